"""bfloat16 on CPUs that have bfloat16 instructions (x86's AVX512-BF16 or AMX-BF16): training on
bfloat16 copies of float32 weights, and inference with bfloat16 weights.

Why copies, not autocast: torch's CPU autocast casts every weight to bfloat16 on every call (its
cache lives for one autocast region, one pass), so a training step casts the encoder's weights
once per pass and once more per recomputed pass, and the casts' backward passes add their float32
gradients. Issue 71's figures (MPNet, a training step of 16 x 48 word pieces, Intel Xeon with
AMX): float32 weights under autocast 1.04x float32, bfloat16 weights 1.35x. oneDNN runs its
bfloat16 kernels (AVX512-BF16's dot products, AMX's tiles) on bfloat16 tensors; the rest is
memory traffic, half of it in bfloat16.

**Training** (``training_dtype``; the encoder's in ``ChunkedTransformerModel``, the grid network's
in ``W2NER.v1``): "float32" (the default), "bfloat16" or "auto". In bfloat16 the module keeps its
float32 weights (the master weights: Thinc's optimizer updates them, its moments stay float32, a
saved pipeline or checkpoint holds them) and a bfloat16 copy of the module, refreshed from them
once a step, before the step's first pass (after ``finish_update``, and after ``use_params`` swaps
weights in or out). Every training pass runs forward and backward on the copy (floating inputs
cast to bfloat16 inside the graph, so their gradients come back float32; outputs given back in
float32, so the loss is float32); after each backward call the copy's gradients are added to the
master weights' float32 gradients. The copy is a function of the master weights, so a run
resumed from a checkpoint trains bit for bit as the run that was not stopped.

"auto" chooses bfloat16 only on a CPU with bfloat16 instructions, and only where a measurement at
the start of training says it is faster. The first ``MEASURE_STEPS`` steps train in float32; each
of their passes is also run, forward and backward, in float32 and in bfloat16 (in turn, the order
reversed every other pass; the gradients thrown away and torch's random state put back, so
training goes on as if nothing had run). So both are timed on the run's own batches, whose shapes
change from step to step as training's do (oneDNN prepares its kernels per shape, and a measurement
on one shape repeated hid that the grid network's bfloat16 LSTM was slower here). The first step
warms up; the passes of the others are summed, and bfloat16 is chosen where its sum is at least
``MIN_TRAINING_SPEEDUP`` times faster. The choice and its figures are kept in the node's attrs
(``RECORD``), which Thinc saves with the weights (a checkpoint too): a resumed run keeps the choice,
or the measurement so far, instead of measuring again. In a data-parallel run (torchrun, Ray
Train) the processes' seconds are summed before the choice, so they all choose alike
(``agreed_seconds``; their CPUs of one kind: a run whose machines differ in bfloat16 instructions
sets the dtype instead). Without bfloat16 instructions "auto" stays float32 and measures nothing;
"bfloat16" there warns (it is slower there); beside autocast (``mixed_precision``) "auto" is float32.

**Inference** (``inference_dtype = "bfloat16"``, what ``python -m spacy_w2ner optimize`` writes
where it measured faster): the module's weights are made bfloat16 in place before it first
predicts or is saved (its saved state is then bfloat16, half the size; a float32 state loads and
is made bfloat16 the same way); floating inputs are cast to bfloat16 and outputs given back in
float32. Such a module is for inference only, as an int8 one is: it refuses to train
(``BFLOAT16_CANNOT_TRAIN``). On a CPU without bfloat16 instructions (a pipeline optimized on
another machine) it predicts several times slower than float32, and says so once.

The shims get these behaviours by class (``use_bfloat16``): a shim whose settings are both float32
keeps its class, so nothing changes for a float32 pipeline.
"""
import copy
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from thinc.util import convert_recursive, iterate_recursive

from .cpu import BFLOAT16_FLAGS, cpu_model
from .cpu import bfloat16_instructions as cpu_bfloat16_instructions
from .shim import FusedPyTorchShim, FusedUpdate, float32_outputs, torch_module

