"""The triplet loss's mining on small hand-made grids (spacy_w2ner.grid.triplets): which cells are
anchors, which are their positives and negatives, within which window."""
import math
from itertools import combinations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_w2ner.entities import Entity
from spacy_w2ner.grid.segments import Segment
from spacy_w2ner.grid.triplets import batch_triplets, segment_triplets


def as_sets(triplets):
    """{anchor cell: (positive cells, negative cells)} of a SegmentTriplets."""
    cells = list(zip(triplets.rows.tolist(), triplets.columns.tolist()))
    found = {}
    for a, anchor in enumerate(triplets.anchors.tolist()):
        positives = {cells[m] for m in np.flatnonzero(triplets.positive[a])}
        negatives = {cells[m] for m in np.flatnonzero(triplets.negative[a])}
        found[cells[anchor]] = (positives, negatives)
    return found


def reference(n, entities, cut=(), window=0):
    """The rules as the module docstring states them, cell by cell."""
    upper = [(i, j) for i in range(n) for j in range(i + 1, n)]

    def near(a, c):
        return window == 0 or round(math.dist(a, c)) <= window  # round half to even, as np.rint: no tie occurs

    def one_entity_holds(*words):
        return any(set(words) <= set(tokens) for tokens in entities)

    neutral = {c for c in upper if any(set(c) <= set(tokens) for tokens in cut)}
    found = {}
    for anchor in upper:
        if not one_entity_holds(*anchor):
            continue
        positives = {c for c in upper if c != anchor and near(anchor, c) and one_entity_holds(*anchor, *c)}
        negatives = {c for c in upper if near(anchor, c) and not one_entity_holds(*anchor, *c) and c not in neutral}
        if negatives:
            found[anchor] = (positives or {anchor}, negatives)
    return found


def test_a_discontinuous_entity_pulls_its_pairs_together_and_pushes_the_rest_away():
    # "pain in ... knees": words 0 1 4 of six; word 5 a one-word entity.
    found = as_sets(segment_triplets(0, 6, [(0, 1, 4), (5,)], [], window=0))
    assert set(found) == {(0, 1), (0, 4), (1, 4)}  # every pair of the entity, not only its links; no single word
    positives, negatives = found[(0, 4)]
    assert positives == {(0, 1), (1, 4)}
    assert (0, 2) in negatives and (1, 3) in negatives and (3, 4) in negatives  # across the gap, into it
    assert len(negatives) == 15 - 3


def test_another_entitys_pairs_are_negatives_and_a_lone_pair_is_its_own_positive():
    found = as_sets(segment_triplets(0, 6, [(0, 1, 4), (3, 4)], [], window=0))
    positives, negatives = found[(3, 4)]
    assert positives == {(3, 4)}  # a two-word entity's only pair: it only pushes
    assert {(0, 1), (0, 4), (1, 4)} <= negatives and (3, 4) not in negatives
    assert (3, 4) in found[(0, 4)][1]


def test_overlapping_entities_share_only_what_one_entity_holds():
    # "pain in her knees and ankles": (0 1 2 3) and (0 1 2 5) share their first three words.
    found = as_sets(segment_triplets(0, 6, [(0, 1, 2, 3), (0, 1, 2, 5)], [], window=0))
    positives, negatives = found[(0, 1)]
    assert {(2, 3), (2, 5), (0, 3), (0, 5)} <= positives  # each through one of the two entities
    assert found[(2, 3)][1] >= {(2, 5), (3, 5)}  # (2, 3) and (2, 5) are in no one entity together
    assert (3, 5) in found[(0, 5)][1]


def test_the_window_is_a_rounded_distance_between_cells():
    found = as_sets(segment_triplets(0, 9, [(0, 1, 2, 8)], [], window=2))
    positives, negatives = found[(0, 1)]
    assert positives == {(0, 2), (1, 2)}  # (0, 8), (1, 8), (2, 8) are 7 or more away
    assert negatives == {(0, 3), (1, 3)}  # distances 2 and sqrt(5) = 2.24; (2, 3) is sqrt(8) = 2.83, (1, 4) 3.16

def test_pairs_of_an_entity_a_window_cuts_are_neither_positive_nor_negative():
    found = as_sets(segment_triplets(0, 6, [(0, 1)], [(3, 4, 5)], window=0))
    positives, negatives = found[(0, 1)]
    assert not {(3, 4), (3, 5), (4, 5)} & (positives | negatives)
    assert (2, 3) in negatives


def test_no_pair_no_triplet_and_no_negative_no_triplet():
    assert len(segment_triplets(0, 4, [(1,), (3,)], [], 0).anchors) == 0
    assert len(segment_triplets(0, 2, [(0, 1)], [], 0).anchors) == 0  # its only pair has nothing to push


@settings(max_examples=80, deadline=None)
@given(data=st.data(), n=st.integers(2, 9), window=st.sampled_from([0, 1, 2, 3, 25]))
def test_the_mining_is_the_rules_cell_by_cell(data, n, window):
    tokens = st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True).map(sorted).map(tuple)
    entities = data.draw(st.lists(tokens, max_size=4))
    cut = data.draw(st.lists(tokens, max_size=1))
    assert as_sets(segment_triplets(0, n, entities, cut, window)) == reference(n, entities, cut, window)


def test_a_batch_numbers_its_segments_and_counts_its_cells():
    gold = [[Entity(0, (0, 2, 3)), Entity(0, (6,))], [Entity(0, (1, 2))]]
    segments = [Segment(0, 0, 5, 0, 5), Segment(0, 5, 8, 5, 8), Segment(1, 0, 4, 0, 4)]
    triplets = batch_triplets(segments, gold, window=0)
    assert [t.segment for t in triplets.segments] == [0, 2]  # the middle one holds a single word only
    assert triplets.cells == 25 + 9 + 16
    assert set(as_sets(triplets.segments[0])) == {(0, 2), (0, 3), (2, 3)}
    windows = [Segment(0, 0, 4, 0, 3), Segment(0, 2, 6, 3, 6)]  # the second cuts (0, 2, 3): 2 and 3 are neutral there
    cut = batch_triplets(windows, [[Entity(0, (0, 2, 3)), Entity(0, (4, 5))]], window=0)
    second = as_sets(next(t for t in cut.segments if t.segment == 1))
    assert (0, 1) not in second[(2, 3)][1]  # segment words 0, 1 are doc words 2, 3
