"""Training runs in the background, from the serving model, on the annotations so far; the new
model serves only when it is not worse on the held-out dev share.

Every ``--retrain-every`` new, changed or deleted annotations (and on Label Studio's Start
Training, ``request``), ``Retrainer``'s thread starts a run in ``RUNS/run-NNNN/``:

1. the annotated tasks, gathered (``corrections``: Label Studio's API, else the events kept),
   become ``train.spacy`` and ``dev.spacy`` (the dev share, held out); no run while either is
   empty (the changes wait for more);
2. ``config.cfg``: the training config (``--train-config``, else the serving model's own) with
   every component sourced from the serving model (``training_config``: spaCy's ``source``, so
   training continues from its weights, not from scratch) and the run's data as its corpora;
3. ``python -m spacy_w2ner train config.cfg --output train --resume`` in a process of its own
   (log: ``train.log``), so predictions never wait for it; a backend restarted while it trained
   runs the same command again, which resumes it from its newest checkpoint (the process stops
   with a checkpoint when the backend goes: SIGTERM, also sent by the kernel when the backend dies);
4. ``spacy evaluate`` of the new ``model-best`` and of the serving model on the same
   ``dev.spacy`` (processes of their own); the new model serves (``Serving.replace``) only when
   its dev F is not below the serving model's, as ``model_version`` ``BASE+run-NNNN``.

A run's ``status.json`` says where it is (``training``, ``trained``, then ``promoted``, ``kept``
or ``failed``, with both dev Fs, the counts and, for a failure, the log's last lines); a failed
run is logged and the serving model stays. ``RUNS/state.json`` holds which model serves, the
project learnt from, and the changes counted since the last run, so a restarted backend goes on
where it stopped.
"""
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from spacy import util
from spacy.tokens import DocBin
from thinc.api import Config

from ..files import remove_tree, write_atomically
from ..training.run import RUN_FILE
from .corrections import SPLIT_FILE, Corrections, GatherError, export_tasks, run_docs
from .options import BackendOptions
from .serving import Serving

log = logging.getLogger("spacy_w2ner.label_studio_backend")
STATE_FILE = "state.json"
STATUS_FILE = "status.json"
UNFINISHED = ("training", "trained")
CORPUS_READER = {"@readers": "spacy.Corpus.v1", "max_length": 0, "gold_preproc": False, "limit": 0, "augmenter": None}


def training_config(base: Config, source: str, pipe_names: List[str], train: Path, dev: Path) -> Config:
    """``base`` with the pipeline ``pipe_names``, each component sourced from ``source`` (training
    goes on from its weights), and ``train``/``dev`` as the corpora."""
    config = Config(base)  # a copy: the caller's stays as it was
    config["nlp"]["pipeline"] = list(pipe_names)
    config["components"] = {name: {"source": str(source)} for name in pipe_names}
    config.setdefault("paths", {}).update({"train": str(train), "dev": str(dev)})
    corpora = config.setdefault("corpora", {})
    for split in ("train", "dev"):
        if not isinstance(corpora.get(split), dict) or "@readers" not in corpora[split]:
            corpora[split] = {**CORPUS_READER, "path": "${paths.%s}" % split}
    training = config.setdefault("training", {})
    training["frozen_components"] = [name for name in training.get("frozen_components", []) if name in pipe_names]
    training["annotating_components"] = [name for name in training.get("annotating_components", []) if name in pipe_names]
    return config


def dev_f(model: str, dev: Path, spans_key: str, output: Path, log_path: Path) -> float:
    """The dev F (``{spans_key}_f``) of the pipeline ``model`` on ``dev``, from ``spacy evaluate``
    in a process of its own (its output appended to ``log_path``); RuntimeError if it fails."""
    command = child_command("-m", "spacy", "evaluate", str(model), str(dev), "--output", str(output))
    with open(log_path, "ab") as file:
        done = subprocess.run(command, stdout=file, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError(f"spacy evaluate {model} exited with {done.returncode}; see {log_path}")
    return float(json.loads(output.read_text(encoding="utf8"))[f"{spans_key}_f"])


# Run before the command in the child: SIGTERM to it when the backend dies (Linux's
# PR_SET_PDEATHSIG, kept across exec), so a training run stops with a checkpoint instead of
# running on unseen, and the restarted backend resumes it. (Not subprocess's preexec_fn: unsafe
# in a process with threads.)
_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "if sys.platform.startswith('linux'):\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('the backend that started this process is gone')\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
)


def child_command(*arguments: str) -> List[str]:
    """``python ARGUMENTS`` in a process that gets SIGTERM when this one dies (see above)."""
    return [sys.executable, "-c", _WITH_PARENT, str(os.getpid()), *arguments]


