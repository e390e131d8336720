"""Tests for cutting docs into grid segments and batching them (spacy_w2ner.segments)."""
from collections import Counter

import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc

import numpy as np

from spacy_w2ner.entities import Entity
from spacy_w2ner.grid.codec import encode_grid
from spacy_w2ner.grid.targets import count_unlearnable, gold_grids
from spacy_w2ner.grid.segments import (
    Segment,
    batch_by_cells,
    decode_segments,
    segment_doc,
    segment_docs,
    sentence_regions,
    validate_window,
    window_region,
)


@pytest.fixture(scope="module")
def vocab():
    return spacy.blank("en").vocab


def check_windows(segments, doc_index, start, end, max_window, overlap):
    """Assert the windowing invariants for one region [start, end)."""
    assert segments, "a non-empty region gets at least one segment"
    covered = set()
    for seg in segments:
        assert seg.doc_index == doc_index
        assert 1 <= seg.length <= max_window
        assert start <= seg.start < seg.end <= end
        assert seg.start <= seg.core_start < seg.core_end <= seg.end
        covered.update(range(seg.start, seg.end))
    assert covered == set(range(start, end))
    # Cores partition [start, end), contiguous and in order.
    assert segments[0].core_start == start
    assert segments[-1].core_end == end
    for left, right in zip(segments, segments[1:]):
        assert left.core_end == right.core_start
        assert left.start < right.start
        assert left.end - right.start >= overlap
    # Each token is owned by exactly one segment.
    for token in range(start, end):
        assert sum(seg.owns(token) for seg in segments) == 1


# ---------------------------------------------------------------------------
# window_region


def test_short_region_is_one_segment():
    segments = window_region(3, 10, 15, max_window=8, window_overlap=2)
    assert segments == [Segment(3, 10, 15, 10, 15)]
    assert segments[0].length == 5
    assert segments[0].owns(10) and segments[0].owns(14)
    assert not segments[0].owns(9) and not segments[0].owns(15)


def test_region_exactly_max_window_is_one_segment():
    assert window_region(0, 0, 8, 8, 3) == [Segment(0, 0, 8, 0, 8)]


def test_long_region_concrete():
    segments = window_region(0, 0, 10, max_window=4, window_overlap=2)
    check_windows(segments, 0, 0, 10, 4, 2)
    assert [(s.start, s.end) for s in segments] == [(0, 4), (2, 6), (4, 8), (6, 10)]


@pytest.mark.parametrize("n", [1, 2, 7, 63, 64, 65, 100, 257, 1000])
@pytest.mark.parametrize("max_window", [1, 2, 5, 16, 64])
@pytest.mark.parametrize("overlap_frac", [0.0, 0.25, 0.5, 0.99])
def test_window_region_grid(n, max_window, overlap_frac):
    overlap = min(int(overlap_frac * max_window), max_window - 1)
    start = 7
    segments = window_region(2, start, start + n, max_window, overlap)
    check_windows(segments, 2, start, start + n, max_window, overlap)
    if n <= max_window:
        assert len(segments) == 1


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 50),
    st.integers(1, 1000),
    st.integers(1, 64).flatmap(lambda w: st.tuples(st.just(w), st.integers(0, w - 1))),
)
def test_window_region_property(start, n, window):
    max_window, overlap = window
    segments = window_region(1, start, start + n, max_window, overlap)
    check_windows(segments, 1, start, start + n, max_window, overlap)
    if n <= max_window:
        assert segments == [Segment(1, start, start + n, start, start + n)]


# ---------------------------------------------------------------------------
# validate_window


@pytest.mark.parametrize(
    "max_window,overlap", [(0, 0), (-3, 0), (4, 4), (4, 5), (4, -1), (1, 1)]
)
def test_validate_window_rejects(max_window, overlap):
    with pytest.raises(ValueError):
        validate_window(max_window, overlap)


@pytest.mark.parametrize("max_window,overlap", [(1, 0), (4, 0), (4, 3), (128, 16)])
def test_validate_window_accepts(max_window, overlap):
    validate_window(max_window, overlap)


