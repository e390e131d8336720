"""Segments' word vectors padded into batches, and their gradients added back.

The grid network takes a batch of segments (sentences or windows, ``grid.segments``) as
one array (segments, longest, width), zero-padded. A batch's segments come from
different docs and may overlap (windows), so the padding is a gather by index arrays
(``padding_rows``) out of every doc's word vectors in one array (``all_word_vectors``):
one copy per batch, not one per segment. The backward pass is the matching
scatter-add (``add_unpadded``), where the gradients of overlapping windows add up.
``padding_limit`` says how much a group may be padded on the model's device (Thinc's ops).
"""
from typing import Optional, Sequence, Tuple

import numpy as np
from thinc.api import NumpyOps
from thinc.types import Floats2d, Floats3d, Ints1d

from ..grid.segments import MAX_PADDING, Segment
from .types import PaddingRows


def grid_length_multiple(ops) -> int:
    """Grid sides are padded to a multiple of this: 8 on a GPU, where each new shape costs
    kernel selection the first time it is met (the padding is masked: results do not
    change), 1 on a CPU, where padding only costs cells."""
    return 1 if isinstance(ops, NumpyOps) else 8


def all_word_vectors(ops, vectors: Sequence[Floats2d]) -> Tuple[Floats2d, np.ndarray]:
    """Every doc's word vectors in one array (one copy at most), and each doc's first row (and the end)."""
    first_rows = np.concatenate([[0], np.cumsum([len(v) for v in vectors])]).astype(np.int64)
    if len(vectors) == 1:
        return vectors[0], first_rows
    width = max((v.shape[1] for v in vectors if v.size), default=0)
    return ops.xp.concatenate([v if v.size else ops.alloc2f(0, width) for v in vectors]), first_rows


def padding_rows(batch: Sequence[Segment], first_rows: np.ndarray, multiple: int = 1) -> PaddingRows:
    """The rows that pad a batch of segments to its longest one, rounded up to ``multiple``
    (numpy index arrays)."""
    lengths = np.array([segment.length for segment in batch], dtype=np.int64)
    longest = -(-int(lengths.max()) // multiple) * multiple
    offsets = np.cumsum(lengths) - lengths  # where each segment's words begin in the index arrays
    within = np.arange(int(lengths.sum())) - np.repeat(offsets, lengths)  # word k of its segment
    starts = np.array([first_rows[s.doc_index] + s.start for s in batch], dtype=np.int64)
    padded = np.repeat(np.arange(len(batch)) * longest, lengths) + within
    return PaddingRows(np.repeat(starts, lengths) + within, padded, longest)


def pad_segments(
    ops, words: Floats2d, batch: Sequence[Segment], rows: PaddingRows
) -> Tuple[Floats3d, Ints1d]:
    """The segments' word vectors padded with zeros to (segments, longest, width): one gather;
    and their lengths (numpy)."""
    width = words.shape[1]
    padded = ops.alloc2f(len(batch) * rows.longest, width)
    padded[ops.asarray1i(rows.padded)] = words[ops.asarray1i(rows.source)]
    lengths = np.array([segment.length for segment in batch], dtype=np.int32)  # stays on the host
    return ops.reshape3f(padded, len(batch), rows.longest, width), lengths


def add_unpadded(ops, d_words: Floats2d, d_padded: Floats3d, rows: PaddingRows) -> None:
    """Add a padded batch's gradients to the words they came from (overlapping windows add up)."""
    d_flat = ops.reshape2f(d_padded, -1, d_padded.shape[-1])
    ops.scatter_add(d_words, ops.asarray1i(rows.source), d_flat[ops.asarray1i(rows.padded)])


def padding_limit(ops, configured: Optional[float]) -> float:
    """How much a group may be padded (``group_by_length``'s ``max_padding``: a grid batch, an
    encoder's prediction pass) before items of other lengths go to a group of their own:
    ``configured`` where set, else ``MAX_PADDING`` on a CPU, where padding costs what real work
    does, and no limit on a GPU, where each group costs the host milliseconds of launches and
    padding little. On an H100, a training step of 12 CADEC sentences made 3.2 grid batches and
    kept the GPU busy 18 ms of its 100 (bench/results/gpu-h100-2026-11-26b); CADEC test's
    prediction with the encoder's passes unlimited was 1.28x (batch 32) and 1.24x (batch 128) as
    fast as at 1.25 (bench/results/gpu-h100-2026-11-27c). ``max_cost`` and ``max_items`` bound
    a group either way."""
    if configured is not None:
        return float(configured)
    return MAX_PADDING if isinstance(ops, NumpyOps) else float("inf")
