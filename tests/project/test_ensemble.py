"""scripts/ensemble.py: pipelines' grid probabilities averaged, then decoded once (issue 73's lever 4)."""
import importlib.util
import json
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import DocBin

from spacy_w2ner.grid.segments import Segment
from tests.conftest import make_examples, train

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensemble.py"
spec = importlib.util.spec_from_file_location("ensemble", SCRIPT)
ensemble = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ensemble)


@pytest.fixture(scope="module")
def gold(tmp_path_factory):
    nlp = spacy.blank("en")
    path = tmp_path_factory.mktemp("gold") / "gold.spacy"
    DocBin(docs=[example.reference for example in make_examples(nlp)]).to_disk(path)
    return path


@pytest.fixture(scope="module")
def undertrained(tmp_path_factory):
    """A pipeline trained less than ``saved_model``: it finds other entities."""
    from tests.conftest import SMALL_W2NER_CONFIG

    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    path = tmp_path_factory.mktemp("undertrained") / "model"
    train(nlp, make_examples(nlp), 8).to_disk(path)
    return path


def test_a_pipeline_with_itself_scores_as_it_does_alone(saved_model, gold):
    result = ensemble.ensemble([saved_model, saved_model], gold)
    alone = result["models"][0]["scores"]
    assert result["ensemble"] == alone == result["models"][1]["scores"] and alone["f"] > 90
    assert result["documents"] == 4 and result["grid_seconds"] >= result["models"][0]["grid_seconds"] > 0


def test_the_ensemble_decodes_the_mean_of_the_pipelines_probabilities(saved_model, undertrained, gold, monkeypatch):
    """Two pipelines that disagree: the ensemble's entities are those of their averaged grids, so
    giving the well-trained one twice the weight (listing it twice) moves the ensemble toward it."""
    from spacy_w2ner.release import decoding

    seen = []
    score_setting = decoding.score_setting
    monkeypatch.setattr(decoding, "score_setting", lambda pipe, docs, gold, grids, setting: (seen.append(grids), score_setting(pipe, docs, gold, grids, setting))[1])
    result = ensemble.ensemble([saved_model, undertrained], gold)
    first, second, averaged = seen
    assert [segment for segment, _ in averaged] == [segment for segment, _ in first]
    for (_, mean), (_, a), (_, b) in zip(averaged, first, second):
        numpy.testing.assert_allclose(mean, (a + b) / 2, rtol=1e-6)
    well, poorly = (row["scores"]["f"] for row in result["models"])
    assert well > poorly
    weighted = ensemble.ensemble([saved_model, saved_model, undertrained], gold)["ensemble"]["f"]
    assert weighted >= result["ensemble"]["f"]


def test_pipelines_that_cut_the_corpus_into_other_segments_are_refused():
    grid = numpy.zeros((2, 2, 3))
    ours = [(Segment(0, 0, 2, 0, 2), grid)]
    theirs = [(Segment(0, 0, 3, 0, 3), grid)]
    ensemble.check_same_segments([Path("a"), Path("b")], [ours, list(ours)])
    with pytest.raises(SystemExit, match="^b cuts the corpus into other segments than a"):
        ensemble.check_same_segments([Path("a"), Path("b")], [ours, theirs])


def test_each_pipeline_carries_its_training_record_where_its_run_folder_has_one(tmp_path):
    run = tmp_path / "run"
    (run / "model-best").mkdir(parents=True)
    assert ensemble.training_record(run / "model-best") is None
    record = {"resumes": 2, "finished": True, "steps": 3340, "seconds": 11483.5, "best_score": 0.717, "best_step": 2672, "config": "[paths]"}
    (run / "run.json").write_text(json.dumps(record), encoding="utf8")
    assert ensemble.training_record(run / "model-best") == {key: record[key] for key in ("finished", "steps", "seconds", "resumes", "best_step", "best_score")}
