"""Data-parallel training over ``torch.distributed``: the processes of one run, their shares of
each batch, their gradients combined, and the duties only the first process has.

Launched as PyTorch programs are (``torchrun``, or Ray Train's ``TorchTrainer``, which set
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and ``MASTER_ADDR``), every process builds the same
pipeline from the same seed and reads the same shuffled batches: the config's batch is the
global batch. Each process updates on its share of a batch (``share``) with spaCy's
``nlp.update(..., sgd=False)``, and before spaCy's loop calls each component's ``finish_update``
the processes sum their gradients (``DataParallelLanguage.combine_gradients``, called at the end
of the step's ``update``); each then makes the one optimizer step, so the processes stay
identical and N of them train what one does.

A sum is right because every loss is a sum over the step's examples or a mean whose denominator
is the whole step's: spaCy's components sum over their examples; a component whose loss is a
mean (w2ner's: over the step's grid cells) says what the whole batch's denominator is
(``loss_denominator(examples)``) and is given it in each process (``component_cfg``), so each
process's gradient is its part of the single process's. The gradients of a step are summed in
buckets (one all-reduce per ``BUCKET_BYTES``, as torch's DistributedDataParallel does), with the
step's small facts in one all-reduce of their own before them: which parameters have a gradient
in any process (a process with nothing in a step still takes part), the losses, each process's
batch fingerprint (which must agree), whether any process was asked to stop or saw a float16
gradient overflow, and the first process's Python random state, which every process takes.

The first process evaluates, logs, saves and writes checkpoints; the others get the evaluation's
result (and the Python random state it left) from it. Each process keeps its numpy and torch
random states (``randomness.py``); at every checkpoint the processes compare a checksum of every
parameter (``check_weights_agree``).
"""
import importlib
import os
import pickle
import socket
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.distributed as dist

from ..nn.shim import grad_scaler, mark_overflow
from .randomness import python_random_state, set_python_random_state
from .state import PipelineParameter, walk_parameters

BUCKET_BYTES = 25 * 1024 * 1024  # torch DistributedDataParallel's bucket_cap_mb
SHARED_FILE_ATTEMPTS = 10  # a second apart


class DistributedError(RuntimeError):
    """The processes of a run disagree, or cannot be started as asked (the message says which)."""


def launched() -> bool:
    """Whether a launcher (torchrun, SLURM through torchrun, Ray Train) started this process as
    one of a group: it sets ``WORLD_SIZE`` and ``RANK`` (or has set up the process group)."""
    return (dist.is_available() and dist.is_initialized()) or ("WORLD_SIZE" in os.environ and "RANK" in os.environ)


def first_process() -> bool:
    """Whether this is the first process of its run (or the only one): the one that speaks."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    return int(os.environ.get("RANK", "0")) == 0


def process_gpu(gpu_id: int) -> int:
    """The GPU this process trains on: the CPU (-1) for a negative ``gpu_id``; in a process
    started by torchrun, the one its ``LOCAL_RANK`` names (as every PyTorch launcher assigns
    them: one GPU a process, ``CUDA_VISIBLE_DEVICES`` to choose them); else ``gpu_id``."""
    if gpu_id < 0 or "LOCAL_RANK" not in os.environ or not launched():
        return gpu_id
    return int(os.environ["LOCAL_RANK"])


def restarted_by_launcher() -> bool:
    """Whether torchrun restarted this process's group after a failure (``--max-restarts``):
    the run then goes on from its newest checkpoint by itself."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0


