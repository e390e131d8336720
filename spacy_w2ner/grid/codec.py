"""The W2NER grid codec: entities <-> word-word relation grids (pure numpy).

A sentence of n words gets an n x n grid of relation ids:

* ``NONE`` (0): no relation;
* ``NNW`` (1), upper triangle: cell (i, j), i < j, links word i to the next word j
  of the same entity;
* ``THW`` (2 + label id), lower triangle or diagonal: cell (tail, head) closes an
  entity of that label; the diagonal marks one-word entities.

``gold_cells`` is the one definition of the gold grid of a set of entities (which cells,
which entity keeps a THW cell that two labels claim): training's targets, the converters'
conflict counts and the grid picture's gold outlines all read it, so they cannot disagree.

Decoding follows the paper: every NNW path from a head to a tail that a THW cell
links is an entity. So entities of one label that share a word can read back as more
than they are, in the reference's grid too: (A, B, D) and (B, C, D) also make
(A, B, C, D) and (B, D). No sentence of CADEC's train, dev or test sets does (every gold
grid decodes to its entities exactly). The number of paths per THW cell is capped, so a badly
trained grid cannot make decoding explode in time or memory. With ``best_path_only``
a THW cell gives one entity, its best-scoring path: gold corpora rarely hold two entities
of one label with the same first and last words (10 of CADEC's 4428 train entities share
their THW cell with another), while a spurious link (a skip link beside a contiguous path,
say) makes a second path there.
"""
from dataclasses import dataclass
from itertools import chain
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

import numpy as np

from ..entities import Entity, Label, TokenIndices

NONE = 0
NNW = 1
THW_OFFSET = 2
Cell = Tuple[int, int]  # (row, column)


def n_relations(n_labels: int) -> int:
    """Number of relation classes on a grid for ``n_labels`` entity labels."""
    return THW_OFFSET + n_labels


@dataclass
class DecodeResult:
    entities: List[Entity]  # labels are label ids
    truncated_edges: int  # THW cells whose paths were cut at the cap


class GoldCells(NamedTuple):
    """The gold grid of a set of entities, as cells: what training is taught."""

    relations: Dict[Cell, int]  # (row, column) -> relation id: NNW links and THW cells
    thw_conflicts: int  # entities whose THW cell another label claimed first


def gold_cells(entities: Iterable[Entity], length: Optional[int] = None) -> GoldCells:
    """The NNW and THW cells of entities (labels are label ids, tokens sorted word indices).

    The one definition of a gold grid: training (``encode_grid``), the conflict counts of
    the converters (``thw_conflicts``) and the grid picture's outlines all read it. Only one
    label fits a (tail, head) cell: the first entity to claim it keeps it, and each later
    entity of another label there is a THW conflict (it cannot be represented, so none of its
    cells is written: its NNW path would read as another entity of the first label). With
    ``length``, tokens outside a grid of that many words raise ValueError.
    """
    relations: Dict[Cell, int] = {}
    conflicts = 0
    for entity in entities:
        tokens = list(entity.tokens)
        if not tokens:
            raise ValueError("An entity must have at least one token")
        if tokens[0] < 0 or (length is not None and tokens[-1] >= length):
            raise ValueError(f"Entity tokens {tokens} fall outside a grid of {length} words")
        relation = THW_OFFSET + entity.label
        if relations.setdefault((tokens[-1], tokens[0]), relation) != relation:
            conflicts += 1  # its links are left out too: under the other label they would make another entity
            continue
        relations.update(dict.fromkeys(zip(tokens, tokens[1:]), NNW))
    return GoldCells(relations, conflicts)


def encode_grid(entities: Iterable[Entity], length: int) -> Tuple[np.ndarray, int]:
    """Write entities (labels are label ids, tokens sorted word indices) into a relation grid.

    Returns the grid (int64, length x length) of ``gold_cells`` and its number of THW
    conflicts, which lets callers report the entities the grid leaves out.
    """
    gold = gold_cells(entities, length)
    grid = np.zeros((length, length), dtype=np.int64)
    if gold.relations:
        rows, columns = zip(*gold.relations)
        grid[rows, columns] = list(gold.relations.values())
    return grid, gold.thw_conflicts


