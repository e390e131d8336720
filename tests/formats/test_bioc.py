"""BioC XML and JSON (spacy_w2ner/formats/bioc.py): entities with their ids, discontinuous annotations,
what cannot be an entity listed, bad input in one located line, and round trips checked with the
bioc package's own parser."""
import json
from pathlib import Path

import pytest
import spacy
from bioc import biocjson, biocxml

from spacy_w2ner import get_entities, set_entities
from spacy_w2ner.formats import BIOC_KEY, FormatError, docs_to_bioc, read_bioc
from spacy_w2ner.formats.standoff import skipped

from ..conftest import VOCAB, cli, summary_line, write

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bioc"
ZH = spacy.blank("zh")  # one token per character: every annotation of the bioc package's example aligns

TEXT = "She had pain in her knees and ankles."
COLLECTION = f"""<?xml version='1.0' encoding='UTF-8'?>
<collection><source>test</source><date>2024</date><key>k.key</key>
<document><id>d1</id><infon key="journal">J</infon>
<passage><infon key="type">title</infon><offset>0</offset><text>Knee pain</text>
<annotation id="T1"><infon key="type">ADR</infon><infon key="identifier">MESH:D059352</infon><location offset="0" length="9"/><text>Knee pain</text></annotation>
</passage>
<passage><infon key="type">abstract</infon><offset>10</offset><text>{TEXT}</text>
<annotation id="T2"><infon key="type">ADR</infon><location offset="18" length="11"/><location offset="40" length="6"/><text>pain in her ankles</text></annotation>
<annotation id="T3"><infon key="type">ADR</infon><location offset="18" length="17"/><text>pain in her knees</text></annotation>
<relation id="R1"><infon key="type">same</infon><node refid="T2" role="a"/><node refid="T3" role="b"/></relation>
</passage></document>
</collection>
"""


def annotations(path):
    """{document id: {annotation id: (infons, [(offset, length)], text)}} as the bioc package reads the file."""
    with open(path, encoding="utf8") as f:
        collection = (biocxml if str(path).endswith(".xml") else biocjson).load(f)
    found = {}
    for document in collection.documents:
        every = list(document.annotations)
        for passage in document.passages:
            every += list(passage.annotations) + [a for sentence in passage.sentences for a in sentence.annotations]
        found[document.id] = {a.id: (a.infons, [(loc.offset, loc.length) for loc in a.locations], a.text) for a in every}
    return found


def test_discontinuous_annotation_ids_infons_and_relations(tmp_path):
    path = write(tmp_path, "c.xml", COLLECTION)
    (doc,) = read_bioc(path, VOCAB, tokenizer=spacy.blank("en").tokenizer)
    assert doc.text == "Knee pain\n" + TEXT
    found = [(e.label, e.text, e.is_discontinuous, e.spans[0].id_) for e in get_entities(doc)]
    assert found == [
        ("ADR", "Knee pain", False, "T1"),
        ("ADR", "pain in her knees", False, "T3"),
        ("ADR", "pain in her ankles", True, "T2"),
    ]
    assert skipped(doc) == [("R1", "relation", "relation same between T2, T3 is not an entity")]
    assert doc.user_data[BIOC_KEY]["document"] == {"id": "d1", "infons": {"journal": "J"}}


@pytest.mark.parametrize("suffix", [".xml", ".json"])
def test_round_trip_keeps_ids_infons_locations_and_text(tmp_path, suffix):
    source = write(tmp_path, "c.xml", COLLECTION)
    docs = list(read_bioc(source, VOCAB, tokenizer=spacy.blank("en").tokenizer))
    out = docs_to_bioc(docs, tmp_path / f"out{suffix}")
    assert annotations(out) == annotations(source)
    again = list(read_bioc(out, VOCAB, tokenizer=spacy.blank("en").tokenizer))
    assert [d.text for d in again] == [d.text for d in docs]


@pytest.mark.parametrize("name", ["everything.xml", "everything.json"])
def test_the_bioc_package_example_round_trips(tmp_path, name):
    """Its annotations sit inside words (one character per token in Chinese aligns them), in
    sentences, at document level and overlapping; its relations are listed, not entities."""
    docs = list(read_bioc(FIXTURES / name, ZH.vocab, tokenizer=ZH.tokenizer, type_key="annotation-infon-key"))
    assert [len(get_entities(d)) for d in docs] == [3, 2]
    assert [kind for d in docs for _, kind, _ in skipped(d)] == ["relation"] * 3
    out = docs_to_bioc(docs, tmp_path / name)
    assert annotations(out) == annotations(FIXTURES / name)


def test_doc_per_passage_round_trips(tmp_path):
    source = write(tmp_path, "c.xml", COLLECTION)
    docs = list(read_bioc(source, VOCAB, tokenizer=spacy.blank("en").tokenizer, doc_per="passage"))
    assert [d.text for d in docs] == ["Knee pain", TEXT]
    assert [[e.spans[0].id_ for e in get_entities(d)] for d in docs] == [["T1"], ["T3", "T2"]]
    out = docs_to_bioc(docs, tmp_path / "out.xml")
    assert annotations(out) == annotations(source)


