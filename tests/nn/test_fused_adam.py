"""The fused optimizer step makes Thinc's Adam update, and the half dtype reaches autocast (on a
CPU too, for bfloat16)."""
import copy
import warnings

import pytest
import torch
from thinc.api import SGD, Adam, ArgsKwargs, PyTorchGradScaler, PyTorchShim
from thinc.schedules import warmup_linear

from spacy_w2ner.nn.network import GridNetwork
from spacy_w2ner.nn import fused_adam
from spacy_w2ner.nn.fused_adam import (
    FusedPyTorchShim,
    autocast_dtype,
    cpu_has_bfloat16_instructions,
    fuse_updates,
    unwrap_optimizer,
)

from ..conftest import HAS_MINILM, make_examples


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
    from spacy_w2ner.nn.fused_adam import ScaledOptimizer as _ScaledOptimizer

    generator = torch.Generator().manual_seed(1)
    view = optimizer if lr_scale is None else _ScaledOptimizer(optimizer, lr_scale)
    for _ in range(steps):
        for parameter in shim._model.parameters():
            parameter.grad = torch.randn(parameter.shape, generator=generator) * 0.1
        shim.finish_update(view)
        optimizer.step_schedules()
    return {name: p.detach().clone() for name, p in shim._model.named_parameters()}


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
    from spacy_w2ner.nn import fused_adam

    monkeypatch.setattr(fused_adam, "FUSED_KERNEL", kernel and fused_adam.FUSED_KERNEL)
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
    assert all(p.grad is None for p in fused_shim._model.parameters())


def test_fused_step_keeps_the_weights_a_recorded_graph_saved():
    # spaCy's nlp.update(sgd=...) updates a transformer right after its forward pass, before
    # its listeners backpropagate through it: that backward pass must still run (an in-place
    # update failed with "modified by an inplace operation").
    shim = FusedPyTorchShim(small_network())
    vectors = torch.randn(2, 3, 8, requires_grad=True)
    logits = shim._model(vectors, torch.tensor([3, 2]))
    run_steps(shim, make_optimizer(), steps=1)
    logits.sum().backward()
    assert vectors.grad is not None and float(vectors.grad.abs().sum()) > 0


def test_fused_step_reuses_two_sets_of_storage_instead_of_allocating():
    shim = FusedPyTorchShim(small_network())
    optimizer = make_optimizer()
    pointers = []
    for _ in range(4):
        run_steps(shim, optimizer, steps=1)
        pointers.append([p.data.data_ptr() for p in shim._model.parameters()])
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
    from spacy_w2ner.nn.fused_adam import ScaledOptimizer as _ScaledOptimizer

    optimizer = make_optimizer()
    assert unwrap_optimizer(_ScaledOptimizer(_ScaledOptimizer(optimizer, 2.0), 5.0)) == (optimizer, 10.0)
    assert unwrap_optimizer(optimizer) == (optimizer, 1.0)


def test_half_dtype_reaches_thincs_autocast_and_is_restored():
    seen = []

    class Probe(torch.nn.Module):
        def forward(self, x):
            seen.append(torch.get_autocast_dtype("cuda"))
            return x * 2

    from thinc.api import ArgsKwargs

    shim = fuse_updates(PyTorchShim(Probe()), FusedPyTorchShim, "bfloat16")
    assert isinstance(shim, FusedPyTorchShim)
    before = torch.get_autocast_dtype("cuda")
    inputs = ArgsKwargs(args=(torch.ones(2),), kwargs={})
    shim.predict(inputs)
    shim.begin_update(inputs)
    assert seen == [torch.bfloat16, torch.bfloat16]
    assert torch.get_autocast_dtype("cuda") == before
    with autocast_dtype("float16"):
        assert torch.get_autocast_dtype("cuda") == torch.float16
    with pytest.raises(ValueError, match="half_precision must be one of"):
        fuse_updates(PyTorchShim(Probe()), FusedPyTorchShim, "float8")


