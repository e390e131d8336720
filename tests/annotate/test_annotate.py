"""The annotate command and spacy_w2ner.annotate: inputs, records with character offsets,
outputs, bad input, safe output and resume."""
import gzip
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_w2ner.annotate import AnnotationError, annotate, read_inputs

from ..conftest import TRAIN_DATA, cli, write

TEXTS = [text for text, _ in TRAIN_DATA]
# Multi-line, indented, unicode: character offsets must still cut each entity out exactly.
ODD = "  Café note:\n\nShe had pain in her knees and ankles .\n\t New York University is in New York .  "


@pytest.fixture(scope="module")
def model(saved_model):
    return saved_model


def records_of(path):
    return [json.loads(line) for line in Path(path).read_text(encoding="utf8").splitlines()]


def quiet(*args, **kwargs):
    return annotate(*args, progress=False, **kwargs)


def check_offsets(record, text):
    """Each fragment's characters are its text in the input; joined, they are the entity's text."""
    for entity in record["entities"]:
        pieces = [text[start:end] for start, end in entity["fragments"]]
        assert " ".join(pieces) == entity["text"]
        assert all(piece and not piece[0].isspace() and not piece[-1].isspace() for piece in pieces)
        assert entity["discontinuous"] == (len(pieces) > 1)


def test_jsonl_records_keep_ids_metadata_and_exact_offsets(tmp_path, model):
    lines = [
        json.dumps({"id": "n1", "text": ODD, "site": "forum", "year": 2024}),
        json.dumps({"text": TEXTS[0]}),
        "not json {",
        json.dumps({"id": "n3", "body": "no text key"}),
        json.dumps({"text": "   "}),
        json.dumps(["a list"]),
        json.dumps({"text": TEXTS[1]}),
        '{"text": "pain \\ud800 in her knees"}',  # a lone surrogate: no encoding writes it
        '{"text": "pain in her knees", "score": NaN}',  # Python's parser takes NaN; JSON has none
    ]
    source = write(tmp_path, "notes.jsonl", "\n".join(lines) + "\n")
    summary = quiet(model, source, tmp_path / "out.jsonl")
    records = records_of(tmp_path / "out.jsonl")
    assert [r["id"] for r in records] == ["n1", 2, 7]  # an id key, else the line number
    assert [r["source"] for r in records] == [f"{source}:1", f"{source}:2", f"{source}:7"]
    assert records[0]["meta"] == {"site": "forum", "year": 2024} and records[1]["meta"] == {}
    for record, text in zip(records, [ODD, TEXTS[0], TEXTS[1]]):
        check_offsets(record, text)
    assert {e["label"] for e in records[0]["entities"]} >= {"SYM", "LOC"}
    assert any(e["discontinuous"] for e in records[0]["entities"])
    errors = records_of(tmp_path / "out.jsonl.errors.jsonl")
    assert [(e["source"], e["problem"].split(" (")[0]) for e in errors] == [
        (f"{source}:3", "not valid JSON"),
        (f"{source}:4", "no 'text': expected the document's text"),
        (f"{source}:5", "empty 'text': no document"),
        (f"{source}:6", "expected a JSON object, got list"),
        (f"{source}:8", "'text' holds a lone surrogate"),
        (f"{source}:9", "not valid JSON"),
    ]
    assert errors[-1]["problem"] == "not valid JSON (NaN is not a JSON number)"
    assert (summary.read, summary.written, summary.skipped) == (9, 3, 6)
    assert summary.as_dict()["read_equals_written_plus_skipped"]
    assert sum(summary.entities.values()) == sum(len(r["entities"]) for r in records)