# ---------------------------------------------------------------------------
# segment_doc


def test_empty_doc_has_no_segments(vocab):
    doc = Doc(vocab, words=[])
    assert sentence_regions(doc) == []
    assert segment_doc(doc, 0, 8, 2) == []


def test_doc_without_sentences_is_windowed_whole(vocab):
    doc = Doc(vocab, words=[f"w{i}" for i in range(20)])
    assert not doc.has_annotation("SENT_START")
    segments = segment_doc(doc, 4, max_window=6, window_overlap=2)
    check_windows(segments, 4, 0, 20, 6, 2)
    assert segments == window_region(4, 0, 20, 6, 2)

    short = Doc(vocab, words=["a", "b", "c"])
    assert segment_doc(short, 0, 6, 2) == [Segment(0, 0, 3, 0, 3)]


def test_short_sentences_give_one_segment_each(vocab):
    words = ["A", "b", "c", ".", "D", "e", ".", "F", "."]
    sent_starts = [True, False, False, False, True, False, False, True, False]
    doc = Doc(vocab, words=words, sent_starts=sent_starts)
    assert sentence_regions(doc) == [(0, 4), (4, 7), (7, 9)]
    segments = segment_doc(doc, 1, max_window=5, window_overlap=1)
    assert segments == [
        Segment(1, 0, 4, 0, 4),
        Segment(1, 4, 7, 4, 7),
        Segment(1, 7, 9, 7, 9),
    ]


def test_long_sentence_is_windowed_inside(vocab):
    words = [f"w{i}" for i in range(18)]
    sent_starts = [True, False, False] + [True] + [False] * 11 + [True, False, False]
    doc = Doc(vocab, words=words, sent_starts=sent_starts)
    assert sentence_regions(doc) == [(0, 3), (3, 15), (15, 18)]
    segments = segment_doc(doc, 0, max_window=5, window_overlap=2)
    assert segments[0] == Segment(0, 0, 3, 0, 3)
    assert segments[-1] == Segment(0, 15, 18, 15, 18)
    inner = segments[1:-1]
    assert len(inner) > 1
    check_windows(inner, 0, 3, 15, 5, 2)
    # All cores together still partition the whole doc.
    owned = Counter(t for seg in segments for t in range(seg.core_start, seg.core_end))
    assert owned == Counter(range(18))


def test_segment_docs_numbers_docs(vocab):
    docs = [
        Doc(vocab, words=["a", "b"]),
        Doc(vocab, words=[]),
        Doc(vocab, words=[f"w{i}" for i in range(9)]),
    ]
    segments = segment_docs(docs, max_window=4, window_overlap=1)
    assert {s.doc_index for s in segments} == {0, 2}
    assert [s for s in segments if s.doc_index == 0] == [Segment(0, 0, 2, 0, 2)]
    check_windows([s for s in segments if s.doc_index == 2], 2, 0, 9, 4, 1)


# ---------------------------------------------------------------------------
# batch_by_cells


def check_batches(segments, batches, max_cells):
    seen = Counter(seg for batch in batches for seg in batch)
    assert seen == Counter(segments)
    for batch in batches:
        assert batch, "no empty batches"
        longest = max(seg.length for seg in batch)
        if len(batch) > 1:
            assert len(batch) * longest * longest <= max_cells
    for seg in segments:
        if seg.length * seg.length > max_cells:
            (batch,) = [b for b in batches if seg in b]
            assert batch == [seg]


def make_segments(lengths):
    return [Segment(i, 0, length, 0, length) for i, length in enumerate(lengths)]


def test_batch_by_cells_concrete():
    segments = make_segments([3, 10, 2, 2, 5, 40, 3])
    batches = list(batch_by_cells(segments, max_cells=100))
    check_batches(segments, batches, 100)
    # The 40-token segment exceeds the budget alone.
    assert [segments[5]] in batches