@dataclass
class Cluster:
    """This process's place in its run: ``rank`` of ``world_size``. A run of one process has no
    process group, and every collective below is then the identity."""

    rank: int = 0
    world_size: int = 1
    group: Optional[object] = None  # the gradients' process group (gloo, or NCCL on GPUs)
    cpu_group: Optional[object] = None  # gloo: objects and the step's facts
    owns_group: bool = False
    host: str = field(default_factory=socket.gethostname)

    @classmethod
    def start(cls, gpu_id: int = -1) -> "Cluster":
        """Join the launcher's process group (create it from the environment unless Ray Train
        has); a process started without a launcher is a run of one."""
        if not launched():
            return cls()
        owns = not dist.is_initialized()
        if owns:
            _import_modules_holding_the_world()
            if gpu_id >= 0:
                torch.cuda.set_device(gpu_id)
            _init_process_group("nccl" if gpu_id >= 0 else "gloo")
        cpu_group = dist.group.WORLD if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")
        return cls(dist.get_rank(), dist.get_world_size(), dist.group.WORLD, cpu_group, owns)

    @property
    def distributed(self) -> bool:
        return self.group is not None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def close(self) -> None:
        """Leave the run: the process group this process created is destroyed, and its threads
        (gloo's) end here rather than while Python shuts down, where a thread that outlives the
        interpreter aborts the process ("terminate called without an active exception").
        ``destroy_process_group`` ends a group only once nothing holds it: the cluster lets go
        of its groups first."""
        self.group = self.cpu_group = None
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier(group=self.cpu_group)

    def broadcast(self, value=None):
        """The first process's ``value``, in every process."""
        if not self.distributed:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0, group=self.cpu_group)
        return box[0]

    def all_gather(self, value) -> list:
        """Every process's ``value``, in rank order, in every process."""
        if not self.distributed:
            return [value]
        values = [None] * self.world_size
        dist.all_gather_object(values, value, group=self.cpu_group)
        return values

    def on_main(self, work: Callable[[], object]):
        """``work()`` done by the first process alone; its result (or the exception it raised,
        raised again) in every process, so that none waits for a process that has stopped."""
        if not self.distributed:
            return work()
        outcome = None
        if self.is_main:
            try:
                outcome = ("value", work())
            except Exception as err:  # handed to every process, raised in each
                outcome = ("error", _picklable(err))
        kind, value = self.broadcast(outcome)
        if kind == "error":
            raise value
        return value

    def main_only(self, work: Callable[[], object]) -> Callable[[], object]:
        """``work`` as a function every process calls and the first alone does (the evaluation),
        leaving Python's random state in every process as ``work`` left it in the first (spaCy
        shuffles the next epoch with it, and evaluating may draw from it: spacy-transformers does)."""
        if not self.distributed:
            return work

        def shared():
            value, state = self.on_main(lambda: (work(), python_random_state()))
            set_python_random_state(state)
            return value

        return shared

    def check_same_run_directory(self, run_file) -> None:
        """Every process reads the run's record as the first wrote it: the output directory is
        one that every machine of the run reaches (a shared file system), DistributedError
        naming the processes that do not see it."""
        for attempt in range(SHARED_FILE_ATTEMPTS):  # a network file system may show a new file late
            if attempt:
                time.sleep(1.0)
            seen = run_file.read_bytes() if run_file.exists() else None
            views = self.all_gather((self.host, seen))
            blind = [f"process {rank} on {host}" for rank, (host, view) in enumerate(views) if view != views[0][1]]
            if not blind:
                return
        raise DistributedError(
            f"{', '.join(blind)} cannot see {run_file} as process 0 on {views[0][0]} wrote it: --output must be "
            "a directory every machine of the run reaches (a shared file system), given as the same path"
        )

    def check_weights_agree(self, nlp, when: str) -> None:
        """DistributedError naming the first parameter whose bytes differ between processes."""
        if not self.distributed:
            return
        parameters = list(walk_parameters(nlp))
        checksums = self.all_gather([_checksum(parameter) for parameter in parameters])
        for index, parameter in enumerate(parameters):
            for rank in range(1, self.world_size):
                if checksums[rank][index] != checksums[0][index]:
                    raise DistributedError(
                        f"the processes' weights differ {when}: {parameter.name} is not the same in process {rank} "
                        f"as in process 0 (the processes must build the same pipeline from the same seed and apply "
                        "the same updates; a component that draws random numbers of its own, or another version of a "
                        "library in one process, makes them drift)"
                    )


def check_same_python_random(states: List[dict]) -> None:
    """DistributedError unless every process's Python random state (``capture_random_states``,
    one a process) is the first's: spaCy shuffles the corpus with it."""
    differing = [rank for rank, state in enumerate(states) if state["python"] != states[0]["python"]]
    if differing:
        raise DistributedError(
            f"Python's random state differs between process 0 and process {differing[0]}: spaCy shuffles the corpus "
            "with it, so every process must draw from it as the others do (a corpus reader, augmenter or callback "
            "that draws in one process only makes them read other batches)"
        )


def check_world_size(checkpoint, world_size: int, force_resume: bool, say: Callable[[str], None]) -> None:
    """Refuse to resume with another number of processes than the checkpoint's (each process's
    random states are in it), naming both; ``force_resume`` goes on, saying so."""
    if checkpoint is None or checkpoint.world_size == world_size:
        return
    processes = f"{checkpoint.world_size} process{'es' if checkpoint.world_size != 1 else ''}"
    written = f"{checkpoint.path} was written by a run of {processes}, this one has {world_size}"
    if not force_resume:
        raise DistributedError(
            f"{written}: resume it with {checkpoint.world_size} to end as the run would have, or with --force-resume "
            f"to go on with {world_size} (the same batches and updates to float rounding; dropout draws other masks)"
        )
    say(f"{written} (--force-resume): the same batches and updates to float rounding; dropout draws other masks")