def test_text_lines_gzip_bytes_that_are_not_utf8_and_limit(tmp_path, model):
    raw = (TEXTS[0] + "\n").encode() + b"caf\xe9 latin-1\n\n" + (TEXTS[2] + "\r\n").encode() + TEXTS[3].encode()
    gz = tmp_path / "docs.txt.gz"
    gz.write_bytes(gzip.compress(raw))
    summary = quiet(model, gz, tmp_path / "out.jsonl")
    records = records_of(tmp_path / "out.jsonl")
    assert [r["id"] for r in records] == [1, 4, 5]  # line numbers
    for record, text in zip(records, [TEXTS[0], TEXTS[2], TEXTS[3]]):
        check_offsets(record, text)
    problems = [e["problem"] for e in records_of(tmp_path / "out.jsonl.errors.jsonl")]
    assert problems[0].startswith("not valid UTF-8") and problems[1] == "empty line: no document"
    assert (summary.read, summary.written, summary.skipped) == (5, 3, 2)
    quiet(model, gz, tmp_path / "limited.jsonl", limit=2)
    assert [r["id"] for r in records_of(tmp_path / "limited.jsonl")] == [1]


def test_directory_of_files_to_brat_keeps_names_and_offsets(tmp_path, model):
    write(tmp_path / "notes", "visit1.txt", ODD)
    write(tmp_path / "notes" / "ward", "visit2.txt", TEXTS[2])
    quiet(model, tmp_path / "notes", tmp_path / "brat", doc_per_file=True)
    assert sorted(p.relative_to(tmp_path / "brat").as_posix() for p in (tmp_path / "brat").rglob("*")
                  if p.is_file()) == ["visit1.ann", "visit1.txt", "ward/visit2.ann", "ward/visit2.txt"]
    assert (tmp_path / "brat" / "visit1.txt").read_text(encoding="utf8") == ODD
    for line in (tmp_path / "brat" / "visit1.ann").read_text(encoding="utf8").splitlines():
        _, spec, shown = line.split("\t")
        offsets = spec.split(" ", 1)[1]
        pieces = [ODD[int(a):int(b)] for a, b in (part.split() for part in offsets.split(";"))]
        assert " ".join(pieces).replace("\n", " ") == shown


def test_an_errors_file_only_where_something_was_skipped(tmp_path, model):
    write(tmp_path, "out.jsonl.errors.jsonl", '{"problem": "from an earlier run"}\n')  # stale: not this run's
    source = write(tmp_path, "docs.txt", "\n".join(TEXTS) + "\n")
    assert quiet(model, source, tmp_path / "out.jsonl").skipped == 0
    assert (tmp_path / "out.jsonl").exists() and not (tmp_path / "out.jsonl.errors.jsonl").exists()
    write(tmp_path, "bad.txt", TEXTS[0] + "\n   \n")
    assert quiet(model, tmp_path / "bad.txt", tmp_path / "bad.jsonl").skipped == 1
    assert [e["source"] for e in records_of(tmp_path / "bad.jsonl.errors.jsonl")] == [f"{tmp_path / 'bad.txt'}:2"]


def test_a_pipeline_that_does_not_load_leaves_no_file_behind(tmp_path):
    source = write(tmp_path, "docs.txt", "\n".join(TEXTS) + "\n")
    result = cli("annotate", tmp_path / "no-such-model", source, tmp_path / "out.jsonl", code=1)
    assert "no-such-model" in result.stderr
    assert [path.name for path in tmp_path.iterdir()] == ["docs.txt"]  # an empty errors .partial was left


def test_an_errors_path_under_no_directory_is_named_before_the_pipeline_loads(tmp_path):
    source = write(tmp_path, "docs.txt", "\n".join(TEXTS) + "\n")
    errors = tmp_path / "no-dir" / "errors.jsonl"
    result = cli("annotate", tmp_path / "no-such-model", source, tmp_path / "out.jsonl", "--errors", errors, code=1)
    assert result.stderr.strip() == f"error: {errors}: {errors.parent} is not a directory (nothing was written)"
    assert [path.name for path in tmp_path.iterdir()] == ["docs.txt"]


