"""The Ray Serve engine: the same app on replicas across a cluster (the ``[ray]`` extra).

``W2NERService`` is a Ray Serve deployment whose replicas each load the pipeline once and
serve the app of ``app.py`` (built per replica, ``__serve_build_asgi_app__``, with a
``ReplicaEngine``); Ray Serve's ``@serve.batch`` gathers the documents of a replica's requests
(``max_batch_size``, ``max_wait_ms``), and its router spreads requests over the replicas
(``replicas``, or ``autoscaling`` passed through as ``autoscaling_config``; ``gpus_per_replica``
and ``cpus_per_replica`` as the replicas' Ray resources). Nothing here is imported unless
``--engine ray`` is asked for.
"""
import asyncio
from pathlib import Path
from typing import Any, Dict, List

from ..extras import connect_ray, require_ray_serve
from .app import create_app
from .engines import ReplicaEngine
from .options import ServeOptions
from .runner import Payload, model_thread


def service_class():
    """The deployment class (made on demand, so importing this module needs no Ray)."""
    serve = require_ray_serve()

    @serve.deployment(name="w2ner")
    @serve.ingress()
    class W2NERService:
        def __init__(self, model: str, options: ServeOptions):
            self.options = options
            self.executor, self.runner = model_thread(model, options)
            self.executor.submit(self.runner.warm_up).result()
            self.annotate_batch.set_max_batch_size(options.max_batch_size)
            self.annotate_batch.set_batch_wait_timeout_s(options.max_wait_ms / 1000.0)

        # serve's defaults here; __init__ sets each deployment's own options
        @serve.batch(max_batch_size=ServeOptions.max_batch_size, batch_wait_timeout_s=ServeOptions.max_wait_ms / 1000.0)
        async def annotate_batch(self, payloads: List[Payload]) -> List[Dict[str, Any]]:
            return await asyncio.get_running_loop().run_in_executor(self.executor, self.runner.records, payloads)

        async def render(self, text: str, threshold: float, grid: bool) -> Dict[str, Any]:
            return await asyncio.get_running_loop().run_in_executor(self.executor, self.runner.render, text, threshold, grid)

        def metadata(self) -> Dict[str, Any]:
            return self.runner.metadata()

        def __serve_build_asgi_app__(self):
            return create_app(ReplicaEngine(self), self.options)

    return W2NERService


def deployment_settings(options: ServeOptions) -> Dict[str, Any]:
    """Ray Serve's settings for the deployment, from the options."""
    settings: Dict[str, Any] = {
        "ray_actor_options": {"num_cpus": options.cpus_per_replica, "num_gpus": options.gpus_per_replica},
        "max_ongoing_requests": options.max_ongoing_requests,
    }
    autoscaling = options.autoscaling_config()
    if autoscaling:
        settings["autoscaling_config"] = autoscaling
    else:
        settings["num_replicas"] = options.replicas
    return settings


def serve_with_ray(model: str, options: ServeOptions, blocking: bool = True):
    """Deploy the service on Ray Serve at ``options.host:options.port`` (a local Ray, or the
    cluster at ``options.address``); with ``blocking`` run until interrupted."""
    serve = require_ray_serve()
    if Path(model).exists():
        model = str(Path(model).resolve())  # replicas may run in another directory
    connect_ray(options.address)
    serve.start(http_options={"host": options.host, "port": options.port})
    application = service_class().options(**deployment_settings(options)).bind(model, options)
    return serve.run(application, name="w2ner", route_prefix="/", blocking=blocking)
