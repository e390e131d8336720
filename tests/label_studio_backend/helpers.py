"""What the backend's tests share: the backend started as a process on a free loopback port, its
tasks, and a small training config (the test pipeline's own, a few steps)."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from spacy import util

from ..conftest import TRAIN_DATA

# A discontinuous entity (pain ... ankles), nested ones, and a character outside the BMP (two
# UTF-16 code units, one code point) before entities: Label Studio counts code points, as Python does.
TEXTS = [text for text, _ in TRAIN_DATA] + ["🙂 She had pain in her knees and ankles ."]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tasks(texts=TEXTS, first_id: int = 1):
    return [{"id": first_id + k, "data": {"text": text}} for k, text in enumerate(texts)]


def small_train_config(model: Path, path: Path, steps: int = 12, every: int = 4) -> Path:
    """The model's own config with a few training steps, an evaluation (and checkpoint) every ``every``."""
    config = util.load_config(Path(model) / "config.cfg", interpolate=False)
    config["training"].update({"max_steps": steps, "eval_frequency": every, "patience": 0})
    config.to_disk(path)
    return path


def request(url: str, path: str, body=None, raw: bytes = None, timeout: float = 120):
    """(status, JSON answer) of a GET (no body) or POST to the backend."""
    import urllib.error
    import urllib.request

    data = raw if raw is not None else None if body is None else json.dumps(body).encode("utf8")
    headers = {"Content-Type": "application/json"} if data is not None else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, data=data, headers=headers), timeout=timeout) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@contextmanager
def running_backend(model, runs: Path, *options, log: Path = None, env=None):
    """``python -m spacy_w2ner label-studio-backend MODEL`` on a free port until /health answers;
    stopped with SIGTERM after (or already killed by the test)."""
    port = free_port()
    command = [sys.executable, "-m", "spacy_w2ner", "label-studio-backend", str(model), "--port", str(port), "--runs", str(runs), *map(str, options)]
    log = log or runs.with_name(runs.name + ".log")
    with open(log, "ab") as file:
        process = subprocess.Popen(command, stdout=file, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    try:
        while True:
            assert process.poll() is None, f"the backend exited: {log.read_text()[-3000:]}"
            try:
                if request(url, "/health", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"the backend did not answer /health: {log.read_text()[-3000:]}"
            time.sleep(0.3)
        yield url, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_for(condition, what: str, timeout: float = 600, every: float = 0.5):
    """Poll ``condition()`` until it is true (returned); AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def annotation_events(answers, texts=TEXTS, project: int = 1, first_id: int = 1):
    """ANNOTATION_CREATED webhooks accepting each prediction as the annotation of its task."""
    events = []
    for k, (task, prediction) in enumerate(zip(tasks(texts, first_id), answers)):
        annotation = {"id": 1000 + first_id + k, "task": task["id"], "result": prediction["result"], "completed_by": 1,
                      "was_cancelled": False, "updated_at": f"2026-01-01T00:00:{k:02d}Z"}  # fmt: skip
        events.append({"action": "ANNOTATION_CREATED", "project": {"id": project}, "annotation": annotation, "task": task})
    return events
