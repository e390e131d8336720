"""Learning material: the project's submitted annotations, as Label Studio's webhooks bring them
and as its API exports them, made into the train and dev sets of a run.

Label Studio (1.23) posts every event of a project to the backend's ``/webhook`` (it makes that
webhook itself when the backend is connected, with the payload): ``ANNOTATION_CREATED`` and
``ANNOTATION_UPDATED`` carry the annotation (its ``result``) and the task (its ``data``),
``ANNOTATIONS_DELETED`` the ids of the annotations deleted. ``Corrections`` keeps each of them as
a line of ``RUNS/events.jsonl`` (appended and flushed: a restarted backend has them all) and
counts the changes; ``tasks`` replays them into the tasks of a Label Studio JSON export (each
task's annotations that are still there). With ``--label-studio-url`` and the API key in
``$LABEL_STUDIO_API_KEY``, ``export_tasks`` asks Label Studio for the export instead (annotations
made before the backend was connected included); the key goes in a header, never in a message.

``run_docs`` reads the tasks with the package's reader (``formats`` ``label-studio``: the latest
annotation not cancelled, fragments, offsets in code points) through the serving pipeline's tokenizer,
leaves out the entities of labels the model does not have (counted), and splits the tasks into
train and dev: a task keeps the side it was given when first seen (``RUNS/split.json``), and the
n-th task seen goes to dev when ``floor(n * dev_share)`` grows, so the dev share is held out
from every run and a task never moves from dev to train.
"""
import json
import math
import threading
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from spacy.language import Language
from spacy.tokens import Doc

from ..entities import get_entities, set_entities
from ..files import write_atomically
from ..formats import LABEL_STUDIO_KEY, NOT_A_DOCUMENT_KEY, read_corpus
from .options import API_KEY_ENV

CHANGES = ("ANNOTATION_CREATED", "ANNOTATIONS_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED", "ANNOTATION_DELETED")
EVENTS_FILE = "events.jsonl"
SPLIT_FILE = "split.json"


class GatherError(Exception):
    """The annotations could not be gathered (the message names the URL and what went wrong)."""


