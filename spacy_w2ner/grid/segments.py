"""Cutting documents into grid segments, and grouping segments into batches.

A grid costs n^2 cells, so a document is never gridded whole. It is cut into
sentences when it has sentence boundaries, and any stretch longer than
``max_window`` tokens (a sentence, or the whole unsegmented document) into
overlapping windows. Each window owns a *core*: the cores partition the
document, and an entity predicted in a window is kept when its first token lies
in that window's core, so each entity is reported once and comes from the window
that sees the most context around its start; an entity that window cannot hold
(it ends past the window) is kept from the windows that hold it whole. Training asks which gold
entities each segment holds whole or cuts (``entities_met``).
"""
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from spacy.tokens import Doc

from ..entities import Entity, TokenIndices
from .codec import decode_grid


@dataclass(frozen=True)
class Segment:
    """Tokens [start, end) of document ``doc_index``, owning [core_start, core_end)."""

    doc_index: int
    start: int
    end: int
    core_start: int
    core_end: int

    @property
    def length(self) -> int:
        return self.end - self.start

    def owns(self, token_index: int) -> bool:
        return self.core_start <= token_index < self.core_end

    def contains(self, tokens: TokenIndices) -> bool:
        """Whether the sorted doc token indices lie wholly inside the segment."""
        return self.start <= tokens[0] and tokens[-1] < self.end

    def cuts(self, tokens: TokenIndices) -> bool:
        """Whether the segment holds some, but not all, of the span from the first to the last token."""
        return not self.contains(tokens) and tokens[0] < self.end and tokens[-1] >= self.start

    def held(self, tokens: TokenIndices) -> List[int]:
        """The sorted doc token indices that lie inside the segment, relative to it."""
        return [t - self.start for t in tokens[bisect_left(tokens, self.start) : bisect_left(tokens, self.end)]]

    def to_segment(self, entity: Entity) -> Entity:
        """An entity of the doc with token indices relative to the segment."""
        return entity.shifted(-self.start)

    def to_doc(self, entity: Entity) -> Entity:
        """An entity of the segment with token indices of the doc."""
        return entity.shifted(self.start)


def validate_window(max_window: int, window_overlap: int) -> None:
    if max_window < 1:
        raise ValueError(f"max_window must be at least 1, got {max_window}")
    if not 0 <= window_overlap < max_window:
        raise ValueError(
            f"window_overlap must be in [0, max_window), got {window_overlap} "
            f"with max_window={max_window}"
        )


def sentence_regions(doc: Doc) -> List[Tuple[int, int]]:
    """(start, end) of each sentence, or of the whole doc when it has no boundaries."""
    if len(doc) == 0:
        return []
    if doc.has_annotation("SENT_START"):
        return [(sent.start, sent.end) for sent in doc.sents]
    return [(0, len(doc))]