def _import_modules_holding_the_world() -> None:
    """Import, before the process group exists, the torch modules that keep the group alive once
    imported: ``torch.distributed.nn.functional``'s collectives take ``group.WORLD`` as it is at
    import time for their default group, and spacy-transformers imports them (through
    transformers and torch's dynamo) as the pipeline is built. Imported after the group is made,
    they hold it past ``destroy_process_group``, and its gloo threads are then ended while
    Python shuts down, which now and then aborts the process (SIGABRT, "terminate called
    without an active exception"). Imported first, their default is None: the same group."""
    importlib.import_module("torch.distributed.nn.functional")


def _init_process_group(backend: str) -> None:
    """The process group from the launcher's environment (``env://``). torchrun keeps one store
    across the restarts of a group (``--max-restarts``), where the keys the processes before the
    restart wrote are still found (a process would connect to a dead one's address): each
    attempt's group keys its own."""
    store, rank, world_size = next(dist.rendezvous("env://"))
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    store = dist.PrefixStore(f"spacy-w2ner/attempt-{attempt}/", store)
    dist.init_process_group(backend=backend, store=store, rank=rank, world_size=world_size)


def _picklable(err: Exception) -> Exception:
    try:
        return pickle.loads(pickle.dumps(err))
    except Exception:
        return DistributedError(f"process 0 failed: {type(err).__name__}: {err}")


def _checksum(parameter: PipelineParameter) -> tuple:
    """Two integer sums of a parameter's bytes (plain, and weighted by position): a change of
    any bit changes them, and integers add up the same way on any device."""
    tensor = _parameter_tensor(parameter).detach().reshape(-1)
    if tensor.dtype.itemsize == 4:
        bits = tensor.view(torch.int32).to(torch.int64)
    else:
        bits = tensor.contiguous().view(torch.uint8).to(torch.int64)
    weights = torch.arange(bits.numel(), device=bits.device, dtype=torch.int64) % 65521 + 1
    return int(bits.sum()), int((bits * weights).sum())


def _parameter_tensor(parameter: PipelineParameter) -> torch.Tensor:
    if parameter.tensor is not None:
        return parameter.tensor
    return _as_torch(parameter.node.get_param(parameter.param_name))


def _as_torch(array) -> torch.Tensor:
    """A Thinc array (numpy or CuPy) as a torch tensor sharing its memory."""
    from thinc.api import xp2torch

    return torch.from_numpy(array) if hasattr(array, "__array_interface__") else xp2torch(array)


# ---------------------------------------------------------------- a process's share of a batch


def share(examples: Sequence, rank: int, world_size: int) -> list:
    """Process ``rank``'s examples of a batch, in the batch's order: the longest examples first,
    each to the process with the fewest grid cells (length squared) so far, so that the
    processes' steps take about as long; the same in every process."""
    loads = [0] * world_size
    owner = [0] * len(examples)
    for index in sorted(range(len(examples)), key=lambda i: (-len(examples[i].predicted), i)):
        chosen = min(range(world_size), key=lambda r: (loads[r], r))
        owner[index] = chosen
        loads[chosen] += len(examples[index].predicted) ** 2
    return [example for example, chosen in zip(examples, owner) if chosen == rank]


def loss_denominators(nlp, examples: Sequence, exclude: Sequence[str]) -> Dict[str, Dict[str, int]]:
    """``component_cfg`` giving each component whose loss is a mean over the step the whole
    batch's denominator (its ``loss_denominator(examples)``)."""
    return {
        name: {"loss_denominator": pipe.loss_denominator(examples)}
        for name, pipe in nlp.pipeline
        if name not in exclude and hasattr(pipe, "loss_denominator")
    }


def check_annotating_components(nlp, annotating: Sequence[str]) -> None:
    """DistributedError when an annotating component comes before a component whose loss is a
    mean: its annotations (sentence boundaries, say) could change the denominator, which each
    process counts for the whole batch before the update."""
    names = nlp.pipe_names
    for name, pipe in nlp.pipeline:
        earlier = [other for other in annotating if other in names and names.index(other) < names.index(name)]
        if hasattr(pipe, "loss_denominator") and earlier:
            raise DistributedError(
                f"data-parallel training cannot annotate with {', '.join(earlier)} before {name} "
                f"([training] annotating_components): {name}'s loss is a mean over the whole batch, whose size each "
                "process counts before the update"
            )


