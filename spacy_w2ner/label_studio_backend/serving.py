"""The model that answers ``/predict``, replaced whole when a training run does better.

``Serving`` holds the loaded pipeline, its path and its ``model_version``. spaCy pipelines are
not thread-safe, so one request at a time runs it (``predict`` holds the lock while its tasks go
through ``nlp.pipe``); a new model is loaded beside the old one, without the lock, and then takes
its place between two requests (``replace``): a request is answered by one model from its first
task to its last, and never waits for a training run or for a model to load.
"""
import threading
from typing import Any, Dict, List, Optional

from ..annotate.outputs import model_version
from ..common import PipelineOptions, load_pipeline, spans_key_of
from ..component import first_w2ner
from .predictions import Names, predict_tasks


class Serving:
    def __init__(self, model: str, options: PipelineOptions, version: Optional[str] = None):
        self.options = options
        self._lock = threading.Lock()
        self._set(model, load_pipeline(model, options), version)

    def _set(self, path: str, nlp, version: Optional[str]) -> None:
        self.path, self.nlp = str(path), nlp
        self.version = version or model_version(nlp)
        self.spans_key = spans_key_of(nlp)
        self.labels = list(first_w2ner(nlp)[1].labels)
        self.lang = nlp.lang

    def predict(self, tasks: List[Any], names: Names, batch_size: int, max_chars: int) -> Dict[str, Any]:
        """``{"results": [one prediction or error per task], "model_version": ...}``."""
        with self._lock:
            results = predict_tasks(self.nlp, tasks, names, self.version, self.spans_key, batch_size=batch_size, max_chars=max_chars)
            return {"results": results, "model_version": self.version}

    def replace(self, path: str, version: str) -> None:
        """Serve the pipeline at ``path`` as ``version`` from the next request on."""
        nlp = load_pipeline(path, self.options)
        with self._lock:
            self._set(path, nlp, version)

    def describe(self) -> Dict[str, Any]:
        return {"model_version": self.version, "path": self.path, "labels": self.labels, "spans_key": self.spans_key}
