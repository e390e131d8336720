"""A run's output directory, for ``train`` and ``adapt-encoder`` alike (``RunDirectory``): whose
run it is, one process writing it at a time, the request to stop, its checkpoints, and what is
saved in it replaced without ever being half-written; and what ``train`` checks of it first.

``DIR/run.json`` (``adapt.json`` for ``adapt-encoder``: a ``RunKind`` says which) records what the
run was started with, whether it finished, and how often it was resumed. While a run goes, the
process that writes its directory holds it (``hold``: ``lock.DirectoryLock``): a second run
started on the same directory (a resume while the run still goes, a job requeued while the old
one drains) is refused, naming the process that holds it, instead of both writing its
checkpoints. ``DIR/STOP`` appearing asks the run to stop after its step, with a checkpoint
(``stop.StopRequests`` polls it). The checkpoints are ``checkpoints.py``'s.

Before anything is loaded, ``prepare_training`` refuses an output directory that holds another
run, or a resume with another config or corpus (naming what changed; the config as given, with
its overrides, interpolated, and a fingerprint of the training and dev corpora), and picks the
newest good checkpoint, saying in one line what it does.
"""
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from thinc.api import Config

from ..files import remove_tree, restore_replaced, sha256_file, write_atomically, write_directory
from .checkpoints import CHECKPOINTS, Checkpoint, checkpoints, newest_good, remove_stale, write_checkpoint
from .lock import LOCK_FILE, DirectoryInUse, DirectoryLock

RUN_FILE = "run.json"
STOP_FILE = "STOP"  # its appearance stops the run after the current step, with a checkpoint
RAY_STORAGE = "ray"  # Ray Train's storage (train --ray-workers), which it fills before the run's record
MODEL_BEST = "model-best"
MODEL_LAST = "model-last"


class RunError(ValueError):
    """The output directory cannot take this run (the message says why and what to do)."""


class RunFinished(Exception):
    """The run to resume has finished, with these settings: nothing to do."""


@dataclass(frozen=True)
class RunKind:
    """What tells the runs apart that write such a directory: their record's name, how an error
    names a run of theirs that still goes, and the error they raise."""

    record_file: str
    running: str
    error: type = RunError


TRAINING = RunKind(RUN_FILE, "a run that is still training")


class RunDirectory:
    def __init__(self, path: Path, kind: RunKind = TRAINING):
        self.path = Path(path)
        self.kind = kind
        self.settings_at_resume: Optional[dict] = None  # train's, recorded once it has replayed (``count_resume``)
        self._lock = DirectoryLock(self.path)

    @property
    def stop_file(self) -> Path:
        return self.path / STOP_FILE

    def request_stop(self) -> None:
        """Ask the run to stop after its current step, with a checkpoint (every process of it)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.stop_file.touch()

    def hold(self) -> None:
        """Hold the directory for this process's run until ``release`` or the process's end
        (``lock.DirectoryLock``); the kind's error naming the process that holds it. A stop request
        left by the run before (the one that stopped it) is removed."""
        if self.path.exists() and not self.path.is_dir():
            raise self.kind.error(f"{self.path} is a file: --output takes a directory")
        try:
            self._lock.acquire()
        except DirectoryInUse as busy:
            raise self.kind.error(
                f"{self.path} is in use by {self.kind.running} ({busy.holder}): wait for it to end, stop it "
                f"(touch {self.stop_file}), or choose another --output"
            ) from None
        if self.stop_file.exists():
            self.stop_file.unlink()

    def release(self) -> None:
        """Let the directory go; the lock file goes too once the run has finished, or where no run
        started (refused: the directory is left as it was found)."""
        record = self.record
        self._lock.release(remove=record is None or bool(record.get("finished")))

    def holds_something_else(self) -> bool:
        """Whether the directory holds files but no run's record (beside what a run makes before its
        record: its lock, a stop request, Ray Train's storage)."""
        made_before_the_record = {LOCK_FILE, STOP_FILE, RAY_STORAGE}
        return self.record is None and self.path.is_dir() and any(p.name not in made_before_the_record for p in self.path.iterdir())

    @property
    def record(self) -> Optional[dict]:
        file = self.path / self.kind.record_file
        return json.loads(file.read_text(encoding="utf8")) if file.exists() else None

    def write_record(self, record: dict) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path / self.kind.record_file, json.dumps(record, indent=1, ensure_ascii=False) + "\n")

    def count_resume(self) -> None:
        """One more resume, counted when the run has replayed to its checkpoint (a process killed or
        failing before that did not resume), with the settings it goes on with (``start_training``)."""
        record = self.record or {}
        record.update(self.settings_at_resume or {})
        record["resumes"] = record.get("resumes", 0) + 1
        self.write_record(record)

    def finish(self, **facts) -> None:
        """The run ended: recorded, with the settings it went on with (a forced resume whose new
        ``max_steps`` ended it while it replayed never reached ``count_resume``)."""
        record = self.record or {}
        record.update(self.settings_at_resume or {})
        record.update(finished=True, **facts)
        self.write_record(record)

    def newest_checkpoint(self, say: Callable[[str], None]) -> Optional[Checkpoint]:
        """The newest good checkpoint to resume from (None, said: start fresh), after removing
        what a killed run left half-written."""
        remove_stale(self.path)
        checkpoint = newest_good(self.path, say)
        if checkpoint is None:
            say(f"no checkpoint in {self.path}: starting fresh")
        return checkpoint

    def write_checkpoint(self, step: int, write_files: Callable[[Path], None], keep: int) -> Checkpoint:
        return write_checkpoint(self.path, step, write_files, keep)

    def remove_checkpoints(self) -> None:
        remove_tree(self.path / CHECKPOINTS)

    def save_model(self, write: Callable[[Path], None], is_best: bool) -> None:
        """spaCy's model-last (and model-best, a copy of it, when ``is_best``), each written
        under a temporary name and moved into place."""
        write_directory(self.path / MODEL_LAST, write)
        if is_best:
            write_directory(self.path / MODEL_BEST, lambda directory: shutil.copytree(self.path / MODEL_LAST, directory))


