"""The w2ner component's decoding settings (the link thresholds ``nnw_threshold`` and
``thw_threshold``, ``best_path_only``): the arg-max and every path by default, checked when the
pipe is created, from the config on load (never from the saved weights)."""
import pytest
import spacy

from spacy_w2ner import get_entities
from spacy_w2ner.model.types import LinkThresholds

from ..conftest import TRAIN_DATA


def test_the_default_is_the_argmax():
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("w2ner")
    assert nlp.config["components"]["w2ner"]["nnw_threshold"] is None
    assert nlp.config["components"]["w2ner"]["thw_threshold"] is None
    assert pipe.link_thresholds == LinkThresholds() and pipe.link_thresholds.is_argmax
    assert nlp.config["components"]["w2ner"]["best_path_only"] is False and pipe.best_path_only is False


@pytest.mark.parametrize("setting, value", [("nnw_threshold", 0.0), ("thw_threshold", 1.2), ("nnw_threshold", -1)])
def test_a_bad_threshold_fails_when_the_pipe_is_created(setting, value):
    with pytest.raises(ValueError, match=f"{setting} must be null"):
        spacy.blank("en").add_pipe("w2ner", config={setting: value})


def test_thresholds_come_from_the_config_not_the_saved_model(trained_nlp, tmp_path):
    trained_nlp.to_disk(tmp_path / "argmax")
    tuned = spacy.load(tmp_path / "argmax", config={"components": {"w2ner": {"nnw_threshold": 0.4}}})
    assert tuned.get_pipe("w2ner").link_thresholds == LinkThresholds(0.4, None)
    tuned.to_disk(tmp_path / "tuned")
    assert spacy.load(tmp_path / "tuned").get_pipe("w2ner").link_thresholds == LinkThresholds(0.4, None)
    plain = spacy.load(tmp_path / "argmax")
    plain.from_bytes(tuned.to_bytes())  # the weights and cfg, not the thresholds
    assert plain.get_pipe("w2ner").link_thresholds == LinkThresholds()



def test_best_path_only_keeps_one_entity_per_thw_cell(trained_nlp, tmp_path):
    """An overfitted model predicts TRAIN_DATA's gold, which has no two entities of one label with
    the same first and last words: best_path_only predicts the same."""
    trained_nlp.to_disk(tmp_path / "model")
    best = spacy.load(tmp_path / "model", config={"components": {"w2ner": {"best_path_only": True}}})
    assert best.get_pipe("w2ner").best_path_only is True
    texts = [text for text, _ in TRAIN_DATA]
    for doc, same in zip(best.pipe(texts), trained_nlp.pipe(texts)):
        assert [e.key for e in get_entities(doc)] == [e.key for e in get_entities(same)]
