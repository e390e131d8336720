"""The model's ``gap_link_weight``: the cross-entropy weighs a discontinuous entity's gap links
that much (1 by default: as before), checked when the pipe is created, decided by the config."""
import pytest
import spacy

from spacy_w2ner.model.types import CellWeights

from ..conftest import SMALL_W2NER_CONFIG, make_examples


def with_gap_weight(weight):
    return {"model": {**SMALL_W2NER_CONFIG["model"], "gap_link_weight": weight}}


def test_one_by_default():
    assert spacy.blank("en").add_pipe("w2ner").model.attrs["cell_weights"] == CellWeights(gap_link=1.0)


@pytest.mark.parametrize("weight", [0, -2.0, "3"])
def test_a_bad_weight_fails_when_the_pipe_is_created(weight):
    with pytest.raises(ValueError, match="gap_link_weight must be a positive number"):
        spacy.blank("en").add_pipe("w2ner", config=with_gap_weight(weight))


def test_the_loss_weighs_the_gap_links_more():
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("w2ner", config=with_gap_weight(5.0))
    examples = make_examples(nlp)  # "pain in her knees and ankles", "severe headaches and nausea" ...: gaps
    nlp.initialize(lambda: examples)
    outputs, _ = pipe.model.begin_update([example.predicted for example in examples])
    weighted_loss, weighted = pipe.get_loss(examples, outputs)
    pipe.model.attrs["cell_weights"] = CellWeights(gap_link=1.0)
    plain_loss, plain = pipe.get_loss(examples, outputs)
    assert weighted_loss > plain_loss > 0
    # "She had pain in her knees and ankles .": the gap link her (4) -> ankles (7), 5 times the gradient
    first = [i for i, s in enumerate(outputs[0].segments) if s.doc_index == 0][0]
    assert weighted[0][first, 4, 7] == pytest.approx(5 * plain[0][first, 4, 7], rel=1e-5)
    assert weighted[0][first, 4, 5] == pytest.approx(plain[0][first, 4, 5], rel=1e-6)  # her -> knees: no gap


def test_the_config_decides_on_load(trained_nlp, tmp_path):
    trained_nlp.to_disk(tmp_path / "model")
    assert spacy.load(tmp_path / "model").get_pipe("w2ner").model.attrs["cell_weights"] == CellWeights(1.0)
    loaded = spacy.load(tmp_path / "model", config={"components": {"w2ner": {"model": {"gap_link_weight": 3}}}})
    assert loaded.get_pipe("w2ner").model.attrs["cell_weights"] == CellWeights(3.0)
