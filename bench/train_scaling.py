"""Data-parallel training (issue 50): what it costs here, and a projection of what it gains on
several machines or GPUs.

    python bench/train_scaling.py cpu ../shared/corpora/cadec/w2ner-json/train.json \\
        --output bench/results/cpu-train-scaling.json
    python bench/train_scaling.py gpu corpora/converted/cadec/train.spacy --encoder ENCODER \\
        --gpu-id 0 --output OUT.json                                   # on a GPU (bench/gpu/run.sh train-scaling)

``cpu`` measures, on this machine:

1. the bytes a step all-reduces (the gradients one step has, float32) for the MiniLM recipe
   (``w2ner_minilm_cpu.cfg``) and the MPNet one (``w2ner_mpnet_gpu.cfg``);
2. a gloo all-reduce of each step's gradients between 2 processes on loopback, in the buckets
   training uses (``all_reduce_buckets``), the median of --repeats;
3. ``python -m spacy_w2ner train`` of the MiniLM recipe (batch --batch-size, the config's
   dropout) as one process with 2 torch threads, one with 1, and ``torchrun --nproc-per-node 2``
   (gloo, 1 thread each), in --rounds interleaved rounds (the fastest of each counts, with every
   round's figure and the share of time some task waited for a CPU, ``cpu_stalled``): seconds a
   step after --warmup steps, from the batches' time stamps (``bench/gpu/hooks.py``), and the
   seconds a step the processes spend combining their gradients;
4. a projection, labelled so: the step of N workers on a link is a measured one-worker step
   over N (the config's batch split N ways: ``strong``) or the same step (a batch N times as
   large: ``weak``), plus a ring all-reduce of the step's bytes, 2 (N - 1) / N of them over the
   link at its assumed rate (``LINKS``), one message latency a bucket a hop, no overlap with the
   backward pass (there is none: the gradients are combined after it). CPU servers are taken
   to be as fast as this machine's 2 threads on a quiet day (``CPU_STEP_SOURCE``), GPUs as the
   H100's measured step of a BERT-base-size w2ner (``GPU_STEP``).

``gpu`` trains the same config, with the same seed and batches, as one plain process and as
``torchrun --nproc-per-node 1`` (NCCL for the gradients, gloo for the step's facts), then plain
again, and reports whether model-last's weights are equal (bit for bit, or their largest
difference: torchrun against plain, and plain against itself) and the seconds a step of each.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "project" / "configs"
HOOKS = ROOT / "bench" / "gpu"
sys.path.insert(0, str(HOOKS))
sys.path.insert(0, str(ROOT))
from memory import cpu_stall_us  # noqa: E402  (bench/ is on sys.path)

RECIPES = {"minilm": "w2ner_minilm_cpu.cfg", "mpnet": "w2ner_mpnet_gpu.cfg"}
# Assumed links of the projection: bytes/s one link moves in a ring all-reduce, and the latency
# of one message. Ethernet at 90% of its line rate; NCCL's bus bandwidth on PCIe 4.0 x16 and on
# the H100's NVLink (NVIDIA's nccl-tests figures, rounded down).
LINKS = {
    "10 GbE": (1.25e9 * 0.9, 50e-6), "25 GbE": (3.125e9 * 0.9, 30e-6),
    "PCIe 4.0 x16": (20e9, 10e-6), "NVLink (H100 SXM)": (350e9, 5e-6),
}  # fmt: skip
# The measured GPU step the GPU rows project from: w2ner with a BERT-base-size encoder, batch
# 12, float32, on an H100 (bench/results/gpu-h100-2026-11-23/results.jsonl: 270 steps in 42.432 s).
GPU_STEP = {"seconds": 42.432 / 270, "batch_size": 12, "source": "bench/results/gpu-h100-2026-11-23/results.jsonl"}
BUCKET_BYTES = 25 * 1024 * 1024


# ---------------------------------------------------------------- hooks inside the training processes


def _install_combine_timer() -> None:
    """Time ``DataParallelLanguage._combine`` (the step's facts and the gradients' all-reduce)."""
    from hooks import STATS, synchronize

    from spacy_w2ner.training.distributed import DataParallelLanguage

    combine = DataParallelLanguage._combine
    STATS["combine_s"] = []

    def timed(self, step):
        synchronize()
        start = time.perf_counter()
        combine(self, step)
        synchronize()
        STATS["combine_s"].append(time.perf_counter() - start)

    DataParallelLanguage._combine = timed


def _register_batcher() -> None:
    from spacy.util import registry

    @registry.batchers("w2ner_scaling.timed_batches.v1")
    def timed_batches(size: int, stats_path: str):
        """``hooks.timed_batches`` writing to ``stats_path`` with ``{rank}`` filled in, and the
        combination of gradients timed."""
        import hooks

        _install_combine_timer()
        return hooks.timed_batches(size, stats_path.format(rank=os.environ.get("RANK", "0")), grid_timers=False)


if __name__ != "__main__":  # loaded by ``train --code``
    _register_batcher()


# ---------------------------------------------------------------- one timed training run


def bench_config(recipe: str, output: Path, steps: int, batch_size: int, extra: Dict[str, object]) -> Path:
    """The recipe's config for ``steps`` timed steps: evaluated at step 0 only (in the warm-up)
    and at the end, on 16 sentences; the batcher stamps each batch."""
    from spacy.util import load_config

    config = load_config(CONFIGS / RECIPES[recipe])
    training = config["training"]
    training.update(max_steps=steps, max_epochs=0, eval_frequency=steps + 1)
    training["optimizer"]["learn_rate"]["total_steps"] = steps
    training["batcher"] = {"@batchers": "w2ner_scaling.timed_batches.v1", "size": batch_size, "stats_path": str(output / "stats-{rank}.json")}
    training["logger"]["progress_bar"] = False
    config["corpora"]["dev"]["limit"] = 16
    for dotted, value in extra.items():
        *parents, last = dotted.split(".")
        section = config
        for name in parents:
            section = section[name]
        section[last] = value
    path = output / "bench.cfg"
    path.parent.mkdir(parents=True, exist_ok=True)
    config.to_disk(path)
    return path


def timed_run(recipe: str, corpus: Path, output: Path, args, threads: int, processes: int = 0, gpu_id: int = -1,
              extra: Dict[str, object] = {}) -> Dict:  # fmt: skip
    """``python -m spacy_w2ner train`` (under ``torchrun --nproc-per-node processes`` when
    ``processes``) with ``threads`` torch threads a process: seconds a step and its parts."""
    from hooks import summarize

    config = bench_config(recipe, output, args.warmup + args.steps + 1, args.batch_size, extra)
    command = [sys.executable, "-m", "spacy_w2ner", "train", str(config), "--output", str(output / "run"),
               "--code", str(Path(__file__).resolve()), "--paths.train", str(corpus), "--paths.dev", str(corpus),
               "--gpu-id", str(gpu_id)]  # fmt: skip
    if processes:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes), *command[1:]]
    env = {**python_env(), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    stalled = cpu_stall_us()
    start = time.perf_counter()
    log = output / "train.log"
    with log.open("wb") as file:
        code = subprocess.run(command, stdout=file, stderr=subprocess.STDOUT, env=env).returncode
    if code:
        raise SystemExit(f"{' '.join(command)} failed ({code}): see {log}")
    wall = time.perf_counter() - start
    stats = json.loads((output / "stats-0.json").read_text())
    result = summarize(stats, args.warmup)
    result["seconds_per_step"] = round(result["seconds"] / result["steps"], 4)
    combine = stats.get("combine_s", [])[args.warmup : args.warmup + result["steps"]]
    if combine:
        result["combine_seconds_per_step"] = round(statistics.mean(combine), 4)
    result.update(threads_per_process=threads, processes=processes or 1, wall_seconds=round(wall, 1))
    if stalled is not None:
        result["cpu_stalled"] = round((cpu_stall_us() - stalled) / 1e6 / wall, 3)
    return result


def python_env() -> Dict[str, str]:
    """This environment, with this checkout first on the path (before what PYTHONPATH holds)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