class AutocastRecorder(torch.nn.Module):
    """Records whether each call ran under the CPU's bfloat16 autocast; its outputs nest a tensor
    its linear layer made (bfloat16 under that autocast) in a dict and a tuple, beside integers."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(16, 16)
        self.seen = []

    def forward(self, x):
        self.seen.append(torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16)
        y = self.linear(x)
        return {"out": y, "layers": (y, y * 2), "ids": torch.ones(2, dtype=torch.long)}


def recorder_shim(mixed_precision: bool, half_dtype: str):
    shim = PyTorchShim(AutocastRecorder(), mixed_precision=mixed_precision, grad_scaler=PyTorchGradScaler(enabled=False))
    return fuse_updates(shim, FusedPyTorchShim, half_dtype)


def test_bfloat16_mixed_precision_autocasts_on_the_cpu_and_gives_float32():
    shim = recorder_shim(True, "bfloat16")
    x = torch.randn(4, 16, requires_grad=True)
    inputs = ArgsKwargs(args=(x,), kwargs={})
    output, backprop = shim.begin_update(inputs)
    assert output["out"].dtype == torch.float32 and [t.dtype for t in output["layers"]] == [torch.float32] * 2
    assert output["ids"].dtype == torch.long
    with torch.no_grad():
        in_float32 = shim._model.linear(x)
    # The product ran in bfloat16: float32's own result to bfloat16's rounding, not equal to it.
    assert not torch.equal(output["out"].detach(), in_float32)
    torch.testing.assert_close(output["out"].detach(), in_float32, rtol=0.02, atol=0.02)
    d_inputs = backprop(ArgsKwargs(args=(output["out"],), kwargs={"grad_tensors": torch.ones_like(output["out"])}))
    assert d_inputs.args[0].dtype == torch.float32 and d_inputs.args[0].shape == x.shape
    assert shim._model.linear.weight.dtype == shim._model.linear.weight.grad.dtype == torch.float32
    predicted = shim.predict(inputs)
    assert predicted["out"].dtype == torch.float32 and not predicted["out"].requires_grad
    assert not shim._model.training  # predict leaves the module in eval mode (``_set_training``)
    assert shim._model.seen == [True, True]


@pytest.mark.filterwarnings("ignore:CUDA is not available")  # Thinc's CUDA autocast, on a CPU-only torch
@pytest.mark.parametrize("mixed_precision,half_dtype", [(False, "bfloat16"), (True, "float16")])
def test_the_cpu_autocasts_only_bfloat16_mixed_precision(mixed_precision, half_dtype):
    shim = recorder_shim(mixed_precision, half_dtype)
    inputs = ArgsKwargs(args=(torch.randn(4, 16),), kwargs={})
    output, _ = shim.begin_update(inputs)
    with torch.no_grad():
        assert torch.equal(output["out"], shim._model.linear(inputs.args[0]))
    shim.predict(inputs)
    assert shim._model.seen == [False, False]


class DropoutProbe(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dropout = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.dropout(x)


def test_the_module_changes_mode_only_when_asked_for_the_other(monkeypatch):
    walks = []
    train = torch.nn.Module.train
    monkeypatch.setattr(torch.nn.Module, "train", lambda module, mode=True: walks.append(mode) or train(module, mode))
    shim = fuse_updates(PyTorchShim(DropoutProbe()), FusedPyTorchShim, "bfloat16")
    x = torch.ones(64, 64)
    inputs = ArgsKwargs(args=(x,), kwargs={})
    for _ in range(3):
        assert torch.equal(shim.predict(inputs), x)  # dropout off: eval mode
    assert not shim._model.dropout.training
    output, _ = shim.begin_update(inputs)
    assert shim._model.dropout.training and not torch.equal(output, x)  # dropout on again
    shim.begin_update(inputs)
    assert torch.equal(shim.predict(inputs), x)
    # One walk to eval for three predictions, one to training for two updates, one back: where
    # Thinc's shim walks twice a prediction and once an update (the root's call, then its child's).
    assert walks == [False, False, True, True, False, False]


def test_a_cpu_without_bfloat16_instructions_is_warned_once(monkeypatch):
    monkeypatch.setattr(fused_adam, "cpu_has_bfloat16_instructions", lambda: False)
    fused_adam._warn_if_slow_bfloat16.cache_clear()
    shim = recorder_shim(True, "bfloat16")
    inputs = ArgsKwargs(args=(torch.randn(4, 16),), kwargs={})
    try:
        with pytest.warns(UserWarning, match="without bfloat16 instructions .* set mixed_precision = false"):
            shim.predict(inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            shim.predict(inputs)
            shim.begin_update(inputs)
    finally:
        fused_adam._warn_if_slow_bfloat16.cache_clear()


def test_bfloat16_instructions_are_torchs_answer_on_x86(monkeypatch):
    monkeypatch.setattr(fused_adam.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert not cpu_has_bfloat16_instructions()
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert cpu_has_bfloat16_instructions()
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(fused_adam.platform, "machine", lambda: "aarch64")  # torch has no test there
    assert cpu_has_bfloat16_instructions()


def test_w2ner_grid_scorer_uses_the_fused_shim(trained_nlp):
    wrapper = trained_nlp.get_pipe("w2ner").model.get_ref("grid_scorer").layers[0]
    assert isinstance(wrapper.shims[0], FusedPyTorchShim)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_MINILM, reason="needs the bundled MiniLM encoder")
def test_chunked_transformer_uses_the_fused_hf_shim_and_trains_like_thinc():
    """A transformer + w2ner pipeline: fused and Thinc's per-tensor steps give the same weights."""
    import spacy

    from spacy_w2ner.nn.hf_shim import FusedHFShim

    from ..encoders.test_chunked_transformer import minilm_nlp

    def trained(fused: bool):
        nlp = minilm_nlp()
        if not fused:
            for component in ("transformer", "w2ner"):
                for node in nlp.get_pipe(component).model.walk():
                    for shim in node.shims:
                        shim.__class__ = shim.__class__.__mro__[2]  # the class FusedUpdate was mixed into
        examples = make_examples(nlp)
        spacy.util.fix_random_seed(0)
        optimizer = nlp.initialize(lambda: examples)
        for _ in range(3):
            nlp.update(examples, sgd=optimizer, drop=0.0)
            optimizer.step_schedules()
        return nlp

    fused, per_tensor = trained(True), trained(False)
    shims = [shim for node in fused.get_pipe("transformer").model.walk() for shim in node.shims]
    assert shims and all(isinstance(shim, FusedHFShim) for shim in shims)
    assert not isinstance(
        [s for n in per_tensor.get_pipe("transformer").model.walk() for s in n.shims][0], FusedHFShim
    )
    for component in ("transformer", "w2ner"):
        a = dict(_torch_parameters(fused.get_pipe(component).model))
        b = dict(_torch_parameters(per_tensor.get_pipe(component).model))
        assert a.keys() == b.keys() and a
        for name in a:
            torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5)


