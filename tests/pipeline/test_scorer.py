"""Exact-match entity scoring (spacy_w2ner.scorer.score_entities)."""
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import registry

from spacy_w2ner.entities import set_entities
from spacy_w2ner.scorer import score_entities

NLP = spacy.blank("en")

SYMPTOMS = "She had pain in her knees and ankles ."
PLACES = "New York University is in New York ."


def example(text, gold, predicted, spans_key="w2ner"):
    """An Example whose docs carry (label, tokens) entities in doc.spans[spans_key]."""
    reference = NLP.make_doc(text)
    set_entities(reference, [(label, tokens, None) for label, tokens in gold], spans_key)
    prediction = NLP.make_doc(text)
    set_entities(prediction, [(label, tokens, 0.5) for label, tokens in predicted], spans_key)
    return Example(prediction, reference)


def test_partial_match_precision_recall_f():
    eg = example(
        SYMPTOMS,
        gold=[("A", (0,)), ("B", (2, 3))],
        predicted=[
            ("A", (0,)),  # correct
            ("B", (2,)),  # one token off
            ("A", (2, 3)),  # right tokens, wrong label
        ],
    )
    scores = score_entities([eg])
    assert scores["w2ner_p"] == pytest.approx(1 / 3)
    assert scores["w2ner_r"] == pytest.approx(1 / 2)
    assert scores["w2ner_f"] == pytest.approx(0.4)
    assert scores["w2ner_per_type"]["A"] == pytest.approx({"p": 0.5, "r": 1.0, "f": 2 / 3})
    assert scores["w2ner_per_type"]["B"] == pytest.approx({"p": 0.0, "r": 0.0, "f": 0.0})
    assert set(scores["w2ner_per_type"]) == {"A", "B"}


def test_exact_match_needs_label_and_exact_tokens():
    gold = [("SYM", (2, 3, 4, 7))]
    wrong = [
        [("SYM", (2, 3, 7))],  # a token missing
        [("SYM", (2, 3, 4, 5, 6, 7))],  # the gap filled
        [("SYM", (2, 3, 4, 7, 8))],  # a token too many
        [("BODY", (2, 3, 4, 7))],  # wrong label
    ]
    for predicted in wrong:
        scores = score_entities([example(SYMPTOMS, gold, predicted)])
        assert (scores["w2ner_p"], scores["w2ner_r"], scores["w2ner_f"]) == (0.0, 0.0, 0.0), predicted
    scores = score_entities([example(SYMPTOMS, gold, gold)])
    assert scores["w2ner_p"] == pytest.approx(1.0)
    assert scores["w2ner_r"] == pytest.approx(1.0)


def test_scores_accumulate_over_examples():
    examples = [
        example(SYMPTOMS, gold=[("A", (0,)), ("B", (2, 3))], predicted=[("A", (0,))]),
        example(PLACES, gold=[("LOC", (0, 1))], predicted=[("LOC", (0, 1)), ("LOC", (5, 6))]),
        example(PLACES, gold=[], predicted=[]),
    ]
    scores = score_entities(examples)
    # tp 2, fp 1, fn 1
    assert scores["w2ner_p"] == pytest.approx(2 / 3)
    assert scores["w2ner_r"] == pytest.approx(2 / 3)
    assert scores["w2ner_f"] == pytest.approx(2 / 3)
    per_type = scores["w2ner_per_type"]
    assert list(per_type) == ["A", "B", "LOC"]
    assert per_type["A"] == pytest.approx({"p": 1.0, "r": 1.0, "f": 1.0})
    assert per_type["B"] == pytest.approx({"p": 0.0, "r": 0.0, "f": 0.0})
    assert per_type["LOC"] == pytest.approx({"p": 0.5, "r": 1.0, "f": 2 / 3})


def test_discontinuous_f_counts_only_entities_with_a_gap():
    eg = example(
        SYMPTOMS,
        gold=[
            ("SYM", (2, 3, 4, 7)),  # discontinuous, found
            ("SYM", (0, 2)),  # discontinuous, missed
            ("SYM", (2, 3, 4, 5)),  # contiguous, found
        ],
        predicted=[
            ("SYM", (2, 3, 4, 7)),
            ("SYM", (2, 7)),  # discontinuous, wrong
            ("SYM", (2, 3, 4, 5)),
            ("DRUG", (0,)),  # contiguous, wrong
        ],
    )
    scores = score_entities([eg])
    # all: tp 2, fp 2, fn 1
    assert scores["w2ner_p"] == pytest.approx(0.5)
    assert scores["w2ner_r"] == pytest.approx(2 / 3)
    assert scores["w2ner_f"] == pytest.approx(4 / 7)
    # discontinuous only: tp 1, fp 1, fn 1
    assert scores["w2ner_discontinuous_f"] == pytest.approx(0.5)