TRAINING_DTYPES = ("float32", "bfloat16", "auto")
INFERENCE_DTYPES = ("float32", "bfloat16")
MEASURE_STEPS = 4  # the first warms up
MIN_TRAINING_SPEEDUP = 1.05
RECORD = "bfloat16_training"  # the node attr that keeps auto's choice and its figures
BFLOAT16_CANNOT_TRAIN = (
    "this pipeline's {label} predicts in bfloat16 (inference_dtype = \"bfloat16\", written by optimize), which is "
    "for inference: train the float32 pipeline it was made from (inference_dtype = \"float32\"; "
    "training_dtype = \"bfloat16\" or \"auto\" trains on bfloat16 copies of float32 weights), then run "
    "'python -m spacy_w2ner optimize' again"
)


def check_dtypes(training_dtype: str, inference_dtype: str, mixed_precision: bool = False) -> "BFloat16Settings":
    """The settings, or ValueError naming one that is not one of the choices, or bfloat16 beside
    autocast; "auto" beside autocast (``mixed_precision``, on a GPU) is float32 weights."""
    if training_dtype not in TRAINING_DTYPES:
        raise ValueError(f"training_dtype must be one of {', '.join(TRAINING_DTYPES)}, got {training_dtype!r}")
    if inference_dtype not in INFERENCE_DTYPES:
        raise ValueError(f"inference_dtype must be one of {', '.join(INFERENCE_DTYPES)}, got {inference_dtype!r}")
    if mixed_precision and training_dtype == "auto":
        training_dtype = "float32"  # autocast was asked for: auto's choice is made
    if mixed_precision and (training_dtype, inference_dtype) != ("float32", "float32"):
        raise ValueError(
            "mixed_precision (autocast) and training_dtype/inference_dtype (bfloat16 weights) do not go together: "
            "on a CPU use training_dtype = \"auto\" or \"bfloat16\" with mixed_precision = false"
        )
    return BFloat16Settings(training_dtype, inference_dtype)


@dataclass(frozen=True)
class BFloat16Settings:
    """A module's settings as the config gives them (a node attr that Thinc does not save: the
    config says them on every load)."""

    training: str = "float32"
    inference: str = "float32"

    @property
    def is_float32(self) -> bool:
        return self.training == "float32" and self.inference == "float32"


def without_bfloat16_instructions(cpu: str) -> str:
    """What a CPU without bfloat16 instructions is told, naming it and the instructions."""
    return f"{cpu} has no bfloat16 instructions ({' or '.join(BFLOAT16_FLAGS.values())}): bfloat16 is slower than float32 there"


def new_measurement() -> dict:
    """auto's record before its choice: steps counted, passes timed, their seconds in each dtype."""
    return {"steps": 0, "passes": 0, "float32_s": 0.0, "bfloat16_s": 0.0}


def agreed_seconds(float32_s: float, bfloat16_s: float) -> Tuple[float, float, int]:
    """auto's measured seconds summed over the processes of a data-parallel run on CPUs
    (``torch.distributed`` with gloo, as ``training.distributed`` starts it), and their number: every
    process then makes the same choice, so they train alike. A run of one process: its own."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_backend() != "gloo" or dist.get_world_size() == 1:
        return float32_s, bfloat16_s, 1
    sums = torch.tensor([float32_s, bfloat16_s], dtype=torch.float64)
    dist.all_reduce(sums)
    return float(sums[0]), float(sums[1]), dist.get_world_size()


def use_bfloat16(shims: Sequence, settings: "BFloat16Settings", record: Optional[dict], label: str) -> None:
    """Give the shims (an encoder's ``FusedHFShim``, the grid network's ``FusedPyTorchShim``) the
    bfloat16 behaviour of the module docstring; shims with both settings float32 are left as
    they are. ``record``: the node attrs where "auto" keeps its choice (saved with the weights);
    ``label``: the module's name in messages ("encoder", "grid network")."""
    training_dtype, inference_dtype = settings.training, settings.inference
    check_dtypes(training_dtype, inference_dtype)
    if settings.is_float32:
        return
    for shim in shims:
        cls = _bfloat16_class(shim)
        if cls is None and not isinstance(shim, BFloat16Passes):
            raise ValueError(f"the {label}'s shim ({type(shim).__name__}) cannot run in bfloat16")
        if cls is not None:
            shim.__class__ = cls
        shim.bfloat16_training = training_dtype
        shim.bfloat16_inference = inference_dtype
        shim.bfloat16_record = record
        shim.bfloat16_label = label


