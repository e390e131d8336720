"""Dynamic batching for the local engine: documents of concurrent requests, one ``nlp.pipe`` call.

Requests put their documents in a queue and wait for their futures. One task takes what is
queued (at most ``max_batch_size`` documents) whenever the model is free, and runs the batch
on the model's thread, so the event loop keeps answering (health checks, new requests) while
it runs. A batch that is not full waits at most ``max_wait_s`` after its oldest document for
more; under load, batches fill up while the model works on the one before. A request whose
client went away, or that timed out, cancels its futures: documents not yet taken are dropped
from the queue, so a gone request frees its slot. A batch the model fails on is run again a
document at a time, so only the requests whose documents fail get the error. More than ``max_queue`` waiting documents:
the request is refused at once (``Overloaded``) instead of waiting for a timeout.
"""
import asyncio
import time
from collections import deque
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, List, Optional


class Overloaded(Exception):
    """More documents are waiting than the queue may hold."""


@dataclass
class Job:
    payload: Any
    future: asyncio.Future
    queued: float = field(default_factory=time.monotonic)


class DynamicBatcher:
    """Gathers payloads into batches for ``run_batch`` (called on ``executor``, one batch at a time)."""

    def __init__(
        self,
        run_batch: Callable[[List[Any]], List[Any]],
        executor: Executor,
        *,
        max_batch_size: int,
        max_wait_s: float,
        max_queue: int,
    ):
        self._run_batch, self._executor = run_batch, executor
        self.max_batch_size, self.max_wait_s, self.max_queue = max_batch_size, max_wait_s, max_queue
        self._queue: Deque[Job] = deque()
        self._arrived: Optional[asyncio.Event] = None
        self._task: Optional[asyncio.Task] = None
        self.batches = 0  # batches run, for /metadata and tests

    @property
    def waiting(self) -> int:
        return sum(not job.future.done() for job in self._queue)

    def start(self) -> None:
        self._arrived = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._serve_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def submit(self, payloads: List[Any]) -> List[asyncio.Future]:
        """Queue the payloads; their futures get the results. ``Overloaded`` if the queue is full."""
        if self.waiting + len(payloads) > self.max_queue:
            raise Overloaded(f"{self.waiting} documents are waiting (the limit is {self.max_queue}); retry shortly")
        loop = asyncio.get_running_loop()
        jobs = [Job(payload, loop.create_future()) for payload in payloads]
        self._queue.extend(jobs)
        self._arrived.set()
        return [job.future for job in jobs]

    async def _serve_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._next_batch()
            try:
                results = await loop.run_in_executor(self._executor, self._run_batch, [job.payload for job in batch])
            except Exception as err:  # the model failed on the batch: its documents, one at a time
                await self._run_alone(batch, err)
                continue
            self.batches += 1
            for job, result in zip(batch, results):
                if not job.future.done():  # its request may have gone meanwhile
                    job.future.set_result(result)

    async def _run_alone(self, batch: List[Job], err: Exception) -> None:
        """A batch that failed, run a document at a time, so that the error reaches only the
        requests whose documents cause it (one document: ``err`` itself)."""
        loop = asyncio.get_running_loop()
        for job in batch:
            if job.future.done():
                continue
            if len(batch) == 1:
                job.future.set_exception(err)
                continue
            try:
                (result,) = await loop.run_in_executor(self._executor, self._run_batch, [job.payload])
            except Exception as alone:
                job.future.set_exception(alone)
            else:
                job.future.set_result(result)

    async def _next_batch(self) -> List[Job]:
        """The next jobs whose requests still wait: as soon as any is there, up to the batch size,
        waiting at most ``max_wait_s`` after the oldest one for a batch that is not full."""
        while True:
            self._drop_cancelled()
            if not self._queue:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            deadline = self._queue[0].queued + self.max_wait_s
            while len(self._queue) < self.max_batch_size and time.monotonic() < deadline:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), deadline - time.monotonic())
                except asyncio.TimeoutError:
                    break
                self._drop_cancelled()
            batch = []
            while self._queue and len(batch) < self.max_batch_size:
                job = self._queue.popleft()
                if not job.future.done():
                    batch.append(job)
            if batch:
                return batch

    def _drop_cancelled(self) -> None:
        if any(job.future.done() for job in self._queue):
            self._queue = deque(job for job in self._queue if not job.future.done())
