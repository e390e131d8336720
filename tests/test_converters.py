"""Corpus converters (Dai, CoNLL, BMES, brat, W2NER JSON), the convert/export CLI and the corpus readers.

Small fixtures are written inline to ``tmp_path``; the real corpora in
``../shared/corpora`` are only counted (and skipped when absent).
"""
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

from spacy_w2ner import get_entities
from spacy_w2ner.cli import app
from spacy_w2ner.formats import (
    IGNORED_KEY,
    NAME_KEY,
    REPAIRED_KEY,
    FormatError,
    docs_to_brat,
    docs_to_w2ner_json,
    read_bmes,
    read_brat,
    read_brat_collection,
    read_conll,
    read_dai_text,
    read_w2ner_json,
    summarize,
    write_docbin,
)

from .conftest import SHARED_CORPORA

NLP = spacy.blank("en")
VOCAB = NLP.vocab
ZH_VOCAB = spacy.blank("zh").vocab
try:  # click < 8.2 mixes stderr into stdout unless told not to
    RUNNER = CliRunner(mix_stderr=False)
except TypeError:
    RUNNER = CliRunner()


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf8"))  # exactly these bytes (no newline translation)
    return path


def entities(doc):
    """(label, token indices) of a doc's entities, in position order."""
    return [(e.label, e.tokens) for e in get_entities(doc, "w2ner")]


def words(doc):
    return [t.text for t in doc]


def cli(*args, code=0):
    """Run the CLI in-process; returns the result after checking its exit code."""
    result = RUNNER.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    return result


def summary_line(result) -> dict:
    """The JSON counts printed as the last line of stdout."""
    return json.loads(result.stdout.strip().splitlines()[-1])


def docbin_docs(path: Path, vocab=VOCAB):
    return list(DocBin().from_disk(path).get_docs(vocab))


# ====================================================================== Dai

DAI = (
    "I did take my blood pressure today though , and it was slightly elevated from the norm .\n"
    "4,5,12,13 ADR|6,6 DATE\n"
    "\n"
    "Nothing to report\n"
    "\n"
    "\n"
    "Muscle aches in arms and legs\n"
    "0,1,5,5 ADR|0,3 ADR\n"
    "\n"
)


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


