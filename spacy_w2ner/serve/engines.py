"""What answers the app's requests: an engine in front of a ``runner.PipelineRunner``.

An engine gives the app one interface (``ready``, ``submit``, ``render``, ``metadata``,
``start``/``stop``):

* ``LocalEngine``: this process; a ``DynamicBatcher`` gathers concurrent requests into one
  ``nlp.pipe`` call on the model's own thread.
* ``ReplicaEngine``: a Ray Serve replica (``ray_serve.W2NERService``); Ray Serve's
  ``@serve.batch`` gathers the requests a replica gets.
"""
import asyncio
import time
from typing import Any, Dict, List

from .batching import DynamicBatcher
from .options import ServeOptions
from .runner import model_thread


class LocalEngine:
    """The pipeline in this process, requests batched by a ``DynamicBatcher``."""

    name = "local"

    def __init__(self, model: str, options: ServeOptions):
        # One thread runs the model: one batch at a time, the event loop free meanwhile.
        self._executor, self.runner = model_thread(model, options)
        self.batcher = DynamicBatcher(
            self.runner.records, self._executor, max_batch_size=options.max_batch_size,
            max_wait_s=options.max_wait_ms / 1000.0, max_queue=options.max_queue,
        )  # fmt: skip
        self.ready = False
        self.started = time.time()

    async def start(self) -> None:
        self.batcher.start()
        await asyncio.get_running_loop().run_in_executor(self._executor, self.runner.warm_up)
        self.ready = True

    async def stop(self) -> None:
        self.ready = False
        await self.batcher.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def submit(self, documents: List[Dict[str, Any]], threshold: float) -> List[asyncio.Future]:
        """Queue the documents (``batching.Overloaded`` if the queue is full); await the futures."""
        return self.batcher.submit([(document, threshold) for document in documents])

    async def render(self, text: str, threshold: float, grid: bool) -> Dict[str, Any]:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.runner.render, text, threshold, grid)

    def metadata(self) -> Dict[str, Any]:
        return {**self.runner.metadata(), "engine": self.name, "documents_waiting": self.batcher.waiting,
                "batches_run": self.batcher.batches}  # fmt: skip


class ReplicaEngine:
    """A Ray Serve replica's pipeline (``ray_serve.W2NERService``): its ``@serve.batch`` method
    gathers the documents of the requests the replica gets."""

    name = "ray"
    ready = True  # the replica takes requests once its constructor (load, warm-up) is done

    def __init__(self, service):
        self.service = service

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def submit(self, documents: List[Dict[str, Any]], threshold: float) -> List[asyncio.Future]:
        return [asyncio.ensure_future(self.service.annotate_batch((document, threshold))) for document in documents]

    async def render(self, text: str, threshold: float, grid: bool) -> Dict[str, Any]:
        return await self.service.render(text, threshold, grid)

    def metadata(self) -> Dict[str, Any]:
        return {**self.service.metadata(), "engine": self.name}
