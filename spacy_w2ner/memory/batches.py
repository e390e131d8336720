"""A pipe's batches bounded by words, and the memory they freed given back to the system.

``batches_within_words`` cuts a stream of docs into batches of at most so many docs and tokens,
so that what a batch holds while it is predicted stays bounded however long the documents;
``ReleasingPipe`` is the ``pipe`` of the w2ner component made of them, which trims the heap
(``heap.release_freed_memory``) after a batch once ``TRIM_EVERY_DOCS`` docs went by, and with
``overlap_batches`` starts a batch's prediction before it gives out the batch before it.
"""
from functools import partial
from typing import Callable, Iterable, Iterator, List, Tuple

from spacy.tokens import Doc

from .heap import release_freed_memory

TRIM_EVERY_DOCS = 64  # ReleasingPipe gives freed memory back at most this often
# A batch's tokens at most (a longer doc goes alone): 1,000 CADEC sentences are 16,000 words
MAX_BATCH_WORDS = 20_000


def batches_within_words(stream: Iterable[Doc], max_docs: int, max_words: int) -> Iterator[List[Doc]]:
    """The stream in order, in batches of at most ``max_docs`` docs and ``max_words`` tokens (a doc
    longer than ``max_words`` alone): what a batch holds while it is predicted stays bounded,
    however long the documents, while short ones still come in large batches."""
    batch: List[Doc] = []
    words = 0
    for doc in stream:
        if batch and (len(batch) >= max_docs or words + len(doc) > max_words):
            yield batch
            batch, words = [], 0
        batch.append(doc)
        words += len(doc)
    if batch:
        yield batch


class ReleasingPipe:
    """Mixin for a ``TrainablePipe``: its ``pipe`` predicts in batches of at most ``batch_size``
    docs and ``MAX_BATCH_WORDS`` tokens (``batches_within_words``), and gives the memory its
    batches freed back to the system in whichever process runs it, after a batch, once at least
    ``TRIM_EVERY_DOCS`` docs went by (counted across calls: a service calls ``pipe`` once per
    small batch, and a trim after every one-doc batch would cost a fifth of a sentence's time;
    bench/README.md, "The HTTP service").

    With ``overlap_batches`` on, each batch's prediction is started (the pipe's
    ``_start_predict(docs)``, which gives the call that waits for it) before the batch before it
    is given out: on a GPU the device scores a batch while the host decodes the one before and
    the components upstream prepare the next (two batches in memory at once). Off by default."""

    _docs_since_trim = 0
    overlap_batches: bool = False

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        error_handler = self.get_error_handler()
        for docs, predictions in self._predictions(batches_within_words(stream, batch_size, MAX_BATCH_WORDS)):
            try:
                self.set_annotations(docs, predictions())
                yield from docs
            except Exception as error:
                error_handler(self.name, self, docs, error)
            self._docs_since_trim += len(docs)
            if self._docs_since_trim >= TRIM_EVERY_DOCS:
                release_freed_memory()
                self._docs_since_trim = 0

    def _predictions(self, batches: Iterable[List[Doc]]) -> Iterator[Tuple[List[Doc], Callable[[], object]]]:
        """(docs, a call that returns their predictions) for each batch, in order: each batch's
        ``predict``, made when its predictions are asked for; with ``overlap_batches``, started
        before the batch before it is given out, an error in starting raised when the batch's
        predictions are asked for (so that the error handler gets that batch's docs)."""
        if not self.overlap_batches:
            for docs in batches:
                yield docs, partial(self.predict, docs)
            return
        waiting = None
        for docs in batches:
            started = (docs, _started_or_raising(self._start_predict, docs))
            if waiting is not None:
                yield waiting
            waiting = started
        if waiting is not None:
            yield waiting


def _started_or_raising(start: Callable[[List[Doc]], Callable], docs: List[Doc]) -> Callable:
    """``start(docs)``, or where it raised, a call that raises the same error."""
    try:
        return start(docs)
    except Exception as error:
        failure = error  # the except clause unbinds ``error`` when it ends

        def raising():
            raise failure

        return raising
