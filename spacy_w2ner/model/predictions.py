"""What a segment's grid scores become once predicted: a relation per cell for decoding,
every relation's probability for pictures and for choosing thresholds.

Decoding needs, per cell, only the relation it is read as and its probability: the arg-max, or
the component's link thresholds (``decided_relations``, the one rule). Reduced on the logits'
device (``HostGrids``), that is several times less to copy to the host than the logits, and
the copy overlaps the next batch's scoring. Pictures show every relation's probability
(``grid_probabilities``), and ``tune-decoding`` decodes them many times under
``decided_relations`` (``release.decoding``). Both come from the model's one loop over
scored batches (``batches``) and are given per segment, unpadded, in numpy.
"""
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from spacy.tokens import Doc
from thinc.api import Model, xp2torch

from ..grid.codec import NNW, THW_OFFSET
from ..grid.segments import Segment
from .batches import score_docs
from .types import GridBatch, LinkThresholds


def decided_relations(probs: torch.Tensor, thresholds: Optional[LinkThresholds] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(confidences, relation ids) of each cell of (..., n, n, relations) probabilities.

    The arg-max relation and its probability, except where ``thresholds`` says otherwise: above
    the diagonal (where the decoder reads only NNW) a cell is NNW when P(NNW) >= ``nnw``, else
    NONE; on and below it (where it reads only THW) a cell is THW of its most probable label when
    that label's P(THW) >= ``thw``, else NONE. A cell read as a link has the link's probability
    as its confidence (an entity's score is its weakest link's). The two triangles hold
    different relations, so the two thresholds never compete for a cell.
    """
    confidences, relations = probs.max(dim=-1)
    if thresholds is None or thresholds.is_argmax:
        return confidences, relations
    n = probs.shape[-2]
    upper = torch.ones(n, n, dtype=torch.bool, device=probs.device).triu(1)
    if thresholds.nnw is not None:
        p_nnw = probs[..., NNW]
        is_nnw = (p_nnw >= thresholds.nnw) & upper
        relations = torch.where(upper, is_nnw.to(relations.dtype) * NNW, relations)
        confidences = torch.where(is_nnw, p_nnw, confidences)
    if thresholds.thw is not None and probs.shape[-1] > THW_OFFSET:
        p_thw, label = probs[..., THW_OFFSET:].max(dim=-1)
        is_thw = (p_thw >= thresholds.thw) & ~upper
        relations = torch.where(upper, relations, is_thw.to(relations.dtype) * (label + THW_OFFSET))
        confidences = torch.where(is_thw, p_thw, confidences)
    return confidences, relations


class HostGrids:
    """The relation ids cells are read as and their probabilities, of a padded batch of grids,
    for the host: the arg-max, or under the link ``thresholds`` (``decided_relations``).

    Reduced on the logits' device (softmax, ``decided_relations``) and copied to the host in
    one transfer that does not wait: on a GPU the copy goes to pinned memory behind the batch's
    kernels, so the device works on the next batch while the host decodes this one. ``arrays``
    waits for the copy.
    """

    def __init__(self, logits, thresholds: Optional[LinkThresholds] = None) -> None:
        confidences, relations = decided_relations(torch.softmax(logits.float(), dim=-1), thresholds)
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
