"""The doc.spans contract of spacy_w2ner.entities: writing, reading, aligning entities."""
import numpy as np
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example

from spacy_w2ner.entities import (
    Entity,
    as_entity,
    aligned_gold_entities,
    flat_entities,
    fragments_of,
    get_entities,
    overlapping,
    set_entities,
    tokens_of,
    without_edge_whitespace,
)

NLP = spacy.blank("en")
SYMPTOMS = "She had pain in her knees and ankles ."  # 9 tokens


def make_doc(text=SYMPTOMS):
    return NLP.make_doc(text)


def group_layout(doc, key="w2ner"):
    return [(span.start, span.end, span.label_, span.id_) for span in doc.spans[key]]


# ---------------------------------------------------------------- set_entities


def test_set_entities_writes_discontinuous_entity_as_fragments_sharing_an_id():
    doc = make_doc()
    set_entities(doc, [("SYM", (2, 3, 4, 7), None)])
    group = doc.spans["w2ner"]
    assert [(s.start, s.end, s.label_) for s in group] == [(2, 5, "SYM"), (7, 8, "SYM")]
    assert group[0].id_ and group[0].id_ == group[1].id_
    assert [s.text for s in group] == ["pain in her", "ankles"]


def test_set_entities_writes_contiguous_entity_as_one_span():
    doc = make_doc()
    set_entities(doc, [("SYM", [5, 2, 3, 4], None)])
    group = doc.spans["w2ner"]
    assert [(s.start, s.end, s.label_) for s in group] == [(2, 6, "SYM")]
    assert group[0].id_


def test_set_entities_ids_unique_per_entity_and_ordered_by_position():
    doc = make_doc()
    set_entities(
        doc,
        [
            ("BODY", (7,), 0.7),
            ("SYM", (2, 3, 4, 7), 0.9),
            ("BODY", (5,), 0.6),
            ("SYM", (2, 3, 4, 5), 0.8),
        ],
    )
    layout = group_layout(doc)
    assert [(start, end, label) for start, end, label, _ in layout] == [
        (2, 6, "SYM"),  # (2, 3, 4, 5)
        (2, 5, "SYM"),  # (2, 3, 4, 7), first fragment
        (7, 8, "SYM"),  # (2, 3, 4, 7), second fragment
        (5, 6, "BODY"),
        (7, 8, "BODY"),
    ]
    ids = [span_id for *_, span_id in layout]
    assert all(ids)
    assert ids[1] == ids[2]
    assert len({ids[0], ids[1], ids[3], ids[4]}) == 4
    # Scores are aligned with spans; fragments share their entity's score.
    scores = doc.spans["w2ner"].attrs["scores"]
    assert isinstance(scores, np.ndarray)
    assert scores.tolist() == pytest.approx([0.8, 0.9, 0.9, 0.6, 0.7])


def test_set_entities_without_all_scores_writes_no_scores():
    doc = make_doc()
    set_entities(doc, [("SYM", (2,), 0.5), ("SYM", (5,), None)])
    assert "scores" not in doc.spans["w2ner"].attrs
    assert [e.score for e in get_entities(doc)] == [None, None]


def test_set_entities_empty_writes_empty_group_with_empty_scores():
    doc = make_doc()
    set_entities(doc, [("SYM", (2,), 0.5)])
    set_entities(doc, [])
    assert "w2ner" in doc.spans
    assert len(doc.spans["w2ner"]) == 0
    scores = doc.spans["w2ner"].attrs["scores"]
    assert np.asarray(scores).shape == (0,)
    assert get_entities(doc) == []


def test_set_entities_uses_spans_key():
    doc = make_doc()
    set_entities(doc, [("SYM", (2, 7), None)], spans_key="other")
    assert "w2ner" not in doc.spans
    assert [(e.label, e.tokens) for e in get_entities(doc, "other")] == [("SYM", (2, 7))]
    assert get_entities(doc) == []


# ---------------------------------------------------------------- get_entities


