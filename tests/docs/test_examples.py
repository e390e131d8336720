"""Every Python and shell example of README.md and docs/ runs and prints what its page says.

Each page's examples run in order in one sandbox directory holding what the pages assume a reader
has: the demo's pipeline at ``training/sample-w2ner_minilm_cpu/model-best`` (the demo's own where
``spacy project run demo`` ran, as CI runs it before the tests; else the small pipeline the other
tests train) also reachable as ``MODEL``, a directory of notes (``notes/``), ``notes.txt``,
``notes.txt.gz``, ``notes.jsonl``, a corpus in each format under ``my_corpus/``, the sample dev
set converted, and the project's configs. The markers are explained in examples.py.
"""
import contextlib
import gzip
import io
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from spacy.training import Example

from spacy_w2ner.nn.cpu import bfloat16_instructions, cpu_model

from ..conftest import cli
from .examples import MARKERS, ROOT, examples, pages

DEMO_MODEL = "training/sample-w2ner_minilm_cpu/model-best"
CPU_FEATURES = {"bfloat16": bfloat16_instructions}  # needs-cpu's FEATURE -> whether this CPU has it
NOTES = [
    "After two weeks on Lipitor I had severe pain in the knees and ankles .",
    "Aspirin caused severe headaches and nausea .",
    "New York University is in New York .",
]
DAI = "She had pain in her knees and ankles .\n2,5 ADR|2,4,7,7 ADR\n\nAspirin helped .\n0,0 DRUG\n\n"
CONLL = "EU NNP B-NP I-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP I-MISC\ncall NN I-NP O\n. . O O\n\n"
BMES = "张 B-NAME\n三 E-NAME\n在 O\n北 B-LOC\n京 E-LOC\n。 O\n\n"


def test_every_example_runs_or_says_why_not():
    """A marker is one of the known ones; a block left out says why; a ``prints`` block shows output."""
    problems = []
    for page in pages():
        for example in examples(page):
            markers = example.markers
            problems += [f"{example.where}: unknown marker {m!r} (known: {', '.join(MARKERS)})" for m in markers if m not in MARKERS]
            if "not-run" in markers and len(markers["not-run"]) < 10:
                problems.append(f"{example.where}: not-run needs a reason")
            if "prints" in markers and not (example.lang == "python" and example.expected_output()):
                problems.append(f"{example.where}: a prints block is Python ending in '# output' lines")
            problems += [f"{example.where}: {m} needs its path or URL" for m in ("needs", "background") if markers.get(m) == ""]
            if "needs-cpu" in markers and markers["needs-cpu"] not in CPU_FEATURES:
                problems.append(f"{example.where}: needs-cpu: one of {', '.join(CPU_FEATURES)}")
    assert problems == []
    assert sum(example.runs for page in pages() for example in examples(page)) >= 15  # the parser finds them


