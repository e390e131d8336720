"""W2NER JSON <-> Docs: counts, round trips, errors naming file and record."""
import json

import pytest
import spacy

from spacy_w2ner.formats import FormatError, docs_to_w2ner_json, read_w2ner_json, write_docbin
from spacy.tokens import DocBin

from .conftest import SHARED_CORPORA

NLP = spacy.blank("en")

RECORDS = [
    {"sentence": ["Muscle", "aches", "in", "arms", "and", "legs", "."],
     "ner": [{"index": [0, 1, 2, 3], "type": "ADR"}, {"index": [0, 1, 2, 5], "type": "ADR"}]},
    {"sentence": ["New", "York", "University"],
     "ner": [{"index": [0, 1, 2], "type": "ORG"}, {"index": [0, 1], "type": "LOC"}]},
    {"sentence": ["Nothing", "here"], "ner": []},
]


def write(tmp_path, records, name="data.json"):
    path = tmp_path / name
    path.write_text(json.dumps(records), encoding="utf8")
    return path


def test_w2ner_json_round_trip_through_docbin(tmp_path):
    path = write(tmp_path, RECORDS)
    summary = write_docbin(read_w2ner_json(path, NLP.vocab), tmp_path / "out.spacy")
    assert summary.as_dict() == {
        "documents": 3, "tokens": 12, "entities": 4, "discontinuous": 1,
        "overlapping": 4, "per_label": {"ADR": 2, "LOC": 1, "ORG": 1},
    }
    docs = list(DocBin().from_disk(tmp_path / "out.spacy").get_docs(NLP.vocab))
    assert docs_to_w2ner_json(docs) == [
        {"sentence": r["sentence"], "ner": sorted(r["ner"], key=lambda e: (e["index"], e["type"]))}
        for r in RECORDS
    ]


@pytest.mark.parametrize(
    "record, message",
    [
        ({"sentence": ["a", "b"], "ner": [{"index": [2], "type": "X"}]}, "record 1: entity 0 \\(X\\) has token indices \\[2\\]"),
        ({"sentence": ["a", ""], "ner": []}, "record 1: token 1"),
        ({"sentence": ["a b"], "ner": []}, "record 1: token 0"),
        ({"sentence": ["a"], "ner": [{"index": [0]}]}, "record 1: entity 0 needs 'index' and 'type'"),
        ({"sentence": ["a", "b"], "ner": [{"index": [0, 0], "type": "X"}]}, "repeats a token index"),
        ({"tokens": ["a"]}, "record 1: expected an object with a 'sentence'"),
    ],
)
def test_malformed_records_name_file_and_record(tmp_path, record, message):
    path = write(tmp_path, [RECORDS[2], record])
    with pytest.raises(FormatError, match=message) as err:
        list(read_w2ner_json(path, NLP.vocab))
    assert str(path) in str(err.value)


def test_invalid_json_names_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('[\n{"sentence": ["a"],\n "ner": [}\n]', encoding="utf8")
    with pytest.raises(FormatError, match=f"{path}:3: not valid JSON"):
        list(read_w2ner_json(path, NLP.vocab))


@pytest.mark.skipif(not SHARED_CORPORA.exists(), reason="../shared/corpora is absent")
def test_cadec_w2ner_json_counts(tmp_path):
    totals = {"entities": 0, "discontinuous": 0, "documents": 0}
    for split in ("train", "dev", "test"):
        path = SHARED_CORPORA / "cadec" / "w2ner-json" / f"{split}.json"
        summary = write_docbin(read_w2ner_json(path, NLP.vocab), tmp_path / f"{split}.spacy")
        for key in totals:
            totals[key] += getattr(summary, key)
    assert totals == {"entities": 6316, "discontinuous": 679, "documents": 7597}
