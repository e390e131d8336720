"""Measuring hooks for the GPU bench, loaded into ``spacy train`` with ``--code``.

- ``w2ner_bench.timed_batches.v1``: spaCy's ``batch_by_sequence`` that stamps the time
  (after a CUDA synchronisation) and the size of every batch it hands to the training
  loop, so the time between two batches is one update step.
- Torch module hooks time the grid network (``GridNetwork``) forward and backward,
  synchronised at its boundaries, for the grid head's share of the time; ``timed_replays``
  times its passes replayed from CUDA graphs, which call no module.
- ``profile_steps`` ("FIRST:LAST"): the loop's own steps FIRST..LAST-1 profiled, torch's
  profiler over the first half, cProfile over the second (put them in the warm-up: the
  profilers and their reports stay out of the timed steps), written to ``profile_path``.
- At exit, the steps, the grid network's time and ``torch.cuda.max_memory_allocated`` go
  to the JSON file named in the batcher's ``stats_path``.
"""
import atexit
import contextlib
import cProfile
import io
import json
import pstats
import time
from typing import Dict, List

import torch
from spacy.util import registry

STATS: Dict[str, object] = {"batches": [], "grid_forward_s": [], "grid_backward_s": []}
_OPEN: Dict[str, float] = {}


def synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _is_grid_network(module) -> bool:
    return type(module).__name__ == "GridNetwork"


def _start(name: str):
    def hook(module, *args):
        if _is_grid_network(module):
            synchronize()
            _OPEN[name] = time.perf_counter()

    return hook


def _stop(name: str, key: str):
    def hook(module, *args):
        if _is_grid_network(module) and name in _OPEN:
            synchronize()
            STATS[key].append(time.perf_counter() - _OPEN.pop(name))

    return hook


def install_grid_timers() -> None:
    """Time every GridNetwork's forward and backward.

    A global forward pre-hook finds each GridNetwork on its first call and puts timing
    hooks on that module alone, so the encoder's modules carry no hooks.
    """
    from torch.nn.modules import module as torch_module

    seen = set()

    def find(module, args):
        if _is_grid_network(module) and id(module) not in seen:
            seen.add(id(module))
            module.register_forward_pre_hook(_start("forward"))
            module.register_forward_hook(_stop("forward", "grid_forward_s"))
            module.register_full_backward_pre_hook(_start("backward"))
            module.register_full_backward_hook(_stop("backward", "grid_backward_s"))
            _start("forward")(module)  # this call's own hooks start with the next call

    torch_module.register_module_forward_pre_hook(find)


def write_torch_tables(averages, path: str, title: str, rows: int = 30) -> None:
    """Torch profiler's totals (``key_averages()``) to ``path``: the top ``rows`` by device time
    (on a GPU) and by host time of their own."""
    with open(path, "w", encoding="utf8") as file:
        file.write(title + "\n")
        if torch.cuda.is_available():
            file.write(f"\n== device time, top {rows}\n")
            file.write(averages.table(sort_by="cuda_time_total", row_limit=rows, max_name_column_width=70))
        file.write(f"\n== host time (self), top {rows}\n")
        file.write(averages.table(sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=70))


# CUDA runtime and driver calls counted in a profile's summary (the profiler records every
# thread's and library's calls: torch's, CuPy's, cuDNN's)
LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
SYNCHRONIZATIONS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
COPIES = ("cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpy2DAsync")


def profile_run(run, path: str, title: str) -> Dict[str, object]:
    """One call of ``run`` under torch's profiler (host operators; device kernels on a GPU), its
    tables written to ``path`` (``write_torch_tables``), and a summary: the wall time (the
    profiler's own cost in it), the device's busy time (its kernels' and copies' own time), and
    the counts of kernel launches, graph launches, waits for the device and copies."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    synchronize()
    start = time.perf_counter()
    with profile(activities=activities) as profiler:
        run()
        synchronize()
    wall = time.perf_counter() - start
    averages = profiler.key_averages()
    write_torch_tables(averages, path, title)
    counts = {event.key: event.count for event in averages}
    device_us = sum(getattr(event, "self_device_time_total", 0) or 0 for event in averages)
    return {
        "wall_s": round(wall, 3),
        "device_busy_s": round(device_us / 1e6, 3),
        "kernel_launches": sum(counts.get(name, 0) for name in LAUNCHES),
        "graph_launches": counts.get("cudaGraphLaunch", 0),
        "synchronizations": sum(counts.get(name, 0) for name in SYNCHRONIZATIONS),
        "copies": sum(counts.get(name, 0) for name in COPIES),
        "torch_operators": sum(count for name, count in counts.items() if name.startswith("aten::")),
    }


@contextlib.contextmanager
def timed_replays(graphed_class, key: str = "grid_forward_s"):
    """Time each call of ``graphed_class`` (a ``nn.cuda_graphs.GraphedPasses``: a replay, which
    calls no module and so meets no module hook), synchronised at both ends, into ``STATS[key]``
    while the context lasts. A call that gives None (the pass runs eagerly after it) takes no
    time here: the module's own hooks time that pass."""
    call = graphed_class.__call__

    def timed(self, *args, **kwargs):
        synchronize()
        start = time.perf_counter()
        output = call(self, *args, **kwargs)
        synchronize()
        if output is not None:
            STATS[key].append(time.perf_counter() - start)
        return output

    graphed_class.__call__ = timed
    try:
        yield
    finally:
        graphed_class.__call__ = call


