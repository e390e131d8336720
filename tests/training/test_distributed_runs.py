"""Data-parallel runs as users start them: ``torchrun`` with 2 processes (gloo, on this CPU), two
torchrun "machines" meeting on 127.0.0.1, a process killed and restarted by torchrun, SIGTERM to
the launcher, and Ray Train's workers. Each trains the same config as one process does, every
dropout 0, and its weights are compared (slow: real processes, minutes)."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest

from tests.conftest import HAS_MINILM, cli

from .helpers import CONFIG, ROOT, differing, environment, run, train_command, weights

pytestmark = pytest.mark.slow

# 65 sentences in batches of 16: each epoch ends with a batch of one, in which the second
# process has nothing; 30 steps (6 epochs), checkpoints every 3.
NO_DROPOUT = [
    "--training.dropout", "0.0", "--components.w2ner.model.input_dropout", "0.0",
    "--components.w2ner.model.conv_dropout", "0.0", "--components.w2ner.model.output_dropout", "0.0",
]  # fmt: skip
STEPS = ["--training.max_steps", "29", "--corpora.train.limit", "65", "--checkpoint-every", "3", *NO_DROPOUT]
ROW = re.compile(r"^\s*\d+\s+(\d+)\s+[\d.]+\s+[\d.]+\s", re.MULTILINE)  # a row of the training table: its step


def torchrun(*arguments: str) -> list:
    """``torchrun``, as users start it: the console script beside this interpreter (its module
    where an installation has none)."""
    script = Path(sys.executable).with_name("torchrun")
    return [str(script), *arguments] if script.exists() else [sys.executable, "-m", "torch.distributed.run", *arguments]


def distributed(command: list, *launcher: str) -> list:
    """``python -m spacy_w2ner train ...`` started by torchrun with ``launcher``'s arguments."""
    return torchrun(*launcher, *command[1:])


def max_difference(a: Path, b: Path) -> float:
    first, second = weights(a), weights(b)
    assert set(first) == set(second)
    return max(float(numpy.abs(first[name] - second[name]).max()) for name in first)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, corpus):
    output = tmp_path_factory.mktemp("one") / "run"
    assert run(train_command(output, corpus, *STEPS), output.with_suffix(".log")) == 0
    return output


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory, corpus):
    output = tmp_path_factory.mktemp("two") / "run"
    command = distributed(train_command(output, corpus, *STEPS), "--standalone", "--nproc-per-node", "2")
    assert run(command, output.with_suffix(".log")) == 0, output.with_suffix(".log").read_text()
    return output


def test_two_processes_train_what_one_process_trains_and_the_first_alone_logs_and_saves(one_process, two_processes):
    """The same config: model-last's weights equal within the all-reduce's float rounding (the
    processes' own weights are compared, bit for bit, at every checkpoint and at the end). The
    config is shrunk, and no maxout unit of its tok2vec switches pieces between the runs in these
    steps: the shares and the sums are checked to rounding here, the shipped recipe below."""
    assert max_difference(one_process / "model-last", two_processes / "model-last") <= 1e-4
    log, one_log = two_processes.with_suffix(".log").read_text(), one_process.with_suffix(".log").read_text()
    assert [int(step) for step in ROW.findall(log)] == [int(step) for step in ROW.findall(one_log)] == [0, 8, 16, 24, 29]
    written = re.findall(r"checkpoint (step-\d+) written", log)
    assert written == [f"step-{step:08d}" for step in range(3, 31, 3)]  # every 3 steps, each once
    assert log.count("Saved pipeline to output directory") == 1 and log.count("Initialized pipeline") == 1
    checkpoint = two_processes / "checkpoints" / "step-00000030"
    assert json.loads((checkpoint / "trainer.json").read_text())["world_size"] == 2
    assert sorted(path.name for path in checkpoint.glob("random*.json")) == ["random-0.json", "random-1.json"]
    record = json.loads((two_processes / "run.json").read_text())
    assert record["finished"] and record["steps"] == 30 and record["resumes"] == 0


