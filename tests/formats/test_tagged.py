"""Token-per-line tag formats (spacy_w2ner/formats/tagged.py): CoNLL BIO/IOB1/BIOES and character BMES."""

import pytest

from spacy_w2ner import get_entities
from spacy_w2ner.formats import REPAIRED_KEY, FormatError, read_bmes, read_conll, summarize

from ..conftest import VOCAB, ZH_VOCAB, cli, docbin_docs, entities, summary_line, words, write
from ..samples import BMES, CONLL, IOB1


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


def test_conll_tokens_keep_no_break_spaces(tmp_path):
    """Columns are split on spaces and tabs only: "New\xa0York" is one token, nothing is cut off."""
    path = write(tmp_path, "nbsp.txt", "New\xa0York NNP B-LOC\n10\xa0000 CD O\ncases\tNNS\tO\n\n")
    (doc,) = read_conll(path, VOCAB)
    assert words(doc) == ["New\xa0York", "10\xa0000", "cases"]
    assert entities(doc) == [("LOC", (0,))]
    assert doc.user_data["w2ner_name"] == "nbsp-line1"


def test_bmes_reads_an_ideographic_space_character(tmp_path):
    path = write(tmp_path, "x.bmes", "北 B-LOC\n京 E-LOC\n\u3000 O\n人 S-PER\n\n东 O\n")
    first, second = read_bmes(path, ZH_VOCAB)
    assert words(first) == ["北", "京", "\u3000", "人"]
    assert entities(first) == [("LOC", (0, 1)), ("PER", (3,))]
    assert [first.user_data["w2ner_name"], second.user_data["w2ner_name"]] == ["x-line1", "x-line6"]