# ===================================================================== CoNLL

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
"""


def test_conll_bio_skips_docstart_and_reads_last_column(tmp_path):
    docs = list(read_conll(write(tmp_path, "train.txt", CONLL), VOCAB))
    assert [words(doc) for doc in docs] == [
        ["EU", "rejects", "German", "call", "."],
        ["Peter", "Blackburn"],
        ["BRUSSELS"],
    ]
    assert [entities(doc) for doc in docs] == [
        [("ORG", (0,)), ("MISC", (2,))],
        [("PER", (0, 1))],
        [("LOC", (0,))],
    ]
    assert not any(REPAIRED_KEY in doc.user_data for doc in docs)
    summary = summarize(docs, sentence_docs=True)
    assert summary.as_dict() == {
        "documents": 3, "sentences": 3, "tokens": 8, "entities": 4, "discontinuous": 0,
        "overlapping": 0, "per_label": {"LOC": 1, "MISC": 1, "ORG": 1, "PER": 1},
    }


def test_conll_tag_column_choice(tmp_path):
    path = write(tmp_path, "train.txt", CONLL)
    by_index = [entities(doc) for doc in read_conll(path, VOCAB, tag_column=3)]
    assert by_index == [entities(doc) for doc in read_conll(path, VOCAB)]
    chunks = [entities(doc) for doc in read_conll(path, VOCAB, tag_column=2)]
    assert chunks == [
        [("NP", (0,)), ("VP", (1,)), ("NP", (2, 3))],
        [("NP", (0, 1))],
        [("NP", (0,))],
    ]
    assert [entities(doc) for doc in read_conll(path, VOCAB, tag_column=-2)] == chunks
    with pytest.raises(FormatError, match=rf"{path}:3: tag 'NNP' is not O or B-, I-TYPE"):
        list(read_conll(path, VOCAB, tag_column=1))


def test_conll_docstart_without_blank_line_separates_sentences(tmp_path):
    path = write(tmp_path, "d.txt", "a B-X\n-DOCSTART- -X- O\nb B-Y\n\n\n")
    assert [entities(doc) for doc in read_conll(path, VOCAB)] == [[("X", (0,))], [("Y", (0,))]]


IOB1 = "Peter I-PER\nBlackburn I-PER\nSmith B-PER\nand O\nParis I-LOC\nLondon B-LOC\nOntario I-LOC\n"


def test_conll_iob1(tmp_path):
    path = write(tmp_path, "iob1.txt", IOB1)
    (doc,) = read_conll(path, VOCAB, scheme="IOB1")
    # I- starts an entity; B- separates two adjacent entities of one type; I- after B- continues it
    assert entities(doc) == [("PER", (0, 1)), ("PER", (2,)), ("LOC", (4,)), ("LOC", (5, 6))]
    assert REPAIRED_KEY not in doc.user_data
    # the same tags read as BIO: same entities, but those starting with I- are repaired
    (bio,) = read_conll(path, VOCAB, scheme="bio")
    assert entities(bio) == entities(doc)
    assert bio.user_data[REPAIRED_KEY] == 2


def test_conll_bioes_and_bilou(tmp_path):
    text = "Rome S-LOC\nParis S-LOC\nand O\nNew B-LOC\nYork I-LOC\nCity E-LOC\nhas O\nBig B-ORG\nCo E-ORG\n"
    (doc,) = read_conll(write(tmp_path, "bioes.txt", text), VOCAB, scheme="BIOES")
    assert entities(doc) == [("LOC", (0,)), ("LOC", (1,)), ("LOC", (3, 4, 5)), ("ORG", (7, 8))]
    assert REPAIRED_KEY not in doc.user_data
    bilou = text.replace("S-", "U-").replace("E-", "L-")
    (doc,) = read_conll(write(tmp_path, "bilou.txt", bilou), VOCAB, scheme="BILOU")
    assert entities(doc) == [("LOC", (0,)), ("LOC", (1,)), ("LOC", (3, 4, 5)), ("ORG", (7, 8))]


def test_conll_bioes_malformed_sequences_are_repaired(tmp_path):
    # B- not closed by E-, an I-E without B-, and an E- alone
    text = "a B-X\nb O\nc I-Y\nd E-Y\ne O\nf E-Z\n"
    (doc,) = read_conll(write(tmp_path, "bioes.txt", text), VOCAB, scheme="BIOES")
    assert entities(doc) == [("X", (0,)), ("Y", (2, 3)), ("Z", (5,))]
    assert doc.user_data[REPAIRED_KEY] == 3


def test_conll_stray_inside_tag_is_read_and_counted_as_repaired(tmp_path):
    text = "a O\nb I-PER\nc I-PER\nd O\ne B-LOC\nf I-ORG\n\ng B-PER\n"
    docs = list(read_conll(write(tmp_path, "stray.txt", text), VOCAB))
    # I- after O and I- after another type start an entity
    assert [entities(doc) for doc in docs] == [[("PER", (1, 2)), ("LOC", (4,)), ("ORG", (5,))], [("PER", (0,))]]
    assert docs[0].user_data[REPAIRED_KEY] == 2
    assert REPAIRED_KEY not in docs[1].user_data
    summary = summarize(docs, sentence_docs=True)
    assert summary.repaired == 2
    assert summary.as_dict()["repaired_entities"] == 2
    # kept in the DocBin and counted by the CLI
    result = cli("convert", "conll", tmp_path / "stray.txt", tmp_path / "out")
    assert summary_line(result)["repaired_entities"] == 2
    assert [d.user_data.get(REPAIRED_KEY) for d in docbin_docs(tmp_path / "out" / "stray.spacy")] == [2, None]


@pytest.mark.parametrize(
    "line, message",
    [
        ("b X-PER", "tag 'X-PER' is not O or B-, I-TYPE (BIO scheme)"),
        ("b B-", "tag 'B-' is not O or B-, I-TYPE"),
        ("b PER", "tag 'PER' is not O"),
        ("b S-PER", "tag 'S-PER' is not O or B-, I-TYPE"),  # S- is BIOES, not BIO
        ("b", "expected a token and a tag column, got 'b'"),
    ],
)
def test_conll_errors_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path, "bad.txt", f"-DOCSTART- O\n\na O\n{line}\n")
    with pytest.raises(FormatError) as err:
        list(read_conll(path, VOCAB))
    assert str(err.value).startswith(f"{path}:4: ")
    assert message in str(err.value)


def test_conll_missing_tag_column_names_line(tmp_path):
    path = write(tmp_path, "bad.txt", "a NN B-X\nb O\n")
    with pytest.raises(FormatError, match=rf"{path}:2: no tag column 2 in a line of 2 columns"):
        list(read_conll(path, VOCAB, tag_column=2))


def test_conll_bad_options_raise_value_error_at_the_call(tmp_path):
    path = write(tmp_path, "ok.txt", "a B-X\n")
    with pytest.raises(ValueError, match="unknown tag scheme 'BIOX'"):
        read_conll(path, VOCAB, scheme="BIOX")
    with pytest.raises(ValueError, match="unknown tag scheme 'BMES'"):
        read_conll(path, VOCAB, scheme="BMES")  # BMES has its own reader
    with pytest.raises(ValueError, match="tag_column 0"):
        read_conll(path, VOCAB, tag_column=0)
    # the CLI reports bad options as usage errors (exit code 2), and writes nothing
    result = cli("convert", "conll", path, tmp_path / "out", "--scheme", "BIOX", code=2)
    assert "unknown tag scheme" in result.stderr
    assert not (tmp_path / "out").exists()


# ====================================================================== BMES

BMES = """张 B-NAME
三 E-NAME
在 O
北 B-LOC
京 M-LOC
市 E-LOC
工 O
作 O
。 S-PUNCT