def test_markers_stack_one_comment_a_line(tmp_path):
    """Both of two stacked markers reach their block; a marker a blank line away reaches none."""
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- test: needs: training/x -->\n<!-- test: needs-cpu: bfloat16 -->\n```bash\nrun a\n```\n\n"
        "<!-- test: not-run: a reason long enough -->\n\n```bash\nrun b\n```\n",
        encoding="utf8",
    )
    found = examples(page)
    assert [(e.line, e.body, e.markers) for e in found] == [
        (3, "run a", {"needs": "training/x", "needs-cpu": "bfloat16"}), (9, "run b", {})
    ]


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory, saved_model):
    """A directory with what the pages' examples assume (see the module's docstring)."""
    root = tmp_path_factory.mktemp("docs-sandbox")
    demo = ROOT / DEMO_MODEL
    (root / DEMO_MODEL).parent.mkdir(parents=True)
    (root / DEMO_MODEL).symlink_to(demo if demo.is_dir() else saved_model)
    (root / "MODEL").symlink_to(demo if demo.is_dir() else saved_model)
    (root / "project").mkdir()
    (root / "project" / "configs").symlink_to(ROOT / "project" / "configs")
    (root / "notes").mkdir()
    for number, text in enumerate(NOTES, start=1):
        (root / "notes" / f"note{number}.txt").write_text(text + "\n", encoding="utf8")
    lines = "".join(text + "\n" for text in NOTES)
    (root / "notes.txt").write_text(lines, encoding="utf8")
    (root / "notes.txt.gz").write_bytes(gzip.compress(lines.encode("utf8")))
    jsonl = "".join(f'{{"id": "n{k}", "text": "{text}", "site": "forum"}}\n' for k, text in enumerate(NOTES, 1))
    (root / "notes.jsonl").write_text(jsonl, encoding="utf8")
    (root / "my_corpus").mkdir()
    (root / "my_corpus" / "train.txt").write_text(DAI, encoding="utf8")
    (root / "my_corpus" / "valid.conll").write_text(CONLL, encoding="utf8")
    (root / "my_corpus" / "train.char.bmes").write_text(BMES, encoding="utf8")
    cli("convert", "w2ner-json", ROOT / "corpora" / "sample" / "dev.json", root / "corpora" / "converted" / "sample")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("page", [str(page.relative_to(ROOT)) for page in pages() if any(e.runs for e in examples(page))])
def test_the_examples_of_a_page_run(page, sandbox, tmp_path, monkeypatch):
    work = tmp_path / "work"
    shutil.copytree(sandbox, work, symlinks=True)
    monkeypatch.chdir(work)
    skipped = _run_examples([example for example in examples(ROOT / page) if example.runs], work)
    if skipped:
        pytest.skip("; ".join(skipped))


@pytest.mark.slow
def test_the_model_cards_examples_run_with_its_wheel_installed(sandbox, tmp_path, monkeypatch):
    """The card ``model-card`` writes for the demo's pipeline (``spacy project run package``): built
    into a wheel by ``spacy package`` with the same name and version, installed offline, its title
    that version, and its examples run as written where the wheel is installed."""
    pytest.importorskip("build", reason="spacy package --build wheel needs the 'build' package")
    import json
    import spacy

    model = tmp_path / "model"
    shutil.copytree((sandbox / DEMO_MODEL).resolve(), model)
    nlp = spacy.load(model)
    dev = list(spacy.tokens.DocBin().from_disk(sandbox / "corpora/converted/sample/dev.spacy").get_docs(nlp.vocab))
    (tmp_path / "metrics.json").write_text(json.dumps(nlp.evaluate([Example(nlp.make_doc(d.text), d) for d in dev])))
    cli("model-card", model, tmp_path / "metrics.json", "--name", "w2ner_card", "--version", "0.1.0")
    subprocess.run([sys.executable, "-m", "spacy", "package", str(model), str(tmp_path), "--name", "w2ner_card",
                    "--version", "0.1.0", "--build", "wheel", "--force"], check=True, capture_output=True)  # fmt: skip
    wheel = next(tmp_path.glob("en_w2ner_card-0.1.0/dist/*.whl"))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "-q", "--target", str(site),
                    str(wheel)], check=True, capture_output=True)  # fmt: skip
    card = next(site.glob("en_w2ner_card-0.1.0.dist-info/METADATA")).read_text(encoding="utf8")
    assert "\n# en_w2ner_card 0.1.0\n" in card and "Version: 0.1.0" in card
    (tmp_path / "README.md").write_text(card.split("\n\n", 1)[1], encoding="utf8")  # the card, after the headers
    work = tmp_path / "work"
    shutil.copytree(sandbox, work, symlinks=True)
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    card_examples = [example for example in examples(tmp_path / "README.md") if example.runs]
    assert [example.lang for example in card_examples] == ["python", "bash", "bash"]
    assert _run_examples(card_examples, work) == []
    assert len((work / "out.jsonl").read_text(encoding="utf8").splitlines()) == len(NOTES)  # one record a note


