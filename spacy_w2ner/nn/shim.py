"""Thinc's shims for w2ner's torch modules: autocast, prediction (replayed from CUDA graphs on a
GPU), the module's mode, ``use_params``, loss scaling, and the optimizer step given to
``adam.py``; and the one place that reads what Thinc keeps private.

``FusedUpdate`` is a mixin for Thinc's ``PyTorchShim`` and its subclasses (spacy-transformers'
``HFShim``: ``hf_shim.py``); ``fuse_updates`` gives a built shim its class. Its ``finish_update``
is one ``adam.fused_adam_step`` over all of the module's tensors where the optimizer is Thinc's
Adam, and Thinc's own loop otherwise.

Mixed precision: Thinc autocasts to float16, which needs loss scaling (a grad scaler with a
host read per step). ``half_dtype = "bfloat16"`` autocasts to bfloat16 instead (the range of
float32: no scaling): the shim's own forward passes give ``torch.autocast`` that dtype. Thinc
autocasts on CUDA only; a module on the CPU with ``half_dtype = "bfloat16"`` autocasts there
(torch's CPU autocast: matrix products in bfloat16, faster on CPUs with bfloat16 instructions,
AVX512-BF16 or AMX), its floating outputs given back in float32, as Thinc and spaCy expect them
(on CUDA they are float32 already). float16 on the CPU stays float32.

What Thinc keeps private, read here and nowhere else in the package (thinc 8.3 has no public
accessor for them; ``tests/nn/test_shim.py`` fails by name when one moves): a shim's torch
module (``_model``: ``torch_module``) and grad scaler (``_grad_scaler``), whether its
mixed precision is on (``_mixed_precision``), whether a ``PyTorchGradScaler`` scales
(``_enabled``: ``loss_scaling``) and its overflow flag, which has a getter but no setter
(``_found_inf``: ``mark_overflow``, for data-parallel training's shared overflow). torch's own
private tests for bfloat16 instructions are ``cpu.py``'s (``bfloat16_is_native``).
"""
import contextlib
import warnings
from functools import lru_cache
from typing import List, Optional

import torch
from thinc.api import Optimizer, PyTorchShim, xp2torch
from thinc.util import convert_recursive, iterate_recursive

from .adam import AdamState, can_fuse, fused_adam_step, unwrap_optimizer
from .cpu import bfloat16_is_native

HALF_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def check_half_dtype(name: str) -> str:
    if name not in HALF_DTYPES:
        raise ValueError(f"half_precision must be one of {sorted(HALF_DTYPES)}, got {name!r}")
    return name


def torch_module(shim) -> Optional[torch.nn.Module]:
    """The torch module a Thinc shim runs (None for a shim without one)."""
    return getattr(shim, "_model", None)


def grad_scaler(shim):
    """A Thinc ``PyTorchShim``'s ``PyTorchGradScaler`` (None for a shim without one)."""
    return getattr(shim, "_grad_scaler", None)


def loss_scaling(scaler) -> bool:
    """Whether a ``PyTorchGradScaler`` scales (float16 mixed precision); off, its methods do nothing."""
    return bool(getattr(scaler, "_enabled", False))


def mark_overflow(scaler) -> None:
    """Make a ``PyTorchGradScaler`` report an overflow for this step (``found_inf``): the step is
    skipped and the scale lowered, as after an overflow of its own."""
    scaler._found_inf = True


def cpu_autocast():
    """torch's CPU autocast to bfloat16, with a warning (once) on a CPU without bfloat16 instructions."""
    _warn_if_slow_bfloat16()
    return torch.autocast("cpu", dtype=torch.bfloat16)


@lru_cache(maxsize=1)
def _warn_if_slow_bfloat16() -> None:
    """The CPU's instructions are looked at once a process, not on every forward pass."""
    if bfloat16_is_native():
        return
    warnings.warn(
        "mixed_precision in bfloat16 on a CPU without bfloat16 instructions (AVX512-BF16 or AMX): "
        "slower than float32 here; set mixed_precision = false",
        stacklevel=3,
    )


