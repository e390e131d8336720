"""``optimize``'s checks of its two paths, before it loads anything: ``--force`` replaces a pipeline
(or an empty directory) and nothing else (no encoder needed)."""
import pytest

from spacy_w2ner.release.optimize import OptimizeError, optimize_pipeline


@pytest.fixture
def run(tmp_path):
    """A training run's directory: its model-best (a config is all the checks read), notes beside it."""
    (tmp_path / "run" / "model-best").mkdir(parents=True)
    (tmp_path / "run" / "model-best" / "config.cfg").write_text("[nlp]\n")
    (tmp_path / "run" / "notes.txt").write_text("notes")
    return tmp_path / "run"


def refused(source, output, says):
    before = sorted(str(path) for path in output.parent.rglob("*"))
    with pytest.raises(OptimizeError, match=says):
        optimize_pipeline(source, output, force=True)
    assert sorted(str(path) for path in output.parent.rglob("*")) == before  # nothing deleted, nothing written


def test_force_never_replaces_a_directory_that_holds_the_pipeline_being_optimized(run):
    refused(run / "model-best", run, says="holds the pipeline being optimized")
    refused(run / "model-best", run.parent, says="holds the pipeline being optimized")
    refused(run / "model-best", run / "model-best", says="is the pipeline being optimized")


def test_force_replaces_only_a_pipeline_or_an_empty_directory(run):
    (run / "results.json").write_text("{}")
    refused(run / "model-best", run / "results.json", says="is not a saved pipeline: --force replaces only")
    (run / "other").mkdir()
    (run / "other" / "data.txt").write_text("kept")
    refused(run / "model-best", run / "other", says="is not a saved pipeline: --force replaces only")
    (run / "project").mkdir()  # spacy init config's layout: a config.cfg, no pipeline
    (run / "project" / "config.cfg").write_text("[nlp]\n")
    refused(run / "model-best", run / "project", says="is not a saved pipeline: --force replaces only")