def window_region(
    doc_index: int, start: int, end: int, max_window: int, window_overlap: int
) -> List[Segment]:
    """Cover tokens [start, end) with windows of at most ``max_window`` tokens."""
    if end - start <= max_window:
        return [Segment(doc_index, start, end, start, end)]
    stride = max_window - window_overlap
    starts = list(range(start, end - max_window, stride)) + [end - max_window]
    # The boundary between two cores lies in the middle of the windows' overlap.
    bounds = [start]
    for left, right in zip(starts, starts[1:]):
        bounds.append((right + left + max_window) // 2)
    bounds.append(end)
    return [
        Segment(doc_index, s, s + max_window, bounds[k], bounds[k + 1])
        for k, s in enumerate(starts)
    ]


Region = Tuple[int, int]  # tokens [start, end) of a doc: a sentence, or the sentences an entity joins


def regions_joined_for(regions: Sequence[Region], entities: Iterable[Entity]) -> Tuple[List[Region], int]:
    """``regions`` (a partition of a doc's tokens, in order) with the regions each entity
    crosses joined into one, so every entity lies whole inside one region; and how many
    boundaries were removed. An entity is never cut: a sentence boundary inside it goes."""
    if len(regions) < 2:
        return list(regions), 0
    boundaries = [start for start, _ in regions[1:]]  # in order
    crossing = np.zeros(len(boundaries) + 1, dtype=np.int64)  # +1 where an entity's boundaries begin, -1 after
    for entity in entities:
        crossing[bisect_right(boundaries, entity.tokens[0])] += 1
        crossing[bisect_right(boundaries, entity.tokens[-1])] -= 1
    kept = [b for b, inside in zip(boundaries, np.cumsum(crossing[:-1])) if not inside]
    starts = [regions[0][0]] + kept
    ends = starts[1:] + [regions[-1][1]]
    return list(zip(starts, ends)), len(boundaries) - len(kept)


def segment_doc(
    doc: Doc, doc_index: int, max_window: int, window_overlap: int, regions: Optional[Sequence[Region]] = None
) -> List[Segment]:
    """The doc's segments: each region (default: its sentences, ``sentence_regions``) whole, or
    in windows where it is longer than ``max_window``."""
    segments: List[Segment] = []
    for start, end in sentence_regions(doc) if regions is None else regions:
        segments.extend(window_region(doc_index, start, end, max_window, window_overlap))
    return segments


def segment_docs(
    docs: Sequence[Doc],
    max_window: int,
    window_overlap: int,
    regions: Optional[Sequence[Optional[Sequence[Region]]]] = None,
) -> List[Segment]:
    """Every doc's segments; ``regions[i]``, where given, replaces doc i's sentences (training
    takes them from the gold doc: ``grid.targets.training_regions``)."""
    regions = [None] * len(docs) if regions is None else regions
    return [
        segment
        for i, (doc, doc_regions) in enumerate(zip(docs, regions))
        for segment in segment_doc(doc, i, max_window, window_overlap, doc_regions)
    ]


def entities_met(segments: Sequence[Segment], entities: Sequence[Sequence[Entity]]) -> Iterator[Tuple[List[Entity], List[Entity]]]:
    """For each segment, the entities of its doc (``entities[doc_index]``, doc token indices) that
    it holds whole (``contains``) and those it cuts (``cuts``), each in the doc's order. The one
    place training asks which entities a segment meets: each doc's entities are searched by
    their first token (``IndexedEntities``: given so, or indexed here for these segments), so a
    long document's many segments cost time in proportion to the entities near each, not to all
    of the document's entities each."""
    longest: Dict[int, int] = {}
    for segment in segments:
        longest[segment.doc_index] = max(longest.get(segment.doc_index, 0), segment.length)
    found: Dict[int, IndexedEntities] = {}
    for segment in segments:
        doc = segment.doc_index
        if doc not in found:
            given = entities[doc]
            found[doc] = given if isinstance(given, IndexedEntities) else IndexedEntities(given, longest[doc])
        met = found[doc].meeting(segment)
        yield [e for e in met if segment.contains(e.tokens)], [e for e in met if not segment.contains(e.tokens)]


class IndexedEntities(list):
    """A doc's entities (the list, in the doc's order), searched by first token for the segments
    that meet them. An entity spanning more than ``widest`` tokens (the longest segment there can
    be: the model's ``max_window``) is never held whole, only cut: such entities are kept apart and
    checked against every segment, so that one of them does not widen every segment's search.
    Training indexes a step's gold entities once (``model.objective``), not once a grid batch."""

    def __init__(self, entities: Iterable[Entity], widest: int):
        super().__init__(entities)
        spans = [e.tokens[-1] - e.tokens[0] for e in self]
        self.wide = [k for k, span in enumerate(spans) if span >= widest]
        self.narrow = sorted((k for k, span in enumerate(spans) if span < widest), key=lambda k: self[k].tokens[0])
        self.firsts = [self[k].tokens[0] for k in self.narrow]
        self.reach = max((spans[k] for k in self.narrow), default=0)  # how far before a segment a narrow entity may start

    def meeting(self, segment: Segment) -> List[Entity]:
        """The entities a segment holds some of the span of, in the doc's order."""
        low, high = bisect_left(self.firsts, segment.start - self.reach), bisect_left(self.firsts, segment.end)
        near = [k for k in self.narrow[low:high] if self[k].tokens[-1] >= segment.start]
        wide = [k for k in self.wide if self[k].tokens[0] < segment.end and self[k].tokens[-1] >= segment.start]
        return [self[k] for k in sorted(near + wide)]


# A group is closed once padding it would cost more than this many times its members' own cost
# (a grid's cells, an encoder's tokens): padding costs a CPU what real work does.
MAX_PADDING = 1.25


def group_by_length(
    lengths: Sequence[int],
    cost: Callable[[int], int],
    *,
    max_cost: Optional[int] = None,
    max_items: Optional[int] = None,
    max_padding: float = MAX_PADDING,
    min_cost: int = 1024,
) -> Iterator[List[int]]:
    """Indices of items grouped by length, shortest first, so that padding a group to its
    longest item is cheap.

    An item of length n costs ``cost(n)`` (n^2 for a grid, n for an encoder's tokens); a group
    pays the cost of its longest item for each member. A group is closed when the next item
    would take it over ``max_cost`` or ``max_items``, or, once the group's padded cost is at
    least ``min_cost`` (small groups cost more in per-call overhead than in padding), when
    padding would cost more than ``max_padding`` times the members' own cost. An item over
    ``max_cost`` on its own gets a group of its own. Items of equal length keep their order.
    """
    group: List[int] = []
    real = 0
    for index in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        longest = cost(lengths[index])  # ordered by length: the newest is the longest
        padded = (len(group) + 1) * longest
        over = (max_cost is not None and padded > max_cost) or (max_items is not None and len(group) >= max_items)
        too_padded = padded > max_padding * (real + longest)
        big_enough = group and len(group) * cost(lengths[group[-1]]) >= min_cost
        if group and (over or (too_padded and big_enough)):
            yield group
            group, real = [], 0
        group.append(index)
        real += longest
    if group:
        yield group


def batch_by_cells(
    segments: Sequence[Segment],
    max_cells: int,
    max_padding: float = MAX_PADDING,
    min_cells: int = 1024,
) -> Iterator[List[Segment]]:
    """Group segments of similar length so that batch size x longest^2 <= max_cells
    (``group_by_length`` with a grid's n^2 cells as the cost), ordered by length, then
    document and position."""
    ordered = sorted(segments, key=lambda s: (s.doc_index, s.start))
    lengths = [segment.length for segment in ordered]
    for group in group_by_length(
        lengths, _cells, max_cost=max_cells, max_padding=max_padding, min_cost=min_cells
    ):
        yield [ordered[i] for i in group]


def _cells(length: int) -> int:
    return length * length


SegmentGrid = Tuple[Segment, np.ndarray, np.ndarray]  # segment, relation ids, confidences (n x n)


def decode_segments(
    grids: Iterable[SegmentGrid], n_docs: int, max_paths_per_edge: int, best_path_only: bool = False
) -> Tuple[List[List[Entity]], int]:
    """The entities of each doc, read off the grids of its segments.

    An entity is kept from the segment whose core owns its first token, so each is reported
    once, from the window with the most context around its start; where that segment cannot
    hold it (it ends past the segment's end), from the segments that hold it whole, as training
    taught it there (``targets.gold_grids``). If two grids report the same entity, the higher
    score counts. Returns the entities per doc (labels are label ids, tokens doc indices) and
    the number of THW cells whose paths were not all read (see ``decode_grid``, which takes
    ``best_path_only``).
    """
    found: List[Dict[Entity, Entity]] = [{} for _ in range(n_docs)]
    segments: List[List[Segment]] = [[] for _ in range(n_docs)]
    elsewhere: List[Tuple[int, Entity]] = []  # (doc, entity) held whole by a segment whose core does not own its first token
    truncated = 0
    for segment, relations, confidences in grids:
        result = decode_grid(relations, confidences, max_paths_per_edge=max_paths_per_edge, best_path_only=best_path_only)
        truncated += result.truncated_edges
        segments[segment.doc_index].append(segment)
        for entity in result.entities:
            entity = segment.to_doc(entity)
            if segment.owns(entity.tokens[0]):
                _keep(found[segment.doc_index], entity)
            else:
                elsewhere.append((segment.doc_index, entity))
    owners = _core_owners(segments, {doc_index for doc_index, _ in elsewhere})
    for doc_index, entity in elsewhere:
        owner = owners[doc_index](entity.tokens[0])
        if owner is None or not owner.contains(entity.tokens):
            _keep(found[doc_index], entity)
    return [list(doc_found.values()) for doc_found in found], truncated


def _keep(doc_found: Dict[Entity, Entity], entity: Entity) -> None:
    previous = doc_found.get(entity)
    if previous is None or entity.score > previous.score:
        doc_found[entity] = entity


def _core_owners(segments: Sequence[Sequence[Segment]], doc_indices: Iterable[int]) -> Dict[int, Callable[[int], Optional[Segment]]]:
    """For each of ``doc_indices``, a function from a token to the segment whose core owns it
    (None where no segment of the doc does), by bisection over the cores' starts."""

    def owner_in(cores: List[Segment]) -> Callable[[int], Optional[Segment]]:
        starts = [segment.core_start for segment in cores]

        def owner(token: int) -> Optional[Segment]:
            k = bisect_right(starts, token) - 1
            return cores[k] if k >= 0 and cores[k].owns(token) else None

        return owner

    return {i: owner_in(sorted(segments[i], key=lambda segment: segment.core_start)) for i in doc_indices}