class BFloat16Passes:
    """Mixin before ``FusedUpdate`` in a shim's classes: see the module docstring."""

    bfloat16_training = "float32"
    bfloat16_inference = "float32"
    bfloat16_record: Optional[dict] = None
    bfloat16_label = "module"
    _twin: Optional["BFloat16Twin"] = None  # the module's bfloat16 copy that trains (a module loaded later gets its own)
    _inference_model = None  # the module last made bfloat16 for inference

    # Training.
    def begin_update(self, inputs):
        if self.bfloat16_inference == "bfloat16":
            raise ValueError(BFLOAT16_CANNOT_TRAIN.format(label=self.bfloat16_label))
        if not self._trains_in_bfloat16(inputs):
            return super().begin_update(inputs)
        twin = self._fresh_twin()
        if not twin.training:
            twin.train(True)
        output = float32_outputs(twin(*_bfloat16(inputs.args), **_bfloat16(inputs.kwargs)))

        def backprop(grads):
            torch.autograd.backward(*grads.args, **grads.kwargs)
            self._gather_gradients()
            return convert_recursive(lambda x: hasattr(x, "grad"), lambda x: x.grad, inputs)

        return output, backprop

    def finish_update(self, optimizer) -> None:
        self._gather_gradients()  # none left where every backward call gathered its own
        super().finish_update(optimizer)
        self._copy_again()  # the master weights moved: the next step's first pass copies them
        if self.bfloat16_training == "auto" and self.training_choice() is None:
            # counted whether or not this process had a pass this step, so every process of a
            # distributed run chooses (and sums its seconds with the others') at the same step
            measuring = self._record().setdefault(RECORD, new_measurement())
            measuring["steps"] += 1
            if measuring["steps"] >= MEASURE_STEPS:
                self._choose(measuring)

    @contextmanager
    def use_params(self, params):
        self._copy_again()
        try:
            with super().use_params(params):
                yield
        finally:
            self._copy_again()

    def _copy_again(self) -> None:
        if self._twin is not None:
            self._twin.stale = True

    def training_choice(self) -> Optional[str]:
        """"float32" or "bfloat16" once decided ("auto": after the first training batch), else None."""
        if self.bfloat16_training != "auto":
            return self.bfloat16_training
        return (self._record().get(RECORD) or {}).get("choice")

    def _record(self) -> dict:
        if self.bfloat16_record is None:
            self.bfloat16_record = {}
        return self.bfloat16_record

    def _trains_in_bfloat16(self, inputs) -> bool:
        choice = self.training_choice()
        if choice is None:
            choice = self._measure(inputs)
        if choice == "bfloat16" and self.bfloat16_training == "bfloat16":
            _warn_without_instructions("training_dtype", 'use "auto" or "float32"')
        return choice == "bfloat16"

    def _fresh_twin(self) -> torch.nn.Module:
        """The bfloat16 copy of the module, its weights those of the master weights."""
        if self._twin is None or self._twin.master is not torch_module(self):
            self._twin = BFloat16Twin(torch_module(self))
        return self._twin.fresh()

    def _gather_gradients(self) -> None:
        if self._twin is not None and self._twin.master is torch_module(self):
            self._twin.gather_gradients()

    def _measure(self, inputs) -> Optional[str]:
        """auto: time this pass in both dtypes (a pass of the first ``MEASURE_STEPS`` steps, which
        train in float32) and say "float32" until the choice is made (``_choose``); or choose
        float32 at once where bfloat16 cannot be faster (not a CPU, no bfloat16 instructions)."""
        why_not = self._why_not_bfloat16()
        if why_not is not None:
            return self._decide({"choice": "float32", "why": why_not})
        measuring = self._record().setdefault(RECORD, new_measurement())
        first = "bfloat16" if measuring["passes"] % 2 else "float32"
        seconds = measure_passes(torch_module(self), self._fresh_twin(), inputs, first=first)
        measuring["passes"] += 1
        if measuring["steps"]:  # the first step warms up
            for dtype, taken in seconds.items():
                measuring[f"{dtype}_s"] = round(measuring[f"{dtype}_s"] + taken, 4)
        return "float32"

    def _why_not_bfloat16(self) -> Optional[str]:
        """Why bfloat16 cannot be faster for this module here (not on a CPU, or a CPU without the
        instructions), or None."""
        device = next(torch_module(self).parameters()).device
        if device.type != "cpu":
            return f"auto measures on a CPU only (the {self.bfloat16_label} is on {device})"
        if not cpu_bfloat16_instructions():
            return without_bfloat16_instructions(cpu_model())
        return None

    def _choose(self, measuring: dict) -> str:
        why_not = self._why_not_bfloat16()  # a process that had no pass in the measured steps
        if why_not is not None:
            return self._decide(dict(measuring, choice="float32", why=why_not))
        float32_s, bfloat16_s, processes = agreed_seconds(measuring["float32_s"], measuring["bfloat16_s"])
        speedup = float32_s / max(bfloat16_s, 1e-9)
        choice = "bfloat16" if speedup >= MIN_TRAINING_SPEEDUP else "float32"
        over = f" (summed over the run's {processes} processes)" if processes > 1 else ""
        why = (f"its training passes of steps 2-{MEASURE_STEPS} ran {speedup:.2f}x float32's in bfloat16{over} on "
               f"{cpu_model()} ({', '.join(cpu_bfloat16_instructions())}; needs >= {MIN_TRAINING_SPEEDUP}x)")  # fmt: skip
        return self._decide(dict(measuring, choice=choice, speedup=round(speedup, 3), why=why))

    def _decide(self, result: dict) -> str:
        """Keep auto's choice in the record and say it on stderr; the copy goes where it is float32."""
        self._record()[RECORD] = result
        if result["choice"] == "float32":
            self._twin = None
        sys.stderr.write(f"bfloat16 training (auto) of the {self.bfloat16_label}: {result['choice']}: {result['why']}\n")
        return result["choice"]

    # Inference.
    def predict(self, inputs):
        if self.bfloat16_inference != "bfloat16":
            return super().predict(inputs)
        module = self._bfloat16_module()
        if next(module.parameters()).device.type == "cpu":
            _warn_without_instructions("inference_dtype", "run 'python -m spacy_w2ner optimize' on this machine (it "
                                       "measures) on the float32 pipeline, or set inference_dtype = \"float32\"")  # fmt: skip
        if module.training:
            module.train(False)
        with torch.no_grad():
            return float32_outputs(module(*_bfloat16(inputs.args), **_bfloat16(inputs.kwargs)))

    def to_bytes(self):
        if self.bfloat16_inference == "bfloat16":
            self._bfloat16_module()
        return super().to_bytes()

    def _bfloat16_module(self) -> torch.nn.Module:
        """The module with bfloat16 weights, made so in place once (a module loaded later too)."""
        if self._inference_model is not torch_module(self):
            torch_module(self).to(torch.bfloat16)
            self._inference_model = torch_module(self)
        return torch_module(self)


