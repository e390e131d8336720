"""Serve a trained pipeline over HTTP: one app, on this machine or on Ray Serve replicas.

``python -m spacy_w2ner serve MODEL`` (or ``serve(model, ServeOptions(...))``) answers
``POST /annotate`` with the records ``annotate`` writes, batching concurrent requests into one
``nlp.pipe`` call; ``GET /`` is a page to try it. One module per part:

* ``options``: ``ServeOptions``, every setting once (the command's options are made from it);
* ``requests``: what a request may hold, each problem named with its status code;
* ``app``: the FastAPI app (routes, errors, limits, the API key), whichever engine answers;
* ``batching``: dynamic batching for the local engine;
* ``runner``: the pipeline behind the app (``PipelineRunner``), on a thread of its own;
* ``engines``: the runner in this process (``LocalEngine``) or in a Ray Serve replica
  (``ReplicaEngine``);
* ``ray_serve``: the deployment on Ray Serve (the ``[ray]`` extra);
* ``page``: the page at ``/``.

Needs the ``[serve]`` extra (FastAPI, uvicorn; the ``[ray]`` extra for ``--engine ray``); the
package itself never imports this module.
"""
from ..extras import require_serving
from .options import API_KEY_ENV, ServeOptions


def create_local_app(model: str, options: ServeOptions):
    """The app with the pipeline loaded in this process (``uvicorn`` can serve it)."""
    from .app import create_app
    from .engines import LocalEngine

    return create_app(LocalEngine(model, options), options)


def serve(model: str, options: ServeOptions) -> None:
    """Serve ``model`` until interrupted, with the engine ``options.engine`` names."""
    options.check()
    if options.engine == "ray":
        from .ray_serve import serve_with_ray

        serve_with_ray(model, options)
        return
    uvicorn = require_serving()
    app = create_local_app(model, options)
    uvicorn.run(app, host=options.host, port=options.port, log_level="warning", timeout_graceful_shutdown=5)


__all__ = ["API_KEY_ENV", "ServeOptions", "create_local_app", "serve"]
