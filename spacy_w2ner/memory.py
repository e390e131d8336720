"""Giving memory that a batch freed back to the system (glibc's ``malloc_trim``).

Grid batches of ever new sizes leave glibc's heap holding freed memory it keeps for reuse:
annotating repeated CADEC sentences, the bytes in use stayed at 320-370 MB while the heap, and
with it the resident memory, grew to 1.8 GB (bench/annotate_memory.py). The w2ner component
trims after a batch it predicts once 64 docs went by (``W2NER.pipe``), so every process that runs the model does
it: ``nlp.pipe``, ``--n-process`` workers, Ray actors, the HTTP service (``ReleasingPipe``).
Elsewhere than on glibc, nothing happens.

Within one long document the same happens batch by batch: each 256-token window's grid
temporaries (tens of MB, under glibc's largest mmap threshold, so taken from the heap) are
freed around the window's small results, which stay, so the heap cannot reuse them whole: a
20,000-token document without sentences grew the resident memory by 9 MB a window, 1.2 GB in
all, of which 0.3 GB was in use. ``ReleaseEvery`` trims while the model predicts on the CPU,
once every so many grid cells (bench/long_doc.py --after-corpus).

Training has a third case: glibc raises its mmap threshold each time a mapped block is freed (up
to 32 MB), after which a step's large tensors come from the heap, and the heap's holes grow the
step's peak step after step (TeamTat's abstracts, the MiniLM config: 1.4 GB at the first step,
3.2 GB at the eleventh). ``map_large_blocks`` fixes the threshold at 4 MB when training starts on
the CPU (``W2NER.initialize``): the same steps peaked at 1.3-1.8 GB, for about 2% more CPU time
on CADEC's sentences (1 MB: 1.1-1.55 GB for 10%).
"""
import ctypes
import ctypes.util
import os
from functools import lru_cache, partial
from typing import Callable, Iterable, Iterator, List, Optional, Tuple

from spacy.tokens import Doc
from thinc.api import NumpyOps

TRIM_EVERY_DOCS = 64  # ReleasingPipe gives freed memory back at most this often
# A batch's tokens at most (a longer doc goes alone): 1,000 CADEC sentences are 16,000 words
MAX_BATCH_WORDS = 20_000


def release_freed_memory() -> None:
    """Return the heap's free memory to the system, where the C library can (glibc)."""
    trim = malloc_trim()
    if trim is not None:
        trim(0)


# glibc's mallopt parameter, and the blocks that training maps on their own from then on
M_MMAP_THRESHOLD = -3
TRAINING_MMAP_THRESHOLD = 4 * 1024 * 1024


def map_large_blocks(threshold: int = TRAINING_MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold (blocks of ``threshold`` bytes or more are mapped, and unmapped
    when freed) unless ``MALLOC_MMAP_THRESHOLD_`` already sets it; True when it was set here.
    Elsewhere than on glibc, nothing happens."""
    mallopt = _glibc_function("mallopt")
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, threshold))


def malloc_trim() -> Optional[Callable[[int], int]]:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    return _glibc_function("malloc_trim")


@lru_cache(maxsize=None)
def _glibc_function(name: str) -> Optional[Callable[..., int]]:
    """The C library's function ``name`` (glibc's malloc tuning), or None where it has none."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None


class ReleaseEvery:
    """Calls ``release_freed_memory`` once every ``cells`` grid cells predicted, on the CPU only
    (a GPU's grid temporaries are on the device, and there a trim would cost more than a batch)."""

    def __init__(self, ops, cells: int) -> None:
        self.enabled = isinstance(ops, NumpyOps) and malloc_trim() is not None
        self.cells = cells
        self._since = 0

    def add(self, cells: int) -> None:
        """Count a batch's cells; trim when the budget is reached."""
        if not self.enabled:
            return
        self._since += cells
        if self._since >= self.cells:
            release_freed_memory()
            self._since = 0


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
    bench/README.md, "The HTTP service")."""

    _docs_since_trim = 0

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
        """(docs, a call that returns their predictions) for each batch, in order: here each
        batch's ``predict``, made when its predictions are asked for."""
        for docs in batches:
            yield docs, partial(self.predict, docs)


def available_memory_bytes(device=None) -> Optional[float]:
    """Memory a new allocation can still get: on a CUDA device its free memory; on the host the
    kernel's MemAvailable, or what is left under this process's cgroup limit if that is less
    (a container's). None where it cannot be read."""
    if device is not None and getattr(device, "type", "cpu") == "cuda":
        import torch

        return float(torch.cuda.mem_get_info(device)[0])
    available = _meminfo_available()
    left = _cgroup_left()
    found = [value for value in (available, left) if value is not None]
    return min(found) if found else None


def _meminfo_available() -> Optional[float]:
    try:
        with open("/proc/meminfo") as lines:
            for line in lines:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cgroup_left() -> Optional[float]:
    """cgroup v2's memory.max less memory.current, for this process's group."""
    try:
        limit = open("/sys/fs/cgroup/memory.max").read().strip()
        if limit == "max":
            return None
        return float(limit) - float(open("/sys/fs/cgroup/memory.current").read())
    except (OSError, ValueError):
        return None