# ---------------------------------------------------------------- gradients and their all-reduce


def gradient_sizes(recipe: str, corpus: Path, batch_size: int) -> List[int]:
    """The element counts of the gradients one step of the recipe has (float32), in the order
    training all-reduces them: one update on a batch of the corpus, the gradients then present."""
    from spacy import util
    from spacy.training.initialize import init_nlp
    from spacy.training.loop import subdivide_batch

    from spacy_w2ner.training.distributed import _gradient
    from spacy_w2ner.training.state import walk_parameters

    overrides = {"paths.train": str(corpus), "paths.dev": str(corpus), "corpora.train.limit": 200}
    nlp = init_nlp(util.load_config(CONFIGS / RECIPES[recipe], overrides=overrides, interpolate=False))
    train = util.resolve_dot_names(nlp.config.interpolate(), ["corpora.train"])[0]
    batch = next(subdivide_batch(list(train(nlp))[:batch_size], 1))
    nlp.update(batch, sgd=False, losses={})
    return [gradient.numel() for gradient in map(_gradient, walk_parameters(nlp)) if gradient is not None]


def _all_reduce_worker(rank: int, store: str, sizes: List[int], repeats: int, results: str) -> None:
    import torch
    import torch.distributed as dist

    from spacy_w2ner.training.distributed import all_reduce_buckets

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    tensors = [torch.ones(size) for size in sizes]
    seconds = []
    for _ in range(repeats + 1):  # the first warms the connections up
        dist.barrier()
        start = time.perf_counter()
        all_reduce_buckets(tensors, dist.group.WORLD)
        seconds.append(time.perf_counter() - start)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        Path(results).write_text(json.dumps(seconds[1:]))


