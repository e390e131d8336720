"""The command line: spaCy's (init labels, train, evaluate) with w2ner, and spacy_w2ner's
convert/export/split/filter (counts, exit codes, errors)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_w2ner import get_entities

from ..conftest import VOCAB, ZH_VOCAB, cli, docbin_docs, make_examples, summary_line, write
from ..samples import BMES, BRAT_ANN, BRAT_TEXT, CONLL, DAI, IOB1, RECORDS

ROOT = Path(__file__).resolve().parents[2]
CNN_CONFIG = ROOT / "project" / "configs" / "w2ner_cnn_cpu.cfg"
SMALL = [
    "--components.w2ner.model.lstm_size=32",
    "--components.w2ner.model.conv_size=16",
    "--components.w2ner.model.biaffine_size=32",
    "--components.w2ner.model.ffnn_size=32",
]


def run(*args):
    result = subprocess.run([sys.executable, "-m", *map(str, args)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.slow
def test_init_labels_then_train_with_label_reader(tmp_path):
    data = tmp_path / "train.spacy"
    DocBin(docs=[eg.reference for eg in make_examples(spacy.blank("en"))]).to_disk(data)
    paths = ["--paths.train", data, "--paths.dev", data]
    run("spacy", "init", "labels", CNN_CONFIG, tmp_path / "labels", *paths, *SMALL)
    labels = json.loads((tmp_path / "labels" / "w2ner.json").read_text())
    assert sorted(labels) == ["DRUG", "LOC", "ORG", "SYM"]
    config = spacy.util.load_config(CNN_CONFIG)
    config["initialize"]["components"]["w2ner"] = {
        "labels": {"@readers": "spacy.read_labels.v1", "path": str(tmp_path / "labels" / "w2ner.json")}
    }
    config.to_disk(tmp_path / "config.cfg")
    out = run("spacy", "train", tmp_path / "config.cfg", "--output", tmp_path / "out", *paths, *SMALL,
              "--training.max_steps", 4, "--training.eval_frequency", 2)
    assert "W2NER_F" in out
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert sorted(nlp.get_pipe("w2ner").labels) == sorted(labels)


def test_split_every_nth_doc_to_dev(tmp_path):
    nlp = spacy.blank("en")
    docs = [eg.reference for eg in make_examples(nlp)] * 4
    DocBin(docs=docs).to_disk(tmp_path / "all.spacy")
    output = run("spacy_w2ner", "split", tmp_path / "all.spacy", tmp_path / "out", "--every", "3")
    assert output.startswith("train: ") and "\ndev: " in output
    train = list(DocBin().from_disk(tmp_path / "out" / "train.spacy").get_docs(nlp.vocab))
    dev = list(DocBin().from_disk(tmp_path / "out" / "dev.spacy").get_docs(nlp.vocab))
    assert len(dev) == len(docs) // 3 and len(train) + len(dev) == len(docs)
    assert [d.text for d in dev] == [d.text for d in docs[2::3]]
    assert sum(len(d.spans["w2ner"]) for d in train + dev) == sum(len(d.spans["w2ner"]) for d in docs)


def test_split_of_fewer_documents_than_every_warns_of_the_empty_dev_set(tmp_path):
    nlp = spacy.blank("en")
    DocBin(docs=[eg.reference for eg in make_examples(nlp)][:2]).to_disk(tmp_path / "all.spacy")
    result = cli("split", tmp_path / "all.spacy", tmp_path / "out")
    assert "warning: " in result.stderr and "has 2 documents, fewer than --every 10: dev.spacy is empty" in result.stderr
    assert '"documents": 0' in result.stdout
    assert "warning" not in cli("split", tmp_path / "all.spacy", tmp_path / "out2", "--every", "2").stderr


def test_filter_contiguous_only_counts_what_it_removes(tmp_path):
    from spacy_w2ner import get_entities

    nlp = spacy.blank("en")
    docs = [eg.reference for eg in make_examples(nlp)]
    before = [get_entities(doc) for doc in docs]
    n_discontinuous = sum(e.is_discontinuous for entities in before for e in entities)
    assert n_discontinuous > 0
    DocBin(docs=docs).to_disk(tmp_path / "all.spacy")
    output = run("spacy_w2ner", "filter", tmp_path / "all.spacy", tmp_path / "flat.spacy", "--contiguous-only")
    assert f"removed {n_discontinuous} discontinuous entities" in output
    after = list(DocBin().from_disk(tmp_path / "flat.spacy").get_docs(nlp.vocab))
    assert len(after) == len(docs)
    for doc, entities in zip(after, before):
        expected = [(e.label, e.tokens) for e in entities if not e.is_discontinuous]
        assert [(e.label, e.tokens) for e in get_entities(doc)] == expected


def test_convert_with_ents_writes_flat_entities_to_doc_ents(tmp_path):
    conll = tmp_path / "flat.txt"
    conll.write_text("John B-PER\nSmith I-PER\nvisited O\nParis B-LOC\n\nHi O\n")
    output = run("spacy_w2ner", "convert", "conll", conll, tmp_path, "--ents")
    assert '"entities": 2' in output
    docs = list(DocBin().from_disk(tmp_path / "flat.spacy").get_docs(spacy.blank("en").vocab))
    assert [(e.text, e.label_) for e in docs[0].ents] == [("John Smith", "PER"), ("Paris", "LOC")]
    assert [(s.text, s.label_) for s in docs[0].spans["w2ner"]] == [("John Smith", "PER"), ("Paris", "LOC")]
    assert list(docs[1].ents) == []


def test_convert_with_ents_refuses_nested_entities_naming_the_doc(tmp_path):
    data = tmp_path / "nested.json"
    data.write_text(json.dumps([{"sentence": ["IL-2", "gene", "expression"], "ner": [
        {"index": [0, 1], "type": "DNA"}, {"index": [0], "type": "protein"}]}]))
    result = subprocess.run([sys.executable, "-m", "spacy_w2ner", "convert", "w2ner-json", str(data),
                             str(tmp_path), "--ents"], capture_output=True, text=True)
    assert result.returncode == 1
    assert "doc 'IL-2 gene expression" in result.stderr
    assert "the DNA entity 'IL-2 gene' overlaps the protein entity 'IL-2'" in result.stderr
    assert not (tmp_path / "nested.spacy").exists()


def test_copy_entities_to_ents_refuses_a_discontinuous_entity():
    from spacy_w2ner.entities import copy_entities_to_ents, set_entities

    doc = spacy.blank("en")("pain in knees and ankles")
    set_entities(doc, [("ADR", (0, 1, 2, 4), None)])
    try:
        copy_entities_to_ents(doc)
    except ValueError as err:
        assert "'pain in knees ankles' is discontinuous" in str(err)
    else:
        raise AssertionError("a discontinuous entity was accepted")
    assert list(doc.ents) == []


CLI_INPUTS = {
    "w2ner-json": ("data.json", json.dumps(RECORDS), [], 4),
    "dai": ("cadec.txt", DAI, [], 4),
    "conll": ("conll.txt", CONLL, [], 4),
    "conll-iob1": ("iob1.txt", IOB1, ["--scheme", "IOB1"], 4),
    "conll-column": ("chunks.txt", CONLL, ["--tag-column", "2"], 5),
    "bmes": ("resume.char.bmes", BMES, ["--lang", "zh"], 5),
    "brat": ("doc.txt", BRAT_TEXT, [], 2),
    "brat-whitespace": ("doc.txt", BRAT_TEXT.replace(".", " ."), ["--tokenizer", "whitespace"], 2),
}


@pytest.mark.parametrize("case", list(CLI_INPUTS))
def test_cli_convert_keeps_every_entity(tmp_path, case):
    name, text, options, expected = CLI_INPUTS[case]
    input_format = case.split("-")[0] if case != "w2ner-json" else case
    path = write(tmp_path, name, text)
    if input_format == "brat":
        write(tmp_path, "doc.ann", BRAT_ANN.replace("35 40", "36 41") if "whitespace" in case else BRAT_ANN)
    result = cli("convert", input_format, path, tmp_path / "out", *options)
    counts = summary_line(result)
    assert counts["entities"] == expected
    assert sum(counts["per_label"].values()) == expected
    output = tmp_path / "out" / (Path(name).stem + ".spacy")
    assert result.stdout.splitlines()[0] == f"{path} -> {output}"
    vocab = ZH_VOCAB if input_format == "bmes" else VOCAB
    docs = docbin_docs(output, vocab)
    assert sum(len(get_entities(doc, "w2ner")) for doc in docs) == expected
    assert counts["documents"] == len(docs)
    if input_format != "brat":
        assert counts["sentences"] == len(docs)
    # exporting counts the same entities
    exported = cli("export", "w2ner-json", output, tmp_path / "out.json", "--lang", "zh" if input_format == "bmes" else "en")
    assert summary_line(exported)["entities"] == expected
    assert sum(len(r["ner"]) for r in json.loads((tmp_path / "out.json").read_text(encoding="utf8"))) == expected


def test_cli_convert_format_error_exits_1_with_file_and_line(tmp_path):
    path = write(tmp_path, "bad.txt", "a b c\n0,1 X\n\nd e\n0,9 Y\n")
    result = cli("convert", "dai", path, tmp_path / "out", code=1)
    assert result.stderr.startswith(f"error: {path}:5: mention 1 '0,9 Y' has the range 0,9")
    assert not (tmp_path / "out" / "bad.spacy").exists()


def test_cli_usage_errors(tmp_path):
    path = write(tmp_path, "x.txt", "a B-X\n")
    assert "unknown format" in cli("convert", "iob", path, tmp_path / "out", code=2).stderr
    assert "only the brat and bioc formats read a directory" in cli("convert", "dai", tmp_path, tmp_path / "out", code=2).stderr
    assert "tokenizer must be 'spacy' or" in cli("convert", "brat", path, tmp_path / "out", "--tokenizer", "bert", code=2).stderr
    # An option of another format is an error, not silently ignored.
    assert "--scheme does not apply to the dai format" in cli("convert", "dai", path, tmp_path / "out", "--scheme", "IOB1", code=2).stderr
    assert "unknown format" in cli("export", "conll", path, tmp_path / "o", code=2).stderr
    result = cli("export", "w2ner-json", path, tmp_path / "out.json", code=1)
    assert result.stderr.startswith(f"error: {path}: cannot read a .spacy DocBin")


# ---------------------------------------------------------------- bad input: one clear line, no traceback


def usage_error(*args):
    """The message of a usage error (exit 2), unwrapped from typer's box."""
    return " ".join(cli(*args, code=2).stderr.replace("│", " ").split())


