"""The one rule by which annotations at character offsets become entities (spacy_w2ner/formats/standoff.py):
texts as other tools write them, tokens split at annotation boundaries, sentences never cut inside
an entity, and what cannot be read listed."""
import random

import pytest
import spacy

from spacy_w2ner import get_entities
from spacy_w2ner.formats import FormatError, summarize
from spacy_w2ner.formats.standoff import Mention, Reading, skipped, split_tokens_named, text_matches

from ..conftest import VOCAB

TEXT = "Breast and Ovarian Cancers. She had pain in her knees and ankles."
BREAST, CANCERS = (0, 6), (19, 26)


@pytest.mark.parametrize(
    "written",
    [
        "Breast Cancers", "BreastCancers", "Breast ... Cancers", "Breast … Cancers", "Breast [...] Cancers",
        "Breast […] Cancers", "Breast (...) Cancers", "Breast . . . Cancers", "Breast ⋯ Cancers", "Breast...Cancers",
        "Breast and Ovarian Cancers", "Breast  and\nOvarian Cancers", " Breast Cancers ", "Breast\tCancers",
    ],
)  # fmt: skip
def test_discontinuous_texts_as_other_tools_write_them(written):
    assert text_matches(TEXT, [BREAST, CANCERS], written)
    assert text_matches(TEXT, [CANCERS, BREAST], written)  # locations given out of order


@pytest.mark.parametrize("written", ["Breast and Cancers", "Breast - Cancers", "Cancers Breast ...", "Breast Cancer", "breast cancers", "Breast .. x Cancers"])
def test_other_texts_differ(written):
    assert not text_matches(TEXT, [BREAST, CANCERS], written)


def test_a_run_of_dots_is_read_once_not_in_every_way_it_could_be_cut():
    """A text that differs, with 400 dots: the ellipsis pattern let a run be cut into ellipses in
    exponentially many ways (40 dots: 43 s; 400: never). An alarm, not a timing: it ends or hangs."""
    import signal

    def hung(*_):
        raise AssertionError("text_matches backtracks exponentially on a run of dots")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        assert not text_matches("a b c", [(0, 1), (4, 5)], "a" + "." * 400 + "b")
        assert text_matches("a b c", [(0, 1), (4, 5)], "a" + "." * 400 + "c")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_one_location_whitespace_and_composed_characters():
    assert text_matches("Café au lait", [(0, 4)], "Cafe\u0301")  # decomposed é
    assert text_matches("pain\nin", [(0, 7)], "pain in")
    assert not text_matches("pain in", [(0, 7)], "painin")
    assert text_matches("anything", [(0, 3)], None)  # nothing to check


def reading(**options) -> Reading:
    return Reading(VOCAB, tokenizer=spacy.blank("en").tokenizer, **options)


def test_tokens_split_at_annotation_boundaries_every_annotation_arrives():
    text = "The chronic hepatitis C. hGRalphaF737L was found."
    mentions = [Mention("1", "Disease", [(4, 23)]), Mention("2", "Mutation", [(33, 38)]), Mention("3", "Gene", [(25, 33)])]
    skips = reading().skips("t")
    doc = reading().doc(text, mentions, skips, "t")
    assert [(e.label, e.text) for e in get_entities(doc)] == [("Disease", "chronic hepatitis C"), ("Gene", "hGRalpha"), ("Mutation", "F737L")]
    assert doc.text == text and split_tokens_named(doc) == [
        "t: annotation 1 (Disease) 'chronic hepatitis C' at 4-23 splits the token 'C.' at 22-24 into 'C' + '.'",
        "t: annotation 2 (Mutation) 'F737L' at 33-38 splits the token 'hGRalphaF737L' at 25-38 into 'hGRalpha' + 'F737L'",
        "t: annotation 3 (Gene) 'hGRalpha' at 25-33 splits the token 'hGRalphaF737L' at 25-38 into 'hGRalpha' + 'F737L'",
    ]
    assert summarize([doc]).tokens_split == 2
    assert not doc.has_annotation("HEAD")  # no parse made up by the retokenizer
    doc = reading(split_tokens=False).doc(text, mentions, reading().skips("t"), "t")
    assert get_entities(doc) == [] and [kind for _, kind, _ in skipped(doc)] == ["boundary inside a token"] * 3


def test_whitespace_at_a_range_edge_is_not_aligned_and_kept_for_the_way_back():
    from spacy_w2ner.formats.standoff import mentions_of

    doc = reading().doc("She had pain in her knees.", [Mention("r", "ADR", [(7, 13)], " pain ")], reading().skips("t"), "t")
    assert [(e.text, e.tokens) for e in get_entities(doc)] == [("pain", (2,))]
    assert [(m.ranges, m.text) for m in mentions_of(doc, "w2ner")] == [([(7, 13)], " pain ")]


