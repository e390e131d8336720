"""annotate --output-format bioc and label-studio: the records' entities as BioC annotations and as
Label Studio predictions, passages and document ids as a BioC input came in, and --resume."""
import json
from pathlib import Path

import pytest
import spacy
from bioc import biocjson, biocxml

from spacy_w2ner.annotate import AnnotationError, annotate
from spacy_w2ner.formats import read_label_studio

from ..conftest import cli, write

TEXTS = ["She had pain in her knees and ankles .", "Aspirin caused severe headaches and nausea .", "New York University is in New York ."]


def run(model, source, output, **options):
    return annotate(model, source, output, progress=False, **options)


def record_entities(path):
    """{id: [(label, fragments)]} of an annotate JSONL output."""
    records = [json.loads(line) for line in Path(path).read_text(encoding="utf8").splitlines()]
    return {str(r["id"]): sorted((e["label"], [tuple(f) for f in e["fragments"]]) for e in r["entities"]) for r in records}


def bioc_entities(path):
    with open(path, encoding="utf8") as f:
        collection = (biocxml if str(path).endswith(".xml") else biocjson).load(f)
    found = {}
    for document in collection.documents:
        annotations = [a for p in document.passages for a in p.annotations] + list(document.annotations)
        found[document.id] = sorted(
            (a.infons["type"], [(loc.offset, loc.offset + loc.length) for loc in a.locations]) for a in annotations
        )
    return found, collection


@pytest.mark.parametrize("suffix", [".xml", ".json"])
def test_bioc_output_holds_the_records_entities_with_scores(tmp_path, saved_model, suffix):
    source = write(tmp_path, "docs.txt", "\n".join(TEXTS) + "\n")
    run(saved_model, source, tmp_path / "out.jsonl")
    summary = run(saved_model, source, tmp_path / f"out{suffix}", output_format="bioc")
    assert summary.written == 3
    found, collection = bioc_entities(tmp_path / f"out{suffix}")
    assert found == record_entities(tmp_path / "out.jsonl")
    assert all(0 <= float(a.infons["score"]) <= 1 for d in collection.documents for p in d.passages for a in p.annotations)
    assert [p.text for d in collection.documents for p in d.passages] == TEXTS


def test_a_bioc_docbin_keeps_its_passages_and_document_ids(tmp_path, saved_model):
    xml = (
        "<collection><source>s</source><date/><key/><document><id>PMC1</id>"
        f"<passage><infon key='type'>title</infon><offset>0</offset><text>{TEXTS[1]}</text></passage>"
        f"<passage><infon key='type'>abstract</infon><offset>{len(TEXTS[1]) + 1}</offset><text>{TEXTS[0]}</text></passage>"
        "</document></collection>"
    )
    write(tmp_path, "c.xml", xml)
    cli("convert", "bioc", tmp_path / "c.xml", tmp_path, "--doc-per", "passage")
    run(saved_model, tmp_path / "c.spacy", tmp_path / "out.xml", output_format="bioc")
    found, collection = bioc_entities(tmp_path / "out.xml")
    (document,) = collection.documents
    assert document.id == "PMC1"
    assert [(p.offset, p.infons["type"], p.text) for p in document.passages] == [(0, "title", TEXTS[1]), (len(TEXTS[1]) + 1, "abstract", TEXTS[0])]
    assert found["PMC1"]  # the entities at the collection's offsets
    for passage in document.passages:
        for annotation in passage.annotations:
            pieces = [passage.text[loc.offset - passage.offset : loc.offset - passage.offset + loc.length] for loc in annotation.locations]
            assert " ".join(pieces) == annotation.text


def test_label_studio_output_holds_the_entities_as_predictions(tmp_path, saved_model):
    source = write(tmp_path, "docs.txt", "\n".join(TEXTS) + "\n")
    run(saved_model, source, tmp_path / "out.jsonl")
    run(saved_model, source, tmp_path / "tasks.json", output_format="label-studio")
    tasks = json.loads((tmp_path / "tasks.json").read_text(encoding="utf8"))
    assert [t["data"]["text"] for t in tasks] == TEXTS
    assert {t["predictions"][0]["model_version"] for t in tasks} == {"en_pipeline-0.0.0"}
    nlp = spacy.blank("en")
    docs = list(read_label_studio(tmp_path / "tasks.json", nlp.vocab, tokenizer=nlp.tokenizer, use="predictions"))
    expected = list(record_entities(tmp_path / "out.jsonl").values())
    from spacy_w2ner import get_entities

    found = [sorted((e.label, [(d[s].idx, d[t - 1].idx + len(d[t - 1])) for s, t in e.fragments]) for e in get_entities(d)) for d in docs]
    assert found == expected


def test_label_studio_tasks_keep_each_input_s_id_source_and_metadata_in_their_data(tmp_path, saved_model):
    """So the corrected tasks can be joined back to the inputs (an emoji before the entities too)."""
    lines = [{"id": "note-17", "text": "🙂 " + TEXTS[0], "site": "forum"}, {"text": TEXTS[1]}]
    source = write(tmp_path, "in.jsonl", "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    run(saved_model, source, tmp_path / "tasks.json", output_format="label-studio")
    first, second = json.loads((tmp_path / "tasks.json").read_text(encoding="utf8"))
    assert first["data"] == {"text": "🙂 " + TEXTS[0], "id": "note-17", "source": f"{source}:1", "meta": {"site": "forum"}}
    assert second["data"] == {"text": TEXTS[1], "id": 2, "source": f"{source}:2"}
    regions = [r["value"] for r in first["predictions"][0]["result"] if r["type"] == "labels"]
    assert regions and all(first["data"]["text"][v["start"] : v["end"]] == v["text"] for v in regions)  # code points


@pytest.mark.parametrize("name, output_format", [("out.xml", "bioc"), ("out.json", "bioc"), ("tasks.json", "label-studio")])
def test_a_stopped_run_resumes_to_the_same_output(tmp_path, saved_model, name, output_format):
    lines = [TEXTS[k % 3] + f" {k}" for k in range(12)]
    lines[7] = ""  # not a document: --strict stops there, with what came before checkpointed
    source = write(tmp_path, "docs.txt", "\n".join(lines) + "\n")
    with pytest.raises(AnnotationError):
        run(saved_model, source, tmp_path / name, output_format=output_format, strict=True, batch_size=4)
    assert not (tmp_path / name).exists()
    lines[7] = "Aspirin helped ."
    write(tmp_path, "docs.txt", "\n".join(lines) + "\n")
    run(saved_model, source, tmp_path / name, output_format=output_format, resume=True, batch_size=4)
    run(saved_model, source, tmp_path / f"whole-{name}", output_format=output_format, batch_size=4)
    assert (tmp_path / name).read_text(encoding="utf8") == (tmp_path / f"whole-{name}").read_text(encoding="utf8")


def test_an_output_format_and_a_name_that_disagree_are_refused(tmp_path, saved_model):
    source = write(tmp_path, "docs.txt", TEXTS[0] + "\n")
    with pytest.raises(AnnotationError, match=r"--output-format bioc writes a .xml or .json file"):
        run(saved_model, source, tmp_path / "out.txt", output_format="bioc")
    result = cli("annotate", saved_model, source, tmp_path / "o.jsonl", "--output-format", "label-studio", "--no-progress", code=1)
    assert "--output-format label-studio writes a .json file" in result.stderr