def thw_conflicts(entities: Iterable[Entity]) -> int:
    """How many entities share their head and tail word with an entity of another label.

    Only one label fits a (tail, head) cell, so all but one of them cannot be learned
    or predicted. Labels may be names or ids (they are numbered in order of appearance).
    """
    label_ids: Dict[Label, int] = {}
    numbered = [entity.with_label(label_ids.setdefault(entity.label, len(label_ids))) for entity in entities]
    return gold_cells(numbered).thw_conflicts


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
    max_paths_per_word: int = 16,
    best_path_only: bool = False,
) -> DecodeResult:
    """Read the entities off a relation grid.

    relations: (n, n) int array of relation ids (argmax of the model's scores).
    confidences: (n, n) probabilities of those relations; an entity's score is the
        lowest probability among its NNW cells and its THW cell (its weakest link).
        Without it every score is 1.0.
    max_paths_per_edge: at most this many NNW paths are read for one THW cell.
    max_paths_per_word: at most ``max_paths_per_word * n`` paths are read for the
        whole grid (THW cells in (tail, head) order), so a degenerate grid with
        thousands of THW cells stays cheap. THW cells with a path left unread, or cut
        at the per-cell cap, are counted in ``truncated_edges``.
    best_path_only: one entity per THW cell, the path of the highest score (the first, in
        lexicographic order, of equals) among those read, instead of every path.
    """
    n = relations.shape[0]
    if n == 0:
        return DecodeResult([], 0)
    relations = np.asarray(relations)
    lower = np.tril(relations >= THW_OFFSET)
    tails, heads = np.nonzero(lower)
    if len(tails) == 0:
        return DecodeResult([], 0)
    labels = relations[tails, heads] - THW_OFFSET
    nnw = np.triu(relations == NNW, k=1)
    reach = reachability(nnw) if (tails > heads).any() else None
    successors = [np.flatnonzero(row).tolist() for row in nnw] if reach is not None else []
    budget = max_paths_per_word * n
    found: List[Tuple[int, TokenIndices]] = []
    truncated = 0
    for k, (tail, head) in enumerate(zip(tails.tolist(), heads.tolist())):
        if len(found) >= budget:
            truncated += _cells_with_a_path(tails[k:], heads[k:], reach)
            break
        if tail == head:
            found.append((int(labels[k]), (head,)))
            continue
        if not reach[head, tail]:
            continue
        cap = min(max_paths_per_edge, budget - len(found))
        paths, was_cut = _paths_between(successors, reach[:, tail], head, tail, cap)
        truncated += was_cut
        found.extend((int(labels[k]), path) for path in paths)
    scores = _path_scores(confidences, [path for _, path in found])
    entities = [Entity(label, path, score) for (label, path), score in zip(found, scores)]
    return DecodeResult(_best_per_cell(entities) if best_path_only else entities, truncated)


def _cells_with_a_path(tails: np.ndarray, heads: np.ndarray, reach: Optional[np.ndarray]) -> int:
    """How many of these THW cells an NNW path closes (each would give an entity): a cell
    without one gives none, so leaving it unread loses nothing."""
    closed = tails == heads
    if reach is not None:
        closed |= reach[heads, tails]
    return int(closed.sum())


def _best_per_cell(entities: List[Entity]) -> List[Entity]:
    """The highest-scoring entity of each THW cell (label, first word, last word); the first of equals."""
    best: Dict[Tuple[int, int, int], Entity] = {}
    for entity in entities:
        cell = (entity.label, entity.tokens[0], entity.tokens[-1])
        if cell not in best or entity.score > best[cell].score:
            best[cell] = entity
    return list(best.values())


def _paths_between(
    successors: List[List[int]], can_reach_tail: np.ndarray, head: int, tail: int, cap: int
) -> Tuple[List[TokenIndices], bool]:
    """The first ``cap`` NNW paths head -> tail in lexicographic order, and whether more exist.

    Depth first with one lazy iterator per level, and branches that cannot reach
    the tail pruned: every step leads to a path, so the work is bounded by the
    first path's length plus a few steps per further path.
    """

    def steps_from(node: int) -> Iterator[int]:
        for nxt in successors[node]:
            if nxt > tail:
                return
            if nxt == tail or can_reach_tail[nxt]:
                yield nxt

    paths: List[TokenIndices] = []
    prefix = [head]
    pending = [steps_from(head)]
    while pending:
        nxt = next(pending[-1], None)
        if nxt is None:
            pending.pop()
            prefix.pop()
        elif nxt == tail:
            if len(paths) >= cap:
                return paths, True
            paths.append(tuple(prefix) + (tail,))
        else:
            prefix.append(nxt)
            pending.append(steps_from(nxt))
    return paths, False


def _path_scores(confidences: Optional[np.ndarray], paths: List[TokenIndices]) -> List[float]:
    """The weakest-link score of each path, computed for all paths at once."""
    if confidences is None or not paths:
        return [1.0] * len(paths)
    lengths = np.fromiter((len(p) for p in paths), dtype=np.int64, count=len(paths))
    flat = np.fromiter(chain.from_iterable(paths), dtype=np.int64, count=int(lengths.sum()))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    ends = starts + lengths
    scores = confidences[flat[ends - 1], flat[starts]].astype(np.float64)
    # Link k joins flat[k] -> flat[k + 1]; the last word of a path links to nothing.
    links = np.empty(len(flat), dtype=np.float64)
    links[:-1] = confidences[flat[:-1], flat[1:]]
    links[ends - 1] = np.inf
    return np.minimum(scores, np.minimum.reduceat(links, starts)).tolist()