def test_batch_by_cells_limits_padding():
    # 100 short segments and 10 long ones: the long ones get batches of their own.
    segments = make_segments([4] * 100 + [60] * 10)
    batches = list(batch_by_cells(segments, max_cells=100_000, max_padding=1.25, min_cells=1024))
    check_batches(segments, batches, 100_000)
    assert all(len({seg.length for seg in batch}) == 1 for batch in batches)
    # Without the padding limit everything fits in one batch padded to 60.
    assert len(list(batch_by_cells(segments, max_cells=1_000_000, max_padding=float("inf")))) == 1


def test_batch_by_cells_small_batches_may_pad():
    segments = make_segments([2, 3, 4])  # 29 real cells, 48 padded: fewer than min_cells
    assert len(list(batch_by_cells(segments, max_cells=100_000, min_cells=1024))) == 1


def test_batch_by_cells_empty():
    assert list(batch_by_cells([], max_cells=100)) == []


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 64), max_size=40),
    st.integers(1, 5000),
    st.floats(1.0, 4.0),
    st.integers(0, 2000),
)
def test_batch_by_cells_property(lengths, max_cells, max_padding, min_cells):
    segments = make_segments(lengths)
    batches = list(batch_by_cells(segments, max_cells, max_padding, min_cells))
    check_batches(segments, batches, max_cells)
    for batch in batches[:-1]:  # a batch that could have been padded less was closed early enough
        longest = max(seg.length for seg in batch)
        padded = len(batch) * longest * longest
        if len(batch) > 1 and (len(batch) - 1) * batch[-2].length ** 2 >= min_cells:
            assert padded <= max_padding * sum(seg.length ** 2 for seg in batch) + 1e-9


# ---------------------------------------------------------------- containment and decoding


def test_segment_contains_and_cuts():
    segment = Segment(0, 4, 12, 6, 10)
    assert segment.contains((4, 11)) and segment.contains((6,))
    assert not segment.contains((3, 5)) and not segment.contains((11, 12))
    assert segment.cuts((3, 5)) and segment.cuts((11, 12)) and segment.cuts((2, 13))
    assert not segment.cuts((0, 3)) and not segment.cuts((12, 14)) and not segment.cuts((5, 7))
    entity = Entity("A", (5, 7), 0.5)
    assert segment.to_segment(entity).tokens == (1, 3)
    assert segment.to_doc(segment.to_segment(entity)) == entity


def _grid(entities, n):
    relations, _ = encode_grid(entities, n)
    return relations, np.full((n, n), 0.9, dtype="float32")


def test_window_predictions_are_merged_by_core():
    """An entity seen by two overlapping windows is kept once, from the window owning its head."""
    windows = [Segment(0, 0, 8, 0, 6), Segment(0, 4, 12, 6, 12)]
    # Doc entity (5, 6): head 5 is in window 0's core; window 1 also sees it (as 1, 2).
    # Doc entity (7, 9): head 7 is in window 1's core; window 0 sees it cut, as (7,).
    first = _grid([Entity(0, (5, 6)), Entity(1, (7,))], 8)
    second = _grid([Entity(0, (1, 2)), Entity(1, (3, 5))], 8)
    found, truncated = decode_segments(
        [(windows[0], *first), (windows[1], *second)], n_docs=1, max_paths_per_edge=64
    )
    assert sorted(found[0], key=lambda e: e.tokens) == [Entity(0, (5, 6)), Entity(1, (7, 9))]
    assert truncated == 0


