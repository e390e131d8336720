"""Thinc shims for w2ner's torch modules: one fused optimizer step, and bfloat16 autocast.

Thinc's ``PyTorchShim.finish_update`` updates a torch module one tensor at a time: for
each parameter it views weights and gradient as CuPy/NumPy arrays, clips the gradient by
its norm (``if norm >= clip``: on a GPU a read of the norm by the host, that is a
synchronisation, per tensor), then runs Adam in a few small kernels. A BERT-base encoder
has about 200 tensors: on an H100 that loop was about half of a training step.

``FusedUpdate`` makes the same update for all of a module's tensors at once with torch's
fused Adam kernel (one pass over each tensor's weights, gradient and moments; the multi-tensor
``torch._foreach_*`` operations where torch has no such kernel), and nothing read back by the host. The
arithmetic is Thinc's Adam: the gradient clipped per tensor by its own norm, L2 added to
the gradient or decoupled weight decay, bias correction from each key's update count,
the component's ``lr_scale`` (w2ner's ``learn_rate_scale``), moving averages when the
optimizer keeps them (and ``use_params``, which puts them in the module where Thinc's shim
did not). The Thinc optimizer stays the owner of the hyperparameters, the schedules
(``step_schedules``), the update counts and the state: the moments and averages live in
its ``mom1``/``mom2``/``averages`` under Thinc's keys, as array views of the torch tensors. So configs do not change, and an optimizer the fused step cannot
reproduce (SGD, RAdam) falls back to Thinc's own loop.

Mixed precision: Thinc autocasts to float16, which needs loss scaling (a grad scaler
with a host read per step). ``half_dtype = "bfloat16"`` autocasts to bfloat16 instead
(the range of float32: no scaling), by setting the dtype that Thinc's autocast picks up.
Thinc autocasts on CUDA only; a module on the CPU with ``half_dtype = "bfloat16"`` autocasts
there (torch's CPU autocast: matrix products in bfloat16, faster on CPUs with bfloat16
instructions, AVX512-BF16 or AMX), its floating outputs given back in float32, as Thinc and
spaCy expect them (on CUDA they are float32 already). float16 on the CPU stays float32.
"""
import contextlib
import platform
import warnings
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

import torch
from thinc.api import Optimizer, PyTorchShim, torch2xp, xp2torch
from thinc.util import convert_recursive, iterate_recursive

HALF_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
# torch's fused Adam kernel (CPU since torch 2.4): one pass over a tensor's weights, gradient and
# moments, where the multi-tensor operations make one pass per operation.
FUSED_KERNEL = hasattr(torch, "_fused_adam_")


def check_half_dtype(name: str) -> str:
    if name not in HALF_DTYPES:
        raise ValueError(f"half_precision must be one of {sorted(HALF_DTYPES)}, got {name!r}")
    return name


@contextlib.contextmanager
def autocast_dtype(name: str):
    """Make ``torch.autocast("cuda")`` without a dtype (Thinc's) use ``name``."""
    dtype = HALF_DTYPES[name]
    previous = torch.get_autocast_dtype("cuda")
    torch.set_autocast_dtype("cuda", dtype)
    try:
        yield
    finally:
        torch.set_autocast_dtype("cuda", previous)


def cpu_autocast():
    """torch's CPU autocast to bfloat16, with a warning (once) on a CPU without bfloat16 instructions."""
    _warn_if_slow_bfloat16()
    return torch.autocast("cpu", dtype=torch.bfloat16)


def cpu_has_bfloat16_instructions() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively: x86's AVX512-BF16 or AMX (as torch
    reports them); other CPUs count as able (torch has no test for them)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True
    tests = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    if not all(tests):
        return True
    return any(test() for test in tests)


@lru_cache(maxsize=1)
def _warn_if_slow_bfloat16() -> None:
    """The CPU's instructions are looked at once a process, not on every forward pass."""
    if cpu_has_bfloat16_instructions():
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
        with autocast_dtype(self.half_dtype):
            return self._begin_own_update(inputs, torch.autocast("cuda", enabled=self._mixed_precision))

    def _autocasts_on_cpu(self) -> bool:
        """Whether this module trains and predicts under the CPU's bfloat16 autocast."""
        return bool(self._mixed_precision) and self.half_dtype == "bfloat16" and self.device.type == "cpu"

    def _grad_scaler_enabled(self) -> bool:
        return bool(getattr(self._grad_scaler, "_enabled", False))

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
        if not self._grad_scaler_enabled():
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
        with autocast_dtype(self.half_dtype):  # read by the autocast made under it
            if self.cuda_graphs is not None:
                output = self.cuda_graphs(self._model, inputs.args, inputs.kwargs, self._capture_autocast)
                if output is not None:
                    return output
            with torch.no_grad(), torch.autocast("cuda", enabled=self._mixed_precision):
                return self._model(*inputs.args, **inputs.kwargs)

    def _capture_autocast(self):
        """The prediction's autocast for a CUDA graph's capture: without its cache of cast
        weights, which a graph cannot keep between replays."""
        return torch.autocast("cuda", enabled=self._mixed_precision, cache_enabled=False)

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

    def _adam_state(self, optimizer: Optimizer, keys: List, params: List[torch.Tensor]) -> "AdamState":
        """The optimizer's state for these keys as torch tensors, looked up once per optimizer."""
        cached = getattr(self, "_cached_adam_state", None)
        if cached is None or cached.optimizer is not optimizer or cached.keys != keys:
            cached = AdamState.of(optimizer, keys, params)
            self._cached_adam_state = cached
        return cached


