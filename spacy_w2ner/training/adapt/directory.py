"""The output directory of ``adapt-encoder``: whose adaptation it is, its checkpoints while it
runs, and, once it has finished, the adapted encoder itself.

``DIR/adapt.json`` records the command, the settings and the texts' SHA-256 (a resume with
other ones is refused, naming them), the steps, epochs and seconds, and every evaluation (the
mean training loss since the one before, the held-out loss): what results cite. While the run
goes, ``DIR/checkpoints/step-N/`` (``training.checkpoints``: written atomically, checked
against their manifest when read) hold the masked LM (``model/``), the optimizer's and the
schedule's state (``optimizer.pt``), the random generators (``random.json``) and the loop's
state (``trainer.json``). When it has finished, DIR holds the encoder (``masked_lm.save_encoder``)
and the checkpoints are removed. While a run goes, its process holds DIR (``training.lock``): a
second run started there is refused, naming that process.
"""
import json
import os
from pathlib import Path
from typing import Callable, List, Optional

from ...files import move_into_place, remove_tree, write_atomically
from ..checkpoints import CHECKPOINTS, Checkpoint, newest_good, remove_stale, write_checkpoint
from ..lock import LOCK_FILE, DirectoryInUse, DirectoryLock
from .options import AdaptError, AdaptFinished

RECORD = "adapt.json"
# Checkpoints kept: the newest, and the one before in case the newest is damaged.
KEEP = 2


class AdaptDirectory:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = DirectoryLock(self.path)

    @property
    def record(self) -> Optional[dict]:
        file = self.path / RECORD
        return json.loads(file.read_text(encoding="utf8")) if file.is_file() else None

    def prepare(self, identity: dict, resume: bool, say: Callable[[str], None]) -> Optional[Checkpoint]:
        """The checkpoint to resume from (None: start fresh); AdaptError when this run may not use
        the directory, AdaptFinished when its adaptation has finished. A directory whose
        adaptation may still run is held from here until ``release``; a finished one, or a
        folder that holds no adaptation, is left as it is."""
        record = self.record
        if record is None or not record.get("finished"):
            if record is None and self.path.is_dir() and any(p.name != LOCK_FILE for p in self.path.iterdir()):
                raise AdaptError(f"{self.path} is not empty and holds no adaptation ({RECORD}): choose another --output")
            self._hold()
            record = self.record
        if record is None:
            if resume:
                say(f"no adaptation in {self.path} to resume: starting fresh")
            return None
        if not resume:
            progress = "finished" if record.get("finished") else f"at step {record.get('steps', 0)}"
            raise AdaptError(f"{self.path} holds an adaptation ({progress}): continue it with --resume, or choose another --output")
        changes = changed(record.get("identity", {}), identity)
        if changes:
            raise AdaptError(f"{self.path}'s adaptation was started with other settings: {'; '.join(changes)}")
        if record.get("finished"):
            raise AdaptFinished(f"{self.path}'s adaptation finished at step {record.get('steps')}: nothing to do")
        remove_stale(self.path)
        checkpoint = newest_good(self.path, say)
        if checkpoint is None:
            say(f"no checkpoint in {self.path}: starting fresh")
        return checkpoint

    def _hold(self) -> None:
        try:
            self._lock.acquire()
        except DirectoryInUse as busy:
            raise AdaptError(
                f"{self.path} is in use by an adaptation that is still running ({busy.holder}): wait for it to end, "
                "stop it (Ctrl-C or SIGTERM: it stops after its step, with a checkpoint), or choose another --output"
            ) from None

    def release(self) -> None:
        """Let the directory go; the lock file goes too once the adaptation has finished (DIR is
        then the encoder's folder)."""
        self._lock.release(remove=bool((self.record or {}).get("finished")))

    def write_record(self, record: dict) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path / RECORD, json.dumps(record, indent=1, ensure_ascii=False) + "\n")

    def write_checkpoint(self, step: int, write_files: Callable[[Path], None]) -> Checkpoint:
        return write_checkpoint(self.path, step, write_files, KEEP)

    def install(self, write_encoder: Callable[[Path], None]) -> List[str]:
        """Write the encoder's files (``write_encoder`` fills a temporary folder) into DIR, each
        moved into place whole, readable as the umask allows (safetensors writes its files for
        their owner alone); return their names. A kill in between leaves the run unfinished:
        resumed, it writes them again from its final checkpoint."""
        temporary = self.path / ".encoder.tmp"
        remove_tree(temporary)
        write_encoder(temporary)
        names = sorted(path.name for path in temporary.iterdir())
        umask = os.umask(0)
        os.umask(umask)
        for name in names:
            if (self.path / name).is_dir():
                remove_tree(self.path / name)
            if (temporary / name).is_file():
                os.chmod(temporary / name, 0o666 & ~umask)
            move_into_place(temporary / name, self.path / name)
        remove_tree(temporary)
        return names

    def remove_checkpoints(self) -> None:
        remove_tree(self.path / CHECKPOINTS)


def changed(old: dict, new: dict) -> List[str]:
    """``key: old -> new`` for each setting that differs (or that only one side has)."""
    missing = "(none)"
    keys = sorted(set(old) | set(new))
    return [f"{key}: {old.get(key, missing)!r} -> {new.get(key, missing)!r}" for key in keys if old.get(key, missing) != new.get(key, missing)]
