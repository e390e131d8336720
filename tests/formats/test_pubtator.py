"""PubTator (spacy_w2ner/formats/pubtator.py): a public corpus sample round-trips byte for byte, relations
are kept and written back, lines of no kind are listed, input that is not PubTator is one located
line, and a discontinuous entity is written only as told."""
from pathlib import Path

import pytest
import spacy

from spacy_w2ner import get_entities, set_entities
from spacy_w2ner.formats import FormatError, docs_to_pubtator, read_pubtator
from spacy_w2ner.formats.standoff import skipped

from ..conftest import VOCAB, cli, summary_line, write
from .test_bioc import COLLECTION

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "pubtator" / "tmVar-sample.txt"
TOKENIZER = spacy.blank("en").tokenizer
DOC = (
    "111|t|Aspirin and pain\n111|a|Knee pain after aspirin.\n"
    "111\t0\t7\tAspirin\tChemical\tMESH:D001241\n111\t17\t21\tKnee\tDisease\t\n"
    "111\tCID\tMESH:D001241\tMESH:D010146\n\n"
)


def test_the_tmvar_sample_round_trips_byte_for_byte(tmp_path):
    docs = list(read_pubtator(SAMPLE, VOCAB, tokenizer=TOKENIZER))
    assert len(docs) == 6
    first = get_entities(docs[0])
    assert [(e.label, e.text) for e in first[:2]] == [("SNP", "rs2234671"), ("DNAMutation", "Ex2+860G>C")]
    docs_to_pubtator(docs, tmp_path / "back.txt")
    assert (tmp_path / "back.txt").read_text(encoding="utf8") == SAMPLE.read_text(encoding="utf8")


def test_relations_are_kept_and_written_back_and_columns_kept(tmp_path):
    (doc,) = read_pubtator(write(tmp_path, "d.txt", DOC), VOCAB, tokenizer=TOKENIZER)
    assert doc.text == "Aspirin and pain\nKnee pain after aspirin."
    assert [(e.label, e.text, e.spans[0].id_) for e in get_entities(doc)] == [("Chemical", "Aspirin", "1"), ("Disease", "Knee", "2")]
    assert skipped(doc) == []
    assert doc.user_data["w2ner_relations"] == {"format": "pubtator", "items": [["CID", "MESH:D001241", "MESH:D010146"]]}
    assert [s.text for s in doc.sents] == ["Aspirin and pain\n", "Knee pain after aspirin."]  # the abstract starts a sentence
    docs_to_pubtator([doc], tmp_path / "back.txt")
    assert (tmp_path / "back.txt").read_text(encoding="utf8") == DOC


def test_other_tools_pubtator(tmp_path):
    """CRLF line ends, a byte order mark, no blank line between documents, relations with three ids
    (BioRED's novelty column), and a line of no kind (listed with its file:line, the rest converts)."""
    text = (
        "\ufeff111|t|Aspirin and pain\r\n111|a|Knee pain after aspirin.\r\n111\t0\t7\tAspirin\tChemical\tD001241\r\n"
        "111\tAssociation\tD001241\tD010146\tNovel\r\n111\tTranslation x\ty\r\n"
        "222|t|Pain\r\n222\t0\t4\tPain\tDisease\tD010146\r\n"
    )
    docs = list(read_pubtator(write(tmp_path, "d.txt", text), VOCAB, tokenizer=TOKENIZER))
    assert [(d.user_data["w2ner_name"], d.text, len(get_entities(d))) for d in docs] == [("111", "Aspirin and pain\nKnee pain after aspirin.", 1), ("222", "Pain", 1)]
    assert docs[0].user_data["w2ner_relations"]["items"] == [["Association", "D001241", "D010146", "Novel"]]
    ((what, kind, why),) = skipped(docs[0])
    assert (what, kind) == (f"{tmp_path / 'd.txt'}:5", "unknown line or element") and "'111\\tTranslation x\\ty'; passed over" in why
    with pytest.raises(FormatError, match=r"d.txt:5: document 111: neither a mention .* \(--strict\)"):
        list(read_pubtator(tmp_path / "d.txt", VOCAB, strict=True))
    docs_to_pubtator(docs, tmp_path / "back.txt")
    assert (tmp_path / "back.txt").read_text(encoding="utf8").splitlines()[3] == "111\tAssociation\tD001241\tD010146\tNovel"


