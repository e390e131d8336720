"""bfloat16 on bfloat16 copies of float32 weights (training) and bfloat16 weights (inference),
``nn.bfloat16``: what trains, what is kept, what auto chooses and remembers, what refuses."""
import io

import pytest
import srsly
import torch
from thinc.api import Adam, ArgsKwargs, Model, PyTorchWrapper_v2

from spacy_w2ner.nn import bfloat16
from spacy_w2ner.nn.bfloat16 import (
    BFloat16PyTorchShim,
    BFloat16Settings,
    check_dtypes,
    measure_passes,
    use_bfloat16,
)
from spacy_w2ner.nn.shim import FusedPyTorchShim, fuse_updates

from .test_adam import small_network


def wrapped(training="bfloat16", inference="float32", seed=0):
    """The grid network (small) in a Thinc layer, its shim fused and given the settings; the
    layer's attrs keep auto's choice, as the grid scorer's do."""
    layer = PyTorchWrapper_v2(small_network(seed))
    fuse_updates(layer.shims[0], FusedPyTorchShim, "float16")
    use_bfloat16(layer.shims, BFloat16Settings(training, inference), layer.attrs, "grid network")
    return layer, layer.shims[0]


def batch(seed=1, length=6):
    generator = torch.Generator().manual_seed(seed)
    vectors = torch.randn(3, length, 8, generator=generator, requires_grad=True)
    return ArgsKwargs(args=(vectors, torch.tensor([length, 4, 2])), kwargs={})


def train_pass(shim, inputs, seed=2):
    """A training pass through the shim, its backward pass from a seeded gradient of the logits."""
    output, backprop = shim.begin_update(inputs)
    gradient = torch.randn(output.shape, generator=torch.Generator().manual_seed(seed))
    backprop(ArgsKwargs(args=(output,), kwargs={"grad_tensors": gradient}))
    return output, gradient


def test_float32_settings_leave_the_shim_as_it_is():
    layer, shim = wrapped("float32", "float32")
    assert type(shim) is FusedPyTorchShim and "bfloat16_training" not in layer.attrs


def test_a_pass_runs_on_a_bfloat16_copy_and_its_gradients_reach_the_float32_weights():
    """The forward pass is the copy's (the master's weights rounded to bfloat16), its output and
    the inputs' gradient float32; the weights' gradients are those of that copy, in float32."""
    _, shim = wrapped()
    assert type(shim) is BFloat16PyTorchShim
    inputs = batch()
    output, gradient = train_pass(shim, inputs)
    master = shim._model
    assert output.dtype == torch.float32 and inputs.args[0].grad.dtype == torch.float32
    assert {p.dtype for p in master.parameters()} == {torch.float32}
    reference = small_network(0).to(torch.bfloat16)  # the same weights, rounded
    reference.train()
    expected = reference(inputs.args[0].detach().to(torch.bfloat16), inputs.args[1])
    torch.testing.assert_close(output, expected.float())
    expected.backward(gradient.to(expected.dtype))
    for (name, param), (_, copy) in zip(master.named_parameters(), reference.named_parameters()):
        assert param.grad is not None and param.grad.dtype == torch.float32, name
        torch.testing.assert_close(param.grad, copy.grad.float(), msg=name)
    fp32 = small_network(0)
    fp32.train()
    assert not torch.equal(fp32(inputs.args[0].detach(), inputs.args[1]), output)  # bfloat16's rounding: not float32


def test_two_passes_of_a_step_add_their_gradients_in_float32():
    _, shim = wrapped()
    train_pass(shim, batch(1), seed=2)
    first = {n: p.grad.clone() for n, p in shim._model.named_parameters()}
    train_pass(shim, batch(3, length=5), seed=4)
    _, alone = wrapped()
    train_pass(alone, batch(3, length=5), seed=4)
    for name, param in shim._model.named_parameters():
        second = dict(alone._model.named_parameters())[name].grad
        torch.testing.assert_close(param.grad, first[name] + second, msg=name)
    assert all(copy.grad is None for _, copy in shim._twin.pairs)  # gathered, nothing left on the copy


