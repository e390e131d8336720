"""W2NER JSON (spacy_w2ner/formats/w2ner_json.py): round trips, counts, errors naming file and record, export."""
import json
import subprocess
import sys

import pytest
import spacy
from spacy.tokens import Doc, DocBin

from spacy_w2ner import set_entities
from spacy_w2ner.formats import FormatError, docs_to_w2ner_json, read_w2ner_json, write_docbin

from ..conftest import SHARED_CORPORA, VOCAB, cli, docbin_docs, entities, summary_line, write
from ..samples import BRAT_ANN, BRAT_TEXT, RECORDS


def test_w2ner_json_round_trip_through_the_cli(tmp_path):
    source = write(tmp_path, "data.json", json.dumps(RECORDS, ensure_ascii=False))
    counts = summary_line(cli("convert", "w2ner-json", source, tmp_path / "spacy"))
    assert counts == {
        "documents": 3, "sentences": 3, "tokens": 11, "entities": 4, "discontinuous": 1,
        "overlapping": 4, "per_label": {"ADR": 2, "LOC": 1, "ORG": 1},
    }
    exported = cli("export", "w2ner-json", tmp_path / "spacy" / "data.spacy", tmp_path / "out.json")
    assert summary_line(exported)["entities"] == 4
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf8")) == RECORDS
    assert (tmp_path / "out.json").read_bytes() == source.read_bytes()


@pytest.mark.slow
def test_w2ner_json_round_trip_with_python_m(tmp_path):
    """The real command line: ``python -m spacy_w2ner convert`` then ``export``."""
    source = write(tmp_path, "data.json", json.dumps(RECORDS, ensure_ascii=False))

    def run(*args):
        result = subprocess.run(
            [sys.executable, "-m", "spacy_w2ner", *map(str, args)], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.strip().splitlines()[-1])

    assert run("convert", "w2ner-json", source, tmp_path / "spacy")["entities"] == 4
    assert run("export", "w2ner-json", tmp_path / "spacy" / "data.spacy", tmp_path / "out.json")["entities"] == 4
    assert (tmp_path / "out.json").read_bytes() == source.read_bytes()


def test_export_of_brat_docs_to_w2ner_json_drops_whitespace_tokens(tmp_path):
    write(tmp_path / "brat", "doc.txt", BRAT_TEXT)
    write(tmp_path / "brat", "doc.ann", BRAT_ANN)
    cli("convert", "brat", tmp_path / "brat", tmp_path / "spacy")
    (doc,) = docbin_docs(tmp_path / "spacy" / "brat.spacy")
    assert doc[8].text == "\n" and entities(doc) == [("ADR", (2, 3, 4, 6)), ("SYM", (10,))]
    cli("export", "w2ner-json", tmp_path / "spacy" / "brat.spacy", tmp_path / "out.json")
    records = json.loads((tmp_path / "out.json").read_text(encoding="utf8"))
    assert records == [{
        "sentence": ["I", "had", "pain", "in", "knees", "and", "ankles", ".", "No", "fever", "."],
        "ner": [{"index": [2, 3, 4, 6], "type": "ADR"}, {"index": [9], "type": "SYM"}],  # fever: 10 -> 9
    }]


def test_export_of_an_entity_over_a_whitespace_token_keeps_it_without_the_whitespace(tmp_path):
    write(tmp_path / "brat", "doc.txt", BRAT_TEXT)
    write(tmp_path / "brat", "doc.ann", "T1\tX 30 34\t. No\n")  # ".\nNo": includes the "\n" token
    cli("convert", "brat", tmp_path / "brat", tmp_path / "spacy")
    (doc,) = docbin_docs(tmp_path / "spacy" / "brat.spacy")
    assert entities(doc) == [("X", (7, 8, 9))]
    result = cli("export", "w2ner-json", tmp_path / "spacy" / "brat.spacy", tmp_path / "out.json")
    (record,) = json.loads((tmp_path / "out.json").read_text(encoding="utf8"))
    assert record["ner"] == [{"index": [7, 8], "type": "X"}]  # ".", "No": adjacent once "\n" is out
    assert [record["sentence"][i] for i in (7, 8)] == [".", "No"]
    assert result.stderr == ""


NESTED_RECORDS = [
    {"sentence": ["Muscle", "aches", "in", "arms", "and", "legs", "."],
     "ner": [{"index": [0, 1, 2, 3], "type": "ADR"}, {"index": [0, 1, 2, 5], "type": "ADR"}]},
    {"sentence": ["New", "York", "University"],
     "ner": [{"index": [0, 1, 2], "type": "ORG"}, {"index": [0, 1], "type": "LOC"}]},
    {"sentence": ["Nothing", "here"], "ner": []},
]


