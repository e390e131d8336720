"""Training with the grid-level triplet loss (the model's ``triplet_*`` settings): off by default,
added to the cross-entropy when on, prediction untouched, the config deciding on load."""
import spacy

from spacy_w2ner import get_entities
from spacy_w2ner.model.types import TripletSettings

from ..conftest import SMALL_W2NER_CONFIG, TRAIN_DATA, make_examples, train

TRIPLET = {"triplet_weight": 1.0, "triplet_window": 20, "triplet_margin": 1.0, "triplet_mining": "centroid"}


def with_triplet(**settings):
    return {"model": {**SMALL_W2NER_CONFIG["model"], **TRIPLET, **settings}}


def test_off_by_default():
    pipe = spacy.blank("en").add_pipe("w2ner")
    assert pipe.model.attrs["triplet"] == TripletSettings() and not pipe.model.attrs["triplet"].is_on


def test_a_bad_setting_fails_when_the_pipe_is_created():
    import pytest

    with pytest.raises(ValueError, match="triplet_mining must be one of"):
        spacy.blank("en").add_pipe("w2ner", config=with_triplet(triplet_mining="semi_hard"))


def test_the_loss_is_the_cross_entropy_plus_the_triplet_loss():
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("w2ner", config=with_triplet(triplet_margin=4.0))
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    outputs, _ = pipe.model.begin_update([example.predicted for example in examples])
    with_loss, with_gradients = pipe.get_loss(examples, outputs)
    pipe.model.attrs["triplet"] = TripletSettings()
    without_loss, without_gradients = pipe.get_loss(examples, outputs)
    assert with_loss > without_loss > 0
    assert any((a != b).any() for a, b in zip(with_gradients, without_gradients))


def test_trains_to_the_same_entities_and_predicts_as_without_it():
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=with_triplet())
    train(nlp, make_examples(nlp), 200)  # 150 without it: it pulls against the cross-entropy a little
    scores = nlp.evaluate(make_examples(nlp))
    assert scores["w2ner_f"] == 1.0 and scores["w2ner_discontinuous_f"] == 1.0
    off = spacy.blank("en")
    off.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    off.from_bytes(nlp.to_bytes())  # the same weights under a config without the triplet loss
    texts = [text for text, _ in TRAIN_DATA]
    for doc, same in zip(nlp.pipe(texts), off.pipe(texts)):
        assert [(e.key, e.score) for e in get_entities(doc)] == [(e.key, e.score) for e in get_entities(same)]


def test_the_config_decides_on_load(trained_nlp, tmp_path):
    trained_nlp.to_disk(tmp_path / "model")
    assert spacy.load(tmp_path / "model").get_pipe("w2ner").model.attrs["triplet"] == TripletSettings()
    overrides = {"components": {"w2ner": {"model": {"triplet_weight": 0.5, "triplet_window": 10}}}}
    loaded = spacy.load(tmp_path / "model", config=overrides)
    assert loaded.get_pipe("w2ner").model.attrs["triplet"] == TripletSettings(0.5, 10, 1.0, "centroid")