# ---------------------------------------------------------------- the step


@dataclass
class _Step:
    """What a process gathered during a step's updates."""

    losses: Dict[str, float] = field(default_factory=dict)
    fingerprint: int = 0


class DataParallelLanguage:
    """The pipeline as spaCy's ``train_while_improving`` sees it in a process of a data-parallel
    run, where the loop is given ``accumulate_gradient = 1``: ``update`` is the whole step's
    updates, this process's share of each of its sub-batches (spaCy's ``subdivide_batch`` by the
    config's ``accumulate_gradient``), then ``combine_gradients``, called here, before spaCy's loop
    calls each component's ``finish_update``. Anything else is the pipeline's own."""

    def __init__(self, nlp, cluster: Cluster, exclude: Sequence[str], accumulate_gradient: int, stop_requested: Callable[[], bool]):
        self._nlp, self._cluster, self._exclude = nlp, cluster, list(exclude)
        self._accumulate_gradient = accumulate_gradient
        self._stop_requested = stop_requested
        self.stop_agreed = False  # whether any process was asked to stop, as of the last step

    def update(self, examples, *, losses=None, component_cfg=None, **kwargs):
        from spacy.training.loop import subdivide_batch

        step = _Step()
        for subbatch in subdivide_batch(examples, self._accumulate_gradient):
            self._update_on_share(list(subbatch), step, component_cfg, kwargs)
        self.combine_gradients(step, losses)
        return losses

    def _update_on_share(self, examples: list, step: _Step, component_cfg: Optional[dict], kwargs: dict) -> None:
        """This process's update on its share of a sub-batch, each mean loss divided by the whole
        sub-batch's denominator."""
        from .stream import batch_fingerprint

        step.fingerprint = (step.fingerprint * 1_000_003 + int(batch_fingerprint(examples)[:12], 16)) % 2**48
        mine = share(examples, self._cluster.rank, self._cluster.world_size)
        if mine:
            config = {**(component_cfg or {})}
            for name, denominator in loss_denominators(self._nlp, examples, self._exclude).items():
                config[name] = {**config.get(name, {}), **denominator}
            self._nlp.update(mine, losses=step.losses, component_cfg=config, **kwargs)

    def combine_gradients(self, step: _Step, losses: Optional[Dict[str, float]]) -> None:
        """Sum the step's gradients and losses over the processes (every process then holds the
        whole step's), and agree on its facts (``_step_facts``); the losses go into ``losses``."""
        parameters = list(walk_parameters(self._nlp, self._exclude))
        gradients = [_gradient(parameter) for parameter in parameters]
        names = self._nlp.pipe_names
        facts = self._step_facts(step, gradients, names)
        chosen = [(parameter, gradient) for parameter, gradient, flag in zip(parameters, gradients, facts["gradients"]) if flag]
        tensors = [gradient if gradient is not None else _zero_gradient(parameter) for parameter, gradient in chosen]
        all_reduce_buckets(tensors, self._cluster.group)
        for (parameter, gradient), tensor in zip(chosen, tensors):
            if gradient is None:
                _set_gradient(parameter, tensor)
        if losses is not None:
            for name, value, flag in zip(names, facts["losses"], facts["has loss"]):
                if flag:
                    losses[name] = losses.get(name, 0.0) + value

    def _step_facts(self, step: _Step, gradients: List[Optional[torch.Tensor]], names: List[str]) -> Dict[str, list]:
        """The step's facts summed over the processes (one all-reduce of a few numbers): which
        parameters have a gradient, whether a float16 gradient overflowed in a process (Thinc's
        grad scalers unscale in the backward pass, before the sum), the losses and which
        components have one, each process's batch fingerprint (DistributedError where they
        differ), whether any process was asked to stop, and the first process's Python random
        state, which every process takes (a component may draw from it in its update:
        spacy-transformers' does, once an update, which a process with nothing in the step does
        not make)."""
        world, rank = self._cluster.world_size, self._cluster.rank
        fingerprints = [0.0] * world
        fingerprints[rank] = float(step.fingerprint)
        scalers = _grad_scalers(self._nlp, self._exclude)
        sections = {
            "gradients": [float(gradient is not None) for gradient in gradients],
            "overflow": [float(any(scaler.found_inf for scaler in scalers))],
            "losses": [float(step.losses.get(name, 0.0)) for name in names],
            "has loss": [float(name in step.losses) for name in names],
            "fingerprints": fingerprints,
            "stop": [float(self._stop_requested())],
            "python random": _random_state_numbers() if rank == 0 else [0.0] * RANDOM_STATE_NUMBERS,
        }
        facts = _all_reduce_sections(sections, self._cluster.cpu_group)
        read = facts["fingerprints"]
        differing = [r for r, value in enumerate(read) if value != read[0]]
        if differing:
            raise DistributedError(
                f"process {differing[0]} read another batch than process 0 in this step: every process must read the "
                "same corpus with the same reader and batcher, and draw from Python's random only as the others do"
            )
        self.stop_agreed = facts["stop"][0] > 0
        _set_random_state_numbers(facts["python random"])
        if facts["overflow"][0]:  # float16: where one process's gradients overflowed, every process skips the step
            for scaler in scalers:
                mark_overflow(scaler)
        return facts

    def __getattr__(self, name):
        return getattr(self._nlp, name)