def test_an_entity_its_first_token_s_window_cuts_is_kept_from_a_window_that_holds_it():
    """With the defaults (256 / 64), tokens 410-449 of a 700-token doc: the window whose core
    holds 410 ends at 448, the next holds the entity whole and was taught it there; and an
    entity that core's window holds (400-401, which the next window holds too) is read from it
    alone."""
    doc = spacy.blank("en").make_doc(" ".join(["w"] * 700))
    segments = segment_doc(doc, 0, 256, 64)
    gold = [Entity(0, tuple(range(410, 450))), Entity(1, (400, 401))]
    assert count_unlearnable([gold], segments) == 0
    targets, _ = gold_grids(segments, 256, [gold])
    perfect = [(s, targets[k, : s.length, : s.length], np.ones((s.length, s.length))) for k, s in enumerate(segments)]
    found, _ = decode_segments(perfect, 1, 64)
    assert sorted(found[0], key=lambda e: e.tokens) == [gold[1], gold[0]]
    owner = next(s for s in segments if s.owns(400))
    silent = [(s, np.zeros_like(r) if s == owner else r, c) for s, r, c in perfect]
    found, _ = decode_segments(silent, 1, 64)
    assert found[0] == [gold[0]]  # (400, 401): its owner predicts nothing there, so nothing


@settings(max_examples=300, deadline=None)
@given(st.data(), st.integers(1, 12), st.integers(1, 60))
def test_perfect_window_grids_give_back_every_entity_a_window_holds(data, max_window, n):
    """Flat entities (no shared word: no grid ambiguity) in a stretch cut into windows: the grids
    training teaches, read back as predictions, give exactly the entities some window holds
    whole (``count_unlearnable``'s complement)."""
    overlap = data.draw(st.integers(0, max_window - 1))
    segments = window_region(0, 0, n, max_window, overlap)
    bounds = sorted(data.draw(st.sets(st.integers(0, n), max_size=12)))
    entities = [Entity(k % 2, tuple(range(a, b))) for k, (a, b) in enumerate(zip(bounds[::2], bounds[1::2])) if b > a]
    targets, _ = gold_grids(segments, max_window, [entities])
    perfect = [(s, targets[k, : s.length, : s.length], np.ones((s.length, s.length))) for k, s in enumerate(segments)]
    found, _ = decode_segments(perfect, 1, 64)
    learnable = [e for e in entities if any(s.contains(e.tokens) for s in segments)]
    assert sorted(found[0], key=lambda e: e.tokens) == learnable
    assert count_unlearnable([entities], segments) == len(entities) - len(learnable)


def test_decode_segments_keeps_the_higher_score_and_doc_order():
    segment = Segment(1, 0, 3, 0, 3)
    relations, confidences = _grid([Entity(0, (0, 2))], 3)
    low = confidences * 0.5
    found, _ = decode_segments([(segment, relations, low), (segment, relations, confidences)], 2, 64)
    assert found[0] == [] and found[1] == [Entity(0, (0, 2))]
    assert found[1][0].score == pytest.approx(0.9)


# ---------------------------------------------------------------- training regions (issue 48)


def _entity(*tokens):
    from spacy_w2ner.entities import Entity

    return Entity(label=0, tokens=tuple(tokens))


def test_regions_an_entity_crosses_are_joined_and_counted():
    from spacy_w2ner.grid.segments import regions_joined_for

    regions = [(0, 4), (4, 7), (7, 10), (10, 12)]
    joined, removed = regions_joined_for(regions, [_entity(2, 3, 8)])  # crosses two boundaries
    assert joined == [(0, 10), (10, 12)] and removed == 2
    assert regions_joined_for(regions, [_entity(4, 5, 6), _entity(10, 11)]) == (regions, 0)
    assert regions_joined_for([(0, 5)], [_entity(0, 4)]) == ([(0, 5)], 0)


def test_training_regions_map_the_gold_sentences_onto_the_predicted_tokens():
    """The predicted Doc is tokenized from the text ("C." one token there, two in the gold Doc):
    a gold boundary inside a predicted token is left out; the others are kept by offset."""
    import spacy
    from spacy.tokens import Doc
    from spacy.training import Example

    from spacy_w2ner.grid.targets import training_regions

    vocab = spacy.blank("en").vocab
    gold = Doc(vocab, words=["hepatitis", "C", ".", "No", "fever", "."], spaces=[True, False, True, True, False, False],
               sent_starts=[True, False, True, True, False, False])
    predicted = Doc(vocab, words=["hepatitis", "C.", "No", "fever", "."], spaces=[True, True, True, False, False])
    regions, joined = training_regions(Example(predicted, gold), [])
    assert regions == [(0, 2), (2, 5)] and joined == 0
    regions, joined = training_regions(Example(predicted, gold), [_entity(1, 2, 3)])
    assert regions == [(0, 5)] and joined == 1
    own = Doc(vocab, words=["a", "b", "c", "d"], sent_starts=[True, False, False, False])  # its own: one sentence
    split = Doc(vocab, words=["a", "b", "c", "d"], sent_starts=[True, False, True, False])
    assert training_regions(Example(own, split), [])[0] == [(0, 4)]


