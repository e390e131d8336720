"""Pipelines saved by spacy-w2ner 0.1.0 load and predict exactly as they did.

tests/fixtures/saved-0.1.0 was written by ``tests/fixtures/make_saved_pipelines.py`` with
version 0.1.0: a CNN pipeline and one with a (tiny, random) transformer through the chunked
encoder with ``last_layers = 2``. The entities must be equal and the scores within 1e-6, with
one intended change since 0.1.0: no entity starts or ends on a whitespace token any more
(``without_edge_whitespace``), so 0.1.0's entities are compared trimmed.
"""
import json
from pathlib import Path

import pytest
import spacy

from spacy_w2ner import get_entities
from spacy_w2ner.entities import Entity, without_edge_whitespace

SAVED = Path(__file__).resolve().parents[1] / "fixtures" / "saved-0.1.0"
EXPECTED = json.loads((SAVED / "predictions.json").read_text(encoding="utf8"))


@pytest.mark.parametrize("name", ["cnn", "trf"])
def test_pipeline_saved_by_0_1_0_predicts_the_same(name):
    nlp = spacy.load(SAVED / name)
    for text, expected, doc in zip(EXPECTED["texts"], EXPECTED[name], nlp.pipe(EXPECTED["texts"])):
        trimmed = without_edge_whitespace([Entity(label, tuple(tokens), score) for label, tokens, score in expected], doc)
        expected = sorted([[e.label, list(e.tokens), e.score] for e in trimmed], key=lambda e: (e[1], e[0]))
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
    for doc, reference in zip(again.pipe(texts), nlp.pipe(texts)):
        assert [e.key for e in get_entities(doc)] == [e.key for e in get_entities(reference)]