def test_discontinuous_f_counts_predicted_and_gold_sides():
    # A discontinuous prediction against contiguous gold is a false positive.
    only_predicted = example(SYMPTOMS, gold=[("SYM", (2, 3))], predicted=[("SYM", (2, 3)), ("SYM", (2, 7))])
    scores = score_entities([only_predicted])
    assert scores["w2ner_discontinuous_f"] == 0.0
    assert scores["w2ner_f"] == pytest.approx(2 / 3)
    # Contiguous entities only: nothing to score.
    contiguous = example(SYMPTOMS, gold=[("SYM", (2, 3))], predicted=[("SYM", (2, 3))])
    assert score_entities([contiguous])["w2ner_discontinuous_f"] == 0.0
    # Combined with a found discontinuous entity elsewhere: tp 1, fp 1, fn 0.
    found = example(SYMPTOMS, gold=[("SYM", (2, 3, 4, 7))], predicted=[("SYM", (2, 3, 4, 7))])
    assert score_entities([only_predicted, found])["w2ner_discontinuous_f"] == pytest.approx(2 / 3)


def test_overlapping_f_counts_overlaps_within_each_side():
    places = example(
        PLACES,
        gold=[("ORG", (0, 1, 2)), ("LOC", (0, 1)), ("LOC", (5, 6))],  # overlapping: ORG, LOC(0, 1)
        predicted=[
            ("LOC", (0, 1)),  # correct, but overlaps nothing among the predictions
            ("LOC", (5, 6)),  # correct, overlaps ORG (4, 5, 6) among the predictions only
            ("ORG", (4, 5, 6)),  # wrong
        ],
    )
    scores = score_entities([places])
    assert scores["w2ner_p"] == pytest.approx(2 / 3)
    assert scores["w2ner_r"] == pytest.approx(2 / 3)
    # overlapping: predicted {LOC(5, 6), ORG(4, 5, 6)}, gold {ORG(0, 1, 2), LOC(0, 1)}: tp 0
    assert scores["w2ner_overlapping_f"] == 0.0

    symptoms = example(
        SYMPTOMS,
        gold=[("SYM", (2, 3, 4, 5)), ("SYM", (2, 3, 4, 7))],
        predicted=[("SYM", (2, 3, 4, 5)), ("SYM", (2, 3, 4, 7))],
    )
    assert score_entities([symptoms])["w2ner_overlapping_f"] == pytest.approx(1.0)
    # Both together: tp 2, fp 2, fn 2.
    assert score_entities([places, symptoms])["w2ner_overlapping_f"] == pytest.approx(0.5)


def test_overlap_in_a_gap_is_not_an_overlap():
    eg = example(
        SYMPTOMS,
        gold=[("SYM", (2, 7)), ("BODY", (5,))],  # BODY lies in the gap of SYM
        predicted=[("SYM", (2, 7)), ("BODY", (5,))],
    )
    scores = score_entities([eg])
    assert scores["w2ner_f"] == pytest.approx(1.0)
    assert scores["w2ner_overlapping_f"] == 0.0


def test_all_zero_when_there_is_nothing():
    expected = {
        "w2ner_p": 0.0,
        "w2ner_r": 0.0,
        "w2ner_f": 0.0,
        "w2ner_per_type": {},
        "w2ner_discontinuous_f": 0.0,
        "w2ner_overlapping_f": 0.0,
        "spans_w2ner_p": 0.0,
        "spans_w2ner_r": 0.0,
        "spans_w2ner_f": 0.0,
        "spans_w2ner_per_type": {},
    }
    assert score_entities([]) == expected
    assert score_entities([example(SYMPTOMS, gold=[], predicted=[])]) == expected
    # Docs without the spans key at all.
    bare = Example(NLP.make_doc(SYMPTOMS), NLP.make_doc(SYMPTOMS))
    assert score_entities([bare]) == expected