def test_a_run_resumed_twice_cuts_its_files_back_to_the_checkpoints_sizes(tmp_path):
    """A checkpoint right after a resume (nothing written since) recorded the size before the cut,
    and the next resume padded the file with NUL bytes up to it."""
    from spacy_w2ner.annotate.outputs import ResumableFile

    path = tmp_path / "errors.jsonl.partial"
    first = ResumableFile(path, None)
    first.write_line({"i": 0})
    at_checkpoint = first.flush()
    first.write_line({"i": "after the checkpoint, lost to the kill"})
    first.close()
    resumed = ResumableFile(path, at_checkpoint)
    assert resumed.flush() == at_checkpoint  # checkpointed again before any new line
    resumed.close()
    again = ResumableFile(path, at_checkpoint)
    again.write_line({"i": 1})
    again.close()
    assert path.read_bytes() == b'{"i": 0}\n{"i": 1}\n'


def test_a_directory_without_doc_per_file_names_the_option(tmp_path, model):
    write(tmp_path / "notes", "visit1.txt", ODD)
    result = cli("annotate", model, tmp_path / "notes", tmp_path / "out.jsonl", code=1)
    assert "is a directory: give --doc-per-file" in result.stderr


def test_docbin_in_and_out_keeps_names_and_drops_nothing(tmp_path, model, trained_nlp):
    docs = [trained_nlp.make_doc(text) for text in TEXTS]
    for k, doc in enumerate(docs):
        doc.user_data["w2ner_name"] = f"doc-{k}"
    DocBin(docs=docs, store_user_data=True).to_disk(tmp_path / "in.spacy")
    quiet(model, tmp_path / "in.spacy", tmp_path / "out.spacy")
    out = list(DocBin().from_disk(tmp_path / "out.spacy").get_docs(trained_nlp.vocab))
    assert [doc.user_data["w2ner_name"] for doc in out] == ["doc-0", "doc-1", "doc-2", "doc-3"]
    assert [doc.text for doc in out] == [doc.text for doc in docs]
    assert all(len(doc.spans["w2ner"]) for doc in out)
    quiet(model, tmp_path / "in.spacy", tmp_path / "out.jsonl")
    assert [r["id"] for r in records_of(tmp_path / "out.jsonl")] == ["doc-0", "doc-1", "doc-2", "doc-3"]


def test_threshold_and_sentencizer_options(tmp_path, model):
    source = write(tmp_path, "docs.txt", ODD.replace("\n", " ") + "\n")
    quiet(model, source, tmp_path / "all.jsonl")
    quiet(model, source, tmp_path / "sure.jsonl", threshold=0.999)
    everything = records_of(tmp_path / "all.jsonl")[0]["entities"]
    sure = records_of(tmp_path / "sure.jsonl")[0]["entities"]
    assert sure == [e for e in everything if e["score"] >= 0.999] and len(sure) < len(everything)
    nlp = spacy.load(model)
    from spacy_w2ner.common import load_pipeline, sets_sentences

    assert not sets_sentences(nlp) and sets_sentences(load_pipeline(model, sentencizer=True))
    assert load_pipeline(model, sentencizer=True).pipe_names.index("sentencizer") == 0
    with pytest.raises(ValueError, match="threshold must be between 0 and 1"):
        load_pipeline(model, threshold=2.0)


def test_documents_over_max_length_are_reported_not_cut(tmp_path, model):
    source = write(tmp_path, "docs.txt", TEXTS[0] + "\n" + " ".join(TEXTS * 3) + "\n")
    summary = quiet(model, source, tmp_path / "out.jsonl", max_length=60)
    assert (summary.written, summary.skipped) == (1, 1)
    (error,) = records_of(tmp_path / "out.jsonl.errors.jsonl")
    assert "more than nlp.max_length=60; raise it with --max-length" in error["problem"]


def test_strict_stops_at_the_first_bad_input(tmp_path, model):
    source = write(tmp_path, "docs.txt", f"{TEXTS[0]}\n\n{TEXTS[1]}\n")
    with pytest.raises(AnnotationError, match=f"{source}:2: empty line"):
        quiet(model, source, tmp_path / "out.jsonl", strict=True)
    assert not (tmp_path / "out.jsonl").exists()  # nothing half-written under the output's name
    result = cli("annotate", model, source, tmp_path / "cli.jsonl", "--strict", "--no-progress", code=1)
    assert result.stderr.strip().splitlines()[-1] == f"error: {source}:2: empty line: no document"


