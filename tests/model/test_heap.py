"""Training maps large blocks on their own (memory.heap.map_large_blocks): glibc's rising mmap threshold
otherwise puts a step's large tensors on the heap, whose holes grew a step's peak step after step."""
import ctypes
import ctypes.util
import subprocess
import sys

import pytest
import spacy

from spacy_w2ner.memory import heap as memory

from ..conftest import SMALL_W2NER_CONFIG, make_examples

try:
    ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallinfo2
    GLIBC = True
except (OSError, AttributeError):
    GLIBC = False

# After a 16 MB block is freed glibc's threshold is 16 MB: is an 8 MB block then mapped?
MAPPED_AFTER_A_LARGE_FREE = """
import ctypes, ctypes.util, sys
from spacy_w2ner.memory.heap import map_large_blocks
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
libc.mallinfo2.restype, libc.malloc.restype = Info, ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    assert map_large_blocks()
libc.free(libc.malloc(16 << 20))
mapped = libc.mallinfo2().hblkhd
block = libc.malloc(8 << 20)
print(libc.mallinfo2().hblkhd - mapped >= 8 << 20)
"""


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
@pytest.mark.parametrize("case,mapped", [("default", "False"), ("fixed", "True")])
def test_a_large_block_is_mapped_after_map_large_blocks_only(case, mapped):
    done = subprocess.run([sys.executable, "-c", MAPPED_AFTER_A_LARGE_FREE, case], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == mapped


def test_the_users_own_threshold_is_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert memory.map_large_blocks() is False


def test_initializing_on_the_cpu_maps_large_blocks(monkeypatch):
    import spacy_w2ner.component as component

    calls = []
    monkeypatch.setattr(component, "map_large_blocks", lambda: calls.append(True))
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    nlp.initialize(lambda: make_examples(nlp))
    assert calls == [True]