def test_get_entities_groups_by_id_and_reports_fields():
    doc = make_doc()
    doc.spans["w2ner"] = [
        Span(doc, 7, 8, label="SYM", span_id="x"),
        Span(doc, 2, 6, label="SYM"),
        Span(doc, 2, 4, label="SYM", span_id="x"),
        Span(doc, 5, 6, label="BODY", span_id="y"),
    ]
    doc.spans["w2ner"].attrs["scores"] = np.asarray([0.4, 0.8, 0.9, 0.3], dtype="float32")
    entities = get_entities(doc)
    assert all(isinstance(e, Entity) for e in entities)
    assert [(e.label, e.tokens) for e in entities] == [
        ("SYM", (2, 3, 4, 5)),
        ("SYM", (2, 3, 7)),
        ("BODY", (5,)),
    ]
    contiguous, discontinuous, body = entities
    assert discontinuous.fragments == ((2, 4), (7, 8))
    assert discontinuous.text == "pain in ankles"
    assert discontinuous.is_discontinuous
    assert discontinuous.score == pytest.approx(0.4)  # min of 0.4 and 0.9
    assert discontinuous.key == ("SYM", (2, 3, 7))
    assert len(discontinuous.spans) == 2
    assert contiguous.fragments == ((2, 6),)
    assert contiguous.text == "pain in her knees"
    assert not contiguous.is_discontinuous
    assert contiguous.score == pytest.approx(0.8)
    assert body.text == "knees"
    assert body.score == pytest.approx(0.3)


def test_get_entities_spans_without_id_are_separate_entities():
    doc = make_doc("New York University is in New York .")
    doc.spans["w2ner"] = [
        Span(doc, 5, 7, label="LOC"),
        Span(doc, 0, 3, label="ORG"),
        Span(doc, 0, 2, label="LOC"),
        Span(doc, 1, 2, label="LOC"),
    ]
    entities = get_entities(doc)
    assert [(e.label, e.tokens, e.text) for e in entities] == [
        ("LOC", (0, 1), "New York"),
        ("ORG", (0, 1, 2), "New York University"),
        ("LOC", (1,), "York"),
        ("LOC", (5, 6), "New York"),
    ]
    assert all(e.score is None and not e.is_discontinuous for e in entities)


def test_get_entities_missing_key_returns_empty_list():
    doc = make_doc()
    assert get_entities(doc) == []
    doc.spans["other"] = [Span(doc, 0, 1, label="X")]
    assert get_entities(doc) == []


def test_get_entities_rejects_mixed_labels_within_an_id():
    doc = make_doc()
    doc.spans["w2ner"] = [
        Span(doc, 2, 3, label="SYM", span_id="ent42"),
        Span(doc, 7, 8, label="BODY", span_id="ent42"),
    ]
    with pytest.raises(ValueError, match="ent42"):
        get_entities(doc)


def test_get_entities_rejects_misaligned_scores():
    doc = make_doc()
    doc.spans["w2ner"] = [Span(doc, 2, 3, label="SYM"), Span(doc, 7, 8, label="SYM")]
    doc.spans["w2ner"].attrs["scores"] = np.asarray([0.5], dtype="float32")
    with pytest.raises(ValueError, match="scores"):
        get_entities(doc)
    doc.spans["w2ner"].attrs["scores"] = np.asarray([0.5, 0.5, 0.5], dtype="float32")
    with pytest.raises(ValueError):
        get_entities(doc)