def test_existing_outputs_are_not_overwritten(tmp_path, model):
    source = write(tmp_path, "docs.txt", TEXTS[0] + "\n")
    quiet(model, source, tmp_path / "out.jsonl")
    with pytest.raises(AnnotationError, match="exists"):
        quiet(model, source, tmp_path / "out.jsonl")


def test_standard_input_and_output(tmp_path, model):
    result = subprocess.run(
        [sys.executable, "-m", "spacy_w2ner", "annotate", str(model), "-", "-", "--no-progress"],
        input="\n".join(TEXTS[:2]) + "\n", capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["source"] for r in records] == ["-:1", "-:2"]
    summary = json.loads(result.stderr.strip().splitlines()[-1])
    assert summary["documents_read"] == 2 and summary["read_equals_written_plus_skipped"]


def test_reading_streams_without_loading_the_whole_input(tmp_path):
    """read_inputs is lazy: the first item comes before the rest of the file is read."""
    path = write(tmp_path, "docs.jsonl", "\n".join(json.dumps({"text": f"doc {i}"}) for i in range(1000)))
    items = read_inputs(path, "jsonl")
    first = next(items)
    assert (first.id, first.text, first.source) == (1, "doc 0", f"{path}:1")
    assert sum(1 for _ in items) == 999


def test_freed_memory_goes_back_to_the_system_after_every_batch(tmp_path, model, monkeypatch):
    """Resident memory follows what is in use, not glibc's heap (bench/README.md, annotate): the
    w2ner component trims after a batch once 64 docs went by, in whichever process runs it."""
    import spacy_w2ner.memory.batches as component_module
    from spacy_w2ner.memory.heap import malloc_trim

    assert malloc_trim() is not None  # glibc: the CI machines and this one
    trims = []
    monkeypatch.setattr(component_module, "release_freed_memory", lambda: trims.append(1))
    path = write(tmp_path, "docs.txt", "\n".join(TEXTS[i % len(TEXTS)] for i in range(200)))
    summary = quiet(model, path, tmp_path / "out.jsonl", batch_size=3)
    # after the first batch that ends 64 docs or more after the last trim: docs 66, 132 and 198
    assert summary.written == 200 and len(trims) == 3


