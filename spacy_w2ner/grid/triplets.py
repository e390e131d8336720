"""Where a batch's triplets are: the anchor, positive and negative cells of a grid-level triplet
loss (TriG-NER, Cabral et al., WWW 2025), from the batch's gold entities (pure numpy).

The cells are the word pairs above the diagonal (row word before column word), where the
codec's NNW links live, as in TriG-NER:

* an **anchor** is a pair of words of one gold entity: any two of its words, neighbours or not;
* its **positives** are the other pairs within ``window`` of it whose four words one gold entity
  holds: they should look alike;
* its **negatives** are all the other pairs within ``window`` of it: pairs that straddle an
  entity's edge or its gap, pairs of no entity, pairs of another entity. They should look
  unlike it.

``window`` is a distance between cells' (row, column) positions, rounded to the nearest
integer as TriG-NER rounds it (0: the whole grid). Its released CADEC settings are 25 (best
overall) and 20 (best for discontinuous entities).

Two differences from TriG-NER, both because it adds two tokens, [POS] and [NEG], to the front
of every sentence (in training and prediction) to pair with anchors that have no positive or
no negative, and nothing is added to the input here: an anchor with no positive within its
window (the only pair of a two-word entity) is its own positive, so its triplet pushes its
negatives away and pulls nothing; an anchor with no negative gives no triplet. Single words
make no pair and so no anchor. Pairs of words of an entity that a window cuts are neither
positives nor negatives: windows never teach that part of an entity is no entity.
"""
from typing import List, NamedTuple, Sequence

import numpy as np

from ..entities import Entity
from .segments import Segment, entities_met


class SegmentTriplets(NamedTuple):
    """A segment's candidate cells and, for each anchor among them, its positives and negatives."""

    segment: int  # its index in the batch
    rows: np.ndarray  # (cells,) the candidate cells' rows
    columns: np.ndarray  # (cells,) their columns
    anchors: np.ndarray  # (anchors,) each anchor's index among the cells
    positive: np.ndarray  # (anchors, cells) bool
    negative: np.ndarray  # (anchors, cells) bool


class BatchTriplets(NamedTuple):
    """A grid batch's triplets, segment by segment, and its real cells (sum of n^2: its share of a step)."""

    segments: List[SegmentTriplets]
    cells: int


def batch_triplets(segments: Sequence[Segment], gold: Sequence[Sequence[Entity]], window: int) -> BatchTriplets:
    """The triplets of a batch of segments; ``gold[doc_index]`` holds the doc's gold entities
    (label ids, doc token indices), as ``targets.gold_grids`` reads them."""
    found = []
    for k, (segment, (held, cut)) in enumerate(zip(segments, entities_met(segments, gold))):
        inside = [segment.to_segment(e).tokens for e in held]
        triplets = segment_triplets(k, segment.length, inside, [segment.held(e.tokens) for e in cut], window)
        if len(triplets.anchors):
            found.append(triplets)
    return BatchTriplets(found, sum(segment.length**2 for segment in segments))


def segment_triplets(index: int, n: int, entities: Sequence[Sequence[int]], cut: Sequence[Sequence[int]], window: int) -> SegmentTriplets:
    """The triplets of one grid of ``n`` words: ``entities`` are the token indices of the gold
    entities it holds whole, ``cut`` those of the entities a window cuts (the tokens it holds)."""
    rows, columns = np.triu_indices(n, k=1)
    members = _members(entities, n)
    held = members[:, rows] & members[:, columns]  # (entities, cells): the entity holds both words
    anchors = np.flatnonzero(held.any(axis=0))
    if len(anchors) == 0:
        return SegmentTriplets(index, rows, columns, anchors, np.zeros((0, len(rows)), bool), np.zeros((0, len(rows)), bool))
    same_entity = (held[:, anchors].T.astype(np.float32) @ held.astype(np.float32)) > 0  # (anchors, cells)
    within = _within(rows, columns, anchors, window)
    itself = np.zeros_like(same_entity)
    itself[np.arange(len(anchors)), anchors] = True
    positive = same_entity & within & ~itself
    alone = ~positive.any(axis=1)
    positive[alone] = itself[alone]  # no other pair of its entity in its window: its own positive
    cut_members = _members(cut, n)
    neutral = (cut_members[:, rows] & cut_members[:, columns]).any(axis=0)
    negative = within & ~same_entity & ~neutral
    keep = negative.any(axis=1)
    return SegmentTriplets(index, rows, columns, anchors[keep], positive[keep], negative[keep])


def _members(entities: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """(entities, n) bool: which words each entity holds."""
    members = np.zeros((len(entities), n), dtype=bool)
    for k, tokens in enumerate(entities):
        members[k, list(tokens)] = True
    return members


def _within(rows: np.ndarray, columns: np.ndarray, anchors: np.ndarray, window: int) -> np.ndarray:
    """(anchors, cells) bool: the cells whose distance to the anchor rounds to at most ``window``
    (0: every cell). Squared distances are integers, so d rounds to <= w exactly when d^2 <= w^2 + w."""
    if window == 0:
        return np.ones((len(anchors), len(rows)), dtype=bool)
    squared = (rows[anchors, None] - rows[None, :]) ** 2 + (columns[anchors, None] - columns[None, :]) ** 2
    return squared <= window * window + window
