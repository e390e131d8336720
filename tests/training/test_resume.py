"""``python -m spacy_w2ner train``: real training processes killed at random moments and resumed
end with the same weights, bit for bit, as a run that was never stopped, and as ``spacy train``."""
import json
import random
import re
import shutil
import signal
import subprocess
import time

import pytest

from tests.conftest import HAS_MINILM, cli

from .helpers import ROOT, differing, environment, run, run_and_kill, train_command, weights


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, corpus):
    """A run never stopped, with a checkpoint every 3 steps (as the killed runs have)."""
    output = tmp_path_factory.mktemp("uninterrupted") / "run"
    assert run(train_command(output, corpus, "--checkpoint-every", "3"), output.with_suffix(".log")) == 0
    return output


def test_runs_killed_at_random_moments_end_as_the_uninterrupted_run(tmp_path, corpus, uninterrupted):
    chooser = random.Random()
    delays = [round(chooser.uniform(0.5, 6.0), 2) for _ in range(3)]
    output, log = tmp_path / "run", tmp_path / "run.log"
    command = train_command(output, corpus, "--checkpoint-every", "3", "--resume")
    kills = [delay for delay in delays if run_and_kill(command, log, delay) is None]
    assert run(command, log) == 0, log.read_text()
    text = log.read_text()
    record = json.loads((output / "run.json").read_text())
    assert record["finished"] and record["steps"] == 25, (delays, record)
    assert record["resumes"] == text.count("Resuming from"), (delays, text)
    for model in ("model-last", "model-best"):
        assert differing(weights(uninterrupted / model), weights(output / model)) == [], (model, delays, text)
    assert json.loads((output / "model-best" / "meta.json").read_text())["performance"] == json.loads(
        (uninterrupted / "model-best" / "meta.json").read_text()
    )["performance"]


def test_the_uninterrupted_run_trains_what_spacy_train_trains(tmp_path, corpus, uninterrupted):
    output = tmp_path / "spacy-train"
    assert run(train_command(output, corpus, spacy_train=True), tmp_path / "log") == 0
    for model in ("model-last", "model-best"):
        assert differing(weights(uninterrupted / model), weights(output / model)) == []


def test_sigterm_stops_after_the_step_with_a_checkpoint_and_a_damaged_one_is_skipped(tmp_path, corpus, uninterrupted):
    output, log = tmp_path / "run", tmp_path / "run.log"
    command = train_command(output, corpus, "--resume", "--training.logger.every_seconds", "0")  # a progress line a step
    with log.open("ab") as file:
        process = subprocess.Popen(command, stdout=file, stderr=subprocess.STDOUT, env=environment())
        while not list(output.glob("checkpoints/step-*")):  # the first evaluation's checkpoint
            assert process.poll() is None, log.read_text()
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        assert process.wait() == 128 + signal.SIGTERM
    text = log.read_text()
    assert "SIGTERM: stopping after this step" in text and "continue with --resume" in text
    steps = sorted(int(path.name[5:]) for path in output.glob("checkpoints/step-*"))
    assert len(steps) == 2 and f"checkpoint step-{steps[-1]:08d} written" in text and (output / "model-last").is_dir()
    newest = output / "checkpoints" / f"step-{steps[-1]:08d}"
    (newest / "optimizer.npz").write_bytes((newest / "optimizer.npz").read_bytes()[:100])  # killed while writing
    assert run(command, log) == 0
    assert f"checkpoint {newest} is incomplete or damaged (optimizer.npz differs from its manifest entry): skipped" in log.read_text()
    assert f"Resuming from {output / 'checkpoints' / f'step-{steps[0]:08d}'}" in log.read_text()
    resumed = log.read_text().split(f"Resumed at step {steps[0]}")[1]
    assert re.search(r"\n  \.\.\. step (\d+) of 24,", resumed).group(1) == str(steps[0])  # counted from there
    assert differing(weights(uninterrupted / "model-last"), weights(output / "model-last")) == []


def test_a_finished_run_is_not_trained_again(uninterrupted, corpus, tmp_path):
    finished = tmp_path / "finished"
    shutil.copytree(uninterrupted, finished)
    result = cli("train", *train_command(finished, corpus, "--resume")[4:])
    assert result.stdout.strip() == f"{finished}'s run finished at step 25: nothing to do"


