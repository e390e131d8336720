"""Giving memory that a batch freed back to the system (glibc's ``malloc_trim``).

Grid batches of ever new sizes leave glibc's heap holding freed memory it keeps for reuse:
annotating repeated CADEC sentences, the bytes in use stayed at 320-370 MB while the heap, and
with it the resident memory, grew to 1.8 GB (bench/annotate_memory.py). The w2ner component
trims after each batch it predicts (``W2NER.pipe``), so every process that runs the model does
it: ``nlp.pipe``, ``--n-process`` workers, Ray actors, the HTTP service. Elsewhere than on
glibc, nothing happens.
"""
import ctypes
import ctypes.util
from functools import lru_cache
from typing import Callable, Optional


def release_freed_memory() -> None:
    """Return the heap's free memory to the system, where the C library can (glibc)."""
    trim = malloc_trim()
    if trim is not None:
        trim(0)


@lru_cache(maxsize=1)
def malloc_trim() -> Optional[Callable[[int], int]]:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