# ---------------------------------------------------------------- train's checks


def prepare_training(
    run: RunDirectory, config: Config, corpora: Dict[str, str], resume: bool, force_resume: bool, say: Callable[[str], None]
) -> Optional[Checkpoint]:
    """Check that this run, of ``config`` on ``corpora`` (``corpus_fingerprints``), may use the
    directory; the checkpoint to resume from (None: start fresh). RunError when it may not."""
    for name in (MODEL_BEST, MODEL_LAST):
        restore_replaced(run.path / name)
    remove_stale(run.path)
    record = run.record
    if record is None:
        return _fresh_directory(run, resume, say)
    if _ended_before_its_first_checkpoint(run, record):
        say(f"the run in {run.path} stopped before its first checkpoint (nothing to resume): starting afresh")
        return None
    if not resume:
        raise RunError(f"{run.path} holds a run ({_progress(record)}): continue it with --resume, or choose another --output")
    changes = changed_settings(Config().from_str(record["config"]), config) + changed_corpora(record["corpora"], corpora)
    if changes and not force_resume:
        raise RunError(f"{run.path}'s run was started with other settings: {'; '.join(changes)} (--force-resume continues anyway)")
    if record.get("finished") and not changes:
        raise RunFinished(f"{run.path}'s run finished at step {record.get('steps')}: nothing to do")
    if changes:
        say(f"resuming although the settings changed (--force-resume): {'; '.join(changes)}")
    return run.newest_checkpoint(say)


def start_training(run: RunDirectory, config: Config, corpora: Dict[str, str], checkpoint: Optional[Checkpoint]) -> None:
    """The run's settings: a fresh run's recorded now; a resumed run's (those a forced resume goes on
    with) kept on ``run``, recorded by ``count_resume`` once it has replayed to its checkpoint, so that
    a forced resume that cannot get there (another corpus or batch size) leaves the record to the
    checkpoints' settings, which a plain ``--resume`` then continues."""
    settings = {"config": config.to_str(), "corpora": corpora, "finished": False}
    if checkpoint is None:
        run.write_record({"resumes": 0, **settings})
    else:
        run.settings_at_resume = settings


def _ended_before_its_first_checkpoint(run: RunDirectory, record: dict) -> bool:
    """Whether the directory's run ended before it wrote anything worth keeping: no checkpoint,
    no model (a corpus path mistyped, a setting the memory check refused, a kill while the
    pipeline initialized). A run still going holds the directory (``hold``, where the file system
    has locks), so it never gets here."""
    saved = [name for name in (MODEL_BEST, MODEL_LAST) if (run.path / name).exists()]
    return not record.get("finished") and not saved and not checkpoints(run.path)


