"""The pieces of a resumable run, without training: the data's place, checkpoints on disk,
what changed between two configs."""
import random
import subprocess
import sys

import pytest
from thinc.api import Config

from spacy_w2ner.training.checkpoints import CheckpointError, Checkpoint, checkpoints, newest_good, verify, write_checkpoint
from spacy_w2ner.training.run import changed_settings
from spacy_w2ner.training.randomness import python_random_state, set_python_random_state
from spacy_w2ner.training.stream import Batches, DataPositionError

from .helpers import held_by_another_process


class Example:
    def __init__(self, text):
        self.reference = type("Doc", (), {"text": text})()


def shuffled_batches(corpus_size=10, batch_size=3, epochs=4):
    """create_train_batches' shape: the corpus shuffled in place each epoch, then batched."""
    examples = [Example(str(i)) for i in range(corpus_size)]
    for epoch in range(epochs):
        random.shuffle(examples)
        for start in range(0, len(examples), batch_size):
            yield epoch, examples[start : start + batch_size]


def texts(items):
    return [(epoch, [e.reference.text for e in batch]) for epoch, batch in items]


def train_on(batches, steps=None, stop_after=None):
    """Take batches as a training loop does, drawing random numbers between them; stop after
    ``stop_after`` batches returning (taken, position, Python's random state)."""
    taken = []
    for count, item in enumerate(batches, start=1):
        taken.append(item)
        random.random()  # the training's own draws
        if count == stop_after:
            return taken, batches.position, python_random_state()
    return taken, batches.position, None


@pytest.mark.parametrize("stop_after", [1, 3, 4, 7, 8, 15])
def test_replayed_batches_continue_as_the_run_that_never_stopped(stop_after):
    random.seed(7)
    expected, _, _ = train_on(Batches(shuffled_batches))
    random.seed(7)
    _, position, state = train_on(Batches(shuffled_batches), stop_after=stop_after)
    random.seed(12345)  # a new process
    resumed = Batches(shuffled_batches, position)
    items = []
    for item in resumed:
        items.append(item)
        if len(items) == stop_after:
            assert resumed.replaying
            set_python_random_state(state)  # what the loop does after the last replayed step
        elif len(items) > stop_after:
            assert not resumed.replaying
            random.random()
    assert texts(items) == texts(expected)


def test_a_corpus_that_no_longer_replays_to_the_checkpoint_is_refused():
    random.seed(7)
    _, position, _ = train_on(Batches(shuffled_batches), stop_after=5)
    with pytest.raises(DataPositionError, match="batch 5 differs from the one trained on"):
        list(Batches(lambda: shuffled_batches(corpus_size=11), position))
    with pytest.raises(DataPositionError, match="epoch 1 began after 2 batches, in epoch 0, which had 4"):
        list(Batches(lambda: shuffled_batches(corpus_size=5), position))
    with pytest.raises(DataPositionError, match="the data ended after 2 batches, in epoch 0, which had 4"):
        list(Batches(lambda: shuffled_batches(corpus_size=5, epochs=1), position))


def test_a_checkpoint_is_renamed_into_place_complete_and_the_newest_are_kept(tmp_path):
    def files(directory):
        (directory / "model").mkdir()
        (directory / "model" / "weights").write_bytes(b"w" * 10)
        (directory / "trainer.json").write_text("{}")

    for step in (3, 6, 9):
        write_checkpoint(tmp_path, step, files, keep=2)
    assert [c.step for c in checkpoints(tmp_path)] == [9, 6]
    verify(checkpoints(tmp_path)[0])

    def crash(directory):
        files(directory)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_checkpoint(tmp_path, 12, crash, keep=2)
    assert [c.step for c in checkpoints(tmp_path)] == [9, 6]


def test_a_damaged_checkpoint_is_skipped_for_the_one_before(tmp_path):
    for step in (3, 6):
        write_checkpoint(tmp_path, step, lambda d: (d / "optimizer.npz").write_bytes(b"state"), keep=2)
    newest = checkpoints(tmp_path)[0]
    (newest.path / "optimizer.npz").write_bytes(b"stat")
    lines = []
    assert newest_good(tmp_path, lines.append).step == 3
    assert lines == [f"checkpoint {newest.path} is incomplete or damaged (optimizer.npz differs from its manifest entry): skipped"]
    (newest.path / "MANIFEST.json").unlink()
    with pytest.raises(CheckpointError, match="no readable MANIFEST.json"):
        verify(Checkpoint(newest.path))


