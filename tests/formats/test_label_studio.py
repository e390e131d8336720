"""Label Studio (spacy_w2ner/formats/label_studio.py): regions and fragment relations in, tasks with
predictions out, UTF-16 offsets, bad exports in one located line, and the labeling config."""
import json
from pathlib import Path
from xml.etree import ElementTree

import pytest
import spacy

from spacy_w2ner import get_entities, set_entities
from spacy_w2ner.formats import FormatError, docs_to_label_studio, label_studio_config, read_label_studio
from spacy_w2ner.formats.standoff import skipped

from ..conftest import VOCAB, cli, docbin_docs, summary_line, write

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "label_studio" / "ner-export.json"
TOKENIZER = spacy.blank("en").tokenizer
TEXT = "She had pain in her knees and ankles 😀 today."


def region(region_id, start, end, label="ADR", text=None):
    value = {"start": start, "end": end, "labels": [label]}
    if text is not None:
        value["text"] = text
    return {"id": region_id, "from_name": "label", "to_name": "text", "type": "labels", "value": value}


def relation(from_id, to_id, labels=("fragment",)):
    return {"type": "relation", "from_id": from_id, "to_id": to_id, "direction": "right", "labels": list(labels)}


RESULT = [
    region("a", 8, 19, text="pain in her"), region("b", 30, 36, text="ankles"), relation("a", "b"),
    region("c", 8, 25, text="pain in her knees"),
    region("d", 39, 44, "TIME", "today"),  # after an emoji: code points, as Python counts (40 in UTF-16)
    relation("c", "d", ["when"]),
    {"id": "x", "type": "choices", "from_name": "sentiment", "to_name": "text", "value": {"choices": ["neg"]}},
]  # fmt: skip


def export(tmp_path, tasks):
    return write(tmp_path, "export.json", json.dumps(tasks, ensure_ascii=False, indent=1))


def test_regions_joined_by_fragment_relations_are_one_entity(tmp_path):
    path = export(tmp_path, [{"id": 7, "data": {"text": TEXT, "site": "forum"}, "annotations": [{"id": 1, "result": RESULT}]}])
    (doc,) = read_label_studio(path, VOCAB, tokenizer=TOKENIZER)
    found = [(e.label, e.text, e.is_discontinuous, e.spans[0].id_) for e in get_entities(doc)]
    assert found == [
        ("ADR", "pain in her knees", False, "c"),
        ("ADR", "pain in her ankles", True, "a"),
        ("TIME", "today", False, "d"),
    ]
    assert [kind for _, kind, _ in skipped(doc)] == ["not a labels region", "relation"]


def test_a_fragment_relation_to_a_region_of_several_labels_joins_the_label_they_share(tmp_path):
    """Such a region was stored as r1-ADR and r1-Symptom, and the relation to r1 stopped the
    conversion: 'points to region r1, which is not in the annotation'."""
    two_labels = region("r1", 8, 12, text="pain")
    two_labels["value"]["labels"] = ["ADR", "Symptom"]
    result = [two_labels, region("r2", 30, 36, text="ankles"), relation("r1", "r2")]
    path = export(tmp_path, [{"id": 7, "data": {"text": TEXT}, "annotations": [{"id": 1, "result": result}]}])
    (doc,) = read_label_studio(path, VOCAB, tokenizer=TOKENIZER)
    found = sorted((e.label, e.text, e.spans[0].id_) for e in get_entities(doc))
    assert found == [("ADR", "pain ankles", "r1-ADR"), ("Symptom", "pain", "r1-Symptom")]
    assert skipped(doc) == []
    result = [region(0, 8, 12, text="pain"), region(1, 30, 36, text="ankles"), relation(0, 1)]  # ids 0 and 1, as scripts write
    path = export(tmp_path, [{"id": 7, "data": {"text": TEXT}, "annotations": [{"id": 1, "result": result}]}])
    (doc,) = read_label_studio(path, VOCAB, tokenizer=TOKENIZER)
    assert [(e.label, e.text, e.spans[0].id_) for e in get_entities(doc)] == [("ADR", "pain ankles", "0")]


def test_a_region_with_an_empty_label_is_listed_not_an_entity_of_label_nothing(tmp_path):
    result = [region("r1", 8, 12, "", "pain"), region("r2", 30, 36, text="ankles"), relation("r1", "r2")]
    path = export(tmp_path, [{"id": 7, "data": {"text": TEXT}, "annotations": [{"id": 1, "result": result}]}])
    (doc,) = read_label_studio(path, VOCAB, tokenizer=TOKENIZER)
    assert [(e.label, e.text) for e in get_entities(doc)] == [("ADR", "ankles")]
    assert sorted(kind for _, kind, _ in skipped(doc)) == ["no type", "relation"]
    result[0]["value"]["labels"] = ["", "ADR"]  # a region with a label beside the empty one is joined by it
    path = export(tmp_path, [{"id": 7, "data": {"text": TEXT}, "annotations": [{"id": 1, "result": result}]}])
    (doc,) = read_label_studio(path, VOCAB, tokenizer=TOKENIZER)
    assert [(e.label, e.text) for e in get_entities(doc)] == [("ADR", "pain ankles")]
    assert [kind for _, kind, _ in skipped(doc)] == ["no type"]


