"""scripts/dev_curve.py: a run's dev scores per evaluation, each checkpoint scored with its weights and its averages."""
import importlib.util
import json
from pathlib import Path

import pytest
import spacy
import torch
from spacy.tokens import DocBin

from spacy_w2ner.training.checkpoints import checkpoints
from spacy_w2ner.training.state import load_averages
from tests.training.helpers import run, sample_corpus, train_command

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "dev_curve.py"
spec = importlib.util.spec_from_file_location("dev_curve", SCRIPT)
dev_curve = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dev_curve)

# 5 epochs of 4 batches: evaluated at steps 0, 8 and 16, and the final weights at step 19 (the
# loop's final evaluation); a checkpoint at each evaluation, all of them kept.
EVERY_EVALUATION = ["--training.max_steps", "0", "--training.max_epochs", "5", "--checkpoint-every", "0", "--keep", "10"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return sample_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def dev_evaluated(corpus, tmp_path_factory):
    """The dev sentences the training loop evaluates on (its first 16: ``--corpora.dev.limit``)."""
    nlp = spacy.blank("en")
    docs = list(DocBin().from_disk(corpus["dev"]).get_docs(nlp.vocab))[:16]
    path = tmp_path_factory.mktemp("dev") / "dev16.spacy"
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    return path


def logged_f(run_dir: Path) -> dict:
    """The loop's own dev F per evaluation step, as its newest checkpoint and model-last keep them."""
    newest = checkpoints(run_dir)[0]
    scores = {step: round(100 * score, 2) for score, step, _ in newest.read_json("trainer.json")["evaluations"]}
    scores[19] = round(100 * json.loads((run_dir / "model-last" / "meta.json").read_text())["performance"]["w2ner_f"], 2)
    return scores


def test_the_rows_are_the_loops_evaluations_and_each_checkpoint_scores_as_logged(tmp_path, corpus, dev_evaluated):
    output = tmp_path / "run"
    assert run(train_command(output, corpus, *EVERY_EVALUATION), tmp_path / "log") == 0
    result = dev_curve.curve(output, dev_evaluated, "the command")
    assert [row["step"] for row in result["evaluations"]] == [8, 16, 19]
    logged = logged_f(output)
    assert [row["f"] for row in result["evaluations"]] == [logged[8], logged[16], logged[19]]
    assert not result["uses_averages"] and result["finished"] and result["steps"] == 20
    assert result["command"] == "the command"
    # Without averages a checkpoint's weights are the ones the loop evaluated: the same scores.
    for row in result["evaluations"][:2]:
        assert row["rescored"] == {"raw": {name: row[name] for name in dev_curve.SCORES}}
    assert result["evaluations"][-1]["rescored"] is None  # no checkpoint after the final evaluation
    best = max(result["evaluations"], key=lambda row: (row["f"], row["step"]))
    assert result["best"] == {"step": best["step"], "f": best["f"]}


def torch_weights(nlp) -> dict:
    return {
        f"{name}/{index}/{key}": tensor.detach().clone()
        for name, pipe in nlp.components if hasattr(getattr(pipe, "model", None), "walk")
        for index, node in enumerate(pipe.model.walk()) for shim in node.shims
        for key, tensor in shim._model.state_dict().items()
    }  # fmt: skip


def test_with_averages_the_loop_evaluates_the_averages_the_checkpoint_holds(tmp_path, corpus, dev_evaluated):
    output = tmp_path / "run"
    assert run(train_command(output, corpus, *EVERY_EVALUATION, "--training.optimizer.use_averages", "true"), tmp_path / "log") == 0
    result = dev_curve.curve(output, dev_evaluated, "")
    assert result["uses_averages"]
    logged = logged_f(output)
    assert [row["f"] for row in result["evaluations"]] == [logged[8], logged[16], logged[19]]
    for row in result["evaluations"][:2]:
        assert set(row["rescored"]) == {"raw", "averaged"}
        assert row["rescored"]["averaged"] == {name: row[name] for name in dev_curve.SCORES}
    # The averages reach w2ner's torch module (Thinc's own shim missed them), and go again after.
    checkpoint = checkpoints(output)[0]
    nlp = spacy.load(checkpoint.model)
    raw = torch_weights(nlp)
    with nlp.use_params(load_averages(nlp, checkpoint.path)):
        averaged = torch_weights(nlp)
    assert [key for key in raw if not torch.equal(raw[key], averaged[key])]
    assert all(torch.equal(raw[key], tensor) for key, tensor in torch_weights(nlp).items())


def test_scores_already_written_for_the_run_are_kept_and_the_rest_scored(tmp_path, corpus, dev_evaluated):
    output = tmp_path / "run"
    assert run(train_command(output, corpus, *EVERY_EVALUATION), tmp_path / "log") == 0
    earlier = tmp_path / "curve.json"
    marker = {"raw": {name: -1.0 for name in dev_curve.SCORES}}
    earlier.write_text(json.dumps({"run": str(output), "evaluations": [{"step": 8, "rescored": marker}]}))
    known = dev_curve.known_scores(earlier, output)
    assert known == {8: marker} and dev_curve.known_scores(earlier, tmp_path / "another") == {}
    rows = dev_curve.curve(output, dev_evaluated, "", known)["evaluations"]
    assert rows[0]["rescored"] == marker  # not scored again
    assert rows[1]["rescored"] == {"raw": {name: rows[1][name] for name in dev_curve.SCORES}}  # scored now


def test_a_directory_without_checkpoints_is_named(tmp_path):
    with pytest.raises(SystemExit, match="has no checkpoints"):
        dev_curve.logged_evaluations(tmp_path)


def test_a_directory_without_a_run_record_is_named(tmp_path):
    with pytest.raises(SystemExit, match=f"{tmp_path} has no run record"):
        dev_curve.curve(tmp_path, None, "")
    (tmp_path / "run.json").write_text(json.dumps({"config": "", "steps": 3}), encoding="utf8")
    assert dev_curve.run_record(tmp_path) == {"config": "", "steps": 3}


def test_the_evaluation_best_on_another_dev_score_is_scored_with_the_weights_it_was_evaluated_with(tmp_path, corpus, dev_evaluated):
    """--test --choose-by: scored on the very dev sentences the loop evaluated on, the chosen
    evaluation's weights give back its logged scores (the right checkpoint, or model-last)."""
    import shutil

    output = tmp_path / "run"
    assert run(train_command(output, corpus, *EVERY_EVALUATION), tmp_path / "log") == 0
    rows = dev_curve.logged_evaluations(output)
    for by in ("f", "discontinuous_f", "overlapping_f"):
        chosen = dev_curve.test_of_best(output, rows, by, dev_evaluated)
        best = max(rows, key=lambda row: (row[by] if row[by] is not None else -1.0, row["step"]))
        assert chosen["step"] == best["step"] and chosen["test"] == chosen["dev"] == {name: best[name] for name in dev_curve.SCORES}
    for checkpoint in checkpoints(output):
        shutil.rmtree(checkpoint.path)
    early = max(rows[:-1], key=lambda row: (row["f"], row["step"]))
    with pytest.raises(SystemExit, match=f"the checkpoint of step {early['step']} .* train with --keep at least 2"):
        dev_curve.test_of_best(output, rows[:-1], "f", dev_evaluated)
    with pytest.raises(SystemExit, match="--choose-by must be one of"):
        dev_curve.test_of_best(output, rows, "w2ner_f", dev_evaluated)