def test_sentences_never_split_an_entity_and_are_counted():
    text = "Dr. Smith saw pain. In her knees. And more."
    entity = Mention("1", "ADR", [(14, 32)], "pain. In her knees")
    doc = reading().doc(text, [entity], reading().skips("t"), "t")
    assert [s.text.strip() for s in doc.sents] == ["Dr. Smith saw pain. In her knees.", "And more."]  # the sentencizer's, less the one inside
    assert doc.user_data["w2ner_sentences_joined"] == 1
    doc = reading(sentencizer=False).doc(text, [entity], reading().skips("t"), "t")
    assert not doc.has_annotation("SENT_START")
    # parts the source states (a passage, a <sentence>) start sentences; whitespace never starts one
    doc = reading(sentencizer=False).doc("Title\n\nAbstract one. Two.", [], reading().skips("t"), "t", parts=[(0, True), (7, False)])
    assert [s.text for s in doc.sents] == ["Title\n\n", "Abstract one. Two."]


def test_what_cannot_be_read_is_listed_and_strict_stops_at_the_first():
    skips = reading().skips("f.txt:1: document 1")
    skips.unknown("f.txt:3", "a line of no kind; passed over")
    doc = reading().doc("Aspirin .", [Mention("1", "DRUG", [(0, 7)], "Aspirn")], skips, "t")
    assert skipped(doc) == [("f.txt:3", "unknown line or element", "a line of no kind; passed over"),
                            ("annotation 1", "text differs from its offsets", "(DRUG) its text 'Aspirn' differs from the text at its offsets 'Aspirin'")]  # fmt: skip
    assert (doc.user_data["w2ner_ignored"], doc.user_data["w2ner_not_read"]) == ({"text differs from its offsets": 1}, {"unknown line or element": 1})
    with pytest.raises(FormatError, match=r"^f.txt:3: a line of no kind; passed over \(--strict\)$"):
        reading(strict=True).skips("f.txt:1").unknown("f.txt:3", "a line of no kind; passed over")


def test_tokens_split_as_spacy_s_retokenizer_splits_them_in_one_pass():
    """split_tokens makes the Doc anew in one pass (the retokenizer shifts the Doc for each split:
    quadratic on a long document) with what the retokenizer gives: words, spaces, norms (a
    piece's is its text's), the first piece's sentence start; a later piece starts no sentence."""
    from spacy_w2ner.formats.standoff import split_tokens

    nlp = spacy.blank("en")
    rng = random.Random(1)
    pool = ["Lipitor", "don't", "hGRalphaF737L", "C.", "ankles.", "U.S.", "pain", "x"]
    for _ in range(200):
        doc = nlp(" ".join(rng.choice(pool) for _ in range(rng.randint(1, 10))))
        if rng.random() < 0.5:
            for token in doc:
                token.is_sent_start = token.i == 0 or rng.random() < 0.3
        cuts = {t.i: {t.idx + c: ["why"] for c in rng.sample(range(1, len(t)), rng.randint(1, len(t) - 1))}
                for t in doc if len(t) > 1 and rng.random() < 0.4}  # fmt: skip
        expected = doc.copy()
        with expected.retokenize() as retokenizer:
            for i, chars in cuts.items():
                edges = [0, *sorted(c - expected[i].idx for c in chars), len(expected[i])]
                pieces = [expected[i].text[a:b] for a, b in zip(edges, edges[1:])]
                retokenizer.split(expected[i], pieces, heads=[(expected[i], k) for k in range(len(pieces))])
        split, named = split_tokens(doc, cuts)
        assert [(t.text, t.whitespace_, t.norm_) for t in split] == [(t.text, t.whitespace_, t.norm_) for t in expected]
        assert split.has_annotation("SENT_START") == doc.has_annotation("SENT_START") and not split.has_annotation("HEAD")
        firsts, k = set(), 0  # where each token (or its first piece) is in the split doc
        for token in doc:
            firsts.add(k)
            k += 1 + len(cuts.get(token.i, ()))
        later = set(range(len(split))) - firsts
        assert [t.is_sent_start for t in split if t.i not in later] == [t.is_sent_start for t in expected if t.i not in later]
        assert all(split[i].is_sent_start is (False if doc.has_annotation("SENT_START") else None) for i in later)
        assert [(s["token"], len(s["pieces"])) for s in named] == [(doc[i].text, len(chars) + 1) for i, chars in sorted(cuts.items())]
