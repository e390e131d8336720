"""Dai et al.'s inline format (spacy_w2ner/formats/dai.py): entities, file end variants, errors naming file:line."""

import pytest

from spacy_w2ner import get_entities
from spacy_w2ner.formats import FormatError, read_dai_text, summarize

from ..conftest import VOCAB, entities, words, write
from ..samples import DAI


def test_dai_discontinuous_mention_and_empty_mention_line(tmp_path):
    docs = list(read_dai_text(write(tmp_path, "dai.txt", DAI), VOCAB))
    assert [len(doc) for doc in docs] == [18, 3, 6]
    assert words(docs[1]) == ["Nothing", "to", "report"]
    first = get_entities(docs[0], "w2ner")
    assert [(e.label, e.tokens, e.fragments, e.is_discontinuous) for e in first] == [
        ("ADR", (4, 5, 12, 13), ((4, 6), (12, 14)), True),
        ("DATE", (6,), ((6, 7),), False),
    ]
    assert first[0].text == "blood pressure slightly elevated"
    # every fragment of the discontinuous entity is a span of the group with one id
    spans = [s for s in docs[0].spans["w2ner"] if s.label_ == "ADR"]
    assert [(s.start, s.end) for s in spans] == [(4, 6), (12, 14)]
    assert len({s.id_ for s in spans}) == 1
    assert entities(docs[1]) == []
    # overlapping mentions are both kept
    assert entities(docs[2]) == [("ADR", (0, 1, 2, 3)), ("ADR", (0, 1, 5))]
    summary = summarize(docs, sentence_docs=True)
    assert (summary.sentences, summary.entities, summary.discontinuous, summary.overlapping) == (3, 4, 2, 2)


def test_dai_ranges_in_any_order_and_adjacent_ranges(tmp_path):
    path = write(tmp_path, "dai.txt", "a b c d\n3,3,0,0 X|0,0,1,1 Y\n\n")
    (doc,) = read_dai_text(path, VOCAB)
    ents = get_entities(doc, "w2ner")
    assert [(e.label, e.tokens, e.fragments) for e in ents] == [
        ("Y", (0, 1), ((0, 2),)),  # adjacent ranges: one contiguous entity
        ("X", (0, 3), ((0, 1), (3, 4))),
    ]


@pytest.mark.parametrize(
    "tail, expected",
    [
        ("d e", [[]]),  # ends after a line of tokens
        ("d e\n", [[]]),
        ("d e\n1,1 Y", [[("Y", (1,))]]),  # ends after the mentions, no newline
        ("d e\n1,1 Y\n", [[("Y", (1,))]]),
        ("d e\n1,1 Y\n\n\n\n", [[("Y", (1,))]]),  # extra blank lines at the end
        ("d e\n\n\n \t\n", [[]]),  # whitespace-only lines at the end
        ("", []),
    ],
)
def test_dai_end_of_file_variants(tmp_path, tail, expected):
    path = write(tmp_path, "dai.txt", "a  b\tc\n0,1 X\n\n" + tail)
    docs = list(read_dai_text(path, VOCAB))
    assert words(docs[0]) == ["a", "b", "c"]  # runs of spaces and tabs separate tokens
    assert [entities(doc) for doc in docs] == [[("X", (0, 1))]] + expected
    if expected:
        assert words(docs[1]) == ["d", "e"]


def test_dai_crlf_line_ends(tmp_path):
    path = write(tmp_path, "dai.txt", DAI.replace("\n", "\r\n"))
    assert [entities(doc) for doc in read_dai_text(path, VOCAB)] == [
        entities(doc) for doc in read_dai_text(write(tmp_path, "lf.txt", DAI), VOCAB)
    ]


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("a b c\n0,3 X\n\n", 2, "range 0,3, not an inclusive token range within the sentence of 3 tokens"),
        ("a b c\n2,1 X\n\n", 2, "range 2,1"),
        ("a b c\n-1,0 X\n\n", 2, "range -1,0"),
        ("a b c\n0,1,2 X\n\n", 2, "odd number of offsets"),
        ("a b c\n0,x X\n\n", 2, "non-integer offset"),
        ("a b c\n0,1 X\nd e\n0,0 Y\n", 3, "expected a blank line after the mentions of line 2"),
        ("a b c d\n0,2,1,3 X\n\n", 2, "ranges that share a token"),
        ("a b c\n0,1\n\n", 2, "is not 'start,end"),
        ("a b c\n0,1 X|1,2 Y Z\n\n", 2, "mention 2"),
        ("a b\n0,0 X\n\nc d\n0,5 Y\n\n", 5, "range 0,5"),
        ("a b\n0,0 X\n\n\nc d\n\n\n", 4, "expected a line of tokens, got a blank line"),
    ],
)
def test_dai_errors_name_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, "bad.txt", text)
    with pytest.raises(FormatError) as err:
        list(read_dai_text(path, VOCAB))
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert message in str(err.value)
