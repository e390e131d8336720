"""Memory: what the package does so that its processes' memory follows what they use.

* ``heap``: memory freed by a batch given back to the system (glibc's ``malloc_trim``, also every
  so many grid cells within a long document: ``ReleaseEvery``), and training's large blocks
  mapped on their own (``map_large_blocks``);
* ``batches``: a pipe's batches bounded by docs and words (``batches_within_words``), and the
  w2ner component's ``pipe`` that trims after them (``ReleasingPipe``);
* ``available``: the memory a new allocation can still get (``available_memory_bytes``).

A leaf of the package: it imports none of its other modules.
"""