def loopback_all_reduce(sizes: List[int], repeats: int) -> Dict:
    """Seconds of a gloo all-reduce of these gradients between 2 processes on this machine."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as directory:
        results = Path(directory, "seconds.json")
        mp.spawn(_all_reduce_worker, args=(f"{directory}/store", sizes, repeats, str(results)), nprocs=2, join=True)
        seconds = json.loads(results.read_text())
    nbytes = 4 * sum(sizes)
    median = statistics.median(seconds)
    return {"seconds": round(median, 4), "seconds_all": [round(s, 4) for s in seconds],
            "bus_bytes_per_s": round(nbytes / median)}  # fmt: skip  (2 (N-1)/N = 1 for N = 2)


# ---------------------------------------------------------------- the projection


def ring_seconds(nbytes: int, workers: int, link: str) -> float:
    """A ring all-reduce of ``nbytes`` among ``workers`` over ``link`` (``LINKS``)."""
    rate, latency = LINKS[link]
    buckets = max(1, -(-nbytes // BUCKET_BYTES))
    return 2 * (workers - 1) / workers * nbytes / rate + 2 * (workers - 1) * buckets * latency


def projection(step_seconds: float, nbytes: int, links: List[str], workers=(2, 4, 8)) -> List[Dict]:
    """Speed-up over one worker (see the module docstring): ``strong`` with the config's batch
    split N ways, ``weak`` with a batch N times as large."""
    rows = []
    for link in links:
        for n in workers:
            reduce = ring_seconds(nbytes, n, link)
            rows.append({"link": link, "workers": n, "all_reduce_s": round(reduce, 4),
                         "strong_speedup": round(step_seconds / (step_seconds / n + reduce), 2),
                         "weak_speedup": round(n * step_seconds / (step_seconds + reduce), 2)})  # fmt: skip
    return rows


# ---------------------------------------------------------------- the commands


def spacy_corpus(path: Path, directory: Path) -> Path:
    """The corpus as a .spacy file (w2ner JSON converted)."""
    if path.suffix == ".spacy":
        return path
    subprocess.run([sys.executable, "-m", "spacy_w2ner", "convert", "w2ner-json", str(path), str(directory)], check=True, env=python_env())
    return directory / f"{path.stem}.spacy"


CPU_CASES = {  # name: (recipe, threads a process, processes under torchrun; 0: a plain process)
    "minilm, 1 process x 2 threads": ("minilm", 2, 0),
    "minilm, 1 process x 1 thread": ("minilm", 1, 0),
    "minilm, torchrun 2 processes x 1 thread (gloo)": ("minilm", 1, 2),
}
# The one-worker steps the CPU rows project from: the recipes' steps of batch 16 on this machine's
# 2 threads, measured on a quiet machine (bench/results/cpu-train-speed.json, profile_s_per_step).
CPU_STEP_SOURCE = ROOT / "bench" / "results" / "cpu-train-speed.json"


def run_cpu(args) -> Dict:
    work = Path(tempfile.mkdtemp(prefix="train-scaling-"))
    corpus = spacy_corpus(Path(args.corpus), work)
    report = {"machine": machine(), "command": "bench/train_scaling.py " + " ".join(sys.argv[1:]),
              "settings": {"batch_size": args.batch_size, "warmup": args.warmup, "steps": args.steps, "rounds": args.rounds}}  # fmt: skip
    gradients = report["gradients"] = {recipe: step_gradients(recipe, corpus, args) for recipe in RECIPES}
    steps = report["steps"] = best_of_rounds(corpus, work, args)
    one, two = steps["minilm, 1 process x 2 threads"], steps["minilm, torchrun 2 processes x 1 thread (gloo)"]
    report["two_processes_against_one"] = {
        "step_time_ratio": round(two["seconds_per_step"] / one["seconds_per_step"], 3),
        "combine_share_of_step": round(two.get("combine_seconds_per_step", 0) / two["seconds_per_step"], 3),
    }
    quiet = json.loads(CPU_STEP_SOURCE.read_text())["results"]
    cpu_rows = {"step_source": str(CPU_STEP_SOURCE.relative_to(ROOT))}
    for recipe in RECIPES:
        step = quiet[f"w2ner {recipe}"]["profile_s_per_step"]["step"]
        cpu_rows[recipe] = {"one_worker_step_s": step, "rows": projection(step, gradients[recipe]["bytes_per_step"], ["10 GbE", "25 GbE"])}
    report["projection"] = {
        "label": "PROJECTION, not a measurement: measured one-worker step + an assumed ring all-reduce (see the docstring)",
        "cpu_servers": cpu_rows,
        "gpus": {"one_worker_step_s": round(GPU_STEP["seconds"], 4), "step_source": GPU_STEP["source"],
                 "rows": projection(GPU_STEP["seconds"], gradients["mpnet"]["bytes_per_step"], ["PCIe 4.0 x16", "NVLink (H100 SXM)"])},
    }  # fmt: skip
    return report


def step_gradients(recipe: str, corpus: Path, args) -> Dict:
    """The recipe's gradients a step (counted in a process of their own) and their all-reduce."""
    command = [sys.executable, __file__, "gradients", recipe, str(corpus), "--batch-size", str(args.batch_size)]
    sizes = json.loads(subprocess.run(command, check=True, capture_output=True, text=True, env=python_env()).stdout)
    return {"tensors": len(sizes), "bytes_per_step": 4 * sum(sizes), "loopback_gloo_2_processes": loopback_all_reduce(sizes, args.repeats)}