def test_changed_settings_names_each_setting_with_both_values():
    old = Config().from_str("[training]\ndropout = 0.1\nmax_steps = 100\n[paths]\ntrain = \"a.spacy\"\n")
    new = Config().from_str("[training]\ndropout = 0.1\nmax_steps = 200\npatience = 5\n[paths]\n")
    assert changed_settings(old, new) == [
        "paths.train: 'a.spacy' -> (none)",
        "training.max_steps: 100 -> 200",
        "training.patience: (none) -> 5",
    ]


def test_a_run_directory_held_by_a_process_is_refused_until_that_process_ends_however_it_ends(tmp_path):
    """A second run on a directory a training process holds is refused, naming that process; once
    the process is killed (SIGKILL: no cleanup of its own), the directory is free again."""
    import os
    import socket

    from spacy_w2ner.training.run import RunDirectory, RunError

    with held_by_another_process(tmp_path / "run") as holder:
        run = RunDirectory(tmp_path / "run")
        with pytest.raises(RunError) as refused:
            run.hold()
        assert str(refused.value) == (
            f"{tmp_path / 'run'} is in use by a run that is still training (process {holder} on {socket.gethostname()}): "
            f"wait for it to end, stop it (touch {tmp_path / 'run' / 'STOP'}), or choose another --output"
        )
    run.hold()  # free once its holder is gone
    assert (tmp_path / "run" / "lock").read_text() == f"process {os.getpid()} on {socket.gethostname()}\n"
    with pytest.raises(RunError, match="is in use by a run that is still training"):
        RunDirectory(tmp_path / "run").hold()  # held by this process now: another holder in it is refused too
    run.release()
    RunDirectory(tmp_path / "run").hold()


def test_a_directory_lock_leaves_no_trace_of_a_run_that_wrote_nothing(tmp_path):
    """Released with nothing else written (a run that failed as it started), the lock file goes,
    and the directory too where acquiring made it; a run's own files keep it (it names the
    last holder), unless the run's work is done (``remove``)."""
    from spacy_w2ner.training.lock import DirectoryLock

    made = DirectoryLock(tmp_path / "new" / "run")
    made.acquire()
    assert (tmp_path / "new" / "run" / "lock").is_file()
    made.release()
    assert not (tmp_path / "new" / "run").exists() and (tmp_path / "new").is_dir()
    (tmp_path / "given").mkdir()
    given = DirectoryLock(tmp_path / "given")
    given.acquire()
    given.release()
    assert (tmp_path / "given").is_dir() and list((tmp_path / "given").iterdir()) == []
    given.acquire()
    (tmp_path / "given" / "run.json").write_text("{}")
    given.release()
    assert sorted(path.name for path in (tmp_path / "given").iterdir()) == ["lock", "run.json"]
    given.acquire()
    given.release(remove=True)
    assert [path.name for path in (tmp_path / "given").iterdir()] == ["run.json"]
    DirectoryLock(tmp_path / "given").release()  # never acquired: nothing happens
    assert [path.name for path in (tmp_path / "given").iterdir()] == ["run.json"]


_LOCK_AFTER_A_PAUSE = """
import fcntl, sys, time
from pathlib import Path
from spacy_w2ner.training.lock import DirectoryInUse, DirectoryLock

opened, go = Path(sys.argv[2]), Path(sys.argv[3])
flock, paused = fcntl.flock, []


def flock_after_a_pause(handle, flags):
    if not paused:  # the file is open and not yet locked: the race's window, held open
        paused.append(True)
        opened.touch()
        while not go.exists():
            time.sleep(0.01)
    return flock(handle, flags)


fcntl.flock = flock_after_a_pause
try:
    DirectoryLock(sys.argv[1]).acquire()
    print("held")
except DirectoryInUse as busy:
    print("in use:", busy.holder)
"""


def test_a_lock_file_removed_by_its_holder_is_not_held_twice(tmp_path):
    """A process opens the lock file while a finished run still holds it, and locks it once that
    run has removed it and let go; meanwhile another process locked the new lock file: the first
    must not count the removed file's lock as the directory's (two writers)."""
    import os
    import socket
    import time

    from spacy_w2ner.training.lock import DirectoryLock

    run, opened, go = tmp_path / "run", tmp_path / "opened", tmp_path / "go"
    finished = DirectoryLock(run)
    finished.acquire()
    (run / "adapt.json").write_text("{}")
    waiting = subprocess.Popen([sys.executable, "-c", _LOCK_AFTER_A_PAUSE, str(run), str(opened), str(go)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 300
    while not opened.exists() and waiting.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert opened.exists(), waiting.communicate()[1]
    finished.release(remove=True)  # its work is done: the lock file goes
    later = DirectoryLock(run)
    later.acquire()  # a third run, here in this process, locks the new lock file
    go.touch()
    out, err = waiting.communicate(timeout=300)
    later.release()
    assert out.strip() == f"in use: process {os.getpid()} on {socket.gethostname()}", err