class FusedPyTorchShim(FusedUpdate, PyTorchShim):
    """Thinc's PyTorchShim with the fused update (the grid network's shim)."""


def unwrap_optimizer(optimizer) -> Tuple[object, float]:
    """The Thinc optimizer behind a component's view of it, and the view's learning-rate scale."""
    scale = 1.0
    while hasattr(optimizer, "wrapped_optimizer"):
        scale *= optimizer.lr_scale
        optimizer = optimizer.wrapped_optimizer
    return optimizer, scale


def can_fuse(optimizer) -> bool:
    """Whether ``fused_adam_step`` reproduces what this optimizer does: Thinc's Adam."""
    return isinstance(optimizer, Optimizer) and not optimizer.use_radam and optimizer.b1 > 0 and optimizer.b2 > 0


@dataclass
class AdamState:
    """Torch views of a Thinc optimizer's moments (and averages) for a list of keys."""

    optimizer: Optimizer
    keys: List
    mom1: List[torch.Tensor]
    mom2: List[torch.Tensor]
    averages: Optional[List[torch.Tensor]]
    # The parameter-sized buffer a step writes the new weights into (``fused_adam_step``), made once.
    spare: Optional[List[torch.Tensor]] = None

    def buffers(self, params: List[torch.Tensor]) -> List[torch.Tensor]:
        if self.spare is None:
            self.spare = [torch.empty_like(param) for param in params]
        return self.spare

    @classmethod
    def of(cls, optimizer: Optimizer, keys: List, params: List[torch.Tensor]) -> "AdamState":
        averages = optimizer.averages
        return cls(
            optimizer,
            list(keys),
            _state_tensors(optimizer.mom1, keys, params, flat=True),
            _state_tensors(optimizer.mom2, keys, params, flat=True),
            None if averages is None else _state_tensors(averages, keys, params, flat=False),
        )


@torch.no_grad()
def fused_adam_step(
    optimizer: Optimizer, keys: List, params: List[torch.Tensor], state: AdamState, lr_scale: float = 1.0
) -> None:
    """Thinc's Adam update (``Optimizer.__call__``) of all the tensors at once."""
    grads = [p.grad for p in params]
    steps = []
    for key in keys:
        optimizer.nr_update[key] += 1
        steps.append(optimizer.nr_update[key])
    if optimizer.L2 != 0 and not optimizer.L2_is_weight_decay:
        torch._foreach_add_(grads, params, alpha=optimizer.L2)
    if optimizer.grad_clip:
        _clip_each(grads, optimizer.grad_clip)
    spare = state.buffers(params)
    torch._foreach_copy_(spare, params)
    if FUSED_KERNEL:
        _adam_kernel(optimizer, spare, grads, state, steps, lr_scale)
    else:
        _adam_foreach(optimizer, spare, grads, state, steps, lr_scale)
    if optimizer.L2 != 0 and optimizer.L2_is_weight_decay:
        torch._foreach_mul_(spare, 1.0 - lr_scale * optimizer.learn_rate * optimizer.L2)
    # The new weights go to other storage, as Thinc's loop gives: a graph recorded before this
    # step can still run its backward pass (spaCy's nlp.update(sgd=...) updates a transformer
    # before its listeners' backward pass has run through it; an in-place update breaks that
    # pass). The storage the weights leave is the next step's buffer (no graph outlives a
    # step), so no memory is allocated, and faulted in, step after step.
    for index, param in enumerate(params):
        spare[index], param.data = param.data, spare[index]
    if state.averages is not None:
        _update_averages(state.averages, params, steps)