def _run_examples(page_examples, work: Path) -> list:
    """Run a page's examples in order in ``work`` (the current directory); what was skipped, and why."""
    namespace = {"__name__": "__docs__"}
    background = []
    skipped = []
    try:
        for example in page_examples:
            path, feature = example.markers.get("needs"), example.markers.get("needs-cpu")
            if path and not (ROOT / path).exists():
                skipped.append(f"{example.where} needs {path}, which is not there")
                continue
            if feature and not CPU_FEATURES[feature]():
                skipped.append(f"{example.where} needs a CPU with {feature} instructions; {cpu_model()} has none")
                continue
            if path:
                _link(ROOT / path, work / path)
            if example.lang == "python":
                _run_python(example, namespace)
            elif "background" in example.markers:
                background.append(_start(example, work))
            else:
                _run_shell(example, work)
    finally:
        for process in background:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)
    return skipped


def _link(source: Path, target: Path) -> None:
    if target.is_symlink():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(source)


def _run_python(example, namespace) -> None:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(example.body, example.where, "exec"), namespace)
    if "prints" in example.markers:
        printed = [line.rstrip() for line in output.getvalue().rstrip("\n").splitlines()]
        assert printed == example.expected_output(), f"{example.where} prints something else"


def _environment() -> dict:
    """This interpreter's ``python`` first on PATH, as in the activated virtual environment."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def _run_shell(example, work: Path) -> None:
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", example.body], cwd=work, env=_environment(),
        capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, f"{example.where}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


def _start(example, work: Path) -> subprocess.Popen:
    """Start a block that keeps running; return once its URL answers."""
    url = example.markers["background"]
    port = int(url.split(":")[2].split("/")[0])
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            pytest.skip(f"{example.where}: port {port} is taken on this machine")
    log = open(work / "background.log", "w")
    process = subprocess.Popen(
        ["bash", "-c", example.body], cwd=work, env=_environment(), stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{example.where} stopped:\n{(work / 'background.log').read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                if answer.status == 200:
                    return process
        except OSError:
            time.sleep(1)
    os.killpg(process.pid, signal.SIGTERM)
    raise AssertionError(f"{example.where}: {url} did not answer in 300 s")


def test_config_snippets_parse_and_name_registered_functions():
    """Each ``ini`` block is a piece of a spaCy config: it parses (its parent sections added) and
    every function it names (``@architectures = "..."``) is registered."""
    import spacy
    from thinc.api import Config

    import spacy_w2ner  # noqa: F401  (registers the package's functions)

    snippets = [example for page in pages() for example in examples(page) if example.lang == "ini"]
    assert snippets
    for example in snippets:
        sections = re.findall(r"^\[([^\]]+)\]", example.body, re.M)
        parents = sorted({".".join(name.split(".")[:k]) for name in sections for k in range(1, name.count(".") + 1)})
        text = "".join(f"[{parent}]\n" for parent in parents if parent not in sections) + example.body
        for section, key, value in _settings(Config().from_str(text, interpolate=False)):
            # spaCy keeps a comment after a value in the value: "50.0  # ..." is no float
            assert not (isinstance(value, str) and re.search(r"\s#", value)), f"{example.where}: [{section}] {key} = {value!r}"
            if key.startswith("@"):
                assert spacy.registry.has(key[1:], value), f"{example.where}: {value} is not registered"


def _settings(config, section=""):
    """(section, key, value) of every setting of a parsed config, its sub-sections' too."""
    for key, value in config.items():
        if isinstance(value, dict):
            yield from _settings(value, f"{section}.{key}".strip("."))
        else:
            yield section, key, value


def test_the_record_shown_is_a_record():
    """The ``json`` record on the annotate page is valid JSON of the record schema (``Record``)."""
    import json

    from spacy_w2ner.annotate.records import Record

    blocks = [example for example in examples(ROOT / "docs" / "annotate.md") if example.lang == "json"]
    assert blocks
    for example in blocks:
        Record.model_validate(json.loads(example.body))