def test_resuming_with_another_setting_or_corpus_is_refused_naming_it(uninterrupted, corpus, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(uninterrupted, run_dir)
    arguments = train_command(run_dir, corpus, "--resume")[4:]
    result = cli("train", *arguments, "--training.dropout", "0.25", code=1)
    assert result.stderr.strip() == (
        f"error: {run_dir}'s run was started with other settings: training.dropout: 0.1 -> 0.25 (--force-resume continues anyway)"
    )
    changed = tmp_path / "train.spacy"
    changed.write_bytes(corpus["train"].read_bytes() + b"\0")
    moved = [a if a != str(corpus["train"]) else str(changed) for a in arguments]
    result = cli("train", *moved, code=1)
    assert f"paths.train: '{corpus['train']}' -> '{changed}'" in result.stderr
    assert f"{changed} is read now" in result.stderr and f"{corpus['train']} is no longer read" in result.stderr


def test_a_forced_resume_that_cannot_replay_to_its_checkpoint_leaves_the_record_to_the_checkpoints_settings(uninterrupted, corpus, tmp_path):
    """Another batch size replays other batches: the forced resume stops, and the record still
    says what the checkpoints were trained with (it said the new size: a plain --resume of the
    original command was then refused as "started with other settings")."""
    run_dir = tmp_path / "run"
    shutil.copytree(uninterrupted, run_dir)
    record = json.loads((run_dir / "run.json").read_text())
    before = {**record, "finished": False}  # killed before its end
    (run_dir / "run.json").write_text(json.dumps(before))
    arguments = train_command(run_dir, corpus, "--resume")[4:]
    result = cli("train", *arguments, "--force-resume", "--training.batcher.size", "3", code=1)
    assert "resuming although the settings changed (--force-resume): training.batcher.size" in result.stdout
    assert "does not replay to the checkpoint" in result.stderr
    assert json.loads((run_dir / "run.json").read_text()) == before
    cli("train", *arguments)  # the original command goes on
    after = json.loads((run_dir / "run.json").read_text())
    assert after["finished"] and after["resumes"] == before["resumes"] + 1 and after["config"] == before["config"]
    # a forced resume whose steps replay as trained goes on, and the record takes its settings
    (run_dir / "run.json").write_text(json.dumps({**after, "finished": False}))
    cli("train", *arguments, "--force-resume", "--training.dropout", "0.25")
    forced = json.loads((run_dir / "run.json").read_text())
    assert forced["finished"] and forced["resumes"] == after["resumes"] + 1 and "dropout = 0.25" in forced["config"]


def test_a_fresh_directory_with_only_what_a_run_makes_before_its_record_starts_fresh(tmp_path):
    """Ray Train fills OUTPUT/ray before a worker's run writes its record (a fresh --ray-workers run
    was refused as "not empty"); the lock and a stop request are the run's own too."""
    from spacy_w2ner.training.run import RunDirectory, prepare_training

    run = RunDirectory(tmp_path / "run")
    (run.path / "ray" / "train").mkdir(parents=True)
    (run.path / "ray" / "train" / ".validate_storage_marker").write_text("")
    (run.path / "STOP").touch()
    assert prepare_training(run, None, {}, resume=False, force_resume=False, say=print) is None
    (run.path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="is not empty and holds no run"):
        prepare_training(run, None, {}, resume=False, force_resume=False, say=print)


def test_an_output_directory_with_another_run_is_refused(uninterrupted, corpus, tmp_path):
    result = cli("train", *train_command(uninterrupted, corpus)[4:], code=1)
    assert result.stderr.strip() == (
        f"error: {uninterrupted} holds a run (finished): continue it with --resume, or choose another --output"
    )
    spacy_run = tmp_path / "spacy-run"
    shutil.copytree(uninterrupted / "model-best", spacy_run / "model-best")
    result = cli("train", *train_command(spacy_run, corpus, "--resume")[4:], code=1)
    assert "holds model-best from a run without checkpoints (spacy train's?)" in result.stderr
    adaptation = tmp_path / "adapted"
    (adaptation / "checkpoints" / "step-00000004").mkdir(parents=True)  # adapt-encoder's, which train's would replace
    (adaptation / "adapt.json").write_text("{}")
    result = cli("train", *train_command(adaptation, corpus)[4:], code=1)
    assert result.stderr.strip() == f"error: {adaptation} is not empty and holds no run (run.json): choose another --output"
    assert sorted(p.name for p in adaptation.iterdir()) == ["adapt.json", "checkpoints"]


def test_a_run_that_stopped_before_its_first_checkpoint_is_started_afresh_with_the_new_settings(uninterrupted, corpus, tmp_path):
    """A run that failed or was killed before it saved anything (a setting the memory check
    refused, a kill while the pipeline initialized) holds nothing to resume: the command run
    again, with the setting fixed, starts afresh instead of asking for --resume and then
    --force-resume."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record = json.loads((uninterrupted / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**record, "finished": False, "resumes": 2, "steps": None}))
    result = cli("train", *train_command(run_dir, corpus, "--training.dropout", "0.25")[4:])
    assert f"the run in {run_dir} stopped before its first checkpoint (nothing to resume): starting afresh" in result.stdout
    record = json.loads((run_dir / "run.json").read_text())
    assert record["finished"] and record["resumes"] == 0 and "dropout = 0.25" in record["config"]
    (run_dir / "run.json").write_text(json.dumps({**record, "finished": False}))
    result = cli("train", *train_command(run_dir, corpus)[4:], code=1)  # its models are kept: not afresh
    assert result.stderr.strip() == f"error: {run_dir} holds a run (resumed 0 times so far): continue it with --resume, or choose another --output"


def test_a_corpus_that_does_not_exist_is_named_before_the_run_starts(corpus, tmp_path):
    missing = tmp_path / "mistyped.spacy"
    arguments = [a if a != str(corpus["dev"]) else str(missing) for a in train_command(tmp_path / "run", corpus)[4:]]
    result = cli("train", *arguments, code=1)
    assert result.stderr.strip() == f"error: corpus not found: {missing} ([corpora.dev] path)"
    assert not (tmp_path / "run").exists()

    arguments = train_command(tmp_path / "run", corpus)[4:]
    for extra, says in [(["--paths.dev", "null"], "corpus not set: [corpora.dev] path (null): give the path"),
                        (["--training.eval_frequency", "0"], "[training] eval_frequency must be at least 1")]:  # fmt: skip
        result = cli("train", *arguments, *extra, code=1)
        assert result.stderr.strip().startswith(f"error: {says}"), result.stderr
        assert not (tmp_path / "run").exists()
    (tmp_path / "a-file").write_text("mine")
    result = cli("train", *train_command(tmp_path / "a-file", corpus)[4:], code=1)
    assert result.stderr.strip() == f"error: {tmp_path / 'a-file'} is a file: --output takes a directory"
    assert (tmp_path / "a-file").read_text() == "mine"


def test_a_run_still_training_in_the_output_directory_is_refused_naming_its_process(uninterrupted, corpus, tmp_path):
    """A resume started while the run still trains (a requeued job, a second terminal) stops
    before it writes anything, naming the process that trains."""
    import os
    import socket

    from spacy_w2ner.training.run import RunDirectory

    run_dir = tmp_path / "run"
    shutil.copytree(uninterrupted, run_dir)
    (run_dir / "run.json").write_text(re.sub(r'"finished": true', '"finished": false', (run_dir / "run.json").read_text()))
    before = {path: path.stat().st_mtime_ns for path in run_dir.rglob("*") if path.name != "lock"}
    training = RunDirectory(run_dir)
    training.hold()
    try:
        result = cli("train", *train_command(run_dir, corpus, "--resume")[4:], code=1)
    finally:
        training.release()
    assert result.stderr.strip() == (
        f"error: {run_dir} is in use by a run that is still training (process {os.getpid()} on {socket.gethostname()}): "
        f"wait for it to end, stop it (touch {run_dir / 'STOP'}), or choose another --output"
    )
    assert {path: path.stat().st_mtime_ns for path in run_dir.rglob("*") if path.name != "lock"} == before


BFLOAT16 = ["--components.transformer.model.training_dtype", "bfloat16", "--components.w2ner.model.training_dtype", "bfloat16"]


FLOAT32 = ["--components.transformer.model.training_dtype", "float32"]  # the config's auto chooses by timing


@pytest.mark.slow
@pytest.mark.skipif(not HAS_MINILM, reason="needs the bundled MiniLM encoder")
@pytest.mark.parametrize("dtype", [FLOAT32, BFLOAT16], ids=["float32", "bfloat16"])
def test_a_transformer_run_killed_after_a_checkpoint_ends_as_the_uninterrupted_one(tmp_path, corpus, dtype):
    """The encoder's fused optimizer step and spacy-transformers' saved encoder, resumed exactly;
    in bfloat16 training too (both networks on bfloat16 copies of their float32 weights, refreshed
    once a step: ``nn.bfloat16``)."""
    minilm = ["--training.max_steps", "9", "--training.eval_frequency", "4", "--checkpoint-every", "3", *dtype]
    command = [
        *train_command(tmp_path / "whole", corpus, *minilm)[:4], str(ROOT / "project" / "configs" / "w2ner_minilm_cpu.cfg"),
        "--output", str(tmp_path / "whole"), "--paths.train", str(corpus["train"]), "--paths.dev", str(corpus["dev"]),
        "--corpora.train.limit", "48", "--corpora.dev.limit", "16", "--training.logger.progress_bar", "false", *minilm,
    ]  # fmt: skip
    assert run(command, tmp_path / "whole.log") == 0
    killed = [str(tmp_path / "killed") if part == str(tmp_path / "whole") else part for part in command] + ["--resume"]
    log = tmp_path / "killed.log"
    with log.open("ab") as file:
        process = subprocess.Popen(killed, stdout=file, stderr=subprocess.STDOUT, env=environment())
        while not list((tmp_path / "killed").glob("checkpoints/step-*")) and process.poll() is None:
            time.sleep(0.05)
        time.sleep(random.uniform(0.0, 3.0))
        process.kill()
        process.wait()
    assert run(killed, log) == 0, log.read_text()
    assert "Resuming from" in log.read_text()
    assert differing(weights(tmp_path / "whole" / "model-last"), weights(tmp_path / "killed" / "model-last")) == []



ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+[\d.]+\s+([\d.]+)\s", re.MULTILINE)  # epoch, step, the w2ner loss


def test_a_run_ending_between_evaluations_evaluates_its_final_weights_also_when_resumed(tmp_path, corpus):
    """5 epochs of 4 batches end at step 19, after the evaluations at steps 0, 8 and 16:
    ``spacy train`` never compares the last 3 steps on dev; this loop evaluates them once, as an
    evaluation step (the log's row, model-last's meta, model-best where they score best)."""
    epochs = ["--training.max_steps", "0", "--training.max_epochs", "5", "--checkpoint-every", "5"]
    whole = tmp_path / "whole"
    assert run(train_command(whole, corpus, *epochs), tmp_path / "whole.log") == 0
    rows = ROW.findall((tmp_path / "whole.log").read_text())
    assert [int(step) for _, step, _ in rows] == [0, 8, 16, 19]
    last_meta = json.loads((whole / "model-last" / "meta.json").read_text())["performance"]
    assert round(last_meta["w2ner_loss"], 2) == float(rows[-1][2])  # the losses of steps 17-19
    record = json.loads((whole / "run.json").read_text())
    final_checkpoint = whole / "checkpoints" / "step-00000020"
    scores = [e[0] for e in json.loads((final_checkpoint / "trainer.json").read_text())["evaluations"]]
    assert len(scores) == 3  # the checkpoint after step 19 came before its evaluation
    final_is_best = record["best_step"] == 19
    assert final_is_best == (json.loads((whole / "model-best" / "meta.json").read_text())["performance"] == last_meta)
    assert record["steps"] == 20 and final_is_best == (record["best_score"] >= max(scores))

    killed = tmp_path / "killed"  # as a kill after the checkpoint at step 20 would have left it
    shutil.copytree(whole, killed)
    (killed / "run.json").write_text(json.dumps(dict(record, finished=False, steps=None, best_step=None)))
    shutil.rmtree(killed / "model-last")
    if final_is_best:
        shutil.rmtree(killed / "model-best")
    log = tmp_path / "killed.log"
    assert run(train_command(killed, corpus, *epochs, "--resume"), log) == 0
    assert f"Resuming from {final_checkpoint.relative_to(whole).as_posix()}" in log.read_text().replace(f"{killed}/", "")
    assert [int(step) for _, step, _ in ROW.findall(log.read_text())] == [19]
    for model in ("model-last", "model-best"):
        assert differing(weights(whole / model), weights(killed / model)) == [], model
    assert json.loads((killed / "run.json").read_text())["best_step"] == record["best_step"]


def test_train_says_what_training_will_grid_after_initializing(uninterrupted):
    said = " ".join(uninterrupted.with_suffix(".log").read_text().split())  # wasabi wraps the line
    plan = said.index("w2ner: ")
    assert said.index("Initialized pipeline") < plan < said.index("Training pipeline")
    assert "training documents" in said[plan:] and "grid batches up to" in said[plan:]
