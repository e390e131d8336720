"""Giving memory that was freed back to the system (glibc's ``malloc_trim``), and training's
large blocks mapped on their own (glibc's mmap threshold).

Grid batches of ever new sizes leave glibc's heap holding freed memory it keeps for reuse:
annotating repeated CADEC sentences, the bytes in use stayed at 320-370 MB while the heap, and
with it the resident memory, grew to 1.8 GB (bench/annotate_memory.py). The w2ner component
trims after a batch it predicts once 64 docs went by (``batches.ReleasingPipe``), so every
process that runs the model does it: ``nlp.pipe``, ``--n-process`` workers, Ray actors, the
HTTP service. Elsewhere than on glibc, nothing happens.

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
from functools import lru_cache
from typing import Callable, Optional

from thinc.api import NumpyOps


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
