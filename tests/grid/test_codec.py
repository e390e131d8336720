"""Tests for the W2NER grid codec (spacy_w2ner.grid)."""
from itertools import combinations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from spacy_w2ner.entities import as_entity
from spacy_w2ner.grid.codec import (
    NNW,
    NONE,
    THW_OFFSET,
    decode_grid,
    encode_grid,
    n_relations,
    reachability,
)


def encode(entities, length):
    """encode_grid of (label id, tokens) pairs, tokens normalised as set_entities does."""
    return encode_grid([as_entity(entity) for entity in entities], length)

# Words A B C D E of the paper's examples.
A, B, C, D, E = range(5)


def decoded_set(result):
    return {(e.label, e.tokens) for e in result.entities}


def roundtrip(entities, length):
    grid, conflicts = encode(entities, length)
    assert conflicts == 0
    return grid, decode_grid(grid)


def oracle(grid):
    """Brute-force decoding, independent of grid.py.

    For each THW cell (t, h) with t >= h, every increasing sequence h .. t whose
    consecutive pairs (a, b), a < b, are NNW cells is an entity.
    """
    n = grid.shape[0]
    found = set()
    for t in range(n):
        for h in range(t + 1):
            value = int(grid[t, h])
            if value < THW_OFFSET:
                continue
            label = value - THW_OFFSET
            if h == t:
                found.add((label, (h,)))
                continue
            middle = list(range(h + 1, t))
            for r in range(len(middle) + 1):
                for combo in combinations(middle, r):
                    path = (h,) + combo + (t,)
                    if all(int(grid[a, b]) == NNW for a, b in zip(path, path[1:])):
                        found.add((label, path))
    return found


# ---------------------------------------------------------------------------
# Constants


def test_constants_and_n_relations():
    assert (NONE, NNW, THW_OFFSET) == (0, 1, 2)
    assert n_relations(0) == 2
    assert n_relations(1) == 3
    assert n_relations(4) == 6


# ---------------------------------------------------------------------------
# The paper's four decoding cases


def test_case_a_flat():
    entities = {(0, (A, B)), (1, (D, E))}
    grid, result = roundtrip(sorted(entities), 5)
    assert decoded_set(result) == entities
    assert len(result.entities) == len(entities)
    assert result.truncated_edges == 0

    expected = np.zeros((5, 5), dtype=np.int64)
    expected[A, B] = NNW
    expected[D, E] = NNW
    expected[B, A] = THW_OFFSET + 0
    expected[E, D] = THW_OFFSET + 1
    np.testing.assert_array_equal(grid, expected)
    assert grid.dtype == np.int64


def test_case_b_nested():
    entities = {(0, (B, C)), (1, (A, B, C))}
    _, result = roundtrip(sorted(entities), 5)
    assert decoded_set(result) == entities
    assert len(result.entities) == 2


def test_case_c_overlapping_discontinuous():
    entities = {(0, (A, B, C)), (0, (A, B, D))}
    grid, result = roundtrip(sorted(entities), 5)
    assert decoded_set(result) == entities
    assert len(result.entities) == 2

    expected = np.zeros((5, 5), dtype=np.int64)
    expected[A, B] = NNW
    expected[B, C] = NNW
    expected[B, D] = NNW
    expected[C, A] = THW_OFFSET
    expected[D, A] = THW_OFFSET
    np.testing.assert_array_equal(grid, expected)


def test_case_d_discontinuous():
    entities = {(0, (A, C, D)), (2, (B, C, E))}
    grid, result = roundtrip(sorted(entities), 5)
    assert decoded_set(result) == entities
    assert len(result.entities) == 2

    expected = np.zeros((5, 5), dtype=np.int64)
    expected[A, C] = NNW
    expected[C, D] = NNW
    expected[B, C] = NNW
    expected[C, E] = NNW
    expected[D, A] = THW_OFFSET + 0
    expected[E, B] = THW_OFFSET + 2
    np.testing.assert_array_equal(grid, expected)