def test_the_copy_is_refreshed_once_a_step_from_the_updated_float32_weights():
    _, shim = wrapped()
    optimizer = Adam(0.01)
    for step in range(3):
        train_pass(shim, batch(step))
        copy_before_update = [copy.detach().clone() for _, copy in shim._twin.pairs]
        shim.finish_update(optimizer)
        assert all(master.grad is None for master, _ in shim._twin.pairs)
        # between the update and the next step's first pass the copy is untouched ...
        assert all(torch.equal(copy, before) for (_, copy), before in zip(shim._twin.pairs, copy_before_update))
        train_pass(shim, batch(step + 10))  # ... which copies the weights the update made
        for master, copy in shim._twin.pairs:
            assert master.dtype == torch.float32 and torch.equal(copy, master.detach().to(torch.bfloat16))
        assert any(not torch.equal(c, b) for (_, c), b in zip(shim._twin.pairs, copy_before_update))
        shim.finish_update(optimizer)


def test_a_module_loaded_later_gets_a_copy_of_its_own():
    layer, shim = wrapped()
    train_pass(shim, batch())
    shim.finish_update(Adam(0.01))
    saved = layer.to_bytes()
    other, other_shim = wrapped(seed=5)
    other.from_bytes(saved)
    train_pass(other_shim, batch())
    for (master, copy), (mine, _) in zip(other_shim._twin.pairs, shim._twin.pairs):
        assert torch.equal(master, mine) and torch.equal(copy, mine.detach().to(torch.bfloat16))


def test_auto_without_bfloat16_instructions_stays_float32_naming_the_cpu(monkeypatch, capsys):
    monkeypatch.setattr(bfloat16, "cpu_bfloat16_instructions", lambda: [])
    monkeypatch.setattr(bfloat16, "measure_passes", lambda *a, **k: pytest.fail("nothing is measured"))
    layer, shim = wrapped("auto")
    train_pass(shim, batch())
    record = layer.attrs[bfloat16.RECORD]
    assert record["choice"] == "float32" and shim._twin is None
    assert "has no bfloat16 instructions (AVX512-BF16 or AMX-BF16)" in record["why"]
    assert "bfloat16 training (auto) of the grid network: float32" in capsys.readouterr().err


@pytest.mark.parametrize("speedup,choice", [(1.4, "bfloat16"), (1.0, "float32")])
def test_auto_measures_the_first_steps_passes_then_keeps_its_choice_with_the_weights(monkeypatch, speedup, choice):
    """auto times every pass of the first MEASURE_STEPS steps in both dtypes (the first step's as a
    warm-up) while they train in float32, then chooses; the attrs keep the choice (and the
    measurement so far), Thinc saves them with the weights, and a layer loaded from them (a
    resumed run) goes on from there without measuring again."""
    measured = []

    def measure(master, twin, inputs, first):
        measured.append(first)
        return {"float32": speedup, "bfloat16": 1.0}

    monkeypatch.setattr(bfloat16, "cpu_bfloat16_instructions", lambda: ["AVX512-BF16"])
    monkeypatch.setattr(bfloat16, "measure_passes", measure)
    layer, shim = wrapped("auto")
    optimizer = Adam(0.01)
    for step in range(bfloat16.MEASURE_STEPS - 1):
        for index in range(2):  # two passes a step
            train_pass(shim, batch(10 * step + index))
        shim.finish_update(optimizer)
        assert shim.training_choice() is None
    saved = layer.to_bytes()  # a checkpoint in the middle of the measurement
    train_pass(shim, batch(99))
    shim.finish_update(optimizer)
    assert len(measured) == 2 * bfloat16.MEASURE_STEPS - 1 and measured[:4] == ["float32", "bfloat16", "float32", "bfloat16"]
    record = layer.attrs[bfloat16.RECORD]
    assert shim.training_choice() == choice and record["passes"] == len(measured)
    assert record["float32_s"] == speedup * (len(measured) - 2) and record["bfloat16_s"] == len(measured) - 2  # not step 1's
    assert (shim._twin is not None) == (choice == "bfloat16")
    train_pass(shim, batch(100))
    assert len(measured) == 2 * bfloat16.MEASURE_STEPS - 1  # chosen: nothing more is measured
    resumed, resumed_shim = wrapped("auto", seed=3)
    resumed.from_bytes(saved)
    assert resumed.attrs[bfloat16.RECORD]["steps"] == bfloat16.MEASURE_STEPS - 1 and resumed_shim.training_choice() is None
    train_pass(resumed_shim, batch(99))
    resumed_shim.finish_update(Adam(0.01))
    assert resumed_shim.training_choice() == choice and len(measured) == 2 * bfloat16.MEASURE_STEPS
    again, again_shim = wrapped("auto", seed=4)
    again.from_bytes(layer.to_bytes())
    train_pass(again_shim, batch())
    assert again_shim.training_choice() == choice and len(measured) == 2 * bfloat16.MEASURE_STEPS


