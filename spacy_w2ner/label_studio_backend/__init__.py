"""A Label Studio ML backend: the model in the annotation loop.

``python -m spacy_w2ner label-studio-backend MODEL`` (or ``serve_backend(model, BackendOptions(...))``)
speaks Label Studio's ML backend protocol on 127.0.0.1:9090: it pre-annotates each task with the
pipeline's entities (discontinuous ones as regions joined by ``fragment`` relations, exactly what
``annotate --output-format label-studio`` writes), gives each task a score Label Studio can sort by
(the most doubtful first), keeps the annotators' corrections, and retrains from them in the
background, serving a new model only when it is not worse on a held-out dev share. One module per
stage:

* ``options``: ``BackendOptions``, every setting once (the command's options are made from it);
* ``predictions``: tasks -> predictions (annotate's batching, ``formats.label_studio``'s writer,
  the task score);
* ``serving``: the model that answers, replaced between two requests;
* ``corrections``: the annotation events kept, Label Studio's export, a run's train and dev sets;
* ``retraining``: training runs (``python -m spacy_w2ner train --resume``) and the dev gate;
* ``app``: the HTTP routes (``/health``, ``/setup``, ``/predict``, ``/webhook``).

Why not on ``label-studio-ml``: the registry's release (1.0.9, 2022) pins Flask 1.1.2, Jinja2 3.0.3
and Werkzeug 2.0.2 (the ``[docs]`` extra needs Jinja2 >= 3.1.6), imports ``rq`` without declaring
it, and has the older class API (``fit(completions, workdir)``, a process per webhook event, model
versions from job ids); the API with ``setup``, ``ModelResponse`` and ``fit(event, data)`` is only
on GitHub. This package speaks the same protocol with FastAPI (the ``[label-studio]`` extra, as
``serve``), and its tests check it against a real Label Studio 1.23.

Needs the ``[label-studio]`` extra (FastAPI, uvicorn); the package itself never imports this one.
"""
import logging
from dataclasses import dataclass
from pathlib import Path

from ..extras import require_label_studio_backend
from .options import API_KEY_ENV, BackendOptions

log = logging.getLogger("spacy_w2ner.label_studio_backend")
INITIAL_MODEL = "initial-model"


@dataclass
class Backend:
    """What the routes answer with."""

    options: BackendOptions
    serving: object  # serving.Serving
    corrections: object  # corrections.Corrections
    retrainer: object  # retraining.Retrainer


def create_backend(model: str, options: BackendOptions) -> Backend:
    """The backend of ``model`` with its runs directory: the model a finished run promoted serves
    (``RUNS/state.json``), else ``model``; an unfinished run is resumed when the app starts."""
    import json

    from .corrections import Corrections
    from .retraining import STATE_FILE, Retrainer
    from .serving import Serving

    options.check()
    runs = Path(options.runs)
    runs.mkdir(parents=True, exist_ok=True)
    state = json.loads((runs / STATE_FILE).read_text(encoding="utf8")) if (runs / STATE_FILE).exists() else {}
    promoted = state.get("serving")
    if promoted:
        log.info("serving %s (%s), which a run promoted", promoted["version"], promoted["path"])
        serving = Serving(promoted["path"], options.pipeline(), promoted["version"])
    else:
        serving = Serving(model, options.pipeline())
        if not Path(model).is_dir():  # a package name: a copy on disk for the runs to start from
            serving.nlp.to_disk(runs / INITIAL_MODEL)
            serving.path = str(runs / INITIAL_MODEL)
    retrainer = Retrainer(options, serving, Corrections(runs), state.get("base_version") or serving.version)
    retrainer.state["base_version"] = retrainer.base_version
    return Backend(options, serving, retrainer.corrections, retrainer)


def create_backend_app(model: str, options: BackendOptions):
    """The FastAPI app of ``create_backend`` (``uvicorn`` can serve it)."""
    require_label_studio_backend()
    from .app import create_app

    return create_app(create_backend(model, options))


def serve_backend(model: str, options: BackendOptions) -> None:
    """Serve the backend until interrupted (SIGINT, SIGTERM): a run that trains then stops with a
    checkpoint, and the next start resumes it."""
    uvicorn = require_label_studio_backend()
    app = create_backend_app(model, options)
    uvicorn.run(app, host=options.host, port=options.port, log_level="warning", timeout_graceful_shutdown=5)


__all__ = ["API_KEY_ENV", "Backend", "BackendOptions", "create_backend", "create_backend_app", "serve_backend"]