def test_single_word_entity_on_diagonal():
    entities = [(1, (C,)), (0, (A, B))]
    grid, conflicts = encode(entities, 5)
    assert conflicts == 0
    assert grid[C, C] == THW_OFFSET + 1
    assert grid[B, A] == THW_OFFSET
    assert grid[A, B] == NNW
    assert np.count_nonzero(grid) == 3
    assert decoded_set(decode_grid(grid)) == {(1, (C,)), (0, (A, B))}


def test_encode_sorts_and_deduplicates_tokens():
    grid, conflicts = encode([(0, [3, 1, 1, 2])], 5)
    assert conflicts == 0
    assert grid[1, 2] == NNW and grid[2, 3] == NNW
    assert grid[3, 1] == THW_OFFSET
    assert decoded_set(decode_grid(grid)) == {(0, (1, 2, 3))}


def test_empty_grid_and_no_entities():
    assert decode_grid(np.zeros((0, 0), dtype=np.int64)).entities == []
    grid, conflicts = encode([], 4)
    assert conflicts == 0
    assert grid.shape == (4, 4) and not grid.any()
    result = decode_grid(grid)
    assert result.entities == [] and result.truncated_edges == 0


# ---------------------------------------------------------------------------
# Encoding errors and conflicts


def test_thw_conflict_first_label_kept():
    grid, conflicts = encode([(0, (A, B, C)), (1, (A, C))], 5)
    assert conflicts == 1
    assert grid[C, A] == THW_OFFSET + 0


def test_same_label_same_cell_is_not_a_conflict():
    grid, conflicts = encode([(1, (A, B, C)), (1, (A, C))], 5)
    assert conflicts == 0
    assert grid[C, A] == THW_OFFSET + 1


@pytest.mark.parametrize(
    "tokens", [(0, 5), (5,), (-1, 2), (2, 7)], ids=["past-end", "single-past-end", "negative", "far"]
)
def test_encode_out_of_range_raises(tokens):
    with pytest.raises(ValueError):
        encode([(0, tokens)], 5)


def test_encode_empty_entity_raises():
    with pytest.raises(ValueError):
        encode([(0, ())], 5)


# ---------------------------------------------------------------------------
# Decoder reads NNW only above the diagonal and THW only on/below it


def test_decoder_ignores_misplaced_relations():
    grid = np.zeros((4, 4), dtype=np.int64)
    grid[0, 2] = THW_OFFSET + 1  # THW value in the upper triangle
    grid[3, 1] = NNW  # NNW value in the lower triangle
    assert decode_grid(grid).entities == []


def test_thw_value_in_upper_triangle_is_not_a_link():
    grid = np.zeros((4, 4), dtype=np.int64)
    grid[0, 1] = NNW
    grid[1, 2] = THW_OFFSET  # not an NNW link
    grid[2, 0] = THW_OFFSET
    assert decode_grid(grid).entities == []
    grid[1, 2] = NNW
    assert decoded_set(decode_grid(grid)) == {(0, (0, 1, 2))}


def test_nnw_in_lower_triangle_is_not_a_link():
    grid = np.zeros((4, 4), dtype=np.int64)
    grid[1, 0] = NNW  # backwards "link" 1 -> 0 must not be used
    grid[2, 1] = NNW
    grid[2, 0] = THW_OFFSET
    assert decode_grid(grid).entities == []
    grid[0, 1] = NNW
    grid[1, 2] = NNW
    assert decoded_set(decode_grid(grid)) == {(0, (0, 1, 2))}


# ---------------------------------------------------------------------------
# Scores


def test_scores_are_weakest_link():
    grid, _ = encode([(0, (A, B, D)), (1, (B, D)), (0, (E,))], 5)
    conf = np.full((5, 5), 0.9)
    conf[A, B] = 0.7  # NNW of ABD
    conf[B, D] = 0.8  # NNW shared by ABD and BD
    conf[D, A] = 0.95  # THW of ABD
    conf[D, B] = 0.6  # THW of BD
    conf[E, E] = 0.55  # THW of E
    result = decode_grid(grid, conf)
    scores = {(e.label, e.tokens): e.score for e in result.entities}
    assert scores == pytest.approx({(0, (A, B, D)): 0.7, (1, (B, D)): 0.6, (0, (E,)): 0.55})

    # The THW cell can be the weakest link too.
    conf[D, A] = 0.3
    scores = {(e.label, e.tokens): e.score for e in decode_grid(grid, conf).entities}
    assert scores[(0, (A, B, D))] == pytest.approx(0.3)