学 M-ORG
院 E-ORG
的 O
人 S-NAME
"""


def test_bmes_chinese_characters(tmp_path):
    docs = list(read_bmes(write(tmp_path, "train.char.bmes", BMES), ZH_VOCAB))
    assert [doc.text for doc in docs] == ["张三在北京市工作。", "学院的人"]  # no spaces between chars
    assert [len(doc) for doc in docs] == [9, 4]
    assert [entities(doc) for doc in docs] == [
        [("NAME", (0, 1)), ("LOC", (3, 4, 5)), ("PUNCT", (8,))],
        [("ORG", (0, 1)), ("NAME", (3,))],
    ]
    assert [e.text for e in get_entities(docs[0], "w2ner")] == ["张三", "北京市", "。"]
    # the sentence starting inside an ORG is tolerated and counted as repaired
    assert REPAIRED_KEY not in docs[0].user_data
    assert docs[1].user_data[REPAIRED_KEY] == 1
    summary = summarize(docs, sentence_docs=True)
    assert (summary.sentences, summary.entities, summary.repaired) == (2, 5, 1)
    assert summary.as_dict()["repaired_entities"] == 1


def test_bmes_accepts_i_as_m_and_repairs_unclosed_entity(tmp_path):
    # BIO tags in a character file (B-I-I) are well formed
    (doc,) = read_bmes(write(tmp_path, "bio.bmes", "北 B-LOC\n京 I-LOC\n市 I-LOC\n的 O\n"), ZH_VOCAB)
    assert entities(doc) == [("LOC", (0, 1, 2))]
    assert REPAIRED_KEY not in doc.user_data
    text = "北 B-LOC\n京 M-LOC\n市 E-LOC\n东 B-ORG\n方 M-ORG\n"
    (doc,) = read_bmes(write(tmp_path, "x.bmes", text), ZH_VOCAB)
    assert entities(doc) == [("LOC", (0, 1, 2)), ("ORG", (3, 4))]
    assert doc.user_data[REPAIRED_KEY] == 1  # the ORG ends with the sentence, without E-


@pytest.mark.parametrize(
    "line, message",
    [
        ("京 M LOC", "expected 'char TAG', got '京 M LOC'"),
        ("京", "expected 'char TAG'"),
        ("京 X-LOC", "tag 'X-LOC' is not O or"),
    ],
)
def test_bmes_errors_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path, "bad.bmes", f"北 B-LOC\n\n东 O\n{line}\n")
    with pytest.raises(FormatError) as err:
        list(read_bmes(path, ZH_VOCAB))
    assert str(err.value).startswith(f"{path}:4: ")
    assert message in str(err.value)


# ===================================================================== brat

BRAT_TEXT = "I had pain in knees and ankles.\nNo fever."
BRAT_ANN = (
    "T1\tADR 6 19;24 30\tpain in knees ankles\n"
    "T2\tSYM 35 40\tfever\n"
    "R1\tCause Arg1:T1 Arg2:T2\n"
    "#1\tAnnotatorNotes T1\tsevere\n"
    "A1\tNegated T2\n"
)


def brat_doc(tmp_path, text=BRAT_TEXT, ann=BRAT_ANN, tokenizer=NLP.tokenizer, **kwargs):
    txt = write(tmp_path, "doc.txt", text)
    write(tmp_path, "doc.ann", ann)
    (doc,) = read_brat(txt, None, VOCAB, tokenizer=tokenizer, **kwargs)
    return doc


def test_brat_discontinuous_entity_ids_and_ignored_annotations(tmp_path):
    doc = brat_doc(tmp_path)
    assert doc.text == BRAT_TEXT
    assert words(doc) == ["I", "had", "pain", "in", "knees", "and", "ankles", ".", "\n", "No", "fever", "."]
    ents = get_entities(doc, "w2ner")
    assert [(e.label, e.tokens, e.fragments, e.is_discontinuous) for e in ents] == [
        ("ADR", (2, 3, 4, 6), ((2, 5), (6, 7)), True),
        ("SYM", (10,), ((10, 11),), False),
    ]
    assert ents[0].text == "pain in knees ankles"
    # the brat id is the span id of every fragment
    assert [(s.text, s.id_) for s in doc.spans["w2ner"]] == [
        ("pain in knees", "T1"), ("ankles", "T1"), ("fever", "T2"),
    ]
    assert doc.user_data[NAME_KEY] == "doc"
    assert doc.user_data[IGNORED_KEY] == {"R": 1, "#": 1, "A": 1}
    summary = summarize([doc])
    assert summary.sentences is None  # one doc per document, no sentence boundaries
    assert summary.as_dict() == {
        "documents": 1, "tokens": 12, "entities": 2, "discontinuous": 1, "overlapping": 0,
        "per_label": {"ADR": 1, "SYM": 1}, "ignored_annotations": {"#": 1, "A": 1, "R": 1},
    }


def test_brat_whitespace_tokenizer(tmp_path):
    # whitespace tokens: "ankles." is one token, so the fragment "ankles" does not align
    with pytest.raises(FormatError, match=r"doc.ann:1: T1 \(ADR\): fragment 24 30 'ankles' does not align"):
        brat_doc(tmp_path, tokenizer=None)
    text = "I had pain in knees and ankles .\nNo  fever ."
    ann = "T1\tADR 6 19;24 30\tpain in knees ankles\nT2\tSYM 37 42\tfever\n"
    doc = brat_doc(tmp_path, text, ann, tokenizer=None)
    assert doc.text == text
    assert words(doc) == ["I", "had", "pain", "in", "knees", "and", "ankles", ".", "\n", "No", " ", "fever", "."]
    assert entities(doc) == [("ADR", (2, 3, 4, 6)), ("SYM", (11,))]
    assert [s.id_ for s in doc.spans["w2ner"]] == ["T1", "T1", "T2"]
    assert IGNORED_KEY not in doc.user_data


def test_brat_sentence_boundaries_from_a_pipeline(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    doc = brat_doc(tmp_path, tokenizer=nlp)
    assert doc.vocab is VOCAB
    assert summarize([doc]).sentences == 2
    assert entities(doc) == [("ADR", (2, 3, 4, 6)), ("SYM", (10,))]


def test_brat_adjacent_fragments_merge(tmp_path):
    doc = brat_doc(tmp_path, ann="T1\tADR 6 10;11 13\tpain in\n")
    ents = get_entities(doc, "w2ner")
    assert [(e.tokens, e.fragments) for e in ents] == [((2, 3), ((2, 4),))]


def test_brat_misaligned_annotation_names_file_line_and_id(tmp_path):
    with pytest.raises(FormatError) as err:
        brat_doc(tmp_path, ann="T1\tADR 6 8\tpa\n")
    message = str(err.value)
    assert str(tmp_path / "doc.ann") in message
    assert ":1" in message and "T1" in message
    assert message.startswith(f"{tmp_path / 'doc.ann'}:1: T1 (ADR): fragment 6 8 'pa' does not align")


def test_brat_text_mismatch(tmp_path):
    ann = "T2\tSYM 35 40\tfever\n\nT1\tADR 6 10\tpian\n"
    with pytest.raises(FormatError) as err:
        brat_doc(tmp_path, ann=ann)
    assert str(err.value).startswith(f"{tmp_path / 'doc.ann'}:3: T1 (ADR): the annotation text 'pian' differs")
    assert "'pain'" in str(err.value)
    # without check_text the offsets are trusted
    doc = brat_doc(tmp_path, ann=ann, check_text=False)
    assert entities(doc) == [("ADR", (2,)), ("SYM", (10,))]


@pytest.mark.parametrize(
    "ann, message",
    [
        ("T1\tADR 6 10\tpain\nT1\tSYM 35 40\tfever\n", ":2: T1 is already defined on line 1"),
        ("T1\tADR 6 10\n", ":1: T1: expected 'ID<TAB>TYPE START END[;START END...]<TAB>TEXT'"),
        ("T1\tADR 6 x\tpain\n", ":1: T1 (ADR): fragment '6 x' is not 'START END'"),
        ("T1\tADR 6 99\tpain\n", ":1: T1 (ADR): fragment 6 99 is empty or outside the text of 41 characters"),
        ("T1\tADR 6 6\t\n", ":1: T1 (ADR): fragment 6 6 is empty"),
        ("X\tADR 6 10\tpain\n", ":1: 'X' is not a brat annotation id"),
    ],
)
def test_brat_malformed_annotations(tmp_path, ann, message):
    with pytest.raises(FormatError) as err:
        brat_doc(tmp_path, ann=ann)
    assert str(err.value).startswith(str(tmp_path / "doc.ann") + message)


def test_brat_missing_annotation_files(tmp_path):
    txt = write(tmp_path, "alone.txt", "Some text.")
    with pytest.raises(FormatError, match="no annotation file"):
        list(read_brat(txt, None, VOCAB))
    with pytest.raises(FormatError, match="alone.txt: no annotation file .*alone.ann"):
        list(read_brat_collection(tmp_path, VOCAB))
    with pytest.raises(FormatError, match="alone.txt: no annotation file"):
        list(read_brat_collection(txt, VOCAB))
    orphan = tmp_path / "other"
    write(orphan, "x.ann", "")
    with pytest.raises(FormatError, match=r"x.ann: no text file .*x.txt beside it"):
        list(read_brat_collection(orphan, VOCAB))
    with pytest.raises(FormatError, match="no brat .txt/.ann documents"):
        list(read_brat_collection(write(tmp_path, "empty/README", "").parent, VOCAB))


@pytest.mark.parametrize("tokenizer", [None, NLP.tokenizer], ids=["whitespace", "spacy"])
def test_brat_collection_keeps_relative_names(tmp_path, tokenizer):
    corpus = tmp_path / "corpus"
    write(corpus, "b.txt", "No fever .")
    write(corpus, "b.ann", "T1\tSYM 3 8\tfever\n")
    write(corpus, "a/deep/c.txt", "Knee pain .\n")
    write(corpus, "a/deep/c.ann", "T3\tADR 0 9\tKnee pain\nT4\tBODY 0 4\tKnee\nE1\tX:T3\n")
    write(corpus, "a/d.txt", "Nothing .")
    write(corpus, "a/d.ann", "")
    docs = list(read_brat_collection(corpus, VOCAB, tokenizer=tokenizer))
    assert [doc.user_data[NAME_KEY] for doc in docs] == ["a/d", "a/deep/c", "b"]
    assert [entities(doc) for doc in docs] == [[], [("BODY", (0,)), ("ADR", (0, 1))], [("SYM", (1,))]]
    assert [[s.id_ for s in doc.spans["w2ner"]] for doc in docs] == [[], ["T4", "T3"], ["T1"]]
    summary = summarize(docs)
    assert (summary.documents, summary.entities, summary.overlapping) == (3, 3, 2)
    assert summary.ignored == {"E": 1}
    # a single .txt (or .ann) is a collection of one document
    (single,) = read_brat_collection(corpus / "a" / "deep" / "c.ann", VOCAB, tokenizer=tokenizer)
    assert single.user_data[NAME_KEY] == "c" and entities(single) == entities(docs[1])


def round_trip_corpus(root: Path) -> dict:
    """A brat collection whose .ann files are written as docs_to_brat writes them: T lines only, in id order."""
    text = "I had pain in knees and ankles.\nNo fever, no rash and no cough in New York City today.\n"

    def at(word, start=0):
        begin = text.index(word, start)
        return begin, begin + len(word)

    def line(ann_id, label, *fragments):
        offsets = ";".join(f"{s} {e}" for s, e in fragments)
        return f"{ann_id}\t{label} {offsets}\t{' '.join(text[s:e] for s, e in fragments)}\n"

    pain, knees, ankles = at("pain"), at("knees"), at("ankles")
    lines = [
        line("T1", "ADR", (pain[0], knees[1]), ankles),  # discontinuous
        line("T2", "ADR", pain),  # overlaps T1
        line("T3", "SYM", at("fever")),
        line("T4", "SYM", at("rash")),
        line("T5", "SYM", at("cough")),
        line("T6", "LOC", (at("New")[0], at("City")[1])),
        line("T7", "LOC", (at("New")[0], at("York")[1])),  # nested
        line("T8", "LOC", at("York")),
        line("T9", "DATE", at("today")),
        line("T10", "BODY", knees),  # numeric order: after T9, not after T1
        line("T11", "BODY", ankles),
    ]
    files = {
        "main.txt": text,
        "main.ann": "".join(lines),
        "sub/empty.txt": "Nothing here.",
        "sub/empty.ann": "",
        "sub/deeper/one.txt": "Severe   headache\n\nafter aspirin",
        "sub/deeper/one.ann": "T1\tADR 0 17\tSevere   headache\nT2\tDRUG 25 32\taspirin\n",
    }
    for name, content in files.items():
        write(root, name, content)
    return files


def tree(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_brat_round_trip_through_docbin_is_byte_identical(tmp_path):
    files = round_trip_corpus(tmp_path / "brat")
    summary = write_docbin(read_brat_collection(tmp_path / "brat", VOCAB, tokenizer=NLP.tokenizer), tmp_path / "c.spacy")
    assert (summary.documents, summary.entities, summary.discontinuous) == (3, 13, 1)
    docs = docbin_docs(tmp_path / "c.spacy")
    main = docs[0]
    assert main.user_data[NAME_KEY] == "main"
    # the brat ids survive the DocBin
    assert {e.spans[0].id_: (e.label, e.text) for e in get_entities(main, "w2ner")} == {
        "T1": ("ADR", "pain in knees ankles"), "T2": ("ADR", "pain"), "T3": ("SYM", "fever"),
        "T4": ("SYM", "rash"), "T5": ("SYM", "cough"), "T6": ("LOC", "New York City"),
        "T7": ("LOC", "New York"), "T8": ("LOC", "York"), "T9": ("DATE", "today"),
        "T10": ("BODY", "knees"), "T11": ("BODY", "ankles"),
    }
    written = docs_to_brat(docs, tmp_path / "out")
    assert [p.relative_to(tmp_path / "out").as_posix() for p in written] == [
        "main.ann", "sub/deeper/one.ann", "sub/empty.ann",
    ]
    assert tree(tmp_path / "out") == {name: text.encode("utf8") for name, text in files.items()}


def test_brat_round_trip_through_the_cli_is_byte_identical(tmp_path):
    files = round_trip_corpus(tmp_path / "brat")
    result = cli("convert", "brat", tmp_path / "brat", tmp_path / "spacy")
    counts = summary_line(result)
    assert "sentences" not in counts
    t_lines = sum(line.startswith("T") for name, text in files.items() if name.endswith(".ann") for line in text.splitlines())
    assert counts["documents"] == 3 and counts["entities"] == t_lines == 13
    exported = cli("export", "brat", tmp_path / "spacy" / "brat.spacy", tmp_path / "out")
    assert summary_line(exported) == counts
    assert tree(tmp_path / "out") == tree(tmp_path / "brat")


def test_brat_export_renumbers_entities_without_brat_ids(tmp_path):
    path = write(tmp_path, "dai.txt", "a b c\n2,2 Y|0,0,2,2 X\n\n")
    (doc,) = read_dai_text(path, VOCAB)
    docs_to_brat([doc], tmp_path / "out")
    assert (tmp_path / "out" / "doc00000.txt").read_text() == "a b c "
    assert (tmp_path / "out" / "doc00000.ann").read_text() == "T1\tX 0 1;4 5\ta c\nT2\tY 4 5\tc\n"


# =============================================================== W2NER JSON

RECORDS = [
    {"sentence": ["Muscle", "aches", "in", "arms", "and", "legs", "."],
     "ner": [{"index": [0, 1, 2, 3], "type": "ADR"}, {"index": [0, 1, 2, 5], "type": "ADR"}]},
    {"sentence": ["東京", "大学"], "ner": [{"index": [0], "type": "LOC"}, {"index": [0, 1], "type": "ORG"}]},
    {"sentence": ["Nothing", "here"], "ner": []},
]


def test_w2ner_json_round_trip_through_the_cli(tmp_path):
    source = write(tmp_path, "data.json", json.dumps(RECORDS, ensure_ascii=False))
    counts = summary_line(cli("convert", "w2ner-json", source, tmp_path / "spacy"))
    assert counts == {
        "documents": 3, "sentences": 3, "tokens": 11, "entities": 4, "discontinuous": 1,
        "overlapping": 4, "per_label": {"ADR": 2, "LOC": 1, "ORG": 1},
    }
    exported = cli("export", "w2ner-json", tmp_path / "spacy" / "data.spacy", tmp_path / "out.json")
    assert summary_line(exported)["entities"] == 4
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf8")) == RECORDS
    assert (tmp_path / "out.json").read_bytes() == source.read_bytes()


def test_w2ner_json_round_trip_with_python_m(tmp_path):
    """The real command line: ``python -m spacy_w2ner convert`` then ``export``."""
    source = write(tmp_path, "data.json", json.dumps(RECORDS, ensure_ascii=False))

    def run(*args):
        result = subprocess.run(
            [sys.executable, "-m", "spacy_w2ner", *map(str, args)], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.strip().splitlines()[-1])

    assert run("convert", "w2ner-json", source, tmp_path / "spacy")["entities"] == 4
    assert run("export", "w2ner-json", tmp_path / "spacy" / "data.spacy", tmp_path / "out.json")["entities"] == 4
    assert (tmp_path / "out.json").read_bytes() == source.read_bytes()


def test_export_of_brat_docs_to_w2ner_json_drops_whitespace_tokens(tmp_path):
    write(tmp_path / "brat", "doc.txt", BRAT_TEXT)
    write(tmp_path / "brat", "doc.ann", BRAT_ANN)
    cli("convert", "brat", tmp_path / "brat", tmp_path / "spacy")
    (doc,) = docbin_docs(tmp_path / "spacy" / "brat.spacy")
    assert doc[8].text == "\n" and entities(doc) == [("ADR", (2, 3, 4, 6)), ("SYM", (10,))]
    cli("export", "w2ner-json", tmp_path / "spacy" / "brat.spacy", tmp_path / "out.json")
    records = json.loads((tmp_path / "out.json").read_text(encoding="utf8"))
    assert records == [{
        "sentence": ["I", "had", "pain", "in", "knees", "and", "ankles", ".", "No", "fever", "."],
        "ner": [{"index": [2, 3, 4, 6], "type": "ADR"}, {"index": [9], "type": "SYM"}],  # fever: 10 -> 9
    }]


def test_export_of_an_entity_over_a_whitespace_token_fails_clearly(tmp_path):
    write(tmp_path / "brat", "doc.txt", BRAT_TEXT)
    write(tmp_path / "brat", "doc.ann", "T1\tX 30 34\t. No\n")  # ".\nNo": includes the "\n" token
    cli("convert", "brat", tmp_path / "brat", tmp_path / "spacy")
    (doc,) = docbin_docs(tmp_path / "spacy" / "brat.spacy")
    assert entities(doc) == [("X", (7, 8, 9))]
    with pytest.raises(ValueError, match="includes a whitespace token"):
        docs_to_w2ner_json([doc])
    result = cli("export", "w2ner-json", tmp_path / "spacy" / "brat.spacy", tmp_path / "out.json", code=1)
    assert result.stderr.startswith("error: doc 0: entity X")
    assert "whitespace token, which W2NER JSON cannot represent" in result.stderr
    assert not (tmp_path / "out.json").exists()


# ========================================================= CLI counts, errors

CLI_INPUTS = {
    "w2ner-json": ("data.json", json.dumps(RECORDS), [], 4),
    "dai": ("cadec.txt", DAI, [], 4),
    "conll": ("conll.txt", CONLL, [], 4),
    "conll-iob1": ("iob1.txt", IOB1, ["--scheme", "IOB1"], 4),
    "conll-column": ("chunks.txt", CONLL, ["--tag-column", "2"], 5),
    "bmes": ("resume.char.bmes", BMES, ["--lang", "zh"], 5),
    "brat": ("doc.txt", BRAT_TEXT, [], 2),
    "brat-whitespace": ("doc.txt", BRAT_TEXT.replace(".", " ."), ["--tokenizer", "whitespace"], 2),
}


@pytest.mark.parametrize("case", list(CLI_INPUTS))
def test_cli_convert_keeps_every_entity(tmp_path, case):
    name, text, options, expected = CLI_INPUTS[case]
    input_format = case.split("-")[0] if case != "w2ner-json" else case
    path = write(tmp_path, name, text)
    if input_format == "brat":
        write(tmp_path, "doc.ann", BRAT_ANN.replace("35 40", "36 41") if "whitespace" in case else BRAT_ANN)
    result = cli("convert", input_format, path, tmp_path / "out", *options)
    counts = summary_line(result)
    assert counts["entities"] == expected
    assert sum(counts["per_label"].values()) == expected
    output = tmp_path / "out" / (Path(name).stem + ".spacy")
    assert result.stdout.splitlines()[0] == f"{path} -> {output}"
    vocab = ZH_VOCAB if input_format == "bmes" else VOCAB
    docs = docbin_docs(output, vocab)
    assert sum(len(get_entities(doc, "w2ner")) for doc in docs) == expected
    assert counts["documents"] == len(docs)
    if input_format != "brat":
        assert counts["sentences"] == len(docs)
    # exporting counts the same entities
    exported = cli("export", "w2ner-json", output, tmp_path / "out.json", "--lang", "zh" if input_format == "bmes" else "en")
    assert summary_line(exported)["entities"] == expected
    assert sum(len(r["ner"]) for r in json.loads((tmp_path / "out.json").read_text(encoding="utf8"))) == expected


def test_cli_convert_format_error_exits_1_with_file_and_line(tmp_path):
    path = write(tmp_path, "bad.txt", "a b c\n0,1 X\n\nd e\n0,9 Y\n")
    result = cli("convert", "dai", path, tmp_path / "out", code=1)
    assert result.stderr.startswith(f"error: {path}:5: mention 1 '0,9 Y' has the range 0,9")
    assert not (tmp_path / "out" / "bad.spacy").exists()


def test_cli_usage_errors(tmp_path):
    path = write(tmp_path, "x.txt", "a B-X\n")
    assert "unknown format" in cli("convert", "iob", path, tmp_path / "out", code=2).stderr
    assert "only the brat format reads a directory" in cli("convert", "dai", tmp_path, tmp_path / "out", code=2).stderr
    assert "tokenizer must be 'spacy' or" in cli("convert", "brat", path, tmp_path / "out", "--tokenizer", "bert", code=2).stderr
    # An option of another format is an error, not silently ignored.
    assert "--scheme does not apply to the dai format" in cli("convert", "dai", path, tmp_path / "out", "--scheme", "IOB1", code=2).stderr
    assert "unknown format" in cli("export", "conll", path, tmp_path / "o", code=2).stderr
    result = cli("export", "w2ner-json", path, tmp_path / "out.json", code=1)
    assert result.stderr.startswith(f"error: {path}: cannot read a .spacy DocBin")


# ========================================================= registered readers

READER_INPUTS = {
    "spacy_w2ner.W2NERJsonCorpus.v1": ("data.json", json.dumps(RECORDS), {}, [2, 2, 0]),
    "spacy_w2ner.DaiCorpus.v1": ("dai.txt", DAI, {}, [2, 0, 2]),
    "spacy_w2ner.ConllCorpus.v1": ("conll.txt", CONLL, {"scheme": "IOB2", "tag_column": 3}, [2, 1, 1]),
    "spacy_w2ner.BmesCorpus.v1": ("x.bmes", BMES, {}, [3, 2]),
    "spacy_w2ner.BratCorpus.v1": ("brat", None, {"tokenizer": "spacy"}, [2]),
}


@pytest.mark.parametrize("name", list(READER_INPUTS))
def test_registered_corpus_readers(tmp_path, name):
    filename, text, options, expected = READER_INPUTS[name]
    if text is None:  # a brat directory
        write(tmp_path / filename, "doc.txt", BRAT_TEXT)
        write(tmp_path / filename, "doc.ann", BRAT_ANN)
        path = tmp_path / filename
    else:
        path = write(tmp_path, filename, text)
    nlp = spacy.blank("zh" if "Bmes" in name else "en")
    corpus = spacy.registry.readers.get(name)(path=str(path), **options)
    examples = list(corpus(nlp))
    assert all(isinstance(eg, Example) for eg in examples)
    assert [len(get_entities(eg.reference, "w2ner")) for eg in examples] == expected
    for eg in examples:
        assert words(eg.predicted) == words(eg.reference)
        assert eg.predicted.text == eg.reference.text
        assert "w2ner" in eg.reference.spans and "w2ner" not in eg.predicted.spans
    assert list(corpus(nlp))[0].reference.text == examples[0].reference.text  # can be read again
    # limit
    assert len(list(spacy.registry.readers.get(name)(path=str(path), limit=1, **options)(nlp))) == 1


def test_brat_corpus_reader_whitespace_tokenizer(tmp_path):
    write(tmp_path, "doc.txt", "No  fever .\n")
    write(tmp_path, "doc.ann", "T1\tSYM 4 9\tfever\n")
    corpus = spacy.registry.readers.get("spacy_w2ner.BratCorpus.v1")(path=tmp_path, tokenizer="whitespace")
    (eg,) = corpus(spacy.blank("en"))
    assert words(eg.predicted) == words(eg.reference) == ["No", " ", "fever", ".", "\n"]
    assert entities(eg.reference) == [("SYM", (2,))]
    assert eg.reference.spans["w2ner"][0].id_ == "T1"


def test_corpus_reader_errors():
    readers = spacy.registry.readers
    with pytest.raises(ValueError, match="'path' is not set"):
        readers.get("spacy_w2ner.DaiCorpus.v1")(path=None)
    with pytest.raises(ValueError, match="unknown tag scheme"):
        readers.get("spacy_w2ner.ConllCorpus.v1")(path="x.txt", scheme="BMES")
    with pytest.raises(ValueError, match="tag_column 0"):
        readers.get("spacy_w2ner.ConllCorpus.v1")(path="x.txt", tag_column=0)
    with pytest.raises(ValueError, match="tokenizer must be 'spacy' or 'whitespace'"):
        readers.get("spacy_w2ner.BratCorpus.v1")(path="x", tokenizer="bert")
    corpus = readers.get("spacy_w2ner.BmesCorpus.v1")(path="/nonexistent/x.bmes")
    with pytest.raises(ValueError, match="does not exist"):
        list(corpus(spacy.blank("zh")))


def test_corpus_reader_malformed_input_raises_format_error(tmp_path):
    path = write(tmp_path, "bad.txt", "a B-X\nb Q-X\n")
    corpus = spacy.registry.readers.get("spacy_w2ner.ConllCorpus.v1")(path=path)
    with pytest.raises(FormatError, match=rf"{path}:2: tag 'Q-X'"):
        list(corpus(NLP))


def test_readers_are_spacy_readers_entry_points():
    points = {ep.name: ep for ep in importlib.metadata.entry_points(group="spacy_readers")}
    for name in READER_INPUTS:
        assert name in points
        assert points[name].load() is spacy.registry.readers.get(name)


CONFIG = """
[paths]
train = null