def _fresh_directory(run: RunDirectory, resume: bool, say: Callable[[str], None]) -> None:
    spacy_outputs = [name for name in (MODEL_BEST, MODEL_LAST) if (run.path / name).exists()]
    if spacy_outputs:
        raise RunError(
            f"{run.path} holds {' and '.join(spacy_outputs)} from a run without checkpoints "
            "(spacy train's?): choose another --output, or move them away"
        )
    if run.holds_something_else():  # an adaptation's checkpoints would be replaced, its others removed
        raise RunError(f"{run.path} is not empty and holds no run ({RUN_FILE}): choose another --output")
    if resume:
        say(f"no run in {run.path} to resume: starting fresh")


def _progress(record: dict) -> str:
    return "finished" if record.get("finished") else f"resumed {record.get('resumes', 0)} times so far"


# ---------------------------------------------------------------- what changed


def _flat(section, prefix: str = "") -> Dict[str, object]:
    flat: Dict[str, object] = {}
    for key, value in section.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flat(value, name + "."))
        else:
            flat[name] = value
    return flat


def changed_settings(old: Config, new: Config) -> List[str]:
    """``section.key: old -> new`` for every setting that differs (added and removed ones too)."""
    return changed(_flat(old.interpolate()), _flat(new.interpolate()))


def changed(old: dict, new: dict) -> List[str]:
    """``key: old -> new`` for each setting that differs (or that only one side has: ``(none)``)."""

    def shown(settings: dict, key: str) -> str:
        return repr(settings[key]) if key in settings else "(none)"

    keys = sorted(set(old) | set(new))
    return [f"{key}: {shown(old, key)} -> {shown(new, key)}" for key in keys if shown(old, key) != shown(new, key)]


def corpus_fingerprints(config: Config) -> Dict[str, str]:
    """The SHA-256 of every file the training and dev corpora read (the paths in their config
    blocks; a directory's files each), by path."""
    fingerprints: Dict[str, str] = {}
    for _, block in _corpus_blocks(config):
        for value in _flat(block).values():
            if isinstance(value, str) and value and Path(value).exists():
                for path in _corpus_files(Path(value)):
                    fingerprints[str(path)] = sha256_file(path)
    return fingerprints


def check_settings(config: Config) -> None:
    """RunError for a [training] setting spaCy's loop fails on with a traceback (after loading the
    pipeline): ``eval_frequency`` below 1 (a ZeroDivisionError at the first step)."""
    frequency = config.interpolate()["training"].get("eval_frequency")
    if isinstance(frequency, int) and frequency < 1:
        raise RunError(f"[training] eval_frequency must be at least 1 (steps between evaluations), got {frequency}")


def check_corpora_exist(config: Config) -> None:
    """RunError naming each corpus whose ``path`` (its config block's) does not exist, before a run
    starts: spaCy would fail minutes later, loading the pipeline, with a traceback."""
    blocks = _corpus_blocks(config)
    unset = [f"[{dot_name}] path" for dot_name, block in blocks if "path" in block and not block["path"]]
    if unset:
        raise RunError(f"corpus not set: {'; '.join(unset)} (null): give the path (--paths.train, --paths.dev)")
    missing = [
        f"{block['path']} ([{dot_name}] path)"
        for dot_name, block in blocks
        if isinstance(block.get("path"), str) and not Path(block["path"]).exists()
    ]
    if missing:
        raise RunError(f"corpus not found: {'; '.join(missing)}")


def _corpus_blocks(config: Config) -> List[Tuple[str, dict]]:
    """The training and dev corpora's config blocks (interpolated), by their dotted names."""
    resolved = config.interpolate()
    blocks = []
    for dot_name in dict.fromkeys((resolved["training"]["train_corpus"], resolved["training"]["dev_corpus"])):
        block = resolved
        for part in dot_name.split("."):
            block = block.get(part, {}) if isinstance(block, dict) else {}
        if isinstance(block, dict):
            blocks.append((dot_name, block))
    return blocks


def changed_corpora(recorded: Dict[str, str], now: Dict[str, str]) -> List[str]:
    changes = [f"{path} changed since the run began" for path in sorted(recorded) if path in now and now[path] != recorded[path]]
    changes += [f"{path} is no longer read" for path in sorted(set(recorded) - set(now))]
    return changes + [f"{path} is read now" for path in sorted(set(now) - set(recorded))]


def _corpus_files(path: Path) -> List[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