def _clip_each(grads: List[torch.Tensor], clip: float) -> None:
    """Clip each gradient by its own norm (Thinc's clip_gradient). On a GPU without a host read
    (every tensor scaled, most by 1); on the CPU, where reading the norms costs nothing, only
    the tensors over the norm are scaled (one pass over the others saved, the same numbers)."""
    scales = (clip / torch.stack(torch._foreach_norm(grads))).clamp_(max=1.0)
    if scales.device.type != "cpu":
        torch._foreach_mul_(grads, list(scales.unbind()))
        return
    clipped = (scales < 1.0).nonzero().flatten().tolist()
    if clipped:
        torch._foreach_mul_([grads[i] for i in clipped], [scales[i] for i in clipped])


def _adam_kernel(optimizer: Optimizer, weights: List, grads: List, state: "AdamState", steps: List[int], lr_scale: float) -> None:
    """Thinc's Adam arithmetic by torch's fused Adam kernel (one pass over each tensor's weights,
    gradient and moments), on ``weights`` in place. Torch adds eps to sqrt(mom2 / (1 - b2^t)),
    Thinc to sqrt(mom2): the same update with eps / sqrt(1 - b2^t), so the tensors are updated
    in groups of equal step count (almost always one)."""
    b1, b2 = optimizer.b1, optimizer.b2
    by_step: Dict[int, List[int]] = defaultdict(list)
    for index, step in enumerate(steps):
        by_step[step].append(index)
    for step, indices in by_step.items():
        count = torch.tensor(float(step), device=weights[indices[0]].device)
        torch._fused_adam_(
            [weights[i] for i in indices], [grads[i] for i in indices], [state.mom1[i] for i in indices],
            [state.mom2[i] for i in indices], [], [count] * len(indices), lr=optimizer.learn_rate * lr_scale,
            beta1=b1, beta2=b2, weight_decay=0.0, eps=optimizer.eps / (1.0 - b2**step) ** 0.5,
            amsgrad=False, maximize=False,
        )  # fmt: skip


def _adam_foreach(optimizer: Optimizer, weights: List, grads: List, state: "AdamState", steps: List[int], lr_scale: float) -> None:
    """Thinc's Adam arithmetic in torch's multi-tensor operations (torch without the fused kernel)."""
    b1, b2 = optimizer.b1, optimizer.b2
    torch._foreach_mul_(state.mom1, b1)
    torch._foreach_add_(state.mom1, grads, alpha=1.0 - b1)
    torch._foreach_mul_(state.mom2, b2)
    torch._foreach_addcmul_(state.mom2, grads, grads, value=1.0 - b2)
    denominators = torch._foreach_sqrt(state.mom2)
    torch._foreach_add_(denominators, optimizer.eps)
    step_sizes = [-(optimizer.learn_rate * lr_scale * (1.0 - b2**t) ** 0.5 / (1.0 - b1**t)) for t in steps]
    torch._foreach_addcdiv_(weights, state.mom1, denominators, step_sizes)


def _state_tensors(store: Dict, keys: List, params: List[torch.Tensor], flat: bool) -> List[torch.Tensor]:
    """Torch views (shaped like the parameters) of the optimizer's arrays for the keys.

    Thinc keeps a flat array per key for the moments and a parameter-shaped one for the
    averages; a missing one is created as zeros, and its array view goes into the store.
    """
    tensors = []
    for key, param in zip(keys, params):
        array = store.get(key)
        if array is None or array.size != param.numel():
            tensor = torch.zeros(param.numel() if flat else param.shape, dtype=torch.float32, device=param.device)
            store[key] = torch2xp(tensor)
        else:
            tensor = xp2torch(array, device=param.device)
        tensors.append(tensor.view(param.shape))
    return tensors


def _update_averages(averages: List[torch.Tensor], params: List[torch.Tensor], steps: List[int]) -> None:
    """Thinc's ``update_averages``: ema += (1 - decay) * (weights - ema), decay from the update count."""
    by_step: Dict[int, List[int]] = defaultdict(list)
    for index, step in enumerate(steps):
        by_step[step].append(index)
    for step, indices in by_step.items():
        decay = min((1.0 + step) / (10.0 + step), 0.9999)
        torch._foreach_lerp_([averages[i] for i in indices], [params[i] for i in indices], 1.0 - decay)


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


class ScaledOptimizer:
    """An optimizer view whose learning rate is the wrapped one's times ``lr_scale`` (the w2ner
    component's ``learn_rate_scale`` for the grid network); ``unwrap_optimizer`` reads it."""

    def __init__(self, optimizer: Optimizer, scale: float) -> None:
        self.wrapped_optimizer = optimizer
        self.lr_scale = scale

    def __call__(self, key, weights, gradient, *, lr_scale: float = 1.0):
        return self.wrapped_optimizer(key, weights, gradient, lr_scale=lr_scale * self.lr_scale)

    def __getattr__(self, name):
        return getattr(self.wrapped_optimizer, name)