def test_a_step_without_a_pass_is_counted_so_every_process_chooses_at_the_same_step(monkeypatch):
    """A process of a distributed run may get no sentences in a step: it counts the step anyway,
    so all of them choose (and sum their seconds) at step MEASURE_STEPS."""
    monkeypatch.setattr(bfloat16, "cpu_bfloat16_instructions", lambda: ["AVX512-BF16"])
    monkeypatch.setattr(bfloat16, "measure_passes", lambda *a, **k: {"float32": 2.0, "bfloat16": 1.0})
    layer, shim = wrapped("auto")
    optimizer = Adam(0.01)
    shim.finish_update(optimizer)  # step 1: no pass here
    assert layer.attrs[bfloat16.RECORD]["steps"] == 1 and shim.training_choice() is None
    for step in range(2, bfloat16.MEASURE_STEPS + 1):
        train_pass(shim, batch(step))
        shim.finish_update(optimizer)
    assert shim.training_choice() == "bfloat16" and layer.attrs[bfloat16.RECORD]["passes"] == bfloat16.MEASURE_STEPS - 1


def test_a_process_without_passes_or_instructions_chooses_float32_at_the_same_step(monkeypatch):
    monkeypatch.setattr(bfloat16, "cpu_bfloat16_instructions", lambda: [])
    monkeypatch.setattr(bfloat16, "agreed_seconds", lambda *a: pytest.fail("no other process reaches it"))
    layer, shim = wrapped("auto")
    for _ in range(bfloat16.MEASURE_STEPS):
        shim.finish_update(Adam(0.01))
    assert shim.training_choice() == "float32" and "has no bfloat16 instructions" in layer.attrs[bfloat16.RECORD]["why"]


def test_the_measured_steps_train_as_float32_steps(monkeypatch):
    """auto's measurement changes nothing that trains: its steps are float32's, bit for bit."""
    monkeypatch.setattr(bfloat16, "cpu_bfloat16_instructions", lambda: ["AVX512-BF16"])
    _, auto = wrapped("auto")
    _, plain = wrapped("float32")
    optimizers = {auto: Adam(0.01), plain: Adam(0.01)}
    for step in range(bfloat16.MEASURE_STEPS - 1):
        for shim in (auto, plain):
            torch.manual_seed(step)  # the same dropout draws (the network has none here; the state must match)
            train_pass(shim, batch(step))
            shim.finish_update(optimizers[shim])
    for (name, a), (_, b) in zip(auto._model.named_parameters(), plain._model.named_parameters()):
        assert torch.equal(a, b), name
    assert auto.training_choice() is None


def test_the_measurement_leaves_gradients_modes_and_random_state_as_they_were():
    network = small_network()
    twin = small_network().to(torch.bfloat16)
    network.eval()
    first = next(network.parameters())
    first.grad = torch.ones_like(first)
    state = torch.get_rng_state()
    inputs = batch()
    seconds = measure_passes(network, twin, inputs, first="bfloat16")
    assert list(seconds) == ["bfloat16", "float32"] and all(t > 0 for t in seconds.values())
    assert torch.equal(torch.get_rng_state(), state) and not network.training and twin.training
    assert torch.equal(first.grad, torch.ones_like(first)) and inputs.args[0].grad is None
    assert all(p.grad is None for p in list(network.parameters())[1:]) and all(p.grad is None for p in twin.parameters())


def test_inference_in_bfloat16_predicts_float32_outputs_saves_bfloat16_and_does_not_train():
    layer, shim = wrapped("float32", "bfloat16")
    fp32, _ = wrapped("float32", "float32")
    inputs = batch()
    predicted = shim.predict(inputs)
    assert predicted.dtype == torch.float32 and {p.dtype for p in shim._model.parameters()} == {torch.bfloat16}
    expected = fp32.shims[0].predict(inputs)
    assert not torch.equal(predicted, expected) and (predicted - expected).abs().max() < 0.05 * expected.abs().max()
    with pytest.raises(ValueError, match="predicts in bfloat16 .* for inference: train the float32 pipeline"):
        shim.begin_update(inputs)
    state = torch.load(io.BytesIO(srsly.msgpack_loads(shim.to_bytes())["state"]), weights_only=True)
    assert {value.dtype for value in state.values() if value.is_floating_point()} == {torch.bfloat16}
    # a float32 state (a pipeline whose config was edited by hand) is made bfloat16 when it predicts
    loaded, loaded_shim = wrapped("float32", "bfloat16", seed=4)
    loaded.from_bytes(fp32.to_bytes())
    assert torch.equal(loaded_shim.predict(inputs), fp32_to_bfloat16_prediction(fp32, inputs))