def test_keys_follow_spans_key():
    eg = example(SYMPTOMS, gold=[("A", (0,)), ("B", (2, 3))], predicted=[("A", (0,))], spans_key="foo")
    scores = score_entities([eg], spans_key="foo")
    assert set(scores) == {
        "foo_p",
        "foo_r",
        "foo_f",
        "foo_per_type",
        "foo_discontinuous_f",
        "foo_overlapping_f",
        "spans_foo_p",
        "spans_foo_r",
        "spans_foo_f",
        "spans_foo_per_type",
    }
    assert scores["foo_p"] == pytest.approx(1.0)
    assert scores["foo_r"] == pytest.approx(0.5)
    assert scores["foo_f"] == pytest.approx(2 / 3)
    for name in ("p", "r", "f", "per_type"):
        assert scores[f"spans_foo_{name}"] == scores[f"foo_{name}"]
    assert scores["foo_per_type"]["A"] == pytest.approx({"p": 1.0, "r": 1.0, "f": 1.0})
    # The default key reads doc.spans["w2ner"], which these docs do not have.
    assert score_entities([eg])["w2ner_f"] == 0.0


def test_spans_aliases_for_default_key():
    eg = example(SYMPTOMS, gold=[("A", (0,)), ("B", (2, 3))], predicted=[("A", (0,)), ("B", (2,)), ("A", (2, 3))])
    scores = score_entities([eg])
    for name in ("p", "r", "f", "per_type"):
        assert scores[f"spans_w2ner_{name}"] == scores[f"w2ner_{name}"]


def test_gold_aligned_across_tokenizations():
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
    set_entities(reference, [("LOC", (2, 3, 4), None), ("LOC", (6,), None)])
    set_entities(predicted, [("LOC", (2,), 0.9), ("LOC", (4,), 0.8)])
    scores = score_entities([Example(predicted, reference)])
    assert scores["w2ner_p"] == pytest.approx(1.0)
    assert scores["w2ner_r"] == pytest.approx(1.0)


def test_unalignable_gold_counts_as_missed():
    predicted = Doc(NLP.vocab, words=["I", "love", "New-York", "."], spaces=[True, True, False, False])
    reference = Doc(
        NLP.vocab, words=["I", "love", "New", "-", "York", "."], spaces=[True, True, False, False, False, False]
    )
    set_entities(reference, [("LOC", (2, 3, 4), None), ("STATE", (4,), None)])
    set_entities(predicted, [("LOC", (2,), 0.9)])
    scores = score_entities([Example(predicted, reference)])
    assert scores["w2ner_p"] == pytest.approx(1.0)
    assert scores["w2ner_r"] == pytest.approx(0.5)
    assert scores["w2ner_per_type"]["STATE"]["r"] == 0.0


def test_unalignable_gold_counts_as_missed_in_the_discontinuous_and_overlapping_figures_too():
    """Gold "pain ... York" cannot be aligned ("York" lies inside "New-York"); gold "pain ...
    knees" is found. Both are discontinuous and share "pain", so both count on those sides."""
    reference = Doc(NLP.vocab, words=["pain", "in", "New", "-", "York", "and", "knees", "ache", "."],
                    spaces=[True, True, False, False, True, True, True, False, False])
    predicted = Doc(NLP.vocab, words=["pain", "in", "New-York", "and", "knees", "ache", "."],
                    spaces=[True, True, True, True, True, False, False])
    set_entities(reference, [("X", (0, 4), None), ("X", (0, 6), None)])
    set_entities(predicted, [("X", (0, 4), 0.9)])  # "pain knees"
    scores = score_entities([Example(predicted, reference)])
    assert scores["w2ner_r"] == pytest.approx(0.5)
    assert scores["w2ner_discontinuous_f"] == pytest.approx(2 / 3)  # 1 of 2 gold, 1 of 1 predicted
    assert scores["w2ner_overlapping_f"] == 0.0  # 2 gold overlapping, none predicted
    set_entities(predicted, [("X", (0, 4), 0.9), ("X", (0, 2), 0.8)])  # and "pain New-York", which overlaps it
    assert score_entities([Example(predicted, reference)])["w2ner_overlapping_f"] == pytest.approx(2 * 0.5 * 0.5 / 1.0)


def test_registered_scorer_is_score_entities():
    make_scorer = registry.scorers.get("spacy_w2ner.entity_scorer.v1")
    assert make_scorer() is score_entities