def test_scores_default_to_one():
    grid, _ = encode([(0, (A, C)), (1, (D,))], 5)
    assert all(e.score == 1.0 for e in decode_grid(grid).entities)


# ---------------------------------------------------------------------------
# Path cap


def full_grid(n):
    grid = np.triu(np.full((n, n), NNW, dtype=np.int64), k=1)
    grid[n - 1, 0] = THW_OFFSET
    return grid


def test_path_cap_truncates():
    n = 20  # 2**18 paths from 0 to 19
    result = decode_grid(full_grid(n), max_paths_per_edge=5)
    assert len(result.entities) == 5
    assert result.truncated_edges == 1
    paths = [e.tokens for e in result.entities]
    assert len(set(paths)) == 5
    for path in paths:
        assert path[0] == 0 and path[-1] == n - 1
        assert list(path) == sorted(set(path))
    assert all(e.label == 0 for e in result.entities)


def test_path_cap_default_is_bounded():
    result = decode_grid(full_grid(20))
    assert len(result.entities) == 64
    assert result.truncated_edges == 1


def test_path_cap_not_reached():
    n = 6  # 2**4 = 16 paths
    grid = full_grid(n)
    result = decode_grid(grid, max_paths_per_edge=100)
    assert len(result.entities) == 16
    assert result.truncated_edges == 0
    assert decoded_set(result) == oracle(grid)


def test_path_cap_exactly_path_count_is_not_truncated():
    grid = full_grid(6)
    result = decode_grid(grid, max_paths_per_edge=16)
    assert len(result.entities) == 16
    assert result.truncated_edges == 0


def test_paths_come_out_in_lexicographic_order():
    result = decode_grid(full_grid(6), max_paths_per_edge=5)
    paths = [e.tokens for e in result.entities]
    assert paths == [(0, 1, 2, 3, 4, 5), (0, 1, 2, 3, 5), (0, 1, 2, 4, 5), (0, 1, 2, 5), (0, 1, 3, 4, 5)]


def test_grid_wide_path_budget_bounds_a_degenerate_grid():
    n = 30
    grid = np.triu(np.full((n, n), NNW, dtype=np.int64), k=1)
    grid[np.tril_indices(n)] = THW_OFFSET  # every lower cell closes an entity
    result = decode_grid(grid, max_paths_per_edge=4, max_paths_per_word=2)
    assert len(result.entities) == 2 * n
    # THW cells are read in (tail, head) order: all of tails 0..k, then the budget ends.
    read = sorted({(e.tokens[-1], e.tokens[0]) for e in result.entities})
    assert read[:3] == [(0, 0), (1, 0), (1, 1)]
    n_cells = n * (n + 1) // 2
    assert result.truncated_edges >= n_cells - len(read)


def test_thw_cells_left_unread_count_as_truncated_only_where_a_path_closes_them():
    """The budget ends after (0,), (0, 1), (1,); the THW cell (2, 1) has no NNW path 1 -> 2, so
    leaving it unread loses no entity (it once counted, and the component warned of a cap)."""
    grid = np.array([[THW_OFFSET, NNW, 0], [THW_OFFSET, THW_OFFSET, 0], [0, THW_OFFSET, 0]])
    full, capped = decode_grid(grid), decode_grid(grid, max_paths_per_word=1)
    assert [e.tokens for e in capped.entities] == [e.tokens for e in full.entities] == [(0,), (0, 1), (1,)]
    assert (full.truncated_edges, capped.truncated_edges) == (0, 0)
    grid[1, 2] = NNW  # now (2, 1) closes 1 -> 2: left unread, it is lost
    assert decode_grid(grid, max_paths_per_word=1).truncated_edges == 1