@pytest.mark.parametrize(
    "text, listed, entities",
    [
        (DOC.replace("111\t0\t7", "111\t0\tx"), [("d.txt:3", "unknown line or element")], 1),
        (DOC.replace("111\t17\t21", "111\t17\t99"), [("annotation 2", "outside the text")], 1),
        (DOC.replace("111|a|", "222|a|"), [("d.txt:2", "unknown line or element"), ("annotation 2", "outside the text")], 1),
        (DOC.replace("111\t17\t21\tKnee", "111\t17\t21\tKnew"), [("annotation 2", "text differs from its offsets")], 1),
        (DOC.replace("Knee\tDisease", "Knee\t"), [("annotation 2", "no type")], 1),  # not an entity of type ""
    ],
)
def test_what_cannot_be_read_is_listed_and_the_rest_converts(tmp_path, text, listed, entities):
    (doc,) = read_pubtator(write(tmp_path, "d.txt", text), VOCAB, tokenizer=TOKENIZER)
    assert [(what.replace(str(tmp_path) + "/", ""), kind) for what, kind, _ in skipped(doc)] == listed
    assert len(get_entities(doc)) == entities
    with pytest.raises(FormatError, match="--strict"):
        list(read_pubtator(tmp_path / "d.txt", VOCAB, tokenizer=TOKENIZER, strict=True))


@pytest.mark.parametrize(
    "text, message",
    [
        (DOC + DOC, r"d.txt:7: document 111: the PMID is already that of the document on line 1"),
        ("111\t0\t7\tAspirin\tChemical\t\n", r"d.txt:1: document 111: no title line"),
        ('[{"data": {"text": "Aspirin"}}]\n', r"d.txt:1: document \[\{\"data\"\: \{\"text\"\: \"Aspirin\"\}\}\]: no title line .*is this a PubTator file\?"),
    ],
)
def test_bad_input_names_file_line_and_document(tmp_path, text, message):
    with pytest.raises(FormatError, match=message):
        list(read_pubtator(write(tmp_path, "d.txt", text), VOCAB))


def test_not_utf8(tmp_path):
    path = tmp_path / "d.txt"
    path.write_bytes(DOC.replace("Knee pain after", "Kn\xe9e pain after").encode("latin-1"))
    with pytest.raises(FormatError, match=r"d.txt:2: not valid UTF-8"):
        list(read_pubtator(path, VOCAB))


def test_a_discontinuous_entity_is_written_only_as_told(tmp_path):
    nlp = spacy.blank("en")
    doc = nlp.make_doc("She had pain in her knees and ankles .")
    doc.user_data["w2ner_name"] = "9"
    set_entities(doc, [("ADR", [2, 3, 4, 7], 0.9), ("ADR", [2, 3, 4, 5], 0.8)])
    with pytest.raises(ValueError, match="discontinuous, which PubTator cannot hold: choose --discontinuous"):
        docs_to_pubtator([doc], tmp_path / "p.txt")
    lines = {}
    for choice in ("split", "span", "skip"):
        docs_to_pubtator([doc], tmp_path / f"{choice}.txt", discontinuous=choice)
        lines[choice] = (tmp_path / f"{choice}.txt").read_text(encoding="utf8").splitlines()[1:-1]
    assert lines["skip"] == ["9\t8\t25\tpain in her knees\tADR\t"]
    assert lines["span"] == ["9\t8\t25\tpain in her knees\tADR\t", "9\t8\t36\tpain in her knees and ankles\tADR\t"]
    assert lines["split"] == ["9\t8\t19\tpain in her\tADR\t", "9\t8\t25\tpain in her knees\tADR\t", "9\t30\t36\tankles\tADR\t"]


def test_export_refuses_discontinuous_entities_unless_told(tmp_path):
    write(tmp_path, "b.xml", COLLECTION)  # one discontinuous entity
    cli("convert", "bioc", tmp_path / "b.xml", tmp_path)
    result = cli("export", "pubtator", tmp_path / "b.spacy", tmp_path / "p.txt", code=1)
    assert "1 discontinuous entities, which PubTator cannot hold: choose --discontinuous" in result.stderr
    assert not (tmp_path / "p.txt").exists()
    result = cli("export", "pubtator", tmp_path / "b.spacy", tmp_path / "p.txt", "--discontinuous", "split")
    assert summary_line(result)["discontinuous_written_as"] == "split"
    assert "--discontinuous does not apply" in cli("export", "brat", tmp_path / "b.spacy", tmp_path / "x", "--discontinuous", "skip", code=2).stderr