def test_set_get_roundtrip_through_docbin():
    doc = make_doc()
    written = [
        ("SYM", (2, 3, 4, 7), 0.9),  # discontinuous
        ("SYM", (2, 3, 4, 5), 0.75),  # overlaps the first
        ("BODY", (5,), 0.5),  # nested in the second
        ("BODY", (7,), 0.25),
        ("SYM", (0, 2, 5, 7), 0.125),  # three gaps
    ]
    set_entities(doc, written)
    before = get_entities(doc)
    doc_bin = DocBin()
    doc_bin.add(doc)
    restored = list(DocBin().from_bytes(doc_bin.to_bytes()).get_docs(NLP.vocab))
    assert len(restored) == 1
    after = get_entities(restored[0])
    assert after == before
    assert sorted((e.label, e.tokens, e.score) for e in after) == sorted(
        (label, tokens, float(np.float32(score))) for label, tokens, score in written
    )
    assert [e.text for e in after] == [e.text for e in before]
    assert {e.tokens: e.fragments for e in after}[(0, 2, 5, 7)] == ((0, 1), (2, 3), (5, 6), (7, 8))
    assert group_layout(restored[0]) == group_layout(doc)


# ---------------------------------------------------------------- helpers


def test_fragments_of():
    assert fragments_of((2, 3, 4, 7)) == ((2, 5), (7, 8))
    assert fragments_of([7, 3, 2, 3]) == ((2, 4), (7, 8))
    assert fragments_of((0,)) == ((0, 1),)
    assert fragments_of((0, 2, 4)) == ((0, 1), (2, 3), (4, 5))
    assert fragments_of(()) == ()


def test_tokens_of():
    assert tokens_of([(7, 8), (2, 5)]) == (2, 3, 4, 7)
    assert tokens_of([(0, 3), (1, 4)]) == (0, 1, 2, 3)
    assert tokens_of([]) == ()
    for tokens in [(2, 3, 4, 7), (0,), (1, 3, 5, 6)]:
        assert tokens_of(fragments_of(tokens)) == tokens


def test_flat_entities_resolves_overlaps():
    entities = [
        as_entity(("A", (0, 1, 2), 0.5)),
        as_entity(("B", (2, 3), 0.9)),  # higher score beats the longer A
        as_entity(("C", (5, 6), 0.5)),  # same score: longer beats D
        as_entity(("D", (5,), 0.5)),
        as_entity(("E", (8, 9), 0.4)),  # same score and length: earlier beats F
        as_entity(("F", (9, 10), 0.4)),
        as_entity(("G", (4, 11), 1.0)),  # discontinuous: dropped
        as_entity(("H", (11,), 0.1)),  # no conflict once G is dropped
    ]
    flat = flat_entities(entities)
    assert [(e.label, e.tokens) for e in flat] == [
        ("B", (2, 3)),
        ("C", (5, 6)),
        ("E", (8, 9)),
        ("H", (11,)),
    ]
    assert flat_entities([]) == []
    assert flat_entities([as_entity(("G", (0, 2), 1.0))]) == []


def test_overlapping():
    entities = [
        ("A", (0, 1)),
        ("B", (1, 2)),
        ("C", (4,)),
        ("D", (5, 8)),
        ("E", (6, 7)),  # inside the gap of D: no shared token
        ("F", (8,)),
    ]
    entities = [Entity(label, tokens) for label, tokens in entities]
    assert overlapping(entities) == {0, 1, 3, 5}
    assert overlapping([]) == set()
    assert overlapping([Entity("A", (0,)), Entity("A", (0,))]) == {0, 1}
    assert overlapping([Entity("A", (0,)), Entity("B", (1,))]) == set()


# ---------------------------------------------------------------- alignment


def test_aligned_gold_entities_identical_tokenization():
    text = "New York University is in New York ."
    reference = make_doc(text)
    gold = [("ORG", (0, 1, 2), None), ("LOC", (0, 1), None), ("LOC", (0, 1, 5, 6), None)]
    set_entities(reference, gold)
    entities, misaligned = aligned_gold_entities(Example(make_doc(text), reference), "w2ner")
    assert misaligned == []
    assert sorted(e.key for e in entities) == sorted((label, tokens) for label, tokens, _ in gold)


