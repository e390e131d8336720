"""Every path that takes one document runs in linear time (issue 69): the same work at N and 8N
tokens takes less than 16 times the CPU time (about 8 for a linear path, 64 for a quadratic one),
the time of a run on a 100-token document (start-up) taken off both, N doubled until its own work
is at least the start-up's on the machine that runs it, measured by bench/scaling.py's ``growth``
on its generated document (entities, discontinuous and nested ones, annotations inside words) in
both shapes (one line; many short sentences). A quadratic loop of the kind round 6 shipped (a
setter that scans the Doc, called per token) fails it, as did a training step whose grids each
scanned all of the document's entities (session 21). Which paths there are is checked against the
CLI: every command that takes a document names the paths that time it (``COMMAND_PATHS``).

The model paths run a tiny CNN pipeline with spaCy's sentencizer on one torch thread (a pipeline's
cost per token, not its accuracy; one thread, so that CPU time is the work's, not threads waiting).
"""
import importlib.util
import sys
from pathlib import Path

import pytest
import spacy

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_scaling", ROOT / "bench" / "scaling.py")
scaling = importlib.util.module_from_spec(spec)
sys.modules["bench_scaling"] = scaling
spec.loader.exec_module(scaling)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """(path, loaded pipeline) of the tiny pipeline, torch on one thread while the module runs."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    path = scaling.small_pipeline(tmp_path_factory.mktemp("scaling") / "model", config=scaling.TINY_CONFIG)
    yield str(path), spacy.load(path)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Where the generated documents are written, once for every path."""
    return tmp_path_factory.mktemp("documents")


def measure(path, shape, pipeline, shared, tmp_path):
    model, nlp = pipeline
    return scaling.growth(path, shape, tmp_path, model, nlp if path in scaling.MODEL_PATHS else None, shared)


@pytest.mark.parametrize("path, shape", scaling.guard_cases(), ids=[f"{p} ({s})" for p, s in scaling.guard_cases()])
def test_eight_times_the_tokens_take_less_than_sixteen_times_the_time(path, shape, pipeline, shared, tmp_path):
    g = measure(path, shape, pipeline, shared, tmp_path)
    assert g["ratio"] < scaling.GROWTH_LIMIT, (
        f"{path} ({shape}): {8 * g['n']} tokens took {g['at_8n']:.3f} s of CPU, {g['n']} tokens {g['at_n']:.3f} s, "
        f"a start-up of {g['start_up']:.3f} s taken off both: {g['ratio']:.1f} times for 8 times the tokens "
        f"(a linear path: about 8; profile it with bench/scaling.py --paths '{path}')"
    )


def test_the_guard_fails_a_path_that_sets_sentence_starts_token_by_token(pipeline, shared, tmp_path, monkeypatch):
    """Round 6's converter: spaCy's is_sent_start setter scans the whole Doc, once per token."""
    from spacy.tokens import Doc

    def quadratic(case):
        document = case.inputs.document
        vocab = spacy.blank("en").vocab

        def run():
            doc = Doc(vocab, words=document.words, spaces=document.spaces)
            for token in doc:
                token.is_sent_start = token.i == 0 or document.words[token.i - 1] == "."

        return run

    monkeypatch.setitem(scaling.PATHS, "sentence starts token by token", quadratic)
    monkeypatch.setitem(scaling.GUARD_N, "sentence starts token by token", 1000)
    g = measure("sentence starts token by token", "sentences", pipeline, shared, tmp_path)
    assert g["ratio"] > 2 * scaling.GROWTH_LIMIT


def test_every_command_that_takes_a_document_has_a_path_that_times_it():
    """A command added to the CLI fails this until bench/scaling.py's ``COMMAND_PATHS`` names the
    paths that time its work on a document (or ``TAKES_NO_DOCUMENT`` says why it needs none); so
    does a format that ``convert`` reads, ``export`` writes, or ``annotate`` reads or writes without a path."""
    from fnmatch import fnmatch

    from typer.main import get_command

    from spacy_w2ner.cli import app
    from spacy_w2ner.formats import FORMATS

    assert set(get_command(app).commands) == set(scaling.COMMAND_PATHS) | set(scaling.TAKES_NO_DOCUMENT)
    assert not set(scaling.COMMAND_PATHS) & set(scaling.TAKES_NO_DOCUMENT)
    unmatched = [name for names in scaling.COMMAND_PATHS.values() for name in names if not any(fnmatch(path, name) for path in scaling.PATHS)]
    assert unmatched == []
    from spacy_w2ner.annotate import INPUT_FORMATS
    from spacy_w2ner.annotate.outputs import OUTPUT_FORMATS

    writes = [f"{fmt}" for fmt in OUTPUT_FORMATS if fmt != "jsonl"]  # jsonl: every "annotate INPUT" path writes it
    for verb, formats in (("convert", FORMATS), ("export", [name for name, fmt in FORMATS.items() if fmt.write]),
                          ("annotate", INPUT_FORMATS), ("annotate ->", writes)):  # fmt: skip
        assert [fmt for fmt in formats if not any(path.split(" (")[0] == f"{verb} {fmt}" for path in scaling.PATHS)] == []