def write_records(tmp_path, records, name="data.json"):
    path = tmp_path / name
    path.write_text(json.dumps(records), encoding="utf8")
    return path


def test_an_entity_that_holds_a_token_of_other_whitespace_is_written_without_it_and_said_so():
    """A BMES or CoNLL file may give an ideographic space as a token; W2NER JSON holds no whitespace
    token, so the entity shrinks: reported, not silent (a line break, a tokenizer's, goes silently)."""
    doc = Doc(VOCAB, words=["中", "\u3000", "国", "人"], spaces=[False] * 4)
    set_entities(doc, [("ORG", (0, 1, 2), None)])
    problems = []
    assert docs_to_w2ner_json([doc], problems=problems) == [{"sentence": ["中", "国", "人"], "ner": [{"index": [0, 1], "type": "ORG"}]}]
    assert problems == [r"doc 0 ('中\u3000国人'): the ORG entity '中\u3000国' (tokens [0, 1, 2]) holds whitespace tokens ['\u3000'], "
                        "which W2NER JSON cannot hold; written without them"]  # repr: the escape, named
    with pytest.raises(ValueError, match="holds whitespace tokens"):
        docs_to_w2ner_json([doc])


def test_a_token_of_other_whitespace_outside_entities_is_left_out_and_said_so(tmp_path):
    """It went silently (an entity's were reported); the file is written a record at a time,
    the same bytes as one json.dumps of the records."""
    from spacy_w2ner.formats import write_w2ner_json

    doc = Doc(VOCAB, words=["北", "京", "\u3000", "人"], spaces=[False] * 4)
    set_entities(doc, [("LOC", (0, 1), None)])
    problems = []
    assert docs_to_w2ner_json([doc], problems=problems)[0]["sentence"] == ["北", "京", "人"]
    assert problems == [r"doc 0 ('北京\u3000人'): whitespace tokens ['\u3000'] (tokens [2]), which W2NER JSON cannot hold; "
                        "left out of its sentence"]  # fmt: skip
    with pytest.raises(ValueError, match="whitespace tokens"):
        docs_to_w2ner_json([doc])
    other = Doc(VOCAB, words=["a", "b"])
    assert write_w2ner_json([doc, other], tmp_path / "out.json", problems=[]) == 2
    records = docs_to_w2ner_json([doc, other], problems=[])
    assert (tmp_path / "out.json").read_text(encoding="utf8") == json.dumps(records, ensure_ascii=False)
    assert write_w2ner_json([], tmp_path / "none.json") == 0 and (tmp_path / "none.json").read_text() == "[]"
    with pytest.raises(ValueError, match="whitespace tokens"):  # an error leaves the file that was there, whole
        write_w2ner_json([other, doc], tmp_path / "out.json")
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf8")) == records
    assert sorted(p.name for p in tmp_path.iterdir()) == ["none.json", "out.json"]


def test_w2ner_json_round_trip_through_docbin(tmp_path):
    path = write_records(tmp_path, NESTED_RECORDS)
    summary = write_docbin(read_w2ner_json(path, VOCAB), tmp_path / "out.spacy")
    assert summary.as_dict() == {
        "documents": 3, "tokens": 12, "entities": 4, "discontinuous": 1,
        "overlapping": 4, "per_label": {"ADR": 2, "LOC": 1, "ORG": 1},
    }
    docs = list(DocBin().from_disk(tmp_path / "out.spacy").get_docs(VOCAB))
    assert docs_to_w2ner_json(docs) == [
        {"sentence": r["sentence"], "ner": sorted(r["ner"], key=lambda e: (e["index"], e["type"]))}
        for r in NESTED_RECORDS
    ]