[corpora]

[corpora.train]
@readers = "spacy_w2ner.ConllCorpus.v1"
path = ${paths.train}
scheme = "IOB1"
tag_column = 3
limit = 0
"""


def test_reader_resolved_from_a_config(tmp_path):
    path = write(tmp_path, "iob1.txt", "EU NNP B-NP I-ORG\nrejects VBZ I-VP O\n\nPeter NNP I-NP I-PER\nSmith NNP I-NP B-PER\n")
    config = spacy.util.load_config_from_str(CONFIG, overrides={"paths.train": str(path)}, interpolate=True)
    corpus = spacy.util.resolve_dot_names(config, ["corpora.train"])[0]
    examples = list(corpus(NLP))
    assert [entities(eg.reference) for eg in examples] == [[("ORG", (0,))], [("PER", (0,)), ("PER", (1,))]]
    assert not any(REPAIRED_KEY in eg.reference.user_data for eg in examples)
    resolved = spacy.util.registry.resolve(config)
    assert [words(eg.reference) for eg in resolved["corpora"]["train"](NLP)] == [["EU", "rejects"], ["Peter", "Smith"]]
    # a bad scheme fails when the config is resolved
    bad = spacy.util.load_config_from_str(CONFIG.replace('"IOB1"', '"BMES"'), overrides={"paths.train": str(path)}, interpolate=True)
    with pytest.raises(ValueError, match="unknown tag scheme 'BMES'"):
        spacy.util.registry.resolve(bad)
    # paths.train left null: a clear error
    with pytest.raises(ValueError, match="'path' is not set"):
        spacy.util.registry.resolve(spacy.util.load_config_from_str(CONFIG, interpolate=True))


# ========================================================== real corpora

REAL = [
    # (corpus file, reader, summary counts that must hold)
    ("cadec/dai-text/train.txt", "dai", {"sentences": 5340, "entities": 4430, "discontinuous": 491}),
    ("cadec/dai-text/dev.txt", "dai", {"sentences": 1097, "entities": 898, "discontinuous": 94}),
    ("cadec/dai-text/test.txt", "dai", {"sentences": 1160, "entities": 990, "discontinuous": 94}),
    ("conll03/bio/train.txt", "conll", {
        "sentences": 14041, "entities": 23499, "discontinuous": 0, "overlapping": 0,
        "per_label": {"LOC": 7140, "MISC": 3438, "ORG": 6321, "PER": 6600},
    }),
    ("conll03/bio/valid.txt", "conll", {"sentences": 3250, "entities": 5942}),
    ("conll03/bio/test.txt", "conll", {"sentences": 3453, "entities": 5648}),
    ("resume/bmes/train.char.bmes", "bmes", {"sentences": 3821, "entities": 13440, "repaired_entities": 4}),
    ("resume/bmes/dev.char.bmes", "bmes", {"sentences": 463, "entities": 1497}),
    ("resume/bmes/test.char.bmes", "bmes", {"sentences": 477, "entities": 1630}),
    ("genia/w2ner-json/dev.json", "w2ner-json", {"sentences": 1669, "entities": 5365, "overlapping": 1067}),
    ("genia/w2ner-json/test.json", "w2ner-json", {"sentences": 1854, "entities": 5506, "overlapping": 1199}),
]

REAL_READERS = {
    "dai": lambda path: read_dai_text(path, VOCAB),
    "conll": lambda path: read_conll(path, VOCAB, scheme="BIO"),
    "bmes": lambda path: read_bmes(path, ZH_VOCAB),
    "w2ner-json": lambda path: read_w2ner_json(path, VOCAB),
}


@pytest.fixture(scope="module")
def real_counts():
    """The summaries of every real corpus file, read once."""
    return {
        name: summarize(REAL_READERS[reader](SHARED_CORPORA / name), sentence_docs=True).as_dict()
        for name, reader, _ in REAL
    }


@pytest.mark.skipif(not SHARED_CORPORA.exists(), reason="../shared/corpora is absent")
@pytest.mark.parametrize("name, reader, expected", REAL, ids=[name for name, _, _ in REAL])
def test_real_corpus_counts(real_counts, name, reader, expected):
    counts = real_counts[name]
    assert {key: counts.get(key) for key in expected} == expected
    assert counts["documents"] == counts["sentences"]
    if reader != "bmes" or "train" not in name:
        assert "repaired_entities" not in counts


@pytest.mark.skipif(not SHARED_CORPORA.exists(), reason="../shared/corpora is absent")
def test_real_cadec_dai_totals(real_counts):
    splits = [real_counts[f"cadec/dai-text/{split}.txt"] for split in ("train", "dev", "test")]
    totals = {key: sum(s[key] for s in splits) for key in ("sentences", "entities", "discontinuous")}
    assert totals == {"sentences": 7597, "entities": 6318, "discontinuous": 679}
