"""The HTTP protocol of Label Studio's ML backends, as the ``label-studio-ml`` package defines it
and Label Studio 1.23 speaks it:

    GET  /health, /     {"status": "UP", "model_class": ..., "model_version": ..., "training": {...}}
    POST /setup         {"project": "ID.TIMESTAMP", "schema": CONFIG, ...} -> {"model_version": ...}
    POST /predict       {"tasks": [...], "project": ..., "label_config": CONFIG, "params": {...}}
                        -> {"results": [one prediction per task], "model_version": ...}
    POST /webhook       {"action": EVENT, "project": {"id": ...}, ...} -> 201 {"status": "ok", "result": {...}}
    GET  /metrics       {}

A task that cannot be predicted gets ``{"error": ...}`` in its place (``predictions``); a request
that cannot be read at all (not JSON, not an object, ``tasks`` not a list, more tasks than
``--max-tasks``, a labeling config without ``<Labels>`` over a ``<Text>``) gets a 4xx with
``{"error": ...}`` naming what is wrong; an error inside the backend a 500 with its type and
message. Neither stops the backend. ``/webhook`` answers at once: the annotation events are kept
and counted, Start Training (``START_TRAINING``) asks for a run, and the runs go on in their own
thread and processes (``retraining``); events of another project than the one the backend learns
from are refused in the answer (and logged), others (``PROJECT_UPDATED``, ...) are acknowledged
as ``label-studio-ml`` does (``{"status": "Unknown event"}``). ``/setup``'s ``access_token`` (Label
Studio's key) is never read, logged or kept.
"""
import json
import logging
from contextlib import asynccontextmanager
from typing import Any, Dict, Optional

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from .. import __version__
from ..messages import json_type, not_utf8
from .corrections import CHANGES
from .predictions import ConfigProblem, config_names, labels_missing

log = logging.getLogger("spacy_w2ner.label_studio_backend")
MODEL_CLASS = "SpacyW2NERBackend"
TRAINING = "START_TRAINING"


class RequestProblem(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class PredictBody(BaseModel):
    """What Label Studio posts to /predict (other keys are ignored)."""

    model_config = ConfigDict(extra="allow")

    tasks: list = Field(description="Label Studio tasks: {'id': ..., 'data': {TEXT_KEY: text}}")
    project: Optional[str] = Field(None, description="'ID.TIMESTAMP' of the project")
    label_config: Optional[str] = Field(None, description="the project's labeling config (XML)")
    params: Optional[Dict[str, Any]] = None


def create_app(backend) -> FastAPI:
    """The app answering with ``backend`` (``Backend``: the serving model, the corrections, the
    retrainer); the routes (``router``) find it in ``app.state``."""
    app = FastAPI(title="spacy-w2ner Label Studio ML backend", version=__version__, lifespan=_lifespan,
                  description=__doc__.split("\n\n")[0])  # fmt: skip
    app.state.backend = backend
    app.add_exception_handler(RequestProblem, _refused)
    app.add_exception_handler(Exception, _failed)
    app.include_router(router)
    return app


async def _refused(request: Request, problem: RequestProblem):
    log.warning("%s %s refused (%d): %s", request.method, request.url.path, problem.status, problem.message)
    return JSONResponse({"error": problem.message}, status_code=problem.status)


async def _failed(request: Request, err: Exception):
    log.exception("%s %s failed", request.method, request.url.path)
    return JSONResponse({"error": f"{type(err).__name__}: {err}"}, status_code=500)


router = APIRouter()


@router.get("/")
@router.get("/health")
async def health(request: Request) -> Dict[str, Any]:
    backend = request.app.state.backend
    return {"status": "UP", "model_class": MODEL_CLASS, "model_version": backend.serving.version, "training": backend.retrainer.describe()}


@router.get("/metrics")
async def metrics() -> Dict[str, Any]:
    return {}


@router.post("/setup")
async def setup(request: Request) -> Dict[str, Any]:
    """Label Studio connecting (and before each batch of predictions): the ``model_version``."""
    backend = request.app.state.backend
    body = await _object(request)
    schema = body.get("schema")
    if schema is not None:
        _names(schema)
        missing = labels_missing(backend.serving.labels, schema)
        if missing:
            log.warning("project %s: the labeling config lacks the model's labels %s (python -m spacy_w2ner "
                        "label-studio-config MODEL prints one with them)", _project(body.get("project")), ", ".join(missing))  # fmt: skip
    return {"model_version": backend.serving.version}


@router.post("/predict", openapi_extra={"requestBody": {"content": {"application/json": {"schema": PredictBody.model_json_schema()}}}})
async def predict(request: Request) -> Dict[str, Any]:
    """One prediction (or error) per task, by the serving model, off the event loop."""
    backend = request.app.state.backend
    body = await _object(request)
    tasks = body.get("tasks")
    if not isinstance(tasks, list):
        raise RequestProblem(422, f"'tasks' must be a list of task objects, got {json_type(tasks)}")
    if len(tasks) > backend.options.max_tasks:
        raise RequestProblem(413, f"{len(tasks)} tasks, more than --max-tasks={backend.options.max_tasks}; send fewer at once")
    names = _names(body.get("label_config"))
    return await run_in_threadpool(backend.serving.predict, tasks, names, backend.options.batch_size, backend.options.max_text_chars)


@router.post("/webhook", status_code=201)
async def webhook(request: Request):
    """Label Studio's events: annotation changes kept and counted, Start Training asked for."""
    backend = request.app.state.backend
    body = await _object(request)
    action = body.get("action")
    if not isinstance(action, str):
        raise RequestProblem(422, f"a webhook needs 'action' (Label Studio's event name), got {json_type(action)}")
    if action not in CHANGES and action != TRAINING:
        return JSONResponse({"status": "Unknown event"}, status_code=200)
    project = _project(body.get("project"))
    learnt = backend.retrainer.state["project"]
    if learnt is not None and project is not None and str(project) != str(learnt):
        message = f"this backend learns from project {learnt}; {action} of project {project} is not used (one backend per project)"
        log.warning(message)
        return JSONResponse({"status": "ignored", "result": message}, status_code=200)
    if action == TRAINING:
        result = backend.retrainer.request(project)
    else:
        result = backend.retrainer.changed(backend.corrections.record(action, body), project)
    return {"status": "ok", "result": result}


@asynccontextmanager
async def _lifespan(app: FastAPI):
    app.state.backend.retrainer.start()
    yield
    await run_in_threadpool(app.state.backend.retrainer.stop)


async def _object(request: Request) -> Dict[str, Any]:
    """The request's JSON object; RequestProblem naming what is wrong with it."""
    raw = await request.body()
    try:
        value = json.loads(raw.decode("utf8"))
    except UnicodeDecodeError as err:
        raise RequestProblem(400, f"the body is {not_utf8(err)}") from None
    except json.JSONDecodeError as err:
        raise RequestProblem(400, f"the body is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    if not isinstance(value, dict):
        raise RequestProblem(422, f"the body must be a JSON object, got {json_type(value)}")
    return value


def _names(label_config: Any):
    if label_config is not None and not isinstance(label_config, str):
        raise RequestProblem(422, f"'label_config' must be the labeling config's XML, got {json_type(label_config)}")
    try:
        return config_names(label_config)
    except ConfigProblem as err:
        raise RequestProblem(422, str(err)) from None


def _project(value: Any) -> Any:
    """A project's id from a webhook's ``project`` object or /predict's ``"ID.TIMESTAMP"``."""
    if isinstance(value, dict):
        return value.get("id")
    if isinstance(value, str):
        return value.split(".", 1)[0] or None
    return value