def test_export_then_read_back_gives_the_same_entities_scores_and_data(tmp_path):
    path = export(tmp_path, [{"id": 7, "data": {"text": TEXT, "site": "forum"}, "annotations": [{"id": 1, "result": RESULT}]}])
    docs = list(read_label_studio(path, VOCAB, tokenizer=TOKENIZER))
    entities = get_entities(docs[0])
    set_entities(docs[0], [(e.label, e.tokens, 0.5 + k / 10) for k, e in enumerate(entities)], ids=[e.spans[0].id_ for e in entities])
    docs_to_label_studio(docs, tmp_path / "tasks.json", model_version="m1")
    (task,) = json.loads((tmp_path / "tasks.json").read_text(encoding="utf8"))
    assert task["data"] == {"text": TEXT, "site": "forum"}
    (prediction,) = task["predictions"]
    assert prediction["model_version"] == "m1" and prediction["score"] == 0.5
    regions = {r["id"]: r for r in prediction["result"] if r["type"] == "labels"}
    assert regions["d"]["value"] == {"start": 39, "end": 44, "text": "today", "labels": ["TIME"]}
    assert regions["d"]["score"] == pytest.approx(0.7)
    assert [r for r in prediction["result"] if r["type"] == "relation"] == [relation("a", "b")]
    (again,) = read_label_studio(tmp_path / "tasks.json", VOCAB, tokenizer=TOKENIZER, use="predictions")
    assert [(e.label, e.tokens) for e in get_entities(again)] == [(e.label, e.tokens) for e in get_entities(docs[0])]


def test_tasks_without_annotations_are_counted_not_converted(tmp_path):
    path = export(tmp_path, [
        {"id": 1, "data": {"text": "Aspirin helped ."}, "annotations": [{"result": [region("r", 0, 7, "DRUG")]}]},
        {"id": 2, "data": {"text": "Nothing here ."}, "annotations": []},
        {"id": 3, "data": {"text": "Cancelled ."}, "annotations": [{"was_cancelled": True, "result": []}]},
    ])  # fmt: skip
    result = cli("convert", "label-studio", path, tmp_path / "out")
    assert summary_line(result)["documents"] == 1
    assert summary_line(result)["not_documents"] == {"task without annotations": 2}
    assert "warning: 2: task without annotations: not converted" in result.stderr
    assert len(docbin_docs(tmp_path / "out" / "export.spacy")) == 1


@pytest.mark.parametrize(
    "tasks, message",
    [
        ([{"id": 4, "data": {"text": TEXT}, "annotations": [{"result": [region("a", 8, 19), relation("a", "zz")]}]}],
         r"export.json:2: task 4: a relation from a to zz points to region zz, which is not in the annotation"),
        ([{"id": 5, "data": {"txt": TEXT, "site": "forum"}, "annotations": []}],
         r"export.json:2: task 5: no text under data.text \(the data's strings: txt, site\); name its key with --text-key"),
        ([{"id": 7, "text": 3}], r"export.json:2: task 7: a task is an object with 'data' \(JSON export\) or with its text \(JSON-MIN export\)"),
        ([{"id": 6, "data": {"text": "short"}, "annotations": [{"result": [region("a", 0, 99)]}]}],
         r"export.json:2: task 6: offset 99 is not within the text of 5 characters"),
        ([{"id": 8, "data": {"text": "short"}, "annotations": [{"result": [region("a", 0, 5), region("a", 0, 2), region("b", 3, 5), relation("a", "b")]}]}],
         r"export.json:2: task 8: a relation from a to b refers to region a, the id of 2 regions; region ids must be unique"),
        ([{"id": 10, "data": {"text": "short"}, "annotations": [{"result": [region("a", "0", "²")]}]}],
         r"export.json:2: task 10: offset '²' is not within the text of 5 characters"),
    ],
)  # fmt: skip
def test_bad_exports_name_file_line_and_task(tmp_path, tasks, message):
    path = export(tmp_path, tasks)
    with pytest.raises(FormatError, match=message):
        list(read_label_studio(path, VOCAB))