def best_of_rounds(corpus: Path, work: Path, args) -> Dict[str, Dict]:
    """Each case of ``CPU_CASES`` --rounds times, interleaved; the fastest round of each counts
    (the machine is shared), every round's seconds a step and CPU stall kept beside it."""
    best: Dict[str, Dict] = {}
    for round_number in range(args.rounds):
        for index, (name, (recipe, threads, processes)) in enumerate(CPU_CASES.items()):
            result = timed_run(recipe, corpus, work / f"case{index}-round{round_number}", args, threads, processes)
            rounds = best.get(name, {}).get("rounds", []) + [[result["seconds_per_step"], result.get("cpu_stalled")]]
            if name not in best or result["seconds_per_step"] < best[name]["seconds_per_step"]:
                best[name] = result
            best[name]["rounds"] = rounds
    return best


def run_gpu(args) -> Dict:
    """Plain ``train`` against ``torchrun --nproc-per-node 1`` on a GPU (NCCL; gloo with
    --gpu-id -1): the same weights? the same step time? (``w2ner_mpnet_gpu.cfg`` with --encoder
    as its transformer)."""
    from tests.training.helpers import weights

    work = Path(tempfile.mkdtemp(prefix="train-scaling-gpu-"))
    corpus = spacy_corpus(Path(args.corpus), work)
    extra = {"components.transformer.model.name": str(Path(args.encoder).resolve())} if args.encoder else {}
    cases = {"plain": 0, "torchrun 1 process": 1, "plain, again": 0}  # name: processes under torchrun
    runs = {name: timed_run("mpnet", corpus, work / f"run{index}", args, args.threads, processes, args.gpu_id, extra)
            for index, (name, processes) in enumerate(cases.items())}  # fmt: skip
    found = [weights(work / f"run{index}" / "run" / "model-last") for index in range(len(cases))]
    return {
        "machine": machine(), "command": "bench/train_scaling.py " + " ".join(sys.argv[1:]),
        "backend": "nccl" if args.gpu_id >= 0 else "gloo", "runs": runs,
        "weights": compare_weights(found[0], found[1]),
        # On a GPU plain train against itself: whether it is deterministic at all (atomics).
        "weights_plain_against_plain_again": compare_weights(found[0], found[2]),
        "step_time_ratio": round(runs["torchrun 1 process"]["seconds_per_step"] / runs["plain"]["seconds_per_step"], 3),
    }  # fmt: skip