@pytest.mark.parametrize(
    "record, message",
    [
        ({"sentence": ["a", "b"], "ner": [{"index": [2], "type": "X"}]}, "record 1: entity 0 \\(X\\): token index 2 is outside the sentence of 2 tokens"),
        ({"sentence": ["a", ""], "ner": []}, "record 1: token 1"),
        ({"sentence": ["a", " \n"], "ner": []}, "record 1: token 1 .* not empty or whitespace"),
        ({"sentence": ["a"], "ner": [{"index": [0]}]}, "record 1: entity 0 needs 'index' and 'type'"),
        ({"sentence": ["a", "b"], "ner": [{"index": [0, 0], "type": "X"}]}, "repeats a token index"),
        ({"tokens": ["a"]}, "record 1: expected an object with a 'sentence'"),
        # Found by a bad-input probe: tracebacks or misreported types before.
        ({"sentence": ["a", "b"], "ner": [{"index": 1, "type": "X"}]},
         "entity 0 \\(X\\): 'index' must be a non-empty list of token indices, got an integer 1"),
        ({"sentence": ["a", "b"], "ner": None}, "record 1: 'ner' must be a list of entities, got null"),
        ({"sentence": ["a\ud800b"], "ner": []}, "record 1: token 0 .* holds a lone surrogate"),
        ({"sentence": ["a", "b"], "ner": [{"index": [0], "type": "X\udfff"}]}, "entity 0's type .* lone surrogate"),
        ({"sentence": ["a", "b"], "ner": [{"index": [True, False], "type": "X"}]}, "token index True is a boolean, not an integer"),
        ({"sentence": ["a", "b"], "ner": [{"index": ["1"], "type": "X"}]}, "token index '1' is a string, not an integer"),
        ({"sentence": ["a", "b"], "ner": [{"index": [1.0], "type": "X"}]}, "token index 1.0 is a float, not an integer"),
        ({"sentence": ["a", "b"], "ner": [{"index": [[1]], "type": "X"}]}, "token index \\[1\\] is a list, not an integer"),
        ({"sentence": ["a", "b"], "ner": [{"index": [float("nan")], "type": "X"}]}, "token index nan is NaN, not an integer"),
    ],
)
def test_malformed_records_name_file_and_record(tmp_path, record, message):
    path = write_records(tmp_path, [NESTED_RECORDS[2], record])
    with pytest.raises(FormatError, match=message) as err:
        list(read_w2ner_json(path, VOCAB))
    assert str(path) in str(err.value)


def test_the_registered_reader_reports_the_same_errors(tmp_path):
    from spacy.util import registry

    path = write_records(tmp_path, [{"sentence": ["a", "b"], "ner": None}])
    corpus = registry.readers.get("spacy_w2ner.W2NERJsonCorpus.v1")(path)
    with pytest.raises(FormatError, match=f"{path}: record 0: 'ner' must be a list of entities, got null"):
        list(corpus(spacy.blank("en")))


def test_byte_order_mark_is_accepted_and_docs_are_named(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(NESTED_RECORDS).encode("utf8"))
    docs = list(read_w2ner_json(path, VOCAB))
    assert [[t.text for t in doc] for doc in docs] == [r["sentence"] for r in NESTED_RECORDS]
    assert [doc.user_data["w2ner_name"] for doc in docs] == ["bom-record0", "bom-record1", "bom-record2"]


def test_invalid_json_names_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('[\n{"sentence": ["a"],\n "ner": [}\n]', encoding="utf8")
    with pytest.raises(FormatError, match=f"{path}:3: not valid JSON"):
        list(read_w2ner_json(path, VOCAB))


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_CORPORA.exists(), reason="../shared/corpora is absent")
def test_cadec_w2ner_json_counts(tmp_path):
    totals = {"entities": 0, "discontinuous": 0, "documents": 0}
    for split in ("train", "dev", "test"):
        path = SHARED_CORPORA / "cadec" / "w2ner-json" / f"{split}.json"
        summary = write_docbin(read_w2ner_json(path, VOCAB), tmp_path / f"{split}.spacy")
        for key in totals:
            totals[key] += getattr(summary, key)
    assert totals == {"entities": 6316, "discontinuous": 679, "documents": 7597}


def test_other_keys_of_a_record_are_kept_and_written_back(tmp_path):
    records = [{"sentence": ["北", "京", "人"], "ner": [{"index": [0, 1], "type": "LOC"}], "word": [[0, 1], [2]]}]
    source = write_records(tmp_path, records)
    docs = list(read_w2ner_json(source, VOCAB))
    assert docs[0].user_data["w2ner_extra"] == {"word": [[0, 1], [2]]}
    assert docs_to_w2ner_json(docs) == records


def test_export_leaves_whitespace_tokens_out_of_entities_and_reports_what_cannot_go():
    from spacy.tokens import Doc

    from spacy_w2ner import set_entities

    doc = Doc(VOCAB, words=["Fatima", "\n", "had", "stomach", "\n", "pain", "\n\n"], spaces=[False] * 7)
    set_entities(doc, [("PER", (0,)), ("ADR", (3, 4, 5)), ("X", (6,))])
    problems = []
    (record,) = docs_to_w2ner_json([doc], problems=problems)
    assert record["sentence"] == ["Fatima", "had", "stomach", "pain"]
    assert record["ner"] == [{"index": [0], "type": "PER"}, {"index": [2, 3], "type": "ADR"}]
    assert len(problems) == 1 and "X entity '\\n\\n'" in problems[0] and "left out" in problems[0]
    with pytest.raises(ValueError, match="is only whitespace"):
        docs_to_w2ner_json([doc])