class BFloat16Twin:
    """A float32 module's bfloat16 copy that trains in its place (the module docstring's
    "Training"; ``adapt-encoder``'s loop uses it too): ``fresh()`` is the copy with the master
    weights' values (copied again after ``stale`` is set: the master weights moved),
    ``gather_gradients()`` adds the copy's gradients to the master weights' float32 ones."""

    def __init__(self, master: torch.nn.Module):
        self.master = master
        self.module = copy.deepcopy(master)
        for param in self.module.parameters():
            param.grad = None
        self.module.to(torch.bfloat16)
        self.pairs = list(zip(master.parameters(), self.module.parameters()))  # in the modules' order
        self.stale = True

    def fresh(self) -> torch.nn.Module:
        if self.stale:
            with torch.no_grad():
                for master, twin in self.pairs:
                    twin.copy_(master)
                    twin.requires_grad_(master.requires_grad)
            self.stale = False
        return self.module

    def gather_gradients(self) -> None:
        """Add the copy's gradients to the master weights' (and clear the copy's)."""
        pairs = [(master, twin) for master, twin in self.pairs if twin.grad is not None]
        for master, twin in pairs:
            if master.grad is None:
                master.grad = twin.grad.float()
            else:
                master.grad.add_(twin.grad)
            twin.grad = None