def test_aligned_gold_entities_different_tokenization():
    predicted = Doc(
        NLP.vocab,
        words=["I", "love", "New-York", "and", "Paris", "."],
        spaces=[True, True, True, True, False, False],
    )
    reference = Doc(
        NLP.vocab,
        words=["I", "love", "New", "-", "York", "and", "Paris", "."],
        spaces=[True, True, False, False, True, True, False, False],
    )
    assert predicted.text == reference.text == "I love New-York and Paris."
    set_entities(
        reference,
        [
            ("LOC", (2, 3, 4), None),  # New-York: one predicted token
            ("CITY", (6,), None),  # Paris
            ("LOC", (2, 3, 4, 6), None),  # discontinuous, both fragments align
            ("STATE", (4,), None),  # York: inside a predicted token
            ("X", (2, 6), None),  # New ... Paris: first fragment does not align
            ("Y", (1,), None),  # love
        ],
    )
    entities, misaligned = aligned_gold_entities(Example(predicted, reference), "w2ner")
    assert sorted((e.label, e.tokens) for e in misaligned) == [("STATE", (4,)), ("X", (2, 6))]
    assert sorted(e.key for e in entities) == sorted(
        [("LOC", (2,)), ("CITY", (4,)), ("LOC", (2, 4)), ("Y", (1,))]
    )


def test_aligned_gold_entities_missing_key():
    doc = make_doc()
    assert aligned_gold_entities(Example(make_doc(), doc), "w2ner") == ([], [])


# ---------------------------------------------------------------- property


LABELS = ["A", "B", "C"]


@st.composite
def docs_with_entities(draw):
    n = draw(st.integers(min_value=1, max_value=12))
    entity = st.tuples(
        st.sampled_from(LABELS),
        st.sets(st.integers(min_value=0, max_value=n - 1), min_size=1),
        st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0, width=32)),
    )
    return n, draw(st.lists(entity, max_size=8))


@settings(max_examples=150, deadline=None, database=None)
@given(docs_with_entities())
def test_set_get_roundtrip_property(case):
    n, entities = case
    doc = Doc(NLP.vocab, words=[f"w{i}" for i in range(n)])
    set_entities(doc, [(label, tuple(tokens), score) for label, tokens, score in entities])
    result = get_entities(doc)
    assert {(e.label, e.tokens) for e in result} == {
        (label, tuple(sorted(tokens))) for label, tokens, _ in entities
    }
    assert len(result) == len(entities)
    assert [(e.tokens, e.label) for e in result] == sorted((e.tokens, e.label) for e in result)
    for e in result:
        assert e.fragments == fragments_of(e.tokens)
        assert tokens_of(e.fragments) == e.tokens
    if entities and all(score is not None for *_, score in entities):
        assert sorted((e.label, e.tokens, e.score) for e in result) == sorted(
            (label, tuple(sorted(tokens)), float(np.float32(score)))
            for label, tokens, score in entities
        )


# ---------------------------------------------------------------- whitespace at the edges


def test_without_edge_whitespace_trims_fragments_and_merges():
    doc = Doc(NLP.vocab, words=["\n", "pain", "\n", "in", "knees", "  ", "and", "ankles", "\n\n"],
              spaces=[False] * 9)
    entities = [
        Entity("SYM", (0, 1, 2, 3, 4), 0.9),  # leading line break trimmed; the inner one stays
        Entity("SYM", (1, 2, 3, 4, 5, 7), 0.5),  # "  " ends a fragment: trimmed, "ankles" stays apart
        Entity("SYM", (1, 2, 3, 4), 0.95),  # equal to the first once trimmed: the higher score stays
        Entity("SYM", (5,), 0.99),  # whitespace only: no entity
        Entity("SYM", (7, 8), None),  # gold-style entity without a score
    ]
    trimmed = without_edge_whitespace(entities, doc)
    assert [(e.tokens, e.score) for e in trimmed] == [
        ((1, 2, 3, 4), 0.95),
        ((1, 2, 3, 4, 7), 0.5),
        ((7,), None),
    ]
    for entity in trimmed:
        for start, end in entity.fragments:
            assert not doc[start].is_space and not doc[end - 1].is_space