def test_a_lone_surrogate_in_a_task_s_text_is_named_not_a_crash(tmp_path):
    tasks = [{"id": 9, "data": {"text": "pain \ud83d here"}, "annotations": [{"result": [region("a", 0, 4)]}]}]
    path = write(tmp_path, "export.json", json.dumps(tasks))  # the \ud83d escape, alone: no character
    with pytest.raises(FormatError, match=r"export.json:1: task 9: the text holds a lone surrogate \('\\ud83d' at character 5\)"):
        list(read_label_studio(path, VOCAB, tokenizer=TOKENIZER))
    assert cli("convert", "label-studio", path, tmp_path / "out", code=1).stderr.startswith("error: ")
    assert not (tmp_path / "out" / "export.spacy").exists()


def test_not_json_and_not_utf8(tmp_path):
    with pytest.raises(FormatError, match=r"e.json:2: not valid JSON"):
        list(read_label_studio(write(tmp_path, "e.json", '[{"data": {"text": "a"}},\n{]'), VOCAB))
    bad = tmp_path / "u.json"
    bad.write_bytes(b'[{"data": {"text": "caf\xe9"}}]')
    with pytest.raises(FormatError, match=r"u.json:1: not valid UTF-8"):
        list(read_label_studio(bad, VOCAB))


def test_the_labeling_config_names_every_label_and_the_fragment_relation(saved_model):
    config = cli("label-studio-config", saved_model).stdout
    root = ElementTree.fromstring(config)
    assert [label.get("value") for label in root.iter("Label")] == ["SYM", "LOC", "ORG", "DRUG"]
    assert [r.get("value") for r in root.iter("Relation")] == ["fragment"]
    assert root.find("Labels").get("toName") == root.find("Text").get("name") == "text"
    assert ElementTree.fromstring(label_studio_config(['a "quoted" <label>'])).find("Labels/Label").get("value") == 'a "quoted" <label>'


def test_a_label_studio_export_round_trips(tmp_path):
    """An export Label Studio 1.23 wrote (tests/fixtures/label_studio/README.md): converted, exported
    as tasks and read back, the same entities."""
    docs = list(read_label_studio(FIXTURE, VOCAB, tokenizer=TOKENIZER))
    assert sum(e.is_discontinuous for d in docs for e in get_entities(d)) >= 1
    docs_to_label_studio(docs, tmp_path / "tasks.json")
    again = list(read_label_studio(tmp_path / "tasks.json", VOCAB, tokenizer=TOKENIZER, use="predictions"))
    assert [[(e.label, e.tokens) for e in get_entities(d)] for d in again] == [[(e.label, e.tokens) for e in get_entities(d)] for d in docs]


def annotation(annotation_id, annotator, when, result, **more):
    return {"id": annotation_id, "completed_by": annotator, "updated_at": when, "result": result, **more}


SEVERAL = [{"id": 9, "data": {"text": "Aspirin helped with knee pain ."}, "annotations": [
    annotation(31, 1, "2024-05-02T10:00:00Z", [region("x", 0, 7, "DRUG")]),
    annotation(32, {"id": 2, "email": "b@example.org"}, "2024-05-03T09:00:00Z", [region("x", 0, 7, "DRUG"), region("y", 20, 29, "ADR")]),
    annotation(33, 3, "2024-05-04T09:00:00Z", [], was_cancelled=True),
], "predictions": [{"model_version": "m", "result": [region("p", 25, 29, "ADR")]}], "drafts": []}]  # fmt: skip


@pytest.mark.parametrize(
    "choice, expected, not_read",
    [
        ("latest", [("9", 32, [("DRUG", "Aspirin"), ("ADR", "knee pain")])], {"annotations not chosen (--annotations latest)": 1}),
        ("first", [("9", 31, [("DRUG", "Aspirin")])], {"annotations not chosen (--annotations first)": 1}),
        ("all", [("9-31", 31, [("DRUG", "Aspirin")]), ("9-32", 32, [("DRUG", "Aspirin"), ("ADR", "knee pain")])], {}),
    ],
)
def test_several_annotators_latest_first_or_all(tmp_path, choice, expected, not_read):
    path = export(tmp_path, SEVERAL)
    docs = list(read_label_studio(path, VOCAB, tokenizer=TOKENIZER, annotations=choice))
    found = [(d.user_data["w2ner_name"], d.user_data["w2ner_label_studio"]["annotation"], [(e.label, e.text) for e in get_entities(d)]) for d in docs]
    assert found == expected
    assert docs[-1].user_data["w2ner_label_studio"]["annotator"] == ({"id": 2, "email": "b@example.org"} if choice != "first" else 1)
    counts = summary_line(cli("convert", "label-studio", path, tmp_path / "out", "--annotations", choice))
    assert counts["documents"] == len(expected)
    assert counts["not_read"] == {**not_read, "cancelled annotations": 1, "predictions (--use annotations)": 1}