def test_vectorised_scores_match_each_path():
    rng = np.random.default_rng(0)
    grid = full_grid(9)
    grid[5, 2] = THW_OFFSET + 1
    grid[4, 4] = THW_OFFSET
    conf = rng.uniform(0.1, 1.0, size=(9, 9))
    for entity in decode_grid(grid, conf, max_paths_per_edge=50).entities:
        path = entity.tokens
        links = [conf[a, b] for a, b in zip(path, path[1:])]
        assert entity.score == pytest.approx(min([conf[path[-1], path[0]]] + links))


# ---------------------------------------------------------------------------
# Reachability


def test_reachability_hand_made():
    n = 6
    nnw = np.zeros((n, n), dtype=bool)
    for u, v in [(0, 1), (1, 3), (2, 3), (3, 4)]:
        nnw[u, v] = True
    reach = reachability(nnw)
    expected = np.zeros((n, n), dtype=bool)
    for u, targets in {0: [1, 3, 4], 1: [3, 4], 2: [3, 4], 3: [4]}.items():
        expected[u, targets] = True
    np.testing.assert_array_equal(reach, expected)


def brute_closure(nnw):
    n = nnw.shape[0]
    reach = nnw.astype(bool).copy()
    for k in range(n):
        reach = reach | (reach[:, [k]] & reach[[k], :])
    return reach


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 8).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.booleans(), min_size=n * n, max_size=n * n))))
def test_reachability_matches_closure(case):
    n, cells = case
    nnw = np.triu(np.array(cells, dtype=bool).reshape(n, n), k=1)
    np.testing.assert_array_equal(reachability(nnw), brute_closure(nnw))


# ---------------------------------------------------------------------------
# Property tests


@st.composite
def random_grids(draw):
    n = draw(st.integers(1, 7))
    n_labels = draw(st.integers(1, 3))
    cells = draw(
        st.lists(st.integers(0, 1 + n_labels), min_size=n * n, max_size=n * n)
    )
    return np.array(cells, dtype=np.int64).reshape(n, n)


@settings(max_examples=200, deadline=None)
@given(random_grids())
def test_decode_matches_oracle(grid):
    result = decode_grid(grid, max_paths_per_edge=10_000)
    pairs = [(e.label, e.tokens) for e in result.entities]
    assert len(pairs) == len(set(pairs)), "duplicate entities"
    assert set(pairs) == oracle(grid)
    assert result.truncated_edges == 0


@st.composite
def entity_sets(draw):
    n = draw(st.integers(1, 8))
    entity = st.tuples(
        st.integers(0, 2),
        st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True).map(
            lambda ts: tuple(sorted(ts))
        ),
    )
    entities = draw(st.lists(entity, min_size=0, max_size=5))
    return n, set(entities)


def encode_conflicts(entities):
    cells = {}
    for label, tokens in entities:
        key = (tokens[0], tokens[-1])
        if cells.setdefault(key, label) != label:
            return True
    return False


@settings(max_examples=200, deadline=None)
@given(entity_sets())
def test_encode_decode_roundtrip(case):
    n, entities = case
    assume(not encode_conflicts(entities))
    grid, conflicts = encode(sorted(entities), n)
    assert conflicts == 0
    assume(oracle(grid) == entities)
    result = decode_grid(grid, max_paths_per_edge=10_000)
    pairs = [(e.label, e.tokens) for e in result.entities]
    assert len(pairs) == len(set(pairs))
    assert set(pairs) == entities


def test_thw_conflicts_counts_what_encode_grid_leaves_out():
    from spacy_w2ner.entities import Entity
    from spacy_w2ner.grid.codec import thw_conflicts

    entities = [Entity(0, (A, B, C)), Entity(1, (A, C)), Entity(0, (A, C)), Entity(2, (A, D, C)), Entity(1, (D,))]
    _, conflicts = encode_grid(entities, 5)
    assert thw_conflicts(entities) == conflicts == 2
    named = [Entity("ADR", (A, C)), Entity("DRUG", (A, B, C))]
    assert thw_conflicts(named) == 1
    assert thw_conflicts([]) == 0


