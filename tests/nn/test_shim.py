"""The shim: the half dtype reaches autocast (on a CPU too, for bfloat16), the module changes
mode only when asked, ``use_params`` puts the averages in the module, and what the shim reads of
Thinc's privates is where it reads it."""
import warnings

import pytest
import torch
from thinc.api import ArgsKwargs, PyTorchGradScaler, PyTorchShim

from spacy_w2ner.nn import shim as shim_module
from spacy_w2ner.nn.shim import (
    FusedPyTorchShim,
    fuse_updates,
    grad_scaler,
    loss_scaling,
    mark_overflow,
    torch_module,
)

from ..conftest import HAS_MINILM, make_examples
from .test_adam import make_optimizer, run_steps, small_network


def test_half_dtype_reaches_the_autocast_and_the_global_dtype_is_left_as_it_was():
    seen = []

    class Probe(torch.nn.Module):
        def forward(self, x):
            seen.append(torch.get_autocast_dtype("cuda"))
            return x * 2

    shim = fuse_updates(PyTorchShim(Probe()), FusedPyTorchShim, "bfloat16")
    assert isinstance(shim, FusedPyTorchShim)
    before = torch.get_autocast_dtype("cuda")
    inputs = ArgsKwargs(args=(torch.ones(2),), kwargs={})
    shim.predict(inputs)
    shim.begin_update(inputs)
    assert seen == [torch.bfloat16, torch.bfloat16]
    assert torch.get_autocast_dtype("cuda") == before
    with pytest.raises(ValueError, match="half_precision must be one of"):
        fuse_updates(PyTorchShim(Probe()), FusedPyTorchShim, "float8")


def test_thincs_private_attributes_are_where_the_shim_reads_them():
    """``nn.shim`` is the one reader of what Thinc keeps private: if this fails, a Thinc release
    moved one of them, and the accessor it names must follow."""
    module = torch.nn.Linear(2, 2)
    thinc_shim = PyTorchShim(module, grad_scaler=PyTorchGradScaler(enabled=True))
    assert torch_module(thinc_shim) is module, "PyTorchShim no longer keeps its module in _model"
    scaler = grad_scaler(thinc_shim)
    assert isinstance(scaler, PyTorchGradScaler), "PyTorchShim no longer keeps its grad scaler in _grad_scaler"
    assert loss_scaling(scaler) and not loss_scaling(PyTorchGradScaler(enabled=False)), "PyTorchGradScaler._enabled moved"
    assert not scaler.found_inf
    mark_overflow(scaler)
    assert scaler.found_inf, "PyTorchGradScaler.found_inf no longer reads _found_inf"
    scaler.update()  # the step's end clears it, as after an overflow of its own
    assert not scaler.found_inf
    assert hasattr(thinc_shim, "_mixed_precision"), "PyTorchShim no longer keeps its mixed precision in _mixed_precision"


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
        in_float32 = torch_module(shim).linear(x)
    # The product ran in bfloat16: float32's own result to bfloat16's rounding, not equal to it.
    assert not torch.equal(output["out"].detach(), in_float32)
    torch.testing.assert_close(output["out"].detach(), in_float32, rtol=0.02, atol=0.02)
    d_inputs = backprop(ArgsKwargs(args=(output["out"],), kwargs={"grad_tensors": torch.ones_like(output["out"])}))
    assert d_inputs.args[0].dtype == torch.float32 and d_inputs.args[0].shape == x.shape
    assert torch_module(shim).linear.weight.dtype == torch_module(shim).linear.weight.grad.dtype == torch.float32
    predicted = shim.predict(inputs)
    assert predicted["out"].dtype == torch.float32 and not predicted["out"].requires_grad
    assert not torch_module(shim).training  # predict leaves the module in eval mode (``_set_training``)
    assert torch_module(shim).seen == [True, True]


@pytest.mark.parametrize("mixed_precision,half_dtype", [(False, "bfloat16"), (True, "float16")])
def test_the_cpu_autocasts_only_bfloat16_mixed_precision(mixed_precision, half_dtype):
    """float16 mixed precision on the CPU stays float32, and quietly: no CUDA autocast is turned on
    for a module on the CPU (torch would warn that CUDA is not available, on a CPU-only torch)."""
    shim = recorder_shim(mixed_precision, half_dtype)
    inputs = ArgsKwargs(args=(torch.randn(4, 16),), kwargs={})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        output, _ = shim.begin_update(inputs)
        with torch.no_grad():
            assert torch.equal(output["out"], torch_module(shim).linear(inputs.args[0]))
        shim.predict(inputs)
    assert torch_module(shim).seen == [False, False]


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
    assert not torch_module(shim).dropout.training
    output, _ = shim.begin_update(inputs)
    assert torch_module(shim).dropout.training and not torch.equal(output, x)  # dropout on again
    shim.begin_update(inputs)
    assert torch.equal(shim.predict(inputs), x)
    # One walk to eval for three predictions, one to training for two updates, one back: where
    # Thinc's shim walks twice a prediction and once an update (the root's call, then its child's).
    assert walks == [False, False, True, True, False, False]


def test_a_cpu_without_bfloat16_instructions_is_warned_once(monkeypatch):
    monkeypatch.setattr(shim_module, "bfloat16_is_native", lambda: False)
    shim_module._warn_if_slow_bfloat16.cache_clear()
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
        shim_module._warn_if_slow_bfloat16.cache_clear()


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
            for name, parameter in torch_module(shim).named_parameters():
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
        for name, param in torch_module(shim).named_parameters():
            assert torch.equal(param.detach(), averages[name]), name
    for name, param in torch_module(shim).named_parameters():
        assert torch.equal(param.detach(), trained[name]), name
    with shim.use_params({}):  # nothing for this shim: the weights as they are
        assert all(torch.equal(p.detach(), trained[n]) for n, p in torch_module(shim).named_parameters())


def test_thincs_shim_still_misses_the_averages():
    """Why FusedUpdate.use_params exists: if this fails, Thinc looks averages up by their keys now
    and the override can go."""
    shim = PyTorchShim(small_network())
    optimizer = make_optimizer(use_averages=True)
    trained = run_steps(shim, optimizer)
    with shim.use_params(optimizer.averages):
        assert all(torch.equal(p.detach(), trained[n]) for n, p in torch_module(shim).named_parameters())