def test_regions_joined_for_removes_exactly_the_boundaries_inside_an_entity():
    """Against the definition, on random partitions and entities (nested, overlapping, long)."""
    import random

    from spacy_w2ner.grid.segments import regions_joined_for

    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(2, 60)
        starts = [0] + sorted(rng.sample(range(1, n), rng.randint(0, min(n - 1, 12))))
        regions = list(zip(starts, starts[1:] + [n]))
        entities = []
        for _ in range(rng.randint(0, 6)):
            first = rng.randrange(n)
            entities.append(_entity(*sorted({first, rng.randrange(first, n)})))
        inside = {b for b in starts[1:] for e in entities if e.tokens[0] < b <= e.tokens[-1]}
        kept = [0] + [b for b in starts[1:] if b not in inside]
        assert regions_joined_for(regions, entities) == (list(zip(kept, kept[1:] + [n])), len(inside))


def test_entities_met_and_unlearnable_are_the_definitions_on_long_documents_of_many_segments():
    """``entities_met`` (each segment's entities held whole and cut, in the doc's order),
    ``Segment.held`` and ``targets.count_unlearnable`` against ``contains``/``cuts`` over every
    entity, on random documents: sentences, windows that overlap, a segment set with gaps, and
    entities nested, discontinuous, duplicated and wider than every segment."""
    import random

    from spacy_w2ner.grid.segments import IndexedEntities, entities_met
    from spacy_w2ner.grid.targets import count_unlearnable

    rng = random.Random(0)
    for _ in range(300):
        gold, segments = [], []
        for doc_index in range(rng.randint(1, 3)):
            n = rng.randint(1, 120)
            starts = [0] + sorted(rng.sample(range(1, n), rng.randint(0, min(n - 1, 15))))
            for start, end in zip(starts, starts[1:] + [n]):
                segments += window_region(doc_index, start, end, rng.randint(3, 20), 2) if end - start > 2 else [Segment(doc_index, start, end, start, end)]
            entities = []
            for _ in range(rng.randint(0, 25)):
                first = rng.randrange(n)
                tokens = sorted({first, *rng.sample(range(first, n), min(n - first, rng.randint(0, 3)))})
                entities.append(Entity(rng.choice("AB"), tuple(tokens)))
            entities += rng.sample(entities, min(len(entities), 2))  # the same entity twice
            gold.append(entities)
        segments = [s for s in segments if rng.random() < 0.8]  # a batch holds some of a doc's segments
        rng.shuffle(segments)
        met = list(entities_met(segments, gold))
        assert len(met) == len(segments)
        # Indexed ahead, as a training step does, with any widest segment: the same entities.
        assert list(entities_met(segments, [IndexedEntities(doc, rng.randint(1, 25)) for doc in gold])) == met
        for segment, (held, cut) in zip(segments, met):
            entities = gold[segment.doc_index]
            assert held == [e for e in entities if segment.contains(e.tokens)]
            assert cut == [e for e in entities if segment.cuts(e.tokens)]
            for e in cut:
                assert segment.held(e.tokens) == [t - segment.start for t in e.tokens if segment.start <= t < segment.end]
        by_definition = sum(not any(s.contains(e.tokens) for s in segments if s.doc_index == i) for i, doc in enumerate(gold) for e in doc)
        assert count_unlearnable(gold, segments) == by_definition