def float32_outputs(value):
    """``value`` (a module's output: a tensor, or tuples, lists and dicts of them, a transformer's
    ``ModelOutput`` changed in place) with its half-precision tensors in float32."""
    if isinstance(value, torch.Tensor):
        return value.float() if value.dtype in (torch.float16, torch.bfloat16) else value
    if isinstance(value, dict):
        for key in list(value.keys()):
            value[key] = float32_outputs(value[key])
        return value
    if type(value) in (tuple, list):
        return type(value)(float32_outputs(item) for item in value)
    return value


class FusedUpdate:
    """Mixin for Thinc's ``PyTorchShim`` and its subclasses (see the module docstring)."""

    half_dtype = "float16"  # set per shim by the layer that builds it
    # A ``cuda_graphs.GraphedPasses`` that replays prediction passes on a GPU, or None (set per
    # shim by the encoder's and the grid scorer's layers, from their ``cuda_graphs`` attrs)
    cuda_graphs = None

    def begin_update(self, inputs):
        if self._autocasts_on_cpu():
            return self._begin_own_update(inputs, cpu_autocast())
        return self._begin_own_update(inputs, self._cuda_autocast())

    def _cuda_autocast(self, cache_enabled: bool = True):
        """torch's CUDA autocast as Thinc's shim makes it (on where its mixed precision is), to the
        shim's half dtype; off for a module on the CPU, which it would not touch (Thinc's turns it
        on there too, and torch warns on every process without CUDA that it is disabling it)."""
        dtype = HALF_DTYPES[self.half_dtype]
        enabled = bool(self._mixed_precision) and self.device.type == "cuda"
        return torch.autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    def _autocasts_on_cpu(self) -> bool:
        """Whether this module trains and predicts under the CPU's bfloat16 autocast."""
        return bool(self._mixed_precision) and self.half_dtype == "bfloat16" and self.device.type == "cpu"

    def _begin_own_update(self, inputs, autocast):
        """Thinc's forward (under ``autocast``) and backward, with the parameters' gradients left
        scaled until ``finish_update`` under loss scaling (without it, scaling does nothing).

        Thinc's backprop walks every parameter of the module after each backward call to unscale
        its ``.grad``: about 0.5 ms a call for a BERT-base encoder even with the scaler off (in
        float32), and under loss scaling a step that calls it k times (w2ner's grid batches, an
        encoder's passes) divided the first call's gradients by the scale k times. Here each
        call unscales only the gradients it returns (its inputs'; zeroed on an overflow, as
        Thinc does), and the parameters' gradients are unscaled once, in ``finish_update``: k
        calls give the gradients of one call over the same data. The scaler's ``found_inf``
        gathers the overflows of every call of the step, so one overflow skips the whole step
        and lowers the scale once."""
        self._set_training(True)
        with autocast:
            output = float32_outputs(self._model(*inputs.args, **inputs.kwargs))

        def backprop(grads):
            grads.kwargs["grad_tensors"] = self._grad_scaler.scale(grads.kwargs["grad_tensors"], inplace=True)
            torch.autograd.backward(*grads.args, **grads.kwargs)
            returned = [x.grad for x in iterate_recursive(lambda x: hasattr(x, "grad"), inputs) if x.grad is not None]
            found_inf = self._grad_scaler.unscale(returned) if returned else self._grad_scaler.found_inf
            grad_get = (lambda x: x.grad.zero_() if x.grad is not None else x.grad) if found_inf else (lambda x: x.grad)
            return convert_recursive(lambda x: hasattr(x, "grad"), grad_get, inputs)

        return output, backprop

    def unscale_gradients(self) -> bool:
        """Unscale the parameters' gradients of the step (once; a no-op without loss scaling or
        when already done) and say whether the step met an overflow (``found_inf``)."""
        if not loss_scaling(self._grad_scaler):
            return False
        if not getattr(self, "_gradients_unscaled", False):
            grads = [p.grad for p in self._model.parameters() if p.grad is not None]
            if grads:
                self._grad_scaler.unscale(grads)
            self._gradients_unscaled = True
        return self._grad_scaler.found_inf

    def predict(self, inputs):
        """Thinc's predict (no gradients, the shim's autocast), with the module left in eval mode;
        on a GPU replayed from CUDA graphs where ``cuda_graphs`` is set."""
        self._set_training(False)
        if self._autocasts_on_cpu():
            with torch.no_grad(), cpu_autocast():
                return float32_outputs(self._model(*inputs.args, **inputs.kwargs))
        if self.cuda_graphs is not None:
            output = self.cuda_graphs(self._model, inputs.args, inputs.kwargs, self._capture_autocast)
            if output is not None:
                return output
        with torch.no_grad(), self._cuda_autocast():
            return self._model(*inputs.args, **inputs.kwargs)

    def _capture_autocast(self):
        """The prediction's autocast for a CUDA graph's capture: without its cache of cast
        weights, which a graph cannot keep between replays."""
        return self._cuda_autocast(cache_enabled=False)

    def _set_training(self, training: bool) -> None:
        """Put the module in training or eval mode, walking its submodules only when the mode
        changes. Thinc's shim calls ``eval()`` before and ``train()`` after every prediction and
        ``train()`` before every update: each call visits every submodule (216 in MPNet-base,
        0.85 ms of host time a call on this project's CPUs), several times a batch. ``train()``
        and ``eval()`` set every submodule's flag with the root's, so the root's flag is the
        module's mode."""
        if self._model.training != training:
            self._model.train(training)

    @contextlib.contextmanager
    def use_params(self, params):
        """The module's parameters set to the values ``params`` holds for them (the optimizer's
        moving averages: spaCy evaluates and saves with them when ``use_averages`` is on), and
        set back afterwards. ``params`` is keyed ``(shim id, parameter name)``, as Thinc's
        optimizer keys every update (``finish_update``); Thinc's ``PyTorchShim.use_params`` looks
        for ``"pytorch_{id}_{name}"`` keys instead, which no update makes, so the averages never
        reached a torch module."""
        chosen = [(p, params[(self.id, n)]) for n, p in self._model.named_parameters() if (self.id, n) in params]
        if not chosen:
            with super().use_params(params):
                yield
            return
        saved = [param.detach().clone() for param, _ in chosen]
        with torch.no_grad():
            for param, value in chosen:
                param.copy_(xp2torch(value, device=param.device).reshape(param.shape))
        try:
            yield
        finally:
            with torch.no_grad():
                for (param, _), before in zip(chosen, saved):
                    param.copy_(before)

    def finish_update(self, optimizer) -> None:
        self.unscale_gradients()
        self._gradients_unscaled = False  # the next step's gradients start scaled
        thinc_optimizer, lr_scale = unwrap_optimizer(optimizer)
        if not can_fuse(thinc_optimizer):
            return super().finish_update(optimizer)
        named = [(n, p) for n, p in self._model.named_parameters() if p.grad is not None and p.numel()]
        if named and not self._grad_scaler.found_inf:  # skip the step after an overflow, as Thinc does
            keys = [(self.id, name) for name, _ in named]
            params = [p for _, p in named]
            fused_adam_step(thinc_optimizer, keys, params, self._adam_state(thinc_optimizer, keys, params), lr_scale)
        for _, param in named:
            param.grad = None  # the next backward pass's gradient becomes .grad, not added to zeros
        self._grad_scaler.update()

    def _adam_state(self, optimizer: Optimizer, keys: List, params: List[torch.Tensor]) -> AdamState:
        """The optimizer's state for these keys as torch tensors, looked up once per optimizer."""
        cached = getattr(self, "_cached_adam_state", None)
        if cached is None or cached.optimizer is not optimizer or cached.keys != keys:
            cached = AdamState.of(optimizer, keys, params)
            self._cached_adam_state = cached
        return cached


class FusedPyTorchShim(FusedUpdate, PyTorchShim):
    """Thinc's PyTorchShim with the fused update (the grid network's shim)."""


def fuse_updates(shim, fused_class: type, half_dtype: str = "float16"):
    """Give a Thinc shim the fused update and a half dtype: ``fused_class`` is a ``FusedUpdate``
    subclass of the shim's class (``FusedPyTorchShim`` for Thinc's ``PyTorchShim``,
    ``hf_shim.FusedHFShim`` for spacy-transformers' ``HFShim``). A shim of another class, or
    one already fused, keeps its class."""
    if not isinstance(shim, FusedUpdate) and type(shim) in fused_class.__mro__:
        shim.__class__ = fused_class
    if isinstance(shim, FusedUpdate):
        shim.half_dtype = check_half_dtype(half_dtype)
    return shim
