"""A run's checkpoints: written atomically, checked when read, the newest ``keep`` kept.

``DIR/checkpoints/step-00000334/`` holds, one file per kind of state (as Hugging Face's
Trainer does): ``model/`` (``nlp.to_disk``, the weights as trained, not their averages),
``optimizer.npz`` and ``optimizer.json`` (``state.py``), ``random.json`` (the generators),
``trainer.json`` (the step, the place in the data, the evaluations so far, the losses since
the last one, words, seconds), ``config.cfg`` (the resolved config) and, written last,
``MANIFEST.json`` with every other file's size and SHA-256. A checkpoint is written under a
temporary name and renamed into place once complete, so a kill leaves either the whole
checkpoint or none; a checkpoint whose files do not match its manifest (a disk that filled, a
file changed since) is skipped when reading, and the one before it is used.
"""
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional

CHECKPOINTS = "checkpoints"
MANIFEST = "MANIFEST.json"
PREFIX = "step-"


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
        return self.path / "model"

    def read_json(self, name: str) -> dict:
        return json.loads((self.path / name).read_text(encoding="utf8"))


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
    manifest = {str(path.relative_to(temporary)): _describe(path, sync=True) for path in _files(temporary)}
    _write_synced(temporary / MANIFEST, json.dumps({"files": manifest}, indent=1).encode("utf8"))
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
        if _describe(path) != expected:
            raise CheckpointError(f"{name} differs from its manifest entry")


def remove_stale(run_dir: Path) -> None:
    """Remove temporary directories that a killed run left."""
    root = run_dir / CHECKPOINTS
    for path in root.iterdir() if root.is_dir() else ():
        if path.name.startswith("."):
            remove_tree(path)


# ---------------------------------------------------------------- files and directories


def replace_directory(source: Path, target: Path) -> None:
    """Move the complete directory ``source`` to ``target``, replacing what is there: the old
    one is first renamed aside (``restore_replaced`` undoes a kill between the two renames)."""
    aside = target.with_name(f".{target.name}.old")
    remove_tree(aside)
    if target.exists():
        os.rename(target, aside)
    os.rename(source, target)
    _sync_directory(target.parent)
    remove_tree(aside)


def restore_replaced(target: Path) -> None:
    """After a kill inside ``replace_directory``: put the old directory back if the new one is
    not in place, else remove it."""
    aside = target.with_name(f".{target.name}.old")
    if aside.exists():
        if target.exists():
            remove_tree(aside)
        else:
            os.rename(aside, target)


def remove_tree(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def _files(directory: Path) -> Iterator[Path]:
    return (path for path in sorted(directory.rglob("*")) if path.is_file())


def _describe(path: Path, sync: bool = False) -> Dict[str, object]:
    """A file's size and SHA-256 (with ``sync``, after making sure its bytes are on disk)."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 22), b""):
            digest.update(block)
        if sync:
            os.fsync(file.fileno())
    return {"size": path.stat().st_size, "sha256": digest.hexdigest()}


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