def _torch_parameters(model):
    for node in model.walk():
        for shim in node.shims:
            for name, parameter in shim._model.named_parameters():
                yield f"{node.name}.{name}", parameter.detach()


def test_use_params_puts_the_averages_in_the_module_and_restores_its_weights():
    """spaCy evaluates and saves under ``nlp.use_params(optimizer.averages)``: the averages are
    keyed (shim id, name), as every update keys them, which Thinc's own shim does not look up."""
    shim = FusedPyTorchShim(small_network())
    optimizer = make_optimizer(use_averages=True)
    trained = run_steps(shim, optimizer)
    averages = {name: torch.as_tensor(optimizer.averages[(shim.id, name)]).reshape(p.shape) for name, p in trained.items()}
    assert any(not torch.equal(averages[name], trained[name]) for name in trained)
    with shim.use_params(optimizer.averages):
        for name, param in shim._model.named_parameters():
            assert torch.equal(param.detach(), averages[name]), name
    for name, param in shim._model.named_parameters():
        assert torch.equal(param.detach(), trained[name]), name
    with shim.use_params({}):  # nothing for this shim: the weights as they are
        assert all(torch.equal(p.detach(), trained[n]) for n, p in shim._model.named_parameters())


def test_thincs_shim_still_misses_the_averages():
    """Why FusedUpdate.use_params exists: if this fails, Thinc looks averages up by their keys now
    and the override can go."""
    shim = PyTorchShim(small_network())
    optimizer = make_optimizer(use_averages=True)
    trained = run_steps(shim, optimizer)
    with shim.use_params(optimizer.averages):
        assert all(torch.equal(p.detach(), trained[n]) for n, p in shim._model.named_parameters())