def test_an_entity_that_loses_its_thw_cell_is_not_taught_as_another_of_the_winner_s_label():
    """Its links under the winner's THW cell would decode as an entity nobody annotated."""
    from spacy_w2ner.entities import Entity

    grid, conflicts = encode_grid([Entity(0, (A, B, C)), Entity(1, (A, C))], 5)
    assert conflicts == 1 and grid[A, C] == 0
    assert decoded_set(decode_grid(grid)) == {(0, (A, B, C))}


def test_gold_cells_are_the_grid_encode_grid_writes():
    from spacy_w2ner.entities import Entity
    from spacy_w2ner.grid.codec import gold_cells

    entities = [Entity(1, (A, C)), Entity(0, (A, B, C)), Entity(1, (A, D)), Entity(1, (A, B, D)), Entity(0, (E,))]
    cells, conflicts = gold_cells(entities, 5)
    assert conflicts == 1  # (A, B, C) of label 0: label 1 claimed (C, A) first, so none of its cells is written
    assert cells == {(C, A): THW_OFFSET + 1, (A, B): NNW, (D, A): THW_OFFSET + 1, (B, D): NNW,
                     (A, C): NNW, (A, D): NNW, (E, E): THW_OFFSET}
    grid, encoded_conflicts = encode_grid(entities, 5)
    assert encoded_conflicts == conflicts
    assert {(i, j): grid[i, j] for i, j in zip(*np.nonzero(grid))} == cells
    assert gold_cells([Entity(0, (A, 7))]).relations == {(A, 7): NNW, (7, A): THW_OFFSET}  # no length, no bound
    with pytest.raises(ValueError, match="outside a grid of 5 words"):
        gold_cells([Entity(0, (A, 7))], 5)


# ---------------------------------------------------------------------------
# One entity per THW cell (best_path_only)


def test_best_path_only_keeps_the_stronger_of_two_paths_to_one_tail():
    # "pain in her knees": the contiguous path A B C D, and a spurious skip link A -> D.
    grid, _ = encode([(0, (A, B, C, D)), (0, (A, D))], 5)
    conf = np.full((5, 5), 0.9)
    conf[A, D] = 0.6
    assert decoded_set(decode_grid(grid, conf)) == {(0, (A, B, C, D)), (0, (A, D))}
    best = decode_grid(grid, conf, best_path_only=True).entities
    assert [(e.label, e.tokens, e.score) for e in best] == [(0, (A, B, C, D), 0.9)]
    conf[B, C] = 0.5  # now the contiguous path is the weaker
    assert [e.tokens for e in decode_grid(grid, conf, best_path_only=True).entities] == [(A, D)]


def test_best_path_only_keeps_entities_of_other_thw_cells_and_the_first_of_equals():
    # The paper's overlapping case: "pain in her knees and ankles", two tails.
    grid, _ = encode([(0, (A, B, C)), (0, (A, B, E)), (1, (D,))], 5)
    assert decoded_set(decode_grid(grid, best_path_only=True)) == decoded_set(decode_grid(grid))
    grid[A, C] = NNW  # a second path A -> C, as strong (scores all 1.0): the first in order stays
    assert [e.tokens for e in decode_grid(grid, best_path_only=True).entities if e.tokens[-1] == C] == [(A, B, C)]


@settings(max_examples=200, deadline=None)
@given(random_grids(), st.integers(0, 2**16))
def test_best_path_only_is_the_best_scored_entity_of_each_cell(grid, seed):
    conf = np.random.default_rng(seed).random(grid.shape)
    every = decode_grid(grid, conf, max_paths_per_edge=10_000).entities
    best = decode_grid(grid, conf, max_paths_per_edge=10_000, best_path_only=True).entities
    by_cell = {}
    for entity in every:
        by_cell.setdefault((entity.label, entity.tokens[0], entity.tokens[-1]), []).append(entity)
    assert len(best) == len(by_cell)
    for entity in best:
        candidates = by_cell[(entity.label, entity.tokens[0], entity.tokens[-1])]
        assert entity in candidates and entity.score == max(c.score for c in candidates)