def peak_gpu_mb() -> float:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated() / 2**20
    return 0.0


class StepProfiler:
    """Over the training loop's steps ``first`` .. ``last - 1`` (batch indices): torch's profiler
    for the first half (device kernels, host operators), cProfile for the second (the Python
    functions by own and by cumulative time), their tables written to ``path``."""

    def __init__(self, steps: str, path: str, rows: int = 30):
        first, last = (int(part) for part in steps.split(":"))
        if not 0 <= first < last - 1:
            raise ValueError(f"profile_steps {steps!r}: FIRST:LAST with 0 <= FIRST < LAST - 1")
        self.first, self.middle, self.last = first, (first + last + 1) // 2, last
        self.path, self.rows = path, rows
        self.torch_profiler = self.python_profiler = None

    def at_batch(self, index: int) -> None:
        """Called as the loop takes batch ``index``, before the batch's time stamp."""
        if index == self.first:
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
            self.torch_profiler = profile(activities=activities)
            self.torch_profiler.__enter__()
        elif index == self.middle and self.torch_profiler is not None:
            synchronize()
            self.torch_profiler.__exit__(None, None, None)
            self._write_torch(self.torch_profiler.key_averages())
            self.python_profiler = cProfile.Profile()
            self.python_profiler.enable()
        elif index == self.last and self.python_profiler is not None:
            synchronize()
            self.python_profiler.disable()
            self._write_python(self.python_profiler)

    def _write_torch(self, averages) -> None:
        title = f"torch profiler, training loop steps {self.first}..{self.middle - 1}: totals over them"
        write_torch_tables(averages, self.path, title, self.rows)

    def _write_python(self, profiler) -> None:
        text = io.StringIO()
        for order in ("tottime", "cumulative"):
            text.write(f"\n== cProfile, training loop steps {self.middle}..{self.last - 1}: Python functions by {order}\n")
            pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(self.rows)
        with open(self.path, "a", encoding="utf8") as file:
            file.write(text.getvalue())


@registry.batchers("w2ner_bench.timed_batches.v1")
def timed_batches(size: int, stats_path: str, grid_timers: bool = True, profile_steps: str = "", profile_path: str = ""):
    """Batches of ``size`` docs (spaCy's ``batch_by_sequence``), each stamped when handed out.

    ``grid_timers`` also times the grid network (four more synchronisations a step);
    ``profile_steps`` ("FIRST:LAST") profiles those steps into ``profile_path``."""
    batch_by_sequence = registry.batchers.get("spacy.batch_by_sequence.v1")(size=size, get_length=None)
    if grid_timers:
        install_grid_timers()
    profiler = StepProfiler(profile_steps, profile_path) if profile_steps else None
    atexit.register(_write, stats_path)

    def batcher(items):
        for batch in batch_by_sequence(items):
            if profiler is not None:
                profiler.at_batch(len(STATS["batches"]))
            synchronize()
            STATS["batches"].append(
                {
                    "time": time.perf_counter(),
                    "sentences": len(batch),
                    "words": sum(len(example) for example in batch),
                    "grid_calls": len(STATS["grid_forward_s"]),
                }
            )
            yield batch

    return batcher


def _write(path: str) -> None:
    STATS["peak_gpu_mb"] = round(peak_gpu_mb(), 1)
    with open(path, "w", encoding="utf8") as file:
        json.dump(STATS, file)


def summarize(stats: Dict, warmup_steps: int) -> Dict[str, object]:
    """Sentences/s over the steps after ``warmup_steps``, and the grid network's share.

    Batch k is stamped before step k; the interval from batch ``warmup`` to the last batch
    covers the updates of batches ``warmup`` .. last-1. The last batch is never timed:
    spaCy stops at ``max_steps`` (and evaluates once at step 0, inside the warm-up).
    """
    batches: List[Dict] = stats["batches"]
    if len(batches) < warmup_steps + 2:
        raise ValueError(f"{len(batches)} batches: too few for {warmup_steps} warm-up steps")
    timed = batches[warmup_steps:-1]
    seconds = batches[-1]["time"] - batches[warmup_steps]["time"]
    first, last = batches[warmup_steps]["grid_calls"], batches[-1]["grid_calls"]
    grid_seconds = sum(stats["grid_forward_s"][first:last]) + sum(stats["grid_backward_s"][first:last])
    timers = bool(stats["grid_forward_s"])
    sentences = sum(b["sentences"] for b in timed)
    # The median step: robust to the steps that also evaluated and wrote a checkpoint.
    intervals = sorted(b["time"] - a["time"] for a, b in zip(batches[warmup_steps:-1], batches[warmup_steps + 1 :]))
    median = intervals[len(intervals) // 2]
    return {
        "median_step_s": round(median, 4),
        "sentences_per_s_at_median_step": round(sentences / len(timed) / median, 1),
        "steps": len(timed),
        "sentences": sentences,
        "seconds": round(seconds, 3),
        "sentences_per_s": round(sentences / seconds, 1),
        "words_per_s": round(sum(b["words"] for b in timed) / seconds, 1),
        "grid_network_share": round(grid_seconds / seconds, 3) if timers else None,
        "peak_gpu_mb": stats.get("peak_gpu_mb", 0.0),
    }
