"""The output directory of ``adapt-encoder`` (a ``run.RunDirectory`` of kind ``ADAPTATION``): whose
adaptation it is, its checkpoints while it runs, and, once it has finished, the adapted encoder.

``DIR/adapt.json`` records the command, the settings and the texts' SHA-256 (a resume with
other ones is refused, naming them), the steps, epochs and seconds, and every evaluation (the
mean training loss since the one before, the held-out loss): what results cite. While the run
goes, ``DIR/checkpoints/step-N/`` (``training.checkpoints``, whose names they are: written
atomically, checked against their manifest when read) hold the masked LM (``model/``), the
optimizer's and the schedule's state (``optimizer.pt``), the random generators (``random.json``)
and the loop's state (``trainer.json``). When it has finished, DIR holds the encoder
(``masked_lm.save_encoder``) and the checkpoints are removed. While a run goes, its process holds
DIR: a second run started there is refused, naming that process.
"""
import os
from pathlib import Path
from typing import Callable, List, Optional

from ...files import move_into_place, remove_tree
from ..checkpoints import Checkpoint, checkpoints
from ..run import RunDirectory, RunKind, changed
from .options import AdaptError, AdaptFinished

RECORD = "adapt.json"
ADAPTATION = RunKind(RECORD, "an adaptation that is still running", AdaptError)
# Checkpoints kept: the newest, and the one before in case the newest is damaged.
KEEP = 2


def adaptation_directory(path: Path) -> RunDirectory:
    return RunDirectory(path, ADAPTATION)


def prepare_adaptation(run: RunDirectory, identity: dict, resume: bool, say: Callable[[str], None]) -> Optional[Checkpoint]:
    """The checkpoint to resume from (None: start fresh); AdaptError when this run may not use
    the directory, AdaptFinished when its adaptation has finished. A directory whose
    adaptation may still run is held from here until ``release``; a finished one, or a
    folder that holds no adaptation, is left as it is."""
    record = run.record
    if record is None or not record.get("finished"):
        if run.holds_something_else():
            raise AdaptError(f"{run.path} is not empty and holds no adaptation ({RECORD}): choose another --output")
        run.hold()
        record = run.record
    if record is None:
        if resume:
            say(f"no adaptation in {run.path} to resume: starting fresh")
        return None
    if not record.get("finished") and not checkpoints(run.path):  # failed or killed as it started
        say(f"the adaptation in {run.path} stopped before its first checkpoint (nothing to resume): starting afresh")
        return None
    if not resume:
        progress = "finished" if record.get("finished") else f"at step {record.get('steps', 0)}"
        raise AdaptError(f"{run.path} holds an adaptation ({progress}): continue it with --resume, or choose another --output")
    changes = changed(record.get("identity", {}), identity)
    if changes:
        raise AdaptError(f"{run.path}'s adaptation was started with other settings: {'; '.join(changes)}")
    if record.get("finished"):
        raise AdaptFinished(f"{run.path}'s adaptation finished at step {record.get('steps')}: nothing to do")
    return run.newest_checkpoint(say)


def install_encoder(run: RunDirectory, write_encoder: Callable[[Path], None]) -> List[str]:
    """Write the encoder's files (``write_encoder`` fills a temporary folder) into DIR, each
    moved into place whole, readable as the umask allows (safetensors writes its files for
    their owner alone); return their names. A kill in between leaves the run unfinished:
    resumed, it writes them again from its final checkpoint."""
    temporary = run.path / ".encoder.tmp"
    remove_tree(temporary)
    write_encoder(temporary)
    names = sorted(path.name for path in temporary.iterdir())
    umask = os.umask(0)
    os.umask(umask)
    for name in names:
        if (run.path / name).is_dir():
            remove_tree(run.path / name)
        if (temporary / name).is_file():
            os.chmod(temporary / name, 0o666 & ~umask)
        move_into_place(temporary / name, run.path / name)
    remove_tree(temporary)
    return names

