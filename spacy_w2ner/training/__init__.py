"""Training that survives interruption: ``python -m spacy_w2ner train CONFIG --output DIR [--resume]``.

``spacy train`` cannot resume: it saves the weights, never the optimizer's state, the step, the
random states or the place in the data. This package adds those to spaCy's own training
functions, in one module per piece:

* ``loop``: spaCy's loop (``init_nlp``, ``create_train_batches``, ``train_while_improving``, the
  ``before_to_disk`` callback, the logger) with checkpoints and a clean stop on SIGINT/SIGTERM;
* ``stream``: the batches' place in the data, replayed exactly;
* ``replay``: ``train_while_improving`` run again over the steps before a checkpoint, without training;
* ``state``: the optimizer's state under names a new process understands;
* ``randomness``: the random generators' states, and their seeds in each process of a run;
* ``checkpoints``: what a checkpoint holds, written atomically, checked when read, the newest kept;
* ``run``: the output directory (``adapt`` uses it too): whose run it is, what changed, model-best and model-last;
* ``lock``: an output directory written by one process at a time;
* ``stop``: SIGINT, SIGTERM or the STOP file ask a run to stop after its step (``adapt`` uses it too);
* ``distributed``: data-parallel training, one process of several (torchrun, Ray Train).
"""
import contextlib
import os
import sys
from pathlib import Path
from typing import IO, Dict

from .checkpoints import CheckpointError
from .distributed import Cluster, DistributedError, check_world_size, restarted_by_launcher
from .loop import Outcome, info_line, train_resumable
from .replay import ReplayError
from .run import (
    RUN_FILE, RunDirectory, RunError, RunFinished, check_corpora_exist, check_settings, corpus_fingerprints, prepare_training,
    start_training,
)  # fmt: skip
from .state import StateError
from .stream import DataPositionError

# What stops a resume, said in one line.
RESUME_ERRORS = (RunError, CheckpointError, DataPositionError, ReplayError, StateError, DistributedError)


def train(
    config_path: Path, output: Path, *, overrides: Dict[str, object] = {}, use_gpu: int = -1, resume: bool = False,
    force_resume: bool = False, checkpoint_every: int = 0, keep: int = 2, stdout: IO = sys.stdout, stderr: IO = sys.stderr,
) -> Outcome:  # fmt: skip
    """``spacy train CONFIG --output OUTPUT`` with checkpoints, resumed from the newest good one
    with ``resume``; RunFinished when that run has finished, RunError (and the others of
    ``RESUME_ERRORS``) when it may not go on.

    Started by a launcher (torchrun, Ray Train), this process is one of a data-parallel run
    (``distributed.py``) training on GPU ``use_gpu``: the first process prepares the output
    directory and says what happens, the others print nothing; restarted by torchrun after a
    failure, the run resumes from its newest checkpoint."""
    from spacy import util
    from spacy.cli._util import show_validation_error

    if keep < 1:
        raise RunError(f"--keep must be at least 1, got {keep}")
    with show_validation_error(config_path):
        config = util.load_config(config_path, overrides=overrides, interpolate=False)
    cluster = Cluster.start(use_gpu)
    run = RunDirectory(output)
    try:
        with _quiet_unless(cluster.is_main, stdout, stderr) as (stdout, stderr):
            if restarted_by_launcher() and not resume:
                print(info_line("restarted by the launcher after a failure: resuming from the newest checkpoint"))
                resume = True
            checkpoint = cluster.on_main(lambda: _prepare(run, config, resume, force_resume, cluster.world_size))
            cluster.check_same_run_directory(run.path / RUN_FILE)
            nlp = _initialized(config_path, config, use_gpu)
            return train_resumable(
                nlp, run, checkpoint, use_gpu=use_gpu, checkpoint_every=checkpoint_every, keep=keep,
                force_resume=force_resume, stdout=stdout, stderr=stderr, cluster=cluster,
            )  # fmt: skip
    finally:
        run.release()
        cluster.close()


def _prepare(run: RunDirectory, config, resume: bool, force_resume: bool, world_size: int):
    """The run directory held, checked and started; the checkpoint to resume from (or None)."""
    say = lambda line: print(info_line(line))  # noqa: E731
    check_corpora_exist(config)
    check_settings(config)
    run.hold()
    corpora = corpus_fingerprints(config)
    checkpoint = prepare_training(run, config, corpora, resume or force_resume, force_resume, say)
    check_world_size(checkpoint, world_size, force_resume, say)
    start_training(run, config, corpora, checkpoint)
    return checkpoint


def _initialized(config_path: Path, config, use_gpu: int):
    """spaCy's ``init_nlp`` on the device, as ``spacy train`` says it."""
    from spacy.cli._util import setup_gpu, show_validation_error
    from spacy.training.initialize import init_nlp
    from wasabi import msg

    setup_gpu(use_gpu)
    msg.divider("Initializing pipeline")
    with show_validation_error(config_path, hint_fill=False):
        nlp = init_nlp(config, use_gpu=use_gpu)
    msg.good("Initialized pipeline")
    for name, pipe in nlp.pipeline:
        if getattr(pipe, "training_plan", None) is not None:
            msg.info(pipe.training_plan.describe(name))
    msg.divider("Training pipeline")
    return nlp


@contextlib.contextmanager
def _quiet_unless(speaks: bool, stdout: IO, stderr: IO):
    """``(stdout, stderr)``, or where this process does not speak (a data-parallel run's
    processes but the first) a null stream for both, and for ``sys.stdout``/``sys.stderr``."""
    if speaks:
        yield stdout, stderr
        return
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        yield null, null


__all__ = ["RESUME_ERRORS", "Outcome", "RunDirectory", "RunError", "RunFinished", "train", "train_resumable"]