class Retrainer:
    """The training loop's state and its thread (see the module docstring)."""

    def __init__(self, options: BackendOptions, serving: Serving, corrections: Corrections, base_version: str):
        self.options, self.serving, self.corrections = options, serving, corrections
        self.directory = Path(options.runs)
        self.base_version = base_version
        self.state = self._load_state()
        self._state_lock = threading.RLock()  # the webhooks' thread and the runs' thread both change it
        self._wake, self._stopping = threading.Event(), threading.Event()
        self._process: Optional[subprocess.Popen] = None
        self._thread = threading.Thread(target=self._loop, name="w2ner-retrainer", daemon=True)

    # ------------------------------------------------------------ state

    def _load_state(self) -> Dict[str, Any]:
        path = self.directory / STATE_FILE
        state = json.loads(path.read_text(encoding="utf8")) if path.exists() else {}
        return {"project": None, "serving": None, "changes": 0, "pending": False, "runs": 0, **state}

    def _save_state(self) -> None:
        with self._state_lock:
            write_atomically(self.directory / STATE_FILE, json.dumps(self.state, indent=1))

    def _status(self, run: Path) -> Dict[str, Any]:
        path = run / STATUS_FILE
        return json.loads(path.read_text(encoding="utf8")) if path.exists() else {}

    def _set_status(self, run: Path, **values) -> Dict[str, Any]:
        status = {**self._status(run), **values}
        write_atomically(run / STATUS_FILE, json.dumps(status, indent=1))
        return status

    # ------------------------------------------------------------ what the app calls

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 120.0) -> None:
        """Stop the thread; a run that trains stops with a checkpoint (resumed at the next start)."""
        self._stopping.set()
        self._wake.set()
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
        self._thread.join(timeout)

    def changed(self, count: int, project: Any) -> Dict[str, Any]:
        """Count ``count`` annotation changes of ``project``; a run is asked for every ``retrain_every``."""
        with self._state_lock:
            if self.state["project"] is None:
                self.state["project"] = project
            self.state["changes"] += count
            if self.options.retrain_every and self.state["changes"] >= self.options.retrain_every:
                self.state["pending"] = True
                self._wake.set()
            self._save_state()
            return {"changes_since_last_run": self.state["changes"], "run_requested": self.state["pending"]}

    def request(self, project: Any = None) -> Dict[str, Any]:
        """Ask for a run now (Label Studio's Start Training); it starts when the one training ends."""
        with self._state_lock:
            if self.state["project"] is None and project is not None:
                self.state["project"] = project
            self.state["pending"] = True
            self._save_state()
        self._wake.set()
        return {"run_requested": True}

    def describe(self) -> Dict[str, Any]:
        runs = sorted(self.directory.glob("run-*"))
        return {
            "changes_since_last_run": self.state["changes"], "run_requested": self.state["pending"],
            "retrain_every": self.options.retrain_every, "project": self.state["project"],
            "runs": [{"run": run.name, **{k: v for k, v in self._status(run).items() if k != "log_tail"}} for run in runs[-5:]],
        }  # fmt: skip

    # ------------------------------------------------------------ the thread

    def _loop(self) -> None:
        while not self._stopping.is_set():
            run = self._unfinished()
            if run is None and self.state["pending"]:
                run = self._new_run()
            if run is None:
                self._wake.wait(5.0)
                self._wake.clear()
                continue
            try:
                self._carry_on(run)
            except Exception as err:  # never the backend's end: the run fails, the model stays
                log.exception("%s failed", run.name)
                self._set_status(run, status="failed", error=f"{type(err).__name__}: {err}")

    def _unfinished(self) -> Optional[Path]:
        for run in sorted(self.directory.glob("run-*")):
            if self._status(run).get("status") in UNFINISHED:
                return run
        return None

    def _carry_on(self, run: Path) -> None:
        if self._status(run)["status"] == "training":
            code = self._train(run)
            if self._stopping.is_set():
                return  # stopped with a checkpoint: the next start resumes it
            if code != 0:
                tail = (run / "train.log").read_text(encoding="utf8", errors="replace").splitlines()[-15:]
                self._set_status(run, status="failed", error=f"train exited with {code}", log_tail=tail)
                log.error("%s failed: train exited with %s; the serving model (%s) stays; see %s", run.name, code,
                          self.serving.version, run / "train.log")  # fmt: skip
                return
            self._set_status(run, status="trained", trained=_now())
        self._judge(run)

    def _train(self, run: Path) -> int:
        arguments = ["-m", "spacy_w2ner", "train", str(run / "config.cfg"), "--output", str(run / "train"), "--resume"]
        resumed = (run / "train" / RUN_FILE).exists()
        log.info("%s: %s training (python %s)", run.name, "resuming" if resumed else "starting", " ".join(arguments))
        with open(run / "train.log", "ab") as file:
            self._process = subprocess.Popen(child_command(*arguments), stdout=file, stderr=subprocess.STDOUT,
                                             env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
            code = self._process.wait()
        self._process = None
        return code

    def _judge(self, run: Path) -> None:
        """Evaluate the run's model and the serving one on the run's dev set; serve the new one
        unless its F is lower."""
        status = self._status(run)
        new_model = run / "train" / "model-best"
        serving_path, serving_version = self.serving.path, self.serving.version
        new_f = dev_f(str(new_model), run / "dev.spacy", self.serving.spans_key, run / "evaluate-new.json", run / "evaluate.log")
        old_f = dev_f(serving_path, run / "dev.spacy", self.serving.spans_key, run / "evaluate-serving.json", run / "evaluate.log")
        version = f"{self.base_version}+{run.name}"
        promoted = new_f >= old_f
        if promoted:
            self.serving.replace(str(new_model), version)
            with self._state_lock:
                self.state["serving"] = {"path": str(new_model), "version": version}
                self._save_state()
        self._set_status(run, status="promoted" if promoted else "kept", dev_f=new_f, serving_dev_f=old_f,
                         compared_with=serving_version, model_version=version if promoted else None, judged=_now())  # fmt: skip
        log.info("%s: dev F %.4f against %.4f of %s on %d dev tasks: %s", run.name, new_f, old_f, serving_version,
                 status.get("counts", {}).get("dev", 0), f"serving {version}" if promoted else "the serving model stays")  # fmt: skip

    def _new_run(self) -> Optional[Path]:
        """Gather the annotations and prepare the next run (None while train or dev is empty)."""
        with self._state_lock:
            self.state.update(pending=False, runs=self.state["runs"] + 1)
            changes, self.state["changes"] = self.state["changes"], 0
            self._save_state()
            run = self.directory / f"run-{self.state['runs']:04d}"
        run.mkdir(parents=True, exist_ok=True)
        try:
            counts = self._prepare(run)
        except (GatherError, ValueError, OSError) as err:
            log.error("%s: cannot gather the annotations: %s; the serving model stays", run.name, err)
            self._set_status(run, status="failed", error=str(err))
            return None
        if not counts["train"] or not counts["dev"]:
            log.info("no run yet: %d train and %d dev tasks annotated (each needs one; the dev share is %s of the tasks)",
                     counts["train"], counts["dev"], f"{self.options.dev_share:.0%}")  # fmt: skip
            remove_tree(run)
            with self._state_lock:
                self.state.update(runs=self.state["runs"] - 1, changes=self.state["changes"] + changes)  # towards the next try
                self._save_state()
            return None
        return run

    def _prepare(self, run: Path) -> Dict[str, Any]:
        tasks = self._gather()
        write_atomically(run / "annotations.json", json.dumps(tasks, ensure_ascii=False))
        import spacy

        reader = spacy.load(self.serving.path, exclude=_pipe_names(self.serving.path))  # its tokenizer and vocab
        train, dev, counts = run_docs(run / "annotations.json", reader, self.serving.labels, self.serving.spans_key,
                                      self.directory / SPLIT_FILE, self.options.dev_share)  # fmt: skip
        for name, docs in (("train", train), ("dev", dev)):
            DocBin(docs=docs, store_user_data=False).to_disk(run / f"{name}.spacy")
        base_path = Path(self.options.train_config) if self.options.train_config else Path(self.serving.path) / "config.cfg"
        base = util.load_config(base_path, interpolate=False)
        config = training_config(base, self.serving.path, _pipe_names(self.serving.path), run / "train.spacy", run / "dev.spacy")
        config.to_disk(run / "config.cfg")
        if counts["train"] and counts["dev"]:
            self._set_status(run, status="training", counts=counts, started=_now(), from_model=self.serving.version,
                             from_path=self.serving.path)  # fmt: skip
        log.info("%s: %d train and %d dev tasks (%s)", run.name, counts["train"], counts["dev"],
                 "from Label Studio's API" if self._uses_api() else "from the webhooks kept")  # fmt: skip
        return counts

    def _uses_api(self) -> bool:
        return bool(self.options.label_studio_url and self.options.api_key and self.state["project"] is not None)

    def _gather(self) -> List[Dict[str, Any]]:
        if self._uses_api():
            return export_tasks(self.options.label_studio_url, self.state["project"], self.options.api_key)
        return self.corrections.tasks()


def _pipe_names(model: str) -> List[str]:
    return list(util.load_config(Path(model) / "config.cfg", interpolate=False)["nlp"]["pipeline"])


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")