def test_a_boundary_inside_a_token_is_listed_or_stops_with_strict(tmp_path):
    text = COLLECTION.replace('<location offset="0" length="9"/><text>Knee pain', '<location offset="0" length="3"/><text>Kne')
    path = write(tmp_path, "c.xml", text)
    (doc,) = read_bioc(path, VOCAB, tokenizer=spacy.blank("en").tokenizer)
    assert [e.spans[0].id_ for e in get_entities(doc)] == ["T3", "T2"]
    assert skipped(doc)[0][:2] == ("T1", "boundary inside a token")
    with pytest.raises(FormatError, match=r"c.xml:3: document d1: annotation T1: .* does not start and end on token boundaries"):
        list(read_bioc(path, VOCAB, tokenizer=spacy.blank("en").tokenizer, strict=True))  # before the relation


def test_convert_lists_what_is_not_an_entity_and_export_writes_it_back(tmp_path):
    source = write(tmp_path, "c.xml", COLLECTION)
    result = cli("convert", "bioc", source, tmp_path / "out")
    assert "warning: d1: annotation R1: relation same between T2, T3 is not an entity" in result.stderr
    assert summary_line(result)["ignored_annotations"] == {"relation": 1}
    assert summary_line(result)["discontinuous"] == 1
    result = cli("export", "bioc", tmp_path / "out" / "c.spacy", tmp_path / "back.json")
    assert annotations(tmp_path / "back.json") == annotations(source)
    cli("convert", "bioc", source, tmp_path / "out", "--strict", code=1)


BAD = {
    "not XML": ("c.xml", COLLECTION.replace("</passage></document>", "</document>"), r"c.xml:\d+: not valid XML"),
    "past its passage": ("c.xml", COLLECTION.replace('offset="40" length="6"', 'offset="40" length="9"'),
                         r"c.xml:8: document d1: annotation T2: location 40\+9 runs past the end of its passage \(47\)"),
    "beyond the text": ("c.xml", COLLECTION.replace('offset="40" length="6"', 'offset="90" length="6"'),
                        r"c.xml:8: document d1: annotation T2: location 90\+6 is beyond the document's text, which ends at 47"),
    "duplicate annotation id": ("c.xml", COLLECTION.replace('annotation id="T3"', 'annotation id="T1"'),
                                r"c.xml:9: document d1: annotation T1: the id is already the id of another annotation of the document \(line 5\)"),
    "duplicate document id": ("c.xml", COLLECTION.replace("</collection>", "<document><id>d1</id></document></collection>"),
                              r"c.xml:12: document d1: the id is already the id of the document on line 3"),
    "unknown infon key": ("c.xml", COLLECTION.replace('<infon key="type">ADR</infon><location offset="18" length="17"/>', '<location offset="18" length="17"/>'),
                          r"c.xml:9: document d1: annotation T3: no infon 'type' .*--type-key"),
    "overlapping passages": ("c.xml", COLLECTION.replace("<offset>10</offset>", "<offset>5</offset>"),
                             r"c.xml:7: document d1: passage 1: text at offset 5 starts before the end of the text before it \(9\)"),
    "not JSON": ("c.json", '{"source": "s", "documents": [\n{"id": "1", "passages": []},\n{"id": 2,,}]}', r"c.json:3: not valid JSON"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_located_line_and_nothing_written(tmp_path, case):
    name, text, message = BAD[case]
    path = write(tmp_path, name, text)
    with pytest.raises(FormatError, match=message):
        list(read_bioc(path, VOCAB, tokenizer=spacy.blank("en").tokenizer))
    result = cli("convert", "bioc", path, tmp_path / "out", code=1)
    lines = result.stderr.strip().splitlines()  # warnings about documents before, then the error
    assert [line for line in lines if line.startswith("error: ")] == lines[-1:]
    assert not (tmp_path / "out" / "c.spacy").exists()


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "c.xml"
    path.write_bytes(COLLECTION.replace("Knee pain</text>\n<annotation", "Kn\xe9e pain</text>\n<annotation").encode("latin-1"))
    with pytest.raises(FormatError, match=r"c.xml:4: not valid UTF-8"):
        list(read_bioc(path, VOCAB))
    json_path = tmp_path / "c.json"
    json_path.write_bytes(b'{"documents": [\n{"id": "\xe9"}]}')
    with pytest.raises(FormatError, match=r"c.json:2: not valid UTF-8"):
        list(read_bioc(json_path, VOCAB))


def test_a_directory_of_collections_and_bad_options(tmp_path):
    write(tmp_path / "in", "a.xml", COLLECTION)
    write(tmp_path / "in", "b.json", json.dumps({"source": "", "documents": [{"id": "j1", "passages": [{"offset": 0, "text": "Aspirin ."}]}]}))
    docs = list(read_bioc(tmp_path / "in", VOCAB))
    assert [d.user_data[BIOC_KEY]["document"]["id"] for d in docs] == ["d1", "j1"]
    with pytest.raises(ValueError, match="doc_per must be"):
        list(read_bioc(tmp_path / "in", VOCAB, doc_per="sentence"))
    assert "does not apply to the conll format" in cli("convert", "conll", write(tmp_path, "x.conll", "a O\n"), tmp_path / "o", "--type-key", "x", code=2).stderr


def test_docs_from_plain_text_become_one_passage_documents(tmp_path):
    doc = spacy.blank("en")("Aspirin helped .")
    set_entities(doc, [("DRUG", [0], 0.875)])
    docs_to_bioc([doc], tmp_path / "p.xml")
    found = annotations(tmp_path / "p.xml")
    assert found == {"doc0": {"e0": ({"type": "DRUG", "score": "0.8750"}, [(0, 7)], "Aspirin")}}
