"""Streamed .spacy files (spacy_w2ner/formats/docbin.py): the very message DocBin writes, read back
one Doc at a time as DocBin makes them, nothing left behind when writing fails."""
import zlib

import pytest
import spacy
import srsly
from spacy.tokens import DocBin

from spacy_w2ner import set_entities
from spacy_w2ner.formats import DocBinFile, DocBinStream, FormatError, write_docbin

NLP = spacy.blank("en")


def docs():
    made = []
    for k, text in enumerate(["She had pain in her knees and ankles .", "", "Aspirin ."]):
        doc = NLP.make_doc(text)
        if len(doc) > 4:
            set_entities(doc, [("ADR", [2, 3, 4, 7], 0.5)])
        doc.user_data["w2ner_name"] = f"d{k}"
        doc.cats = {"x": float(k)}
        made.append(doc)
    return made


def message(path):
    return srsly.msgpack_loads(zlib.decompress(path.read_bytes()))


@pytest.mark.parametrize("count", [0, 1, 3])
def test_the_stream_writes_what_docbin_writes(tmp_path, count):
    stream = DocBinStream(tmp_path / "s.spacy")
    for doc in docs()[:count]:
        stream.add(doc)
    stream.close()
    DocBin(store_user_data=True, docs=docs()[:count]).to_disk(tmp_path / "d.spacy")
    assert message(tmp_path / "s.spacy") == message(tmp_path / "d.spacy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.spacy", "s.spacy"]  # the spool is gone


@pytest.mark.parametrize("store_user_data", [True, False])  # False: spaCy's default, no user_data in the file
def test_docs_read_one_at_a_time_are_docbins_docs(tmp_path, store_user_data):
    DocBin(store_user_data=store_user_data, docs=docs()).to_disk(tmp_path / "d.spacy")
    expected = list(DocBin().from_disk(tmp_path / "d.spacy").get_docs(spacy.blank("en").vocab))
    with DocBinFile(tmp_path / "d.spacy") as source:
        assert len(source) == 3
        for _ in range(2):  # as often as asked
            found = list(source.docs(spacy.blank("en").vocab))
            assert [d.to_json() for d in found] == [d.to_json() for d in expected]
            assert [d.user_data for d in found] == [d.user_data for d in expected]
            assert [d.spans["w2ner"].attrs.get("scores") is not None for d in found if "w2ner" in d.spans] == [True]


def test_a_failed_write_leaves_nothing(tmp_path):
    def failing():
        yield docs()[0]
        raise FormatError("bad input")

    with pytest.raises(FormatError):
        write_docbin(failing(), tmp_path / "out.spacy")
    assert list(tmp_path.iterdir()) == []


def test_not_a_docbin(tmp_path):
    (tmp_path / "x.spacy").write_bytes(b"not zlib")
    with pytest.raises(FormatError, match="x.spacy: cannot read a .spacy DocBin"):
        DocBinFile(tmp_path / "x.spacy")


def test_an_integer_beyond_64_bits_in_user_data_is_named_not_a_traceback(tmp_path):
    """Valid JSON (a record's extra key, a task's data) that msgpack cannot pack: OverflowError
    with a traceback from inside DocBin, before."""
    doc = spacy.blank("en")("a")
    doc.user_data.update({"w2ner_name": "rec7", "w2ner_extra": {"ids": [1, 2**64]}})
    with pytest.raises(FormatError, match=r"document 1 \('rec7'\): its 'w2ner_extra' -> 'ids' -> 1 is an integer beyond 64 bits"):
        write_docbin([doc], tmp_path / "out.spacy")
    doc.user_data["w2ner_extra"] = {"ids": [1, 2**64 - 1, -(2**63)]}  # the edges msgpack holds
    write_docbin([doc], tmp_path / "out.spacy")