def test_unknown_language_is_a_usage_error(tmp_path):
    path = write(tmp_path, "x.json", json.dumps(RECORDS))
    assert "unknown language code 'klingon'" in usage_error("convert", "w2ner-json", path, tmp_path / "out", "--lang", "klingon")


def test_output_paths_of_the_wrong_kind_are_usage_errors(tmp_path):
    path = write(tmp_path, "x.json", json.dumps(RECORDS))
    a_file = write(tmp_path, "taken", "")
    assert f"{a_file} is a file" in usage_error("convert", "w2ner-json", path, a_file)
    cli("convert", "w2ner-json", path, tmp_path / "out")
    docbin = tmp_path / "out" / "x.spacy"
    assert "is a file" in usage_error("export", "brat", docbin, a_file)
    assert "is a directory" in usage_error("export", "w2ner-json", docbin, tmp_path / "out")
    assert "is a file" in usage_error("split", docbin, a_file)
    assert "is a directory" in usage_error("filter", docbin, tmp_path / "out", "--contiguous-only")
    # under a file: one line naming it (a traceback from mkdir or open before)
    under = f"{a_file} is a file: {a_file / 'sub'} cannot be written under it"
    assert under in usage_error("convert", "w2ner-json", path, a_file / "sub")
    assert under in usage_error("split", docbin, a_file / "sub")
    assert under in usage_error("filter", docbin, a_file / "sub", "--contiguous-only")
    assert under in usage_error("export", "w2ner-json", docbin, a_file / "sub")
    assert under in usage_error("fetch-encoder", "all-mpnet-base-v2", "--directory", a_file / "sub")
    assert "is a file" in usage_error("fetch-encoder", "all-mpnet-base-v2", "--directory", a_file)