def fp32_to_bfloat16_prediction(layer, inputs):
    module = small_network(9)
    module.load_state_dict(layer.shims[0]._model.state_dict())
    module.to(torch.bfloat16).eval()
    with torch.no_grad():
        return module(inputs.args[0].to(torch.bfloat16), inputs.args[1]).float()


def test_settings_are_checked_naming_the_choices():
    with pytest.raises(ValueError, match="training_dtype must be one of float32, bfloat16, auto, got 'bf16'"):
        check_dtypes("bf16", "float32")
    with pytest.raises(ValueError, match="inference_dtype must be one of float32, bfloat16, got 'auto'"):
        check_dtypes("float32", "auto")
    for dtypes in (("bfloat16", "float32"), ("float32", "bfloat16")):
        with pytest.raises(ValueError, match="mixed_precision .* do not go together"):
            check_dtypes(*dtypes, mixed_precision=True)
    assert check_dtypes("float32", "float32", mixed_precision=True).is_float32
    # auto beside autocast (a GPU config with mixed_precision turned on) is float32 weights
    assert check_dtypes("auto", "float32", mixed_precision=True).is_float32
    assert check_dtypes("auto", "float32").training == "auto"
    # the settings ride in the grid scorer's attrs without being saved (the config says them)
    node = Model("node", lambda model, X, is_train: (X, lambda dY: dY), attrs={"bfloat16": BFloat16Settings("auto")})
    assert "bfloat16" not in srsly.msgpack_loads(node.to_bytes())["attrs"][0]


def test_without_the_instructions_training_in_bfloat16_warns_naming_them(monkeypatch):
    monkeypatch.setattr(bfloat16, "cpu_bfloat16_instructions", lambda: [])
    bfloat16._warn_without_instructions.cache_clear()
    _, shim = wrapped("bfloat16")
    with pytest.warns(UserWarning, match="has no bfloat16 instructions \\(AVX512-BF16 or AMX-BF16\\)"):
        train_pass(shim, batch())
    bfloat16._warn_without_instructions.cache_clear()


def test_without_the_instructions_inference_in_bfloat16_warns_once_naming_them(monkeypatch, recwarn):
    """A pipeline optimized on a CPU with bfloat16 instructions, loaded on one without: slower
    than float32 there, said once a process."""
    monkeypatch.setattr(bfloat16, "cpu_bfloat16_instructions", lambda: [])
    bfloat16._warn_without_instructions.cache_clear()
    _, shim = wrapped("float32", "bfloat16")
    shim.predict(batch())
    shim.predict(batch())
    said = [str(warning.message) for warning in recwarn if "bfloat16" in str(warning.message)]
    assert len(said) == 1 and said[0].startswith('inference_dtype = "bfloat16": ')
    assert "has no bfloat16 instructions (AVX512-BF16 or AMX-BF16)" in said[0] and "optimize" in said[0]
    bfloat16._warn_without_instructions.cache_clear()
    monkeypatch.setattr(bfloat16, "cpu_bfloat16_instructions", lambda: ["AMX-BF16"])
    recwarn.clear()
    wrapped("float32", "bfloat16")[1].predict(batch())
    assert not [warning for warning in recwarn if "bfloat16" in str(warning.message)]
    bfloat16._warn_without_instructions.cache_clear()


def _agree(rank: int, address: str, seconds: dict, results) -> None:
    torch.distributed.init_process_group("gloo", init_method=address, rank=rank, world_size=2)
    try:
        results[rank] = bfloat16.agreed_seconds(*seconds[rank])
    finally:
        torch.distributed.destroy_process_group()


def test_the_processes_of_a_run_choose_alike_from_their_summed_seconds(tmp_path):
    """Two processes that measured apart (one would choose bfloat16, the other float32) both see
    the sums, so auto's choice is the same in every process of a torchrun/Ray Train run."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        results = manager.dict()
        seconds = {0: (3.0, 2.0), 1: (1.0, 1.5)}  # 1.5x alone, 0.67x alone: 4.0 / 3.5 = 1.14x together
        processes = [context.Process(target=_agree, args=(rank, f"file://{tmp_path / 'rendezvous'}", seconds, results)) for rank in (0, 1)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(120)
        assert [process.exitcode for process in processes] == [0, 0]
        assert dict(results) == {0: (4.0, 3.5, 2), 1: (4.0, 3.5, 2)}
    assert bfloat16.agreed_seconds(3.0, 2.0) == (3.0, 2.0, 1)  # a run of one process: its own
