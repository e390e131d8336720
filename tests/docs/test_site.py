"""The documentation site builds in strict mode: no broken link, missing page, plot or reference."""
import importlib.util
import logging
import subprocess
import sys

import pytest

from .examples import ROOT

HAS_MKDOCS = all(importlib.util.find_spec(name) for name in ("mkdocs", "material", "mkdocstrings_handlers"))


@pytest.mark.skipif(not HAS_MKDOCS, reason="the [docs] extra (mkdocs-material, mkdocstrings-python) is not installed")
def test_the_site_builds_in_strict_mode(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    site = tmp_path / "site"
    cli = (site / "cli" / "index.html").read_text(encoding="utf8")
    assert "--doc-per-file" in cli and "fetch-encoder" in cli  # generated from the Typer app
    settings = (site / "configuration" / "index.html").read_text(encoding="utf8")
    assert "max_paths_per_edge" in settings and "max_spans_per_pass" in settings and "max_batch_size" in settings
    assert "get_entities" in (site / "api" / "index.html").read_text(encoding="utf8")
    assert "## 0.3.0" not in (site / "changelog" / "index.html").read_text(encoding="utf8")  # included, rendered
    for plot in ("accuracy-by-seed", "speed", "memory-by-length", "serve-load"):
        assert (site / "plots" / f"{plot}.png").is_file()


@pytest.mark.skipif(not HAS_MKDOCS, reason="the [docs] extra is not installed")
def test_a_missing_plot_is_a_warning_naming_it(tmp_path, caplog, monkeypatch):
    """A warning makes `mkdocs build --strict` fail; the message names the file the plot comes from."""
    spec = importlib.util.spec_from_file_location("plots_hook", ROOT / "docs" / "hooks" / "plots.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    monkeypatch.setattr(hook, "PLOTS", {"plots/nothing.png": "bench/results/nothing.png"})
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.plots"):
        files = hook.on_files([], config=None)
    assert files == []
    assert "bench/results/nothing.png is missing" in caplog.text


def test_the_four_first_tasks_are_two_clicks_from_home():
    """Home links to the page of each task, and that page shows how to do it."""
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf8")
    tasks = {
        "train.md": "python -m spacy_w2ner convert brat",  # train on a brat corpus
        "doc-contract.md": "'ankles' 7 8 ADR e1",  # a discontinuous entity's fragments in doc.spans
        "annotate.md": "notes/ notes-brat/ --doc-per-file",  # annotate a directory of notes
        "serve.md": "python -m spacy_w2ner serve",  # serve a pipeline
    }
    for page, shown in tasks.items():
        assert f"]({page})" in home, page
        assert shown in (ROOT / "docs" / page).read_text(encoding="utf8"), page