def test_show_names_a_pipeline_it_cannot_load(tmp_path):
    result = cli("show", tmp_path / "no-such-model", "some text", code=1)
    assert result.stderr.startswith(f"error: cannot load the pipeline '{tmp_path / 'no-such-model'}'")


def test_a_wrong_spans_key_names_the_keys_there_are(tmp_path, trained_nlp):
    path = write(tmp_path, "x.json", json.dumps(RECORDS))
    cli("convert", "w2ner-json", path, tmp_path / "out")
    result = cli("export", "brat", tmp_path / "out" / "x.spacy", tmp_path / "brat", "--spans-key", "sc", code=1)
    assert "no doc has doc.spans['sc']; they have 'w2ner'" in result.stderr
    trained_nlp.to_disk(tmp_path / "model")
    result = cli("show", tmp_path / "model", "New York .", "--spans-key", "ents", code=1)
    assert "no doc has doc.spans['ents']; they have 'w2ner'" in result.stderr


def test_empty_input_converts_with_a_warning(tmp_path):
    path = write(tmp_path, "blank.txt", "\n  \n\n")
    result = cli("convert", "conll", path, tmp_path / "out")
    assert "warning: " in result.stderr and "holds no documents" in result.stderr
    assert summary_line(result)["documents"] == 0