class Corrections:
    """The annotation events kept under ``directory`` (see the module docstring)."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file = open(self.directory / EVENTS_FILE, "ab")

    def record(self, action: str, payload: Dict[str, Any]) -> int:
        """Keep an annotation event; how many annotations it creates, changes or deletes (0 for
        another event, which is not kept)."""
        if action not in CHANGES:
            return 0
        kept = {"action": action, **{key: payload[key] for key in ("annotation", "annotations", "task", "tasks") if key in payload}}
        line = (json.dumps(kept) + "\n").encode("ascii")  # escaped: a lone surrogate in a text is kept, not a crash
        with self._lock:
            self._file.write(line)
            self._file.flush()
        return max(1, len(_listed(kept.get("annotation") or kept.get("annotations"))))

    def tasks(self) -> List[Dict[str, Any]]:
        """The tasks the kept events leave, as a Label Studio JSON export has them (ordered by id)."""
        tasks: Dict[Any, Dict[str, Any]] = {}
        annotations: Dict[Any, Dict[str, Any]] = {}  # annotation id -> annotation (with its task id)
        for event in self._events():
            for task in _listed(event.get("task") or event.get("tasks")):
                if isinstance(task, dict) and "id" in task and isinstance(task.get("data"), dict):
                    tasks[task["id"]] = {"id": task["id"], "data": task["data"]}
            for annotation in _listed(event.get("annotation") or event.get("annotations")):
                if not isinstance(annotation, dict) or "id" not in annotation:
                    continue
                if event["action"].endswith("DELETED"):
                    annotations.pop(annotation["id"], None)
                else:
                    annotations[annotation["id"]] = annotation
        for annotation in annotations.values():
            task_id = annotation.get("task")
            task_id = task_id.get("id") if isinstance(task_id, dict) else task_id
            if task_id in tasks:
                tasks[task_id].setdefault("annotations", []).append(annotation)
        return [task for _, task in sorted(tasks.items(), key=lambda pair: str(pair[0])) if task.get("annotations")]

    def _events(self):
        with self._lock:
            self._file.flush()
        with open(self.directory / EVENTS_FILE, "rb") as file:
            for line in file:
                try:
                    event = json.loads(line)
                except ValueError:  # a line cut by a kill while it was written
                    continue
                if isinstance(event, dict) and event.get("action") in CHANGES:
                    yield event

    def close(self) -> None:
        self._file.close()


def _listed(value: Any) -> List[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def export_tasks(url: str, project: Any, api_key: str, timeout: float = 120.0) -> List[Dict[str, Any]]:
    """The project's annotated tasks from Label Studio's API (a JSON export); GatherError if not."""
    base = url.rstrip("/")
    address = f"{base}/api/projects/{project}/export?exportType=JSON&download_all_tasks=false"
    request = urllib.request.Request(address, headers={"Authorization": _authorization(base, api_key, timeout)})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            tasks = json.loads(response.read().decode("utf8"))
    except urllib.error.HTTPError as err:
        raise GatherError(f"{address}: Label Studio answered {err.code} {err.reason} (is ${API_KEY_ENV} a key of this Label Studio?)") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise GatherError(f"{address}: {getattr(err, 'reason', err)}") from None
    if not isinstance(tasks, list):
        raise GatherError(f"{address}: expected a list of tasks, got {type(tasks).__name__}")
    return tasks


def _authorization(base: str, api_key: str, timeout: float) -> str:
    """The Authorization header: ``Token KEY`` for a legacy token; a personal access token (a JWT
    refresh token) is exchanged for an access token first (``Bearer``)."""
    if api_key.count(".") != 2:
        return f"Token {api_key}"
    body = json.dumps({"refresh": api_key}).encode("utf8")
    request = urllib.request.Request(f"{base}/api/token/refresh", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return f"Bearer {json.loads(response.read())['access']}"
    except (urllib.error.URLError, OSError, ValueError, KeyError) as err:
        raise GatherError(f"{base}/api/token/refresh: the personal access token was not accepted ({getattr(err, 'reason', type(err).__name__)})") from None


def run_docs(
    tasks_path: Path, nlp: Language, labels: List[str], spans_key: str, split_path: Path, dev_share: float
) -> Tuple[List[Doc], List[Doc], Dict[str, Any]]:
    """(train docs, dev docs, counts) of the tasks in ``tasks_path`` (a JSON export), read with
    ``nlp``'s tokenizer, entities of other ``labels`` left out, split as the module docstring
    says; ``split_path`` keeps each task's side."""
    labels = set(labels)
    split = json.loads(split_path.read_text(encoding="utf8")) if split_path.exists() else {}
    sides: Dict[str, List[Doc]] = {"train": [], "dev": []}
    counts: Counter = Counter()
    for doc in read_corpus("label-studio", tasks_path, nlp, spans_key):
        if NOT_A_DOCUMENT_KEY in doc.user_data:
            counts["tasks without annotations"] += 1
            continue
        entities = get_entities(doc, spans_key)
        known = [entity for entity in entities if entity.label in labels]
        counts["entities of labels the model does not have (left out)"] += len(entities) - len(known)
        set_entities(doc, known, spans_key)
        task = str(doc.user_data.get(LABEL_STUDIO_KEY, {}).get("task"))
        if task not in split:
            seen = len(split)
            split[task] = "dev" if math.floor((seen + 1) * dev_share) > math.floor(seen * dev_share) else "train"
        sides[split[task]].append(doc)
    write_atomically(split_path, json.dumps(split, indent=0))
    counts.update({"train": len(sides["train"]), "dev": len(sides["dev"])})
    return sides["train"], sides["dev"], dict(counts)

