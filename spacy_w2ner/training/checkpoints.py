"""A run's checkpoints: what one holds, written atomically, checked when read, the newest
``keep`` kept.

``DIR/checkpoints/step-00000334/`` holds one file per kind of state (as Hugging Face's Trainer
does), named below and nowhere else; a checkpoint is written under a temporary name and renamed
into place once complete, so a kill leaves either the whole checkpoint or none; a checkpoint
whose files do not match its manifest (a disk that filled, a file changed since) is skipped when
reading, and the one before it is used.
"""
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import torch

from ..files import describe_file, remove_tree, replace_directory, write_synced

CHECKPOINTS = "checkpoints"
PREFIX = "step-"

# What a checkpoint holds: ``train``'s and ``adapt-encoder``'s.
MODEL = "model"  # nlp.to_disk(): the weights as trained, not their averages; adapt: the masked LM (save_pretrained)
OPTIMIZER_ARRAYS = "optimizer.npz"  # the optimizer's moments and averages (state.py)
OPTIMIZER_STATE = "optimizer.json"  # its update counts, hyperparameters and the arrays' names
TORCH_OPTIMIZER = "optimizer.pt"  # adapt: the torch optimizer's and the schedule's state_dict (torch.save)
TRAINER = "trainer.json"  # the step, the place in the data, the evaluations and losses so far, the processes
CONFIG = "config.cfg"  # the resolved config
MANIFEST = "MANIFEST.json"  # written last: every other file's size and SHA-256


def random_states_file(rank: int, world_size: int) -> str:
    """The random generators' states of process ``rank`` (``randomness.py``): ``random.json`` in
    a run of one process, ``random-{rank}.json`` for each of a data-parallel run's processes."""
    return "random.json" if world_size == 1 else f"random-{rank}.json"


class CheckpointError(ValueError):
    """A checkpoint is incomplete or damaged."""


@dataclass(frozen=True)
class Checkpoint:
    path: Path

    @property
    def step(self) -> int:
        return int(self.path.name[len(PREFIX):])

    @property
    def model(self) -> Path:
        return self.path / MODEL

    def read_json(self, name: str) -> dict:
        return json.loads((self.path / name).read_text(encoding="utf8"))

    def threads_differ(self) -> Optional[str]:
        """A line where this process has other torch threads than the one that wrote the
        checkpoint (a sum over threads rounds otherwise), else None."""
        threads = self.read_json(TRAINER).get("threads")
        if threads is None or threads == torch.get_num_threads():
            return None
        return (f"this process uses {torch.get_num_threads()} threads, the checkpoint's {threads}: "
                "the results can differ in the last bits from a run that was never stopped")  # fmt: skip

    @property
    def world_size(self) -> int:
        """How many processes trained the run (1 where the checkpoint does not say)."""
        return self.read_json(TRAINER).get("world_size", 1)

    def random_states(self, rank: int) -> dict:
        """Process ``rank``'s random states; where the checkpoint has none for it (a resume with
        more processes, forced) the first process's."""
        own = self.path / random_states_file(rank, self.world_size)
        return self.read_json(own.name if own.exists() else random_states_file(0, self.world_size))


def write_json(path: Path, data) -> None:
    """Python's json, whose floats read back exactly (the losses, the scores)."""
    path.write_text(json.dumps(data), encoding="utf8")


def checkpoint_name(step: int) -> str:
    return f"{PREFIX}{step:08d}"


def write_checkpoint(run_dir: Path, step: int, write_files: Callable[[Path], None], keep: int) -> Checkpoint:
    """Write a checkpoint for ``step`` (the steps done): ``write_files(directory)`` fills a
    temporary directory, which gets its manifest and is renamed into place; then only the newest
    ``keep`` checkpoints are kept."""
    root = run_dir / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(step)
    temporary = root / f".{final.name}.tmp-{os.getpid()}"
    remove_tree(temporary)
    temporary.mkdir()
    write_files(temporary)
    manifest = {str(path.relative_to(temporary)): describe_file(path, sync=True) for path in _files(temporary)}
    write_synced(temporary / MANIFEST, json.dumps({"files": manifest}, indent=1).encode("utf8"))
    replace_directory(temporary, final)
    for old in checkpoints(run_dir)[keep:]:
        remove_tree(old.path)
    return Checkpoint(final)


def checkpoints(run_dir: Path) -> List[Checkpoint]:
    """The run's checkpoints, newest first (complete or not: see ``newest_good``)."""
    root = run_dir / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [Checkpoint(path) for path in root.iterdir() if path.is_dir() and path.name.startswith(PREFIX) and path.name[len(PREFIX):].isdigit()]
    return sorted(found, key=lambda checkpoint: checkpoint.step, reverse=True)


def newest_good(run_dir: Path, say: Callable[[str], None]) -> Optional[Checkpoint]:
    """The newest checkpoint whose files match its manifest; each one skipped is said in a line."""
    for checkpoint in checkpoints(run_dir):
        try:
            verify(checkpoint)
        except CheckpointError as err:
            say(f"checkpoint {checkpoint.path} is incomplete or damaged ({err}): skipped")
            continue
        return checkpoint
    return None


def verify(checkpoint: Checkpoint) -> None:
    """CheckpointError naming the first file that is missing or differs from the manifest."""
    try:
        manifest = json.loads((checkpoint.path / MANIFEST).read_text(encoding="utf8"))["files"]
    except (OSError, ValueError, KeyError) as err:
        raise CheckpointError(f"no readable {MANIFEST}: {err}") from None
    for name, expected in manifest.items():
        path = checkpoint.path / name
        if not path.is_file():
            raise CheckpointError(f"{name} is missing")
        if describe_file(path) != expected:
            raise CheckpointError(f"{name} differs from its manifest entry")


def remove_stale(run_dir: Path) -> None:
    """Remove temporary directories that a killed run left."""
    root = run_dir / CHECKPOINTS
    for path in root.iterdir() if root.is_dir() else ():
        if path.name.startswith("."):
            remove_tree(path)


def _files(directory: Path) -> Iterator[Path]:
    return (path for path in sorted(directory.rglob("*")) if path.is_file())