def read_until(stream, text: str, seconds: float = 300) -> str:
    """The first line of a process's stream that holds ``text`` (waiting for it, with a deadline)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        line = stream.readline() if ready else ""
        if text in line:
            return line
        if ready and not line:
            break  # the process ended
    raise AssertionError(f"no line with {text!r} on the process's stream")


@pytest.mark.slow
def test_a_killed_run_resumes_after_its_checkpoint(tmp_path, model):
    """Kill a run part-way: --resume writes every record once, in order, as an uninterrupted run.

    The run reads a named pipe that the test feeds, so it cannot finish before the kill, and it
    is killed when it reports the bad input the test put at line 251: by then it has annotated
    the 250 documents before it.
    """
    lines = [TEXTS[i % 4] + f" {i}" for i in range(600)]
    lines[250] = ""  # a bad input: reported once, and the moment to kill the run
    source = tmp_path / "docs.txt"
    os.mkfifo(source)
    command = [sys.executable, "-m", "spacy_w2ner", "annotate", str(model), str(source), str(tmp_path / "out.jsonl"),
               "--no-progress", "--batch-size", "16"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with open(source, "w", encoding="utf8") as feed:  # opens when the run opens the pipe
        feed.write("\n".join(lines[:300]) + "\n")
        feed.flush()
        assert f"{source}:251: empty line" in read_until(process.stderr, "skipped")
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    progress = tmp_path / "out.jsonl.partial.progress"
    done = json.loads(progress.read_text())["inputs"]
    assert 1 <= done <= 251, done
    assert not (tmp_path / "out.jsonl").exists()
    source.unlink()
    write(tmp_path, "docs.txt", "\n".join(lines) + "\n")  # the same input, now a file
    refused = subprocess.run(command, capture_output=True, text=True)
    assert refused.returncode == 1 and "--resume" in refused.stderr
    resumed = subprocess.run(command + ["--resume"], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stderr.strip().splitlines()[-1])["documents_read"] == 600
    quiet(model, source, tmp_path / "whole.jsonl", batch_size=16)
    assert (tmp_path / "out.jsonl").read_text() == (tmp_path / "whole.jsonl").read_text()
    assert (tmp_path / "out.jsonl.errors.jsonl").read_text() == (tmp_path / "whole.jsonl.errors.jsonl").read_text()
    assert len(records_of(tmp_path / "out.jsonl")) == 599
    assert not progress.exists() and not (tmp_path / "out.jsonl.partial").exists()


def test_the_package_and_the_local_path_work_without_ray(tmp_path, model):
    source = write(tmp_path, "docs.txt", TEXTS[0] + "\n")
    code = (
        "import sys; sys.modules['ray'] = None\n"  # as if Ray were not installed
        "import spacy_w2ner, spacy_w2ner.cli\n"
        "from spacy_w2ner.annotate import annotate\n"
        f"summary = annotate({str(model)!r}, {str(source)!r}, {str(tmp_path / 'out.jsonl')!r}, progress=False)\n"
        "assert summary.written == 1, summary\n"
        "from spacy_w2ner.annotate.ray import annotate_with_ray\n"
        "try:\n"
        f"    annotate_with_ray({str(model)!r}, {str(source)!r}, {str(tmp_path / 'ray.jsonl')!r})\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "pip install 'spacy-w2ner[ray]'" in result.stdout
    assert not list(tmp_path.glob("ray.jsonl*")), "nothing is created when the engine cannot start"


def test_every_record_validates_against_the_schema_the_schema_command_prints(tmp_path, model):
    from pydantic import ValidationError

    from spacy_w2ner.annotate import RECORD_SCHEMA, validate_record

    source = write(tmp_path, "notes.jsonl", "\n".join(json.dumps({"id": f"n{i}", "text": t, "site": "forum"}) for i, t in enumerate(TEXTS + [ODD])))
    quiet(model, source, tmp_path / "out.jsonl")
    records = records_of(tmp_path / "out.jsonl")
    assert len(records) == 5 and any(r["entities"] for r in records)
    for record in records:
        validate_record(record)
    broken = dict(records[0], entities=[dict(records[0]["entities"][0], fragments=[])])
    with pytest.raises(ValidationError, match="fragments"):
        validate_record(broken)
    with pytest.raises(ValidationError, match="Extra inputs"):
        validate_record(dict(records[0], unexpected=1))
    printed = json.loads(cli("schema").stdout)
    assert printed == RECORD_SCHEMA
    assert set(printed["required"]) == {"id", "source", "meta", "entities"}
    assert "fragments" in printed["$defs"]["EntityRecord"]["properties"]


def test_the_command_has_every_option_of_the_options_type():
    from spacy_w2ner.annotate import AnnotateOptions
    from spacy_w2ner.common import cli_fields

    help_text = cli("annotate", "--help").stdout
    for name, _, _ in cli_fields(AnnotateOptions):
        assert "--" + name.replace("_", "-") in help_text, name
    with pytest.raises(TypeError, match="unknown annotate option"):
        AnnotateOptions.of(bacth_size=3)
    with pytest.raises(ValueError, match="engine must be local or ray"):
        AnnotateOptions.of(engine="spark").check()
    assert AnnotateOptions.of(AnnotateOptions(batch_size=7), limit=2).batch_size == 7


def test_freed_memory_goes_back_across_small_pipe_calls(trained_nlp, monkeypatch):
    """The HTTP service calls nlp.pipe once per small batch: the docs are counted across calls,
    so its memory is given back too (every 64 docs at the end of a batch)."""
    import spacy_w2ner.memory.batches as component_module

    trims = []
    monkeypatch.setattr(component_module, "release_freed_memory", lambda: trims.append(1))
    monkeypatch.setattr(trained_nlp.get_pipe("w2ner"), "_docs_since_trim", 0)
    for _ in range(40):  # 40 calls of 5 docs: 200 docs
        list(trained_nlp.pipe([TEXTS[0]] * 5, batch_size=5))
    assert len(trims) == 3  # after docs 65, 130 and 195
