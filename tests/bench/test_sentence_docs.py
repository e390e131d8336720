"""bench/sentence_docs.py: a document's sentences one Doc each, entities kept, sentences that an
entity crosses kept together."""
import importlib.util
from pathlib import Path

import spacy
from spacy.tokens import Doc

from spacy_w2ner import get_entities, set_entities

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_sentence_docs", ROOT / "bench" / "sentence_docs.py")
sentence_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sentence_docs)


def make_doc(entities):
    words = "Pain began . Her knees and ankles hurt . She slept .".split()
    starts = [True, False, False, True, False, False, False, False, False, True, False, False]
    doc = Doc(spacy.blank("en").vocab, words=words, sent_starts=starts)
    set_entities(doc, entities)
    return doc


def as_tuples(doc):
    return [(e.label, list(e.tokens)) for e in get_entities(doc)]


def test_each_sentence_becomes_a_doc_with_its_entities_shifted():
    doc = make_doc([("ADR", [0]), ("ADR", [4, 7]), ("ADR", [6, 7])])
    sentences = sentence_docs.split_sentences(doc)
    assert [s.text for s in sentences] == ["Pain began .", "Her knees and ankles hurt .", "She slept ."]
    assert [as_tuples(s) for s in sentences] == [[("ADR", [0])], [("ADR", [1, 4]), ("ADR", [3, 4])], []]


def test_sentences_an_entity_crosses_stay_one_doc():
    doc = make_doc([("ADR", [1, 4]), ("ADR", [10])])
    sentences = sentence_docs.split_sentences(doc)
    assert [s.text for s in sentences] == ["Pain began . Her knees and ankles hurt .", "She slept ."]
    assert [as_tuples(s) for s in sentences] == [[("ADR", [1, 4])], [("ADR", [1])]]