def test_labels_with_whitespace_are_flagged_at_conversion_and_left_out_of_brat_only(tmp_path):
    records = [{"sentence": ["pain", "in", "knees"], "ner": [{"index": [0, 1, 2], "type": "Adverse Reaction"},
                                                             {"index": [2], "type": "BODY"}]}]
    path = write(tmp_path, "x.json", json.dumps(records))
    result = cli("convert", "w2ner-json", path, tmp_path / "out")
    assert "labels with whitespace ('Adverse Reaction')" in result.stderr
    result = cli("export", "brat", tmp_path / "out" / "x.spacy", tmp_path / "brat")
    assert "the 'Adverse Reaction' entity 'pain in knees' cannot be written in brat" in result.stderr
    assert summary_line(result)["not_exported"] == 1
    assert (tmp_path / "brat" / "x-record0.ann").read_text() == "T2\tBODY 8 13\tknees\n"


def test_export_refuses_a_directory_that_is_not_empty_and_never_writes_into_a_killed_exports_partial(tmp_path):
    path = write(tmp_path, "x.json", json.dumps(RECORDS))
    cli("convert", "w2ner-json", path, tmp_path / "out")
    write(tmp_path / "brat", "mine.txt", "kept")
    result = cli("export", "brat", tmp_path / "out" / "x.spacy", tmp_path / "brat", code=1)
    assert result.stderr.strip() == f"error: {tmp_path / 'brat'} is a directory that is not empty: give a new or an empty one (nothing was written)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["brat", "out", "x.json"]
    assert [p.name for p in (tmp_path / "brat").iterdir()] == ["mine.txt"]
    write(tmp_path / "again.partial", "stale-record9.ann", "T1\tSYM 0 4\tpain\n")  # what a killed export left
    cli("export", "brat", tmp_path / "out" / "x.spacy", tmp_path / "again")
    assert not (tmp_path / "again.partial").exists() and not (tmp_path / "again" / "stale-record9.ann").exists()
    cli("export", "brat", tmp_path / "out" / "x.spacy", tmp_path / "fresh")
    assert sorted(p.name for p in (tmp_path / "again").iterdir()) == sorted(p.name for p in (tmp_path / "fresh").iterdir())