def test_the_shipped_cnn_recipe_on_two_processes_as_users_start_it(tmp_path, corpus):
    """``torchrun --standalone --nproc-per-node 2 -m spacy_w2ner train`` against ``python -m
    spacy_w2ner train``: the CNN recipe as shipped, the sample corpus, every dropout 0, 30 steps.
    Not to rounding: the two sums round differently (1e-7), and once a maxout unit of tok2vec has
    two pieces closer than that on some token, the runs pick different pieces, send that token's
    gradient to other weights, and Adam, whose step is about the learning rate whatever the
    gradient's size, turns it into steps of the learning rate (docs/distributed.md: the first
    flips came at step 17, bench/data_parallel_divergence.py). So the grid network agrees within
    1e-4 and tok2vec within the sum of the run's learning rates, what Adam can move a weight."""
    def shipped(output: Path) -> list:
        return [sys.executable, "-m", "spacy_w2ner", "train", str(CONFIG), "--output", str(output), "--paths.train",
                str(corpus["train"]), "--paths.dev", str(corpus["dev"]), *NO_DROPOUT, "--training.max_steps", "29",
                "--training.logger.progress_bar", "false"]  # fmt: skip

    assert run(shipped(tmp_path / "one"), tmp_path / "one.log") == 0
    assert run(distributed(shipped(tmp_path / "two"), "--standalone", "--nproc-per-node", "2"), tmp_path / "two.log") == 0
    one, two = weights(tmp_path / "one" / "model-last"), weights(tmp_path / "two" / "model-last")
    differences = {name: float(numpy.abs(one[name] - two[name]).max()) for name in one}
    learning_rates = sum(0.001 * step / 200 for step in range(30))  # warmup_linear's, as the recipe sets it
    assert max(difference for name, difference in differences.items() if name.startswith("w2ner/")) <= 1e-4
    assert max(difference for name, difference in differences.items() if name.startswith("tok2vec/")) <= learning_rates


def test_one_process_under_torchrun_trains_bit_for_bit_what_plain_train_does(tmp_path, corpus, one_process):
    output = tmp_path / "run"
    command = distributed(train_command(output, corpus, *STEPS), "--standalone", "--nproc-per-node", "1")
    assert run(command, tmp_path / "log") == 0
    for model in ("model-last", "model-best"):
        assert differing(weights(one_process / model), weights(output / model)) == [], model


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_machines_meeting_on_one_address_train_what_two_local_processes_do(tmp_path, corpus, two_processes):
    """Two torchrun launchers, ``--nnodes 2`` with a c10d rendezvous on 127.0.0.1: the multi-node
    path (each node's torchrun, as SLURM's srun starts them)."""
    output, endpoint = tmp_path / "run", f"127.0.0.1:{_free_port()}"
    command = train_command(output, corpus, *STEPS)
    nodes = []
    for node in range(2):
        launcher = ["--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", endpoint, "--rdzv-id", "w2ner-test"]  # fmt: skip
        log = (tmp_path / f"node{node}.log").open("wb")
        nodes.append(subprocess.Popen(distributed(command, *launcher), stdout=log, stderr=subprocess.STDOUT, env=environment()))
    assert [node.wait(timeout=600) for node in nodes] == [0, 0], (tmp_path / "node0.log").read_text()
    for model in ("model-last", "model-best"):
        assert differing(weights(two_processes / model), weights(output / model)) == [], model


def _worker_of_rank(launcher_pid: int, rank: int) -> int:
    """The pid of torchrun's worker process of ``rank`` (read from its environment)."""
    children = Path(f"/proc/{launcher_pid}/task/{launcher_pid}/children").read_text().split()
    for pid in children:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if f"RANK={rank}".encode() in environ:
            return int(pid)
    raise AssertionError(f"no worker of rank {rank} among {children}")


def _wait_for_checkpoint(output: Path, process: subprocess.Popen, log: Path, newer_than: int = 0) -> None:
    def steps():
        return [int(path.name[5:]) for path in output.glob("checkpoints/step-*")]

    while not any(step > newer_than for step in steps()):
        assert process.poll() is None, log.read_text()
        time.sleep(0.05)


def test_a_process_killed_is_restarted_by_torchrun_and_the_run_ends_as_the_uninterrupted_one(tmp_path, corpus, two_processes):
    """SIGKILL to the second process after the checkpoint at step 6: torchrun (``--max-restarts
    1``) restarts the group, which resumes from the newest checkpoint by itself (no --resume)."""
    output, log = tmp_path / "run", tmp_path / "run.log"
    command = distributed(train_command(output, corpus, *STEPS), "--standalone", "--nproc-per-node", "2", "--max-restarts", "1")
    with log.open("ab") as file:
        launcher = subprocess.Popen(command, stdout=file, stderr=subprocess.STDOUT, env=environment())
        _wait_for_checkpoint(output, launcher, log, newer_than=3)
        os.kill(_worker_of_rank(launcher.pid, 1), signal.SIGKILL)
        assert launcher.wait(timeout=600) == 0, log.read_text()
    text = log.read_text()
    assert "restarted by the launcher after a failure: resuming from the newest checkpoint" in text
    assert text.count("Resuming from") == 1 and json.loads((output / "run.json").read_text())["resumes"] == 1
    for model in ("model-last", "model-best"):
        assert differing(weights(two_processes / model), weights(output / model)) == [], model