class BFloat16PyTorchShim(BFloat16Passes, FusedPyTorchShim):
    """The grid network's shim in bfloat16 (training or inference)."""


def _bfloat16_class(shim) -> Optional[type]:
    """The bfloat16 class of a float32 shim's class: the subclass of ``BFloat16Passes`` and it
    (``BFloat16PyTorchShim`` here, ``hf_shim.BFloat16HFShim`` beside the encoder's shim); None
    for another shim."""
    return next((cls for cls in BFloat16Passes.__subclasses__() if cls.__bases__[1:] == (type(shim),)), None)


def _bfloat16(value):
    """``value`` (a module's args or kwargs) with its floating tensors cast to bfloat16 (inside the
    autograd graph: their gradients come back in their own dtype)."""
    if isinstance(value, torch.Tensor):
        return value.to(torch.bfloat16) if value.is_floating_point() else value
    if isinstance(value, dict):
        return {key: _bfloat16(item) for key, item in value.items()}
    if type(value) in (tuple, list):
        return type(value)(_bfloat16(item) for item in value)
    return value


def _detached(value):
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, dict):
        return {key: _detached(item) for key, item in value.items()}
    if type(value) in (tuple, list):
        return type(value)(_detached(item) for item in value)
    return value


def measure_passes(master: torch.nn.Module, twin: torch.nn.Module, inputs, first: str = "float32") -> Dict[str, float]:
    """Seconds of a training pass (forward, and backward from the sum of the floating outputs) of
    the float32 ``master`` and of its bfloat16 ``twin`` on ``inputs`` (Thinc's ArgsKwargs), ``first``
    first. The modules' gradients, training modes and torch's random state are as they were
    afterwards; the inputs get no gradient."""
    args, kwargs = _detached(inputs.args), _detached(inputs.kwargs)
    runs = {"float32": (master, args, kwargs), "bfloat16": (twin, _bfloat16(args), _bfloat16(kwargs))}
    saved_grads = [param.grad for param in master.parameters()]
    modes = {name: module.training for name, (module, _, _) in runs.items()}
    rng = torch.get_rng_state()
    seconds: Dict[str, float] = {}
    try:
        for param in master.parameters():
            param.grad = None
        for name in sorted(runs, key=lambda name: name != first):
            module, run_args, run_kwargs = runs[name]
            module.train(True)
            torch.set_rng_state(rng)  # the same dropout draws as the pass that trains
            start = time.perf_counter()
            with torch.enable_grad():
                output = module(*run_args, **run_kwargs)
                floating = [t for t in iterate_recursive(lambda x: isinstance(x, torch.Tensor), output)
                            if t.is_floating_point() and t.requires_grad]  # fmt: skip
                torch.autograd.backward([t.float().sum() for t in floating])
            seconds[name] = time.perf_counter() - start
            del output, floating
            for param in module.parameters():
                param.grad = None
    finally:
        torch.set_rng_state(rng)
        for param, grad in zip(master.parameters(), saved_grads):
            param.grad = grad
        for name, (module, _, _) in runs.items():
            module.train(modes[name])
    return seconds


@lru_cache(maxsize=None)
def _warn_without_instructions(setting: str, advice: str) -> None:
    """Once a process for each setting: training or inference in bfloat16 asked for on a CPU without
    the instructions (a pipeline optimized on another machine predicts slower here than in float32)."""
    if cpu_bfloat16_instructions():
        return
    warnings.warn(f"{setting} = \"bfloat16\": {without_bfloat16_instructions(cpu_model())}; {advice}", stacklevel=3)