@pytest.mark.slow
def test_document_names_survive_spacy_apply_and_export(tmp_path, trained_nlp):
    """Predictions map back to the files they came from: brat in, `spacy apply`, brat out."""
    for name in ("notes/visit1", "visit2"):
        write(tmp_path / "brat", f"{name}.txt", "She had pain in her knees and ankles .")
        write(tmp_path / "brat", f"{name}.ann", "")
    cli("convert", "brat", tmp_path / "brat", tmp_path / "gold", "--name", "notes")
    trained_nlp.to_disk(tmp_path / "model")
    run("spacy", "apply", tmp_path / "model", tmp_path / "gold" / "notes.spacy", tmp_path / "predicted.spacy")
    result = cli("export", "brat", tmp_path / "predicted.spacy", tmp_path / "out")
    assert summary_line(result)["entities"] >= 4
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.ann")) == [
        "notes/visit1.ann", "visit2.ann"
    ]
    assert "SYM" in (tmp_path / "out" / "visit2.ann").read_text()


def test_the_counts_name_entities_the_grid_cannot_hold(tmp_path):
    """Two entities with the same first and last word and other labels share a THW cell: every
    command's counts say so (the grid codec's count, given to the formats' summary by the CLI)."""
    records = [{"sentence": ["New", "York", "City"], "ner": [{"index": [0, 1, 2], "type": "LOC"}, {"index": [0, 2], "type": "ORG"}]}]
    counts = summary_line(cli("convert", "w2ner-json", write(tmp_path, "c.json", json.dumps(records)), tmp_path))
    assert counts["thw_conflicts"] == 1
    assert summary_line(cli("export", "w2ner-json", tmp_path / "c.spacy", tmp_path / "back.json"))["thw_conflicts"] == 1


PUBTATOR = "111|t|Aspirin and pain\n111\t0\t7\tAspirin\tChemical\tD001241\n"
NOT_THE_FORMAT = [  # (format, file name, content, the error line's start)
    ("pubtator", "tasks.json", '[{"data": {"text": "Aspirin and pain"}}]\n', "tasks.json:1: document "),
    ("bioc", "abstracts.xml", PUBTATOR, "abstracts.xml:1: not valid XML"),
    ("label-studio", "c.json", '{"source": "", "documents": []}', "c.json:1: not valid JSON: expected a JSON array of tasks"),
    ("brat", "note.txt", "Aspirin and pain", "note.ann:1: not a brat annotation file"),
]


@pytest.mark.parametrize("name, file_name, content, error", NOT_THE_FORMAT, ids=[case[0] for case in NOT_THE_FORMAT])
def test_a_file_that_is_not_the_format_is_one_located_line_and_nothing_written(tmp_path, name, file_name, content, error):
    path = write(tmp_path / "in", file_name, content)
    if name == "brat":
        write(tmp_path / "in", "note.ann", "111|t|Aspirin and pain\n")
    result = cli("convert", name, path, tmp_path / "out", code=1)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and line[len("error: "):].startswith(str(path.with_name(error.split(":")[0]))) and error in line
    assert not list((tmp_path / "out").glob("*.spacy"))


def test_convert_of_the_current_directory_names_the_file_after_it(tmp_path, monkeypatch):
    write(tmp_path / "notes", "doc.txt", BRAT_TEXT)
    write(tmp_path / "notes", "doc.ann", BRAT_ANN)
    monkeypatch.chdir(tmp_path / "notes")
    cli("convert", "brat", ".", tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["notes.spacy"]


def test_help_prints_the_help_texts_as_written():
    """Rich markup once ate "[ray]" and "[label-studio]" from --help (docs/cli.md kept them)."""
    assert "(the [ray] extra)" in " ".join(cli("train", "--help").stdout.split())
    assert "Needs the [label-studio] extra." in " ".join(cli("label-studio-backend", "--help").stdout.split())
