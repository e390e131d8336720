"""Training that survives interruption: ``python -m spacy_w2ner train CONFIG --output DIR [--resume]``.

``spacy train`` cannot resume: it saves the weights, never the optimizer's state, the step, the
random states or the place in the data. This package adds those to spaCy's own training
functions, in one module per piece:

* ``loop``: spaCy's loop (``init_nlp``, ``create_train_batches``, ``train_while_improving``, the
  ``before_to_disk`` callback, the logger) with checkpoints and a clean stop on SIGINT/SIGTERM;
* ``stream``: the batches' place in the data, replayed exactly;
* ``replay``: ``train_while_improving`` run again over the steps before a checkpoint, without training;
* ``state``: the optimizer's state under names a new process understands, the random states;
* ``checkpoints``: checkpoints written atomically, checked when read, the newest kept;
* ``run``: the output directory: whose run it is, what changed, model-best and model-last.
"""
import sys
from pathlib import Path
from typing import IO, Dict, Optional

from .checkpoints import CheckpointError
from .loop import Outcome, train_resumable
from .replay import ReplayError
from .run import RunDirectory, RunError, RunFinished
from .state import StateError
from .stream import DataPositionError

# What stops a resume, said in one line.
RESUME_ERRORS = (RunError, CheckpointError, DataPositionError, ReplayError, StateError)


def train(
    config_path: Path, output: Path, *, overrides: Dict[str, object] = {}, use_gpu: int = -1, resume: bool = False,
    force_resume: bool = False, checkpoint_every: int = 0, keep: int = 2, stdout: IO = sys.stdout, stderr: IO = sys.stderr,
) -> Outcome:  # fmt: skip
    """``spacy train CONFIG --output OUTPUT`` with checkpoints, resumed from the newest good one
    with ``resume``; RunFinished when that run has finished, RunError (and the others of
    ``RESUME_ERRORS``) when it may not go on."""
    from spacy import util
    from spacy.cli._util import setup_gpu, show_validation_error
    from spacy.training.initialize import init_nlp
    from wasabi import msg

    from .loop import info_line

    if keep < 1:
        raise RunError(f"--keep must be at least 1, got {keep}")
    with show_validation_error(config_path):
        config = util.load_config(config_path, overrides=overrides, interpolate=False)
    run = RunDirectory(output)
    checkpoint = run.prepare(config, resume or force_resume, force_resume, lambda line: print(info_line(line)))
    run.start(config, checkpoint)
    setup_gpu(use_gpu)
    msg.divider("Initializing pipeline")
    with show_validation_error(config_path, hint_fill=False):
        nlp = init_nlp(config, use_gpu=use_gpu)
    msg.good("Initialized pipeline")
    for name, pipe in nlp.pipeline:
        if getattr(pipe, "training_plan", None) is not None:
            msg.info(pipe.training_plan.describe(name))
    msg.divider("Training pipeline")
    return train_resumable(
        nlp, run, checkpoint, use_gpu=use_gpu, checkpoint_every=checkpoint_every, keep=keep,
        force_resume=force_resume, stdout=stdout, stderr=stderr,
    )  # fmt: skip


__all__ = ["RESUME_ERRORS", "Outcome", "RunDirectory", "RunError", "RunFinished", "train", "train_resumable"]
