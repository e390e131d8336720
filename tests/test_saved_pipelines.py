"""Pipelines saved by spacy-w2ner 0.1.0 load and predict exactly as they did.

tests/fixtures/saved-0.1.0 was written by ``tests/fixtures/make_saved_pipelines.py`` with
version 0.1.0: a CNN pipeline and one with a (tiny, random) transformer through the chunked
encoder with ``last_layers = 2``. The entities must be equal and the scores within 1e-6.
"""
import json
from pathlib import Path

import pytest
import spacy

from spacy_w2ner import get_entities

SAVED = Path(__file__).parent / "fixtures" / "saved-0.1.0"
EXPECTED = json.loads((SAVED / "predictions.json").read_text(encoding="utf8"))


@pytest.mark.parametrize("name", ["cnn", "trf"])
def test_pipeline_saved_by_0_1_0_predicts_the_same(name):
    nlp = spacy.load(SAVED / name)
    for text, expected, doc in zip(EXPECTED["texts"], EXPECTED[name], nlp.pipe(EXPECTED["texts"])):
        found = [[e.label, list(e.tokens), e.score] for e in get_entities(doc)]
        assert [f[:2] for f in found] == [e[:2] for e in expected], text
        assert [f[2] for f in found] == pytest.approx([e[2] for e in expected], abs=1e-6), text
    assert any(EXPECTED[name]), "the saved pipeline should find entities"


@pytest.mark.parametrize("name", ["cnn", "trf"])
def test_pipeline_saved_by_0_1_0_round_trips_through_bytes(name):
    nlp = spacy.load(SAVED / name)
    again = spacy.load(SAVED / name)
    again.from_bytes(nlp.to_bytes())
    texts = EXPECTED["texts"]
    for doc, expected in zip(again.pipe(texts), EXPECTED[name]):
        assert [[e.label, list(e.tokens)] for e in get_entities(doc)] == [e[:2] for e in expected]
