"""The fused optimizer step (``nn.adam``, torch's functional Adam) makes Thinc's Adam update, by its
fused kernel and by its multi-tensor implementation, and keeps the optimizer's state Thinc's."""
import copy

import pytest
import torch
from thinc.api import SGD, Adam, PyTorchShim
from thinc.schedules import warmup_linear

from spacy_w2ner.nn import adam
from spacy_w2ner.nn.adam import ScaledOptimizer, unwrap_optimizer
from spacy_w2ner.nn.network import GridNetwork
from spacy_w2ner.nn.shim import FusedPyTorchShim, torch_module


def small_network(seed=0):
    torch.manual_seed(seed)
    return GridNetwork(
        8, 4, lstm_size=8, dist_emb_size=4, region_emb_size=4, conv_size=8, dilations=[1, 2],
        biaffine_size=8, ffnn_size=8, input_dropout=0.0, conv_dropout=0.0, output_dropout=0.0,
    )  # fmt: skip


def make_optimizer(**settings):
    settings.setdefault("grad_clip", 0.05)  # small enough that some tensors are clipped
    return Adam(warmup_linear(1e-2, 3, 20), **settings)


def run_steps(shim, optimizer, steps=6, lr_scale=None):
    """Give the module the same gradients each run (seeded), call finish_update, step the schedules."""
    generator = torch.Generator().manual_seed(1)
    view = optimizer if lr_scale is None else ScaledOptimizer(optimizer, lr_scale)
    module = torch_module(shim)
    for _ in range(steps):
        for parameter in module.parameters():
            parameter.grad = torch.randn(parameter.shape, generator=generator) * 0.1
        shim.finish_update(view)
        optimizer.step_schedules()
    return {name: p.detach().clone() for name, p in module.named_parameters()}


@pytest.mark.parametrize(
    "settings,lr_scale",
    [
        ({}, None),
        ({"L2": 0.01, "L2_is_weight_decay": True}, 50.0),
        ({"L2": 0.01, "L2_is_weight_decay": False, "use_averages": True}, 3.0),
    ],
)
@pytest.mark.parametrize("kernel", [True, False], ids=["fused kernel", "multi-tensor operations"])
def test_fused_step_makes_thincs_adam_update(settings, lr_scale, kernel, monkeypatch):
    monkeypatch.setattr(adam, "FUSED_DEVICES", adam.FUSED_DEVICES if kernel else ())
    network = small_network()
    thinc_shim = PyTorchShim(copy.deepcopy(network))
    fused_shim = FusedPyTorchShim(copy.deepcopy(network))
    thinc_optimizer, fused_optimizer = make_optimizer(**settings), make_optimizer(**settings)
    expected = run_steps(thinc_shim, thinc_optimizer, lr_scale=lr_scale)
    got = run_steps(fused_shim, fused_optimizer, lr_scale=lr_scale)
    moved = 0.0
    for name, before in network.named_parameters():
        # float32 rounding in another order: a few ulps a step, at a step size of up to 0.5
        torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=2e-5)
        moved = max(moved, float((got[name] - before.detach()).abs().max()))
    assert moved > 1e-3  # the steps changed the weights: the comparison means something
    # The optimizer's state is Thinc's, under Thinc's keys (a flat array per key).
    for key, value in thinc_optimizer.mom2.items():
        fused_key = (fused_shim.id, key[1])
        assert fused_optimizer.nr_update[fused_key] == thinc_optimizer.nr_update[key] == 6
        torch.testing.assert_close(
            torch.as_tensor(fused_optimizer.mom2[fused_key]), torch.as_tensor(value), rtol=1e-5, atol=1e-9
        )
    if settings.get("use_averages"):
        for key, value in thinc_optimizer.averages.items():
            fused_value = fused_optimizer.averages[(fused_shim.id, key[1])]
            torch.testing.assert_close(torch.as_tensor(fused_value), torch.as_tensor(value), rtol=1e-5, atol=1e-6)
    # Gradients are cleared after the step (Thinc's loop zeroes them; None spares the next
    # backward pass adding its gradients to zeros).
    assert all(p.grad is None for p in torch_module(fused_shim).parameters())


def test_fused_step_keeps_the_weights_a_recorded_graph_saved():
    # spaCy's nlp.update(sgd=...) updates a transformer right after its forward pass, before
    # its listeners backpropagate through it: that backward pass must still run (an in-place
    # update failed with "modified by an inplace operation").
    shim = FusedPyTorchShim(small_network())
    vectors = torch.randn(2, 3, 8, requires_grad=True)
    logits = torch_module(shim)(vectors, torch.tensor([3, 2]))
    run_steps(shim, make_optimizer(), steps=1)
    logits.sum().backward()
    assert vectors.grad is not None and float(vectors.grad.abs().sum()) > 0


def test_fused_step_reuses_two_sets_of_storage_instead_of_allocating():
    shim = FusedPyTorchShim(small_network())
    optimizer = make_optimizer()
    pointers = []
    for _ in range(4):
        run_steps(shim, optimizer, steps=1)
        pointers.append([p.data.data_ptr() for p in torch_module(shim).parameters()])
    assert pointers[0] == pointers[2] and pointers[1] == pointers[3] and pointers[0] != pointers[1]


def test_optimizers_the_fused_step_cannot_reproduce_use_thincs_loop():
    network = small_network()
    thinc_shim = PyTorchShim(copy.deepcopy(network))
    fused_shim = FusedPyTorchShim(copy.deepcopy(network))
    expected = run_steps(thinc_shim, SGD(0.1), steps=2)
    got = run_steps(fused_shim, SGD(0.1), steps=2)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name])


def test_unwrap_optimizer_multiplies_nested_scales():
    optimizer = make_optimizer()
    assert unwrap_optimizer(ScaledOptimizer(ScaledOptimizer(optimizer, 2.0), 5.0)) == (optimizer, 10.0)
    assert unwrap_optimizer(optimizer) == (optimizer, 1.0)
