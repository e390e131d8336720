"""nn.int8: which Linear layers become int8, and the 8-bit activations where the CPU has VNNI."""
import pytest
import torch

from spacy_w2ner.nn import int8


def _encoder_like() -> torch.nn.Module:
    torch.manual_seed(0)
    layer = torch.nn.ModuleDict({
        "attention": torch.nn.ModuleDict({"query": torch.nn.Linear(64, 64), "output": torch.nn.Linear(64, 64)}),
        "intermediate": torch.nn.Linear(64, 256),
    })  # fmt: skip
    return torch.nn.ModuleDict({"layer": layer})


def test_only_the_matched_linear_layers_become_int8():
    module = _encoder_like()
    names = int8.quantize_linear_layers(module, [r"attention"])
    assert names == ["layer.attention.query", "layer.attention.output"]
    assert int8.int8_layer_names(module) == names
    assert all(isinstance(module.get_submodule(name), int8.Int8Linear) for name in names)
    assert type(module.get_submodule("layer.intermediate")) is torch.nn.Linear


def test_an_int8_layer_predicts_what_its_float_layer_does_to_int8_rounding():
    """Its forward reads torch's packed weights (a private name): fails where a torch moves them."""
    torch.manual_seed(0)
    linear, inputs = torch.nn.Linear(32, 16), torch.randn(8, 32)
    expected = linear(inputs).detach()
    quantized = torch.nn.Sequential(linear)
    int8.quantize_linear_layers(quantized, ["."])
    assert isinstance(quantized[0], int8.Int8Linear)
    assert (quantized(inputs) - expected).abs().max() < 0.05 * expected.abs().max()


def _error_at(bits: int, monkeypatch) -> float:
    monkeypatch.setattr(int8, "ACTIVATION_BITS", bits)
    torch.manual_seed(1)
    linear = torch.nn.Linear(64, 64)
    inputs = torch.randn(512, 64)
    inputs[:, 3] *= 30  # an outlier channel, as a transformer's layer norms make
    expected = linear(inputs).detach()
    quantized = torch.nn.Sequential(linear)
    int8.quantize_linear_layers(quantized, ["."])
    return (quantized(inputs) - expected).abs().mean().item()


@pytest.mark.skipif(int8.ACTIVATION_BITS < 8, reason="this CPU has no AVX-512 VNNI: activations stay 7-bit")
def test_8_bit_activations_halve_the_error_of_7_bit_ones(monkeypatch):
    seven, eight = _error_at(7, monkeypatch), _error_at(8, monkeypatch)
    assert eight < 0.65 * seven