def _grad_scalers(nlp, exclude: Sequence[str]) -> list:
    """The grad scalers of the torch modules' shims (Thinc's float16 loss scaling)."""
    shims = {id(shim): shim for name, pipe in nlp.pipeline if name not in exclude and hasattr(getattr(pipe, "model", None), "walk")
             for node in pipe.model.walk() for shim in node.shims}  # fmt: skip
    return [grad_scaler(shim) for shim in shims.values() if grad_scaler(shim) is not None]


def _all_reduce_sections(sections: Dict[str, list], group) -> Dict[str, list]:
    """Named lists of numbers, each summed over the processes, in one float64 all-reduce."""
    vector = torch.tensor([value for values in sections.values() for value in values], dtype=torch.float64)
    dist.all_reduce(vector, group=group)
    summed, offset = {}, 0
    for name, values in sections.items():
        summed[name] = vector[offset : offset + len(values)].tolist()
        offset += len(values)
    return summed


# Python's random state as float64 numbers (exact: its words are 32-bit): the Mersenne Twister's
# 624 words and position, whether a Gaussian is cached, the cached value.
RANDOM_STATE_NUMBERS = 625 + 2


def _random_state_numbers() -> List[float]:
    version, internal, gauss = python_random_state()
    return [float(word) for word in internal] + [float(gauss is not None), 0.0 if gauss is None else gauss]


def _set_random_state_numbers(numbers: List[float]) -> None:
    version = python_random_state()[0]
    gauss = numbers[-1] if numbers[-2] else None
    set_python_random_state([version, [int(word) for word in numbers[:-2]], gauss])


def _gradient(parameter: PipelineParameter) -> Optional[torch.Tensor]:
    """The parameter's gradient as a torch tensor sharing its memory; None where it has none."""
    if parameter.tensor is not None:
        return parameter.tensor.grad
    node, name = parameter.node, parameter.param_name
    return _as_torch(node.get_grad(name)) if node.has_grad(name) else None


def _zero_gradient(parameter: PipelineParameter) -> torch.Tensor:
    return torch.zeros_like(_parameter_tensor(parameter))


def _set_gradient(parameter: PipelineParameter, tensor: torch.Tensor) -> None:
    """Give a parameter that had no gradient in this process the summed one."""
    if parameter.tensor is not None:
        parameter.tensor.grad = tensor
        return
    from thinc.api import torch2xp

    node = parameter.node
    node.set_grad(parameter.param_name, tensor.numpy() if tensor.device.type == "cpu" else torch2xp(tensor))


def all_reduce_buckets(tensors: List[torch.Tensor], group, bucket_bytes: int = BUCKET_BYTES) -> None:
    """Sum each tensor over the processes, in place: the tensors flattened into buckets of up to
    ``bucket_bytes`` (one device and dtype each), one all-reduce a bucket."""
    for bucket in _buckets(tensors, bucket_bytes):
        if len(bucket) == 1:
            dist.all_reduce(bucket[0], group=group)
            continue
        flat = torch.cat([tensor.reshape(-1) for tensor in bucket])
        dist.all_reduce(flat, group=group)
        offset = 0
        for tensor in bucket:
            tensor.copy_(flat[offset : offset + tensor.numel()].view_as(tensor))
            offset += tensor.numel()


def _buckets(tensors: List[torch.Tensor], bucket_bytes: int) -> List[List[torch.Tensor]]:
    buckets: List[List[torch.Tensor]] = []
    size = 0
    for tensor in tensors:
        nbytes = tensor.numel() * tensor.element_size()
        last = buckets[-1][-1] if buckets else None
        fits = last is not None and (last.device, last.dtype) == (tensor.device, tensor.dtype) and size + nbytes <= bucket_bytes
        if not fits:
            buckets.append([])
            size = 0
        buckets[-1].append(tensor)
        size += nbytes
    return buckets
