"""A run's output directory: whose run it is, whether it may continue, and spaCy's model-best and
model-last replaced without ever being half-written.

``DIR/run.json`` says what the run was started with (the config as given, with its overrides,
interpolated; a fingerprint of the training and dev corpora), whether it finished, and how often
it was resumed. Before anything is loaded, ``prepare`` refuses an output directory that holds
another run, or a resume with another config or corpus (naming what changed), and picks the
newest good checkpoint, saying in one line what it does. While a run trains, the process that
writes its directory holds it (``hold``): a second run started on the same directory (a resume
while the run still trains, a job requeued while the old one drains) is refused, naming the
process that holds it, instead of both writing its checkpoints.
"""
import json
import shutil
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from thinc.api import Config

from ..files import restore_replaced, sha256_file, write_atomically, write_directory
from .checkpoints import Checkpoint, checkpoints, newest_good, remove_stale
from .lock import DirectoryInUse, DirectoryLock

RUN_FILE = "run.json"
STOP_FILE = "STOP"  # its appearance stops the run after the current step, with a checkpoint
MODEL_BEST = "model-best"
MODEL_LAST = "model-last"


class RunError(ValueError):
    """The output directory cannot take this run (the message says why and what to do)."""


class RunFinished(Exception):
    """The run to resume has finished, with these settings: nothing to do."""


class RunDirectory:
    def __init__(self, path: Path):
        self.path = Path(path)
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
        (``lock.DirectoryLock``); RunError naming the process that holds it."""
        try:
            self._lock.acquire()
        except DirectoryInUse as busy:
            raise RunError(
                f"{self.path} is in use by a run that is still training ({busy.holder}): wait for it to end, stop it "
                f"(touch {self.stop_file}), or choose another --output"
            ) from None

    def release(self) -> None:
        self._lock.release()

    @property
    def record(self) -> Optional[dict]:
        file = self.path / RUN_FILE
        return json.loads(file.read_text(encoding="utf8")) if file.exists() else None

    def prepare(self, config: Config, resume: bool, force_resume: bool, say: Callable[[str], None]) -> Optional[Checkpoint]:
        """Check that this run may use the directory; the checkpoint to resume from (None: start
        fresh). RunError when it may not."""
        for name in (MODEL_BEST, MODEL_LAST):
            restore_replaced(self.path / name)
        remove_stale(self.path)
        if self.stop_file.exists():  # the request that stopped the run before
            self.stop_file.unlink()
        record = self.record
        if record is None:
            return self._fresh_directory(resume, say)
        if self._ended_before_its_first_checkpoint(record):
            say(f"the run in {self.path} stopped before its first checkpoint (nothing to resume): starting afresh")
            return None
        if not resume:
            raise RunError(
                f"{self.path} holds a run ({_progress(record)}): continue it with --resume, or choose another --output"
            )
        changes = changed_settings(Config().from_str(record["config"]), config) + changed_corpora(record["corpora"], self._fingerprints(config))
        if changes and not force_resume:
            raise RunError(f"{self.path}'s run was started with other settings: {'; '.join(changes)} (--force-resume continues anyway)")
        if record.get("finished") and not changes:
            raise RunFinished(f"{self.path}'s run finished at step {record.get('steps')}: nothing to do")
        if changes:
            say(f"resuming although the settings changed (--force-resume): {'; '.join(changes)}")
        checkpoint = newest_good(self.path, say)
        if checkpoint is None:
            say(f"no checkpoint in {self.path}: starting fresh")
        return checkpoint

    def _ended_before_its_first_checkpoint(self, record: dict) -> bool:
        """Whether the directory's run ended before it wrote anything worth keeping: no checkpoint,
        no model (a corpus path mistyped, a setting the memory check refused, a kill while the
        pipeline initialized). A run still going holds the directory (``hold``, where the file system
        has locks), so it never gets here."""
        saved = [name for name in (MODEL_BEST, MODEL_LAST) if (self.path / name).exists()]
        return not record.get("finished") and not saved and not checkpoints(self.path)

    def _fresh_directory(self, resume: bool, say: Callable[[str], None]) -> None:
        spacy_outputs = [name for name in (MODEL_BEST, MODEL_LAST) if (self.path / name).exists()]
        if spacy_outputs:
            raise RunError(
                f"{self.path} holds {' and '.join(spacy_outputs)} from a run without checkpoints "
                "(spacy train's?): choose another --output, or move them away"
            )
        if resume:
            say(f"no run in {self.path} to resume: starting fresh")

    def start(self, config: Config, checkpoint: Optional[Checkpoint]) -> None:
        """Record the run's settings (a fresh run's, or those a forced resume goes on with)."""
        record = (self.record if checkpoint is not None else None) or {"resumes": 0}
        record.update(config=config.to_str(), corpora=self._fingerprints(config), finished=False)
        self.write_record(record)

    def count_resume(self) -> None:
        """One more resume, counted when the run says it resumes (a process killed before that,
        while loading, did not resume)."""
        record = self.record or {}
        record["resumes"] = record.get("resumes", 0) + 1
        self.write_record(record)

    def _fingerprints(self, config: Config) -> Dict[str, str]:
        """``corpus_fingerprints``, read once per config."""
        text = config.to_str()
        if getattr(self, "_fingerprinted", (None,))[0] != text:
            self._fingerprinted = (text, corpus_fingerprints(config))
        return self._fingerprinted[1]

    def finish(self, **facts) -> None:
        record = self.record or {}
        record.update(finished=True, **facts)
        self.write_record(record)

    def write_record(self, record: dict) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path / RUN_FILE, json.dumps(record, indent=1, ensure_ascii=False) + "\n")

    def save_model(self, write: Callable[[Path], None], is_best: bool) -> None:
        """spaCy's model-last (and model-best, a copy of it, when ``is_best``), each written
        under a temporary name and moved into place."""
        write_directory(self.path / MODEL_LAST, write)
        if is_best:
            write_directory(self.path / MODEL_BEST, lambda directory: shutil.copytree(self.path / MODEL_LAST, directory))


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
    before, after = _flat(old.interpolate()), _flat(new.interpolate())
    def shown(settings: dict, key: str) -> str:
        return repr(settings[key]) if key in settings else "(none)"

    keys = sorted(set(before) | set(after))
    return [f"{key}: {shown(before, key)} -> {shown(after, key)}" for key in keys if shown(before, key) != shown(after, key)]


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


def check_corpora_exist(config: Config) -> None:
    """RunError naming each corpus whose ``path`` (its config block's) does not exist, before a run
    starts: spaCy would fail minutes later, loading the pipeline, with a traceback."""
    missing = [
        f"{block['path']} ([{dot_name}] path)"
        for dot_name, block in _corpus_blocks(config)
        if isinstance(block.get("path"), str) and block["path"] and not Path(block["path"]).exists()
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
