"""The w2ner component's link thresholds (``nnw_threshold``, ``thw_threshold``): off by default,
checked when the pipe is created, from the config on load (never from the saved weights)."""
import pytest
import spacy

from spacy_w2ner.model.types import LinkThresholds


def test_the_default_is_the_argmax():
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("w2ner")
    assert nlp.config["components"]["w2ner"]["nnw_threshold"] is None
    assert nlp.config["components"]["w2ner"]["thw_threshold"] is None
    assert pipe.link_thresholds == LinkThresholds() and pipe.link_thresholds.is_argmax


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

