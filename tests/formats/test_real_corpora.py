"""The public benchmark corpora in ../shared/corpora convert with the counts of their PROVENANCE.md (skipped without them)."""

import pytest

from spacy_w2ner.formats import read_bmes, read_conll, read_dai_text, read_w2ner_json, summarize

from ..conftest import SHARED_CORPORA, VOCAB, ZH_VOCAB

pytestmark = pytest.mark.slow  # reads every public corpus file


REAL = [
    # (corpus file, reader, summary counts that must hold)
    ("cadec/dai-text/train.txt", "dai", {"sentences": 5340, "entities": 4430, "discontinuous": 491}),
    ("cadec/dai-text/dev.txt", "dai", {"sentences": 1097, "entities": 898, "discontinuous": 94}),
    ("cadec/dai-text/test.txt", "dai", {"sentences": 1160, "entities": 990, "discontinuous": 94}),
    ("conll03/bio/train.txt", "conll", {
        "sentences": 14041, "entities": 23499, "discontinuous": 0, "overlapping": 0,
        "per_label": {"LOC": 7140, "MISC": 3438, "ORG": 6321, "PER": 6600},
    }),
    ("conll03/bio/valid.txt", "conll", {"sentences": 3250, "entities": 5942}),
    ("conll03/bio/test.txt", "conll", {"sentences": 3453, "entities": 5648}),
    ("resume/bmes/train.char.bmes", "bmes", {"sentences": 3821, "entities": 13440, "repaired_entities": 4}),
    ("resume/bmes/dev.char.bmes", "bmes", {"sentences": 463, "entities": 1497}),
    ("resume/bmes/test.char.bmes", "bmes", {"sentences": 477, "entities": 1630}),
    ("genia/w2ner-json/dev.json", "w2ner-json", {"sentences": 1669, "entities": 5365, "overlapping": 1067}),
    ("genia/w2ner-json/test.json", "w2ner-json", {"sentences": 1854, "entities": 5506, "overlapping": 1199}),
]

REAL_READERS = {
    "dai": lambda path: read_dai_text(path, VOCAB),
    "conll": lambda path: read_conll(path, VOCAB, scheme="BIO"),
    "bmes": lambda path: read_bmes(path, ZH_VOCAB),
    "w2ner-json": lambda path: read_w2ner_json(path, VOCAB),
}


@pytest.fixture(scope="module")
def real_counts():
    """The summaries of every real corpus file, read once."""
    return {
        name: summarize(REAL_READERS[reader](SHARED_CORPORA / name), sentence_docs=True).as_dict()
        for name, reader, _ in REAL
    }


@pytest.mark.skipif(not SHARED_CORPORA.exists(), reason="../shared/corpora is absent")
@pytest.mark.parametrize("name, reader, expected", REAL, ids=[name for name, _, _ in REAL])
def test_real_corpus_counts(real_counts, name, reader, expected):
    counts = real_counts[name]
    assert {key: counts.get(key) for key in expected} == expected
    assert counts["documents"] == counts["sentences"]
    if reader != "bmes" or "train" not in name:
        assert "repaired_entities" not in counts


@pytest.mark.skipif(not SHARED_CORPORA.exists(), reason="../shared/corpora is absent")
def test_real_cadec_dai_totals(real_counts):
    splits = [real_counts[f"cadec/dai-text/{split}.txt"] for split in ("train", "dev", "test")]
    totals = {key: sum(s[key] for s in splits) for key in ("sentences", "entities", "discontinuous")}
    assert totals == {"sentences": 7597, "entities": 6318, "discontinuous": 679}