def test_a_resume_with_another_number_of_processes_is_refused_naming_both(tmp_path, corpus, two_processes):
    unfinished = tmp_path / "run"
    shutil.copytree(two_processes, unfinished)
    record = json.loads((unfinished / "run.json").read_text())
    (unfinished / "run.json").write_text(json.dumps(dict(record, finished=False)))
    result = cli("train", *train_command(unfinished, corpus, *STEPS, "--resume")[4:], code=1)
    newest = unfinished / "checkpoints" / "step-00000030"
    assert result.stderr.strip() == (
        f"error: {newest} was written by a run of 2 processes, this one has 1: resume it with 2 to end as the run "
        "would have, or with --force-resume to go on with 1 (the same batches and updates to float rounding; dropout "
        "draws other masks)"
    )


def test_sigterm_to_torchrun_stops_every_process_after_one_checkpoint(tmp_path, corpus, two_processes):
    output, log = tmp_path / "run", tmp_path / "run.log"
    command = distributed(train_command(output, corpus, *STEPS, "--resume"), "--standalone", "--nproc-per-node", "2")
    with log.open("ab") as file:
        launcher = subprocess.Popen(command, stdout=file, stderr=subprocess.STDOUT, env=environment())
        _wait_for_checkpoint(output, launcher, log)
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=300) != 0
    text = log.read_text()
    assert text.count("SIGTERM: stopping after this step") == 1 and text.count("continue with --resume") == 1
    newest = max(int(path.name[5:]) for path in output.glob("checkpoints/step-*"))
    assert f"checkpoint step-{newest:08d} written" in text and newest < 30
    assert run(command, log) == 0, log.read_text()
    assert differing(weights(two_processes / "model-last"), weights(output / "model-last")) == []


def test_ray_train_workers_train_what_torchrun_does_and_stop_and_resume_with_the_run(tmp_path, corpus, two_processes):
    """``--ray-workers 2`` on a local Ray: SIGTERM to the command stops its workers after a
    checkpoint; ``--resume`` ends with torchrun's weights, bit for bit."""
    pytest.importorskip("ray.train.torch")
    output, log = tmp_path / "run", tmp_path / "run.log"
    command = train_command(output, corpus, *STEPS, "--resume", "--ray-workers", "2")
    with log.open("ab") as file:
        driver = subprocess.Popen(command, stdout=file, stderr=subprocess.STDOUT, env=environment())
        _wait_for_checkpoint(output, driver, log)
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=600) == 128 + signal.SIGTERM, log.read_text()
    assert "the workers stop after this step, with a checkpoint" in log.read_text()
    assert max(int(path.name[5:]) for path in output.glob("checkpoints/step-*")) < 30
    assert run(command, log) == 0, log.read_text()
    for model in ("model-last", "model-best"):
        assert differing(weights(two_processes / model), weights(output / model)) == [], model
    assert json.loads((output / "run.json").read_text())["resumes"] == 1


@pytest.mark.skipif(not HAS_MINILM, reason="needs the bundled MiniLM encoder")
def test_two_processes_train_what_one_process_trains_with_a_transformer(tmp_path, corpus):
    """The MiniLM config: the encoder's fused optimizer step (spacy-transformers' HFShim) and the
    grid network's, gradients summed; every dropout 0, the encoder's too."""
    minilm = [
        "--training.max_steps", "29", "--training.eval_frequency", "10", "--corpora.train.limit", "48",
        "--corpora.dev.limit", "16", "--training.logger.progress_bar", "false", *NO_DROPOUT,
        "--components.transformer.model.transformer_config.hidden_dropout_prob", "0.0",
        "--components.transformer.model.transformer_config.attention_probs_dropout_prob", "0.0",
        "--components.transformer.model.training_dtype", "float32",  # the config's auto chooses by timing
    ]  # fmt: skip
    outputs = {}
    for name, launcher in (("one", None), ("two", ["--standalone", "--nproc-per-node", "2"])):
        output = outputs[name] = tmp_path / name
        command = [sys.executable, "-m", "spacy_w2ner", "train", str(ROOT / "project" / "configs" / "w2ner_minilm_cpu.cfg"),
                   "--output", str(output), "--paths.train", str(corpus["train"]), "--paths.dev", str(corpus["dev"]), *minilm]  # fmt: skip
        assert run(distributed(command, *launcher) if launcher else command, tmp_path / f"{name}.log") == 0
    assert max_difference(outputs["one"] / "model-last", outputs["two"] / "model-last") <= 1e-4
