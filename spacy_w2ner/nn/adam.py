"""Thinc's Adam update of a torch module's tensors all at once, by torch's public functional Adam.

Thinc's ``PyTorchShim.finish_update`` updates a module one tensor at a time: for each parameter
it views weights and gradient as CuPy/NumPy arrays, clips the gradient by its norm (``if norm
>= clip``: on a GPU a read of the norm by the host, a synchronisation, per tensor), then runs
Adam in a few small kernels. A BERT-base encoder has about 200 tensors: on an H100 that loop
was about half of a training step.

``fused_adam_step`` makes the same update for all the tensors of a step with
``torch.optim.adam.adam`` (public, in ``torch.optim.adam.__all__``): its fused kernel (one pass
over each tensor's weights, gradient and moments) on the devices in ``FUSED_DEVICES``, its
multi-tensor implementation elsewhere, and nothing read back by the host on a GPU. The
arithmetic is Thinc's Adam: the gradient clipped per tensor by its own norm, L2 added to the
gradient or decoupled weight decay after the step, bias correction from each key's update
count, the component's ``lr_scale`` (w2ner's ``learn_rate_scale``: ``ScaledOptimizer``), and
moving averages when the optimizer keeps them. The Thinc optimizer stays the owner of the
hyperparameters, the schedules (``step_schedules``), the update counts and the state: the
moments and averages live in its ``mom1``/``mom2``/``averages`` under Thinc's keys, as array
views of the torch tensors that torch's Adam updates. So configs do not change, and an
optimizer this step cannot reproduce (SGD, RAdam: ``can_fuse``) falls back to Thinc's loop.
"""
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
from thinc.api import Optimizer, torch2xp, xp2torch
from torch.optim.adam import adam as functional_adam

# Devices where torch's fused Adam kernel runs (the CPU's since torch 2.4, below this package's
# torch floor); elsewhere (MPS, XPU) torch's multi-tensor implementation.
FUSED_DEVICES = ("cpu", "cuda")


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
        for grad, param in zip(grads, params):
            grad.add_(param, alpha=optimizer.L2)
    if optimizer.grad_clip:
        _clip_each(grads, optimizer.grad_clip)
    spare = state.buffers(params)
    for buffer, param in zip(spare, params):
        buffer.copy_(param)
    _adam(optimizer, spare, grads, state, steps, lr_scale)
    if optimizer.L2 != 0 and optimizer.L2_is_weight_decay:
        for buffer in spare:
            buffer.mul_(1.0 - lr_scale * optimizer.learn_rate * optimizer.L2)
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
    scales = (clip / torch.stack([torch.linalg.vector_norm(grad) for grad in grads])).clamp_(max=1.0)
    if scales.device.type != "cpu":
        for grad, scale in zip(grads, scales.unbind()):
            grad.mul_(scale)
        return
    for index in (scales < 1.0).nonzero().flatten().tolist():
        grads[index].mul_(scales[index])


def _adam(optimizer: Optimizer, weights: List, grads: List, state: AdamState, steps: List[int], lr_scale: float) -> None:
    """Thinc's Adam arithmetic by ``torch.optim.adam.adam`` on ``weights`` in place. Torch adds
    eps to sqrt(mom2 / (1 - b2^t)), Thinc to sqrt(mom2): the same update with eps / sqrt(1 - b2^t),
    so the tensors are updated in groups of equal update count (almost always one). torch counts
    each tensor's step up before using it: it is given the count before this step."""
    b1, b2 = optimizer.b1, optimizer.b2
    for step, indices in _by_step(steps).items():
        device = weights[indices[0]].device
        fused = device.type in FUSED_DEVICES
        counts = torch.full((len(indices),), float(step - 1), device=device if fused else "cpu").unbind()
        functional_adam(
            [weights[i] for i in indices], [grads[i] for i in indices], [state.mom1[i] for i in indices],
            [state.mom2[i] for i in indices], [], list(counts), foreach=not fused, fused=fused, amsgrad=False,
            beta1=b1, beta2=b2, lr=optimizer.learn_rate * lr_scale, weight_decay=0.0,
            eps=optimizer.eps / (1.0 - b2**step) ** 0.5, maximize=False,
        )  # fmt: skip


def _by_step(steps: List[int]) -> Dict[int, List[int]]:
    """The tensors' indices grouped by their update count."""
    groups: Dict[int, List[int]] = defaultdict(list)
    for index, step in enumerate(steps):
        groups[step].append(index)
    return groups


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
    for average, param, step in zip(averages, params, steps):
        average.lerp_(param, 1.0 - min((1.0 + step) / (10.0 + step), 0.9999))