def test_repeated_region_ids_are_kept_where_no_relation_refers_to_them(tmp_path):
    """Scripts that make imports often give every region the id 0."""
    path = export(tmp_path, [{"id": 1, "data": {"text": TEXT}, "annotations": [{"result": [region("0", 8, 12, text="pain"), region("0", 20, 25, "BODY", "knees")]}]}])
    (doc,) = read_label_studio(path, VOCAB, tokenizer=TOKENIZER)
    assert [(e.label, e.text, e.spans[0].id_) for e in get_entities(doc)] == [("ADR", "pain", "0"), ("BODY", "knees", "0#1")]
    docs_to_label_studio([doc], tmp_path / "tasks.json")
    (task,) = json.loads((tmp_path / "tasks.json").read_text(encoding="utf8"))
    assert [(r["id"], r["value"]["start"]) for r in task["predictions"][0]["result"]] == [("0", 8), ("0-1", 20)]


def test_results_of_other_types_and_regions_with_spaces_at_their_edges(tmp_path):
    results = [
        region("a", 7, 13, text="pain "),  # a selection that took the space after the word, and the one before
        {"id": "img", "type": "rectanglelabels", "from_name": "box", "to_name": "image", "value": {"x": 1, "y": 2, "rectanglelabels": ["Cat"]}},
        {"id": "para", "type": "labels", "from_name": "label", "to_name": "dialogue", "value": {"labels": ["ADR"], "start": "/p[1]", "startOffset": 0}},
        {"id": "t", "type": "textarea", "from_name": "note", "to_name": "text", "value": {"text": ["severe"]}},
        dict(region("h", 0, 4, "ADR", "Pain"), to_name="title"),  # a region of the task's other text
    ]
    path = export(tmp_path, [{"id": 1, "data": {"text": TEXT, "title": "Pain"}, "annotations": [{"result": results}]}])
    (doc,) = read_label_studio(path, VOCAB, tokenizer=TOKENIZER)
    assert [(e.label, e.text) for e in get_entities(doc)] == [("ADR", "pain")]
    assert [(what, kind) for what, kind, _ in skipped(doc)] == [(f"result {k}", "not a labels region") for k in ("img", "para", "t", "h")]
    assert skipped(doc)[-1][2] == "a labels result of title, not of the text is not an entity"
    docs_to_label_studio([doc], tmp_path / "tasks.json")
    (task,) = json.loads((tmp_path / "tasks.json").read_text(encoding="utf8"))
    assert task["predictions"][0]["result"][0]["value"] == {"start": 7, "end": 13, "text": " pain ", "labels": ["ADR"]}


def test_json_min_exports_other_text_keys_and_python_offsets(tmp_path):
    """What else writes Label Studio tasks: its JSON-MIN export, data whose text is not under
    'text', and an older Label Studio's export whose offsets count UTF-16 units, not code points."""
    rows = [
        {"id": 1, "content": TEXT, "label": [{"start": 8, "end": 12, "text": "pain", "labels": ["ADR"]}], "annotator": 4, "annotation_id": 7, "lead_time": 2.5},
        {"id": 2, "content": "Nothing here ."},
    ]  # fmt: skip
    docs = list(read_label_studio(export(tmp_path, rows), VOCAB, tokenizer=TOKENIZER))
    assert [(e.label, e.text) for e in get_entities(docs[0])] == [("ADR", "pain")]
    assert docs[0].user_data["w2ner_label_studio"]["annotator"] == 4 and docs[0].user_data["w2ner_label_studio"]["text_key"] == "content"
    assert docs[1].user_data["w2ner_not_a_document"] == "task without annotations"
    utf16 = [{"id": 3, "data": {"text": TEXT}, "annotations": [{"result": [region("t", 40, 45, "TIME", "today")]}]}]  # 39-44 in code points
    (doc,) = read_label_studio(export(tmp_path, utf16), VOCAB, tokenizer=TOKENIZER)
    assert [(e.label, e.text) for e in get_entities(doc)] == [("TIME", "today")]
    beyond = [{"id": 4, "data": {"text": TEXT}, "annotations": [{"result": [region("t", 40, 46, "TIME")]}]}]  # no text; 46 > 45 code points
    (shifted,) = read_label_studio(export(tmp_path, beyond), VOCAB, tokenizer=TOKENIZER)
    assert [(e.label, e.text) for e in get_entities(shifted)] == [("TIME", "today.")]
    docs_to_label_studio([doc], tmp_path / "tasks.json")  # written back in code points
    (task,) = json.loads((tmp_path / "tasks.json").read_text(encoding="utf8"))
    assert [(r["value"]["start"], r["value"]["end"]) for r in task["predictions"][0]["result"]] == [(39, 44)]
