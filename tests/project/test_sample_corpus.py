"""The bundled sample corpus (corpora/sample), checked with the package's own codec and counts.

make_sample.py generates it with the standard library only; here the written files must equal a
fresh generation, every sentence's entities must survive a W2NER grid encode/decode round trip
(spacy_w2ner.grid), and the counts of corpora/sample/README.md must be what
``python -m spacy_w2ner convert`` reports (spacy_w2ner.formats.CorpusSummary).
"""
import importlib.util
import json
from pathlib import Path

import pytest

from spacy_w2ner.entities import get_entities
from spacy_w2ner.formats import read_w2ner_json, summarize
from spacy_w2ner.grid.codec import decode_grid, encode_grid

from ..conftest import VOCAB

SAMPLE = Path(__file__).resolve().parents[2] / "corpora" / "sample"
SPLITS = ("train", "dev")


def load_generator():
    spec = importlib.util.spec_from_file_location("make_sample", SAMPLE / "make_sample.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def docs():
    return {split: list(read_w2ner_json(SAMPLE / f"{split}.json", VOCAB)) for split in SPLITS}


def is_chinese(doc):
    return any("\u4e00" <= ch <= "\u9fff" for ch in doc.text)


def test_files_equal_a_fresh_generation():
    make_sample = load_generator()
    splits, meta = make_sample.generate()
    make_sample.validate_corpus(splits, meta)
    for split in SPLITS:
        assert (SAMPLE / f"{split}.json").read_text(encoding="utf-8") == make_sample.dumps(splits[split])


def test_every_sentence_round_trips_through_the_w2ner_grid(docs):
    for split in SPLITS:
        for doc in docs[split]:
            gold = get_entities(doc)
            labels = sorted({e.label for e in gold})
            ids = [e.with_label(labels.index(e.label)) for e in gold]
            grid, conflicts = encode_grid(ids, len(doc))
            assert conflicts == 0, doc.text
            decoded = {e.with_label(labels[e.label]) for e in decode_grid(grid).entities}
            assert decoded == set(gold), doc.text


def test_counts_are_those_of_the_readme(docs):
    """The README's counts table (sentences, tokens, entities, labels, discontinuous, sharing a token)."""
    expected = {
        "train": {"sentences": 360, "tokens": 6049, "entities": 1547, "discontinuous": 363, "overlapping": 783,
                  "per_label": {"ADR": 794, "DRUG": 356, "LOC": 135, "ORG": 121, "PER": 141}},
        "dev": {"sentences": 90, "tokens": 1505, "entities": 384, "discontinuous": 90, "overlapping": 192,
                "per_label": {"ADR": 197, "DRUG": 89, "LOC": 34, "ORG": 29, "PER": 35}},
    }
    readme = (SAMPLE / "README.md").read_text(encoding="utf-8")
    for split in SPLITS:
        counts = summarize(docs[split], sentence_docs=True).as_dict()
        assert {key: counts[key] for key in expected[split]} == expected[split]
        assert "thw_conflicts" not in counts  # every entity fits the grid
    assert "| Tokens | 6049 | 1505 | 7554 |" in readme
    assert "| Discontinuous entities | 363 (23.5%) | 90 (23.4%) | 453 (23.5%) |" in readme


def test_shares_the_sample_promises(docs):
    """Chinese 15-20% of sentences, >= 20% discontinuous entities in train, >= 30% of sentences with
    overlapping entities, discontinuous Chinese entities, and all discontinuous entities ADR."""
    for split in SPLITS:
        split_docs = docs[split]
        chinese = sum(is_chinese(doc) for doc in split_docs) / len(split_docs)
        assert 0.15 <= chinese <= 0.20, (split, chinese)
        with_overlap = sum(summarize([doc], sentence_docs=True).overlapping > 0 for doc in split_docs)
        assert with_overlap / len(split_docs) >= 0.30, split
        for label in ("DRUG", "ADR", "ORG", "LOC", "PER"):
            assert any(e.label == label for doc in split_docs for e in get_entities(doc)), (split, label)
    train = summarize(docs["train"], sentence_docs=True)
    assert train.discontinuous / train.entities >= 0.20
    discontinuous = [(doc, e) for split in SPLITS for doc in docs[split] for e in get_entities(doc) if e.is_discontinuous]
    assert {e.label for _, e in discontinuous} == {"ADR"}
    assert sum(is_chinese(doc) for doc, _ in discontinuous) >= 3
    assert json.loads((SAMPLE / "dev.json").read_text(encoding="utf-8"))  # valid JSON, not empty
