"""What a segment's grid scores become once predicted: argmax relations for decoding,
every relation's probability for pictures.

Decoding needs, per cell, only the most likely relation and its probability: reduced on
the logits' device (``HostGrids``), that is several times less to copy to the host than
the logits, and the copy overlaps the next batch's scoring. Pictures show every
relation's probability (``grid_probabilities``). Both come from the model's one loop over
scored batches (``batches``) and are given per segment, unpadded, in numpy.
"""
from typing import Iterator, List, Sequence, Tuple

import numpy as np
import torch
from spacy.tokens import Doc
from thinc.api import Model, xp2torch

from ..grid.segments import Segment
from .batches import score_docs
from .types import GridBatch


class HostGrids:
    """Argmax relation ids and their probabilities of a padded batch of grids, for the host.

    Reduced on the logits' device (softmax, max) and copied to the host in one transfer
    that does not wait: on a GPU the copy goes to pinned memory behind the batch's kernels,
    so the device works on the next batch while the host decodes this one. ``arrays``
    waits for the copy.
    """

    def __init__(self, logits) -> None:
        confidences, relations = torch.softmax(logits.float(), dim=-1).max(dim=-1)
        packed = torch.stack([confidences, relations.to(confidences.dtype)])  # ids < 2**24: exact
        self._relation_dtype = np.uint8 if logits.shape[-1] <= 256 else np.int16  # kept per window until decoded
        self._ready = None
        if packed.is_cuda:
            self._host = torch.empty(packed.shape, dtype=packed.dtype, pin_memory=True)
            self._host.copy_(packed, non_blocking=True)
            self._ready = torch.cuda.Event()
            self._ready.record()
        else:
            self._host = packed

    def arrays(self) -> Tuple[np.ndarray, np.ndarray]:
        """(relation ids, confidences) as numpy, (segments, longest, longest) each."""
        if self._ready is not None:
            self._ready.synchronize()
            self._ready = None
        host = self._host.numpy()
        return host[1].astype(self._relation_dtype), host[0]


def segment_grids(batches: Sequence[GridBatch]) -> Iterator[Tuple[Segment, np.ndarray, np.ndarray]]:
    """(segment, relation ids, confidences) for every segment of the batches, unpadded (numpy)."""
    for batch in batches:
        predicted = batch.predicted if batch.predicted is not None else HostGrids(xp2torch(batch.logits))
        yield from _per_segment(batch.segments, *predicted.arrays())


def grid_probabilities(model: Model, docs: List[Doc]) -> List[Tuple[Segment, np.ndarray]]:
    """Every relation's probability on every cell of each segment's grid (for pictures).

    Returns (segment, probs) per segment, probs of shape (n, n, relations) in numpy, as
    the model predicts them. A transformer listener reads the upstream component's output:
    run the pipeline's components before w2ner on the docs first.
    """
    _, _, batches = score_docs(model, docs, is_train=False)
    grids: List[Tuple[Segment, np.ndarray]] = []
    for batch in batches:
        probs = torch.softmax(batch.logits.float(), dim=-1).cpu().numpy()
        grids.extend(_per_segment(batch.segments, probs))
    return sorted(grids, key=lambda grid: (grid[0].doc_index, grid[0].start))


def _per_segment(segments: Sequence[Segment], *padded: np.ndarray) -> Iterator[tuple]:
    """(segment, each padded array's n x n block of it) for every segment of a batch."""
    for k, segment in enumerate(segments):
        n = segment.length
        yield (segment, *(array[k, :n, :n] for array in padded))
