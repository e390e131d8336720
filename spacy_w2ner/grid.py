"""The W2NER grid codec: entities <-> word-word relation grids (pure numpy).

A sentence of n words gets an n x n grid of relation ids:

* ``NONE`` (0): no relation;
* ``NNW`` (1), upper triangle: cell (i, j), i < j, links word i to the next word j
  of the same entity;
* ``THW`` (2 + label id), lower triangle or diagonal: cell (tail, head) closes an
  entity of that label; the diagonal marks one-word entities.

Decoding follows the paper: every NNW path from a head to a tail that a THW cell
links is an entity. The number of paths per THW cell is capped, so a badly
trained grid cannot make decoding explode in time or memory.
"""
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

NONE = 0
NNW = 1
THW_OFFSET = 2

TokenIndices = Tuple[int, ...]


def n_relations(n_labels: int) -> int:
    """Number of relation classes on a grid for ``n_labels`` entity labels."""
    return THW_OFFSET + n_labels


@dataclass(frozen=True)
class DecodedEntity:
    """An entity read off a grid: label id, sorted word indices and confidence."""

    label_id: int
    tokens: TokenIndices
    score: float = 1.0


@dataclass
class DecodeResult:
    entities: List[DecodedEntity]
    truncated_edges: int  # THW cells whose paths were cut at the cap


def encode_grid(
    entities: Iterable[Tuple[int, Sequence[int]]], length: int
) -> Tuple[np.ndarray, int]:
    """Write entities (label id, word indices) into a relation grid.

    Returns the grid (int64, length x length) and the number of THW conflicts:
    entities whose (tail, head) cell already holds another label. The first entity
    to claim a cell keeps it; the conflict count lets callers report the rest.
    """
    grid = np.zeros((length, length), dtype=np.int64)
    conflicts = 0
    for label_id, tokens in entities:
        tokens = sorted(set(tokens))
        if not tokens:
            raise ValueError("An entity must have at least one token")
        if tokens[0] < 0 or tokens[-1] >= length:
            raise ValueError(f"Entity tokens {tokens} fall outside a grid of {length} words")
        if len(tokens) > 1:
            grid[tokens[:-1], tokens[1:]] = NNW
        tail, head = tokens[-1], tokens[0]
        relation = THW_OFFSET + label_id
        if grid[tail, head] not in (NONE, relation):
            conflicts += 1
        else:
            grid[tail, head] = relation
    return grid, conflicts


def reachability(nnw: np.ndarray) -> np.ndarray:
    """Transitive closure of the NNW graph: ``reach[u, v]`` iff a path u -> v exists.

    NNW edges only point forward (u < v), so one backward sweep suffices.
    """
    n = nnw.shape[0]
    reach = np.zeros((n, n), dtype=bool)
    for u in range(n - 1, -1, -1):
        successors = nnw[u]
        reach[u] = successors
        if successors.any():
            reach[u] |= reach[successors].any(axis=0)
    return reach


def decode_grid(
    relations: np.ndarray,
    confidences: Optional[np.ndarray] = None,
    *,
    max_paths_per_edge: int = 64,
) -> DecodeResult:
    """Read the entities off a relation grid.

    relations: (n, n) int array of relation ids (argmax of the model's scores).
    confidences: (n, n) probabilities of those relations; an entity's score is the
        lowest probability among its NNW cells and its THW cell (its weakest link).
        Without it every score is 1.0.
    max_paths_per_edge: at most this many NNW paths are read for one THW cell.
    """
    n = relations.shape[0]
    if n == 0:
        return DecodeResult([], 0)
    relations = np.asarray(relations)
    lower = np.tril(relations >= THW_OFFSET)
    tails, heads = np.nonzero(lower)
    if len(tails) == 0:
        return DecodeResult([], 0)
    nnw = np.triu(relations == NNW, k=1)
    multi_word = tails > heads
    reach = reachability(nnw) if multi_word.any() else None
    successors = [np.flatnonzero(row).tolist() for row in nnw] if reach is not None else []
    entities: List[DecodedEntity] = []
    truncated = 0
    for tail, head in zip(tails.tolist(), heads.tolist()):
        label_id = int(relations[tail, head]) - THW_OFFSET
        if tail == head:
            paths = [(head,)]
        else:
            if not reach[head, tail]:
                continue
            paths, was_cut = _paths_between(successors, reach, head, tail, max_paths_per_edge)
            truncated += was_cut
        for path in paths:
            score = _path_score(confidences, path) if confidences is not None else 1.0
            entities.append(DecodedEntity(label_id, path, score))
    return DecodeResult(entities, truncated)


def _paths_between(
    successors: List[List[int]], reach: np.ndarray, head: int, tail: int, cap: int
) -> Tuple[List[TokenIndices], bool]:
    """Enumerate NNW paths head -> tail, depth first, stopping after ``cap`` paths.

    Branches that cannot reach the tail are pruned, so every step taken leads to a
    path: the work is bounded by cap x path length.
    """
    can_reach_tail = reach[:, tail]
    paths: List[TokenIndices] = []
    stack: List[Tuple[int, TokenIndices]] = [(head, (head,))]
    while stack:
        node, prefix = stack.pop()
        # Push in reverse so that paths come out in lexicographic order.
        for nxt in reversed(successors[node]):
            if nxt > tail:
                continue
            if nxt == tail:
                if len(paths) >= cap:
                    return sorted(paths), True
                paths.append(prefix + (tail,))
            elif can_reach_tail[nxt]:
                stack.append((nxt, prefix + (nxt,)))
    return sorted(paths), False


def _path_score(confidences: np.ndarray, path: TokenIndices) -> float:
    idx = np.asarray(path)
    weakest = float(confidences[idx[-1], idx[0]])
    if len(idx) > 1:
        weakest = min(weakest, float(confidences[idx[:-1], idx[1:]].min()))
    return weakest