def compare_weights(first: Dict, second: Dict) -> Dict:
    differences = {name: float(abs(first[name] - second[name]).max()) for name in first}
    return {"tensors": len(first), "bit_identical": sum(d == 0 for d in differences.values()),
            "max_abs_difference": max(differences.values())}  # fmt: skip


def machine() -> Dict:
    import torch

    from spacy_w2ner.nn.int8 import cpu_features

    found = {"cpu": cpu_features()["model"], "cpus": os.cpu_count(), "torch": torch.__version__}
    if torch.cuda.is_available():
        found["gpu"] = torch.cuda.get_device_name(0)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("cpu", "gpu"):
        command = commands.add_parser(name)
        command.add_argument("corpus", help="training sentences: w2ner JSON or .spacy")
        command.add_argument("--output", type=Path, help="the JSON report (else printed)")
        command.add_argument("--batch-size", type=int, default=16 if name == "cpu" else 12)
        command.add_argument("--steps", type=int, default=12 if name == "cpu" else 100)
        command.add_argument("--warmup", type=int, default=3 if name == "cpu" else 20)
        command.add_argument("--repeats", type=int, default=5, help="all-reduces timed (cpu)")
        command.add_argument("--rounds", type=int, default=2, help="interleaved rounds of the timed runs (cpu)")
    gpu = commands.choices["gpu"]
    gpu.add_argument("--encoder", help="the transformer's path (w2ner_mpnet_gpu.cfg's own name by default)")
    gpu.add_argument("--gpu-id", type=int, default=0)
    gpu.add_argument("--threads", type=int, default=4)
    gradients = commands.add_parser("gradients")
    gradients.add_argument("recipe", choices=sorted(RECIPES))
    gradients.add_argument("corpus", type=Path)
    gradients.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    if args.command == "gradients":
        print(json.dumps(gradient_sizes(args.recipe, args.corpus, args.batch_size)))
        return
    report = run_cpu(args) if args.command == "cpu" else run_gpu(args)
    text = json.dumps(report, indent=1)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
