"""BioC XML and JSON (spacy_w2ner/formats/bioc.py): entities with their ids, discontinuous annotations,
relations kept and written back where they were, what cannot be an entity and what BioC does not have
listed, bad input in one located line, and round trips checked with the bioc package's own parser."""
import json
from pathlib import Path

import pytest
import spacy
from bioc import biocjson, biocxml

from spacy_w2ner import get_entities, set_entities
from spacy_w2ner.formats import BIOC_KEY, FormatError, docs_to_bioc, read_bioc
from spacy_w2ner.formats.base import RELATIONS_KEY
from spacy_w2ner.formats.standoff import skipped, split_tokens_named

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


def contents(path):
    """{document id: ([annotation], [relation])}, each with where it is (document, passage k or
    sentence k.j), sorted, as the bioc package reads the file: what a round trip must keep."""
    with open(path, encoding="utf8") as f:
        collection = (biocxml if str(path).endswith(".xml") else biocjson).load(f)
    found = {}
    for document in collection.documents:
        places = [("document", document)] + [
            (place, part) for k, passage in enumerate(document.passages)
            for place, part in [(f"passage {k}", passage)] + [(f"sentence {k}.{j}", s) for j, s in enumerate(passage.sentences)]
        ]  # fmt: skip
        found[document.id] = (
            sorted((place, a.id, sorted(a.infons.items()), [(loc.offset, loc.length) for loc in a.locations], a.text) for place, part in places for a in part.annotations),
            sorted((place, str(r.id), sorted(r.infons.items()), [(n.refid, n.role) for n in r.nodes]) for place, part in places for r in part.relations),
        )  # fmt: skip
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
    assert skipped(doc) == []
    relation = {"id": "R1", "infons": {"type": "same"}, "nodes": [{"refid": "T2", "role": "a"}, {"refid": "T3", "role": "b"}], "at": [1, None]}
    assert doc.user_data[RELATIONS_KEY] == {"format": "bioc", "items": [relation]}
    assert doc.user_data[BIOC_KEY]["document"] == {"id": "d1", "infons": {"journal": "J"}}
    assert [s.text for s in doc.sents] == ["Knee pain\n", TEXT]  # each passage starts a sentence


@pytest.mark.parametrize("suffix", [".xml", ".json"])
def test_round_trip_keeps_ids_infons_locations_and_text(tmp_path, suffix):
    source = write(tmp_path, "c.xml", COLLECTION)
    docs = list(read_bioc(source, VOCAB, tokenizer=spacy.blank("en").tokenizer))
    out = docs_to_bioc(docs, tmp_path / f"out{suffix}")
    assert annotations(out) == annotations(source)
    assert contents(out) == contents(source)  # the relation too, in its passage
    again = list(read_bioc(out, VOCAB, tokenizer=spacy.blank("en").tokenizer))
    assert [d.text for d in again] == [d.text for d in docs]


@pytest.mark.parametrize("name", ["everything.xml", "everything.json"])
@pytest.mark.parametrize("nlp", [ZH, spacy.blank("en")], ids=["zh", "en"])
def test_the_bioc_package_example_round_trips(tmp_path, name, nlp):
    """Its annotations sit inside words (one character per token in Chinese aligns them; English
    tokens are split there), in sentences, at document level and overlapping; its relations, at
    document, passage and sentence level, are kept and written back where they were."""
    docs = list(read_bioc(FIXTURES / name, nlp.vocab, tokenizer=nlp.tokenizer, type_key="annotation-infon-key"))
    assert [len(get_entities(d)) for d in docs] == [3, 2]
    assert [skipped(d) for d in docs] == [[], []]
    assert [len(d.user_data[RELATIONS_KEY]["items"]) for d in docs] == [2, 1]
    assert [[s.text for s in d.sents] for d in docs][1] == ["abcdefg", "测试Non-ASCII"]  # its <sentence>s, adjacent
    out = docs_to_bioc(docs, tmp_path / name)
    assert contents(out) == contents(FIXTURES / name)


def test_doc_per_passage_round_trips(tmp_path):
    source = write(tmp_path, "c.xml", COLLECTION)
    docs = list(read_bioc(source, VOCAB, tokenizer=spacy.blank("en").tokenizer, doc_per="passage"))
    assert [d.text for d in docs] == ["Knee pain", TEXT]
    assert [[e.spans[0].id_ for e in get_entities(d)] for d in docs] == [["T1"], ["T3", "T2"]]
    out = docs_to_bioc(docs, tmp_path / "out.xml")
    assert annotations(out) == annotations(source)


def test_a_boundary_inside_a_token_splits_it_or_is_listed_or_stops_with_strict(tmp_path):
    text = COLLECTION.replace('<location offset="0" length="9"/><text>Knee pain', '<location offset="0" length="3"/><text>Kne')
    path = write(tmp_path, "c.xml", text)
    tokenizer = spacy.blank("en").tokenizer
    (doc,) = read_bioc(path, VOCAB, tokenizer=tokenizer)
    assert [(e.spans[0].id_, e.text) for e in get_entities(doc)] == [("T1", "Kne"), ("T3", "pain in her knees"), ("T2", "pain in her ankles")]
    assert [t.text for t in doc[:3]] == ["Kne", "e", "pain"]
    assert split_tokens_named(doc) == [f"{path}:5: document d1: annotation T1 (ADR) 'Kne' at 0-3 splits the token 'Knee' at 0-4 into 'Kne' + 'e'"]
    (doc,) = read_bioc(path, VOCAB, tokenizer=tokenizer, split_tokens=False)
    assert [e.spans[0].id_ for e in get_entities(doc)] == ["T3", "T2"]
    assert skipped(doc)[0][:2] == ("annotation T1", "boundary inside a token")
    with pytest.raises(FormatError, match=r"c.xml:5: document d1: annotation T1: .* does not start and end on token boundaries"):
        list(read_bioc(path, VOCAB, tokenizer=tokenizer, strict=True, split_tokens=False))


def test_convert_lists_what_is_not_an_entity_and_export_writes_it_back(tmp_path):
    source = write(tmp_path, "c.xml", COLLECTION)
    listed = source.with_name("listed.xml")
    listed.write_text(COLLECTION.replace('offset="40" length="6"/><text>pain in her ankles', 'offset="40" length="6"/><text>pain in her knees'), encoding="utf8")
    result = cli("convert", "bioc", listed, tmp_path / "out")
    assert "warning: d1: annotation T2: (ADR) its text 'pain in her knees' differs from the text at its offsets 'pain in her ankles'" in result.stderr
    counts = summary_line(result)
    assert (counts["ignored_annotations"], counts["relations"], counts["entities"]) == ({"text differs from its offsets": 1}, 1, 2)
    cli("convert", "bioc", listed, tmp_path / "out", "--strict", code=1)
    # the relation refers to the annotation that was no entity: export leaves it out and says so
    result = cli("export", "bioc", tmp_path / "out" / "listed.spacy", tmp_path / "back.xml")
    assert "warning: document d1: relation R1 refers to T2, not written as an annotation; left out" in result.stderr
    assert contents(tmp_path / "back.xml")["d1"][1] == []
    counts = summary_line(cli("convert", "bioc", source, tmp_path / "out"))
    assert (counts["discontinuous"], counts["relations"], counts["sentences"]) == (1, 1, 2)
    cli("export", "bioc", tmp_path / "out" / "c.spacy", tmp_path / "back.json")
    assert contents(tmp_path / "back.json") == contents(source)


BAD = {
    "not XML": ("c.xml", COLLECTION.replace("</passage></document>", "</document>"), r"c.xml:\d+: not valid XML"),
    "not BioC": ("c.xml", "<?xml version='1.0'?>\n<html><body>Knee pain</body></html>", r"c.xml:2: not a BioC collection \(the root element is <html>\)"),
    "a relation to a repeated id": ("c.xml", COLLECTION.replace('annotation id="T3"', 'annotation id="T2"'),
                                    r"c.xml:10: document d1: relation R1: it refers to T2, the id of the annotations on lines 8, 9; the id must be unique"),
    "duplicate document id": ("c.xml", COLLECTION.replace("</collection>", "<document><id>d1</id></document></collection>"),
                              r"c.xml:12: document d1: the id is already the id of the document on line 3"),
    "unknown infon key": ("c.xml", COLLECTION.replace('<infon key="type">ADR</infon>', ""),
                          r"c.xml:5: document d1: annotation T1: no infon 'type' .*--type-key"),
    "overlapping passages": ("c.xml", COLLECTION.replace("<offset>10</offset>", "<offset>5</offset>"),
                             r"c.xml:7: document d1: passage 1: text at offset 5 starts before the end of the text before it \(9\)"),
    "not JSON": ("c.json", '{"source": "s", "documents": [\n{"id": "1", "passages": []},\n{"id": 2,,}]}', r"c.json:3: not valid JSON"),
    "a sentence text not a string": ("c.json", '{"documents": [{"id": "1", "passages": [{"offset": 0, "sentences": [{"offset": 0, "text": 12345}]}]}]}',
                                     r"c.json:1: document 1: passage 0: sentence 0's text is not a string \(12345\)"),
    "a lone surrogate": ("c.json", '{"documents": [{"id": "1", "passages": [{"offset": 0, "text": "abc \\udc00 def"}]}]}',
                         r"c.json:1: document 1: the text holds a lone surrogate"),
    "an offset of other digits": ("c.xml", COLLECTION.replace('offset="18" length="17"', 'offset="1²" length="17"'),
                                  r"c.xml:9: document d1: annotation T3: the location's offset is not a whole number .* \('1²'\)"),
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


def test_a_document_id_is_one_document_in_the_whole_directory(tmp_path):
    write(tmp_path / "in", "a.xml", COLLECTION)
    write(tmp_path / "in", "b.json", json.dumps({"documents": [{"id": "d1", "passages": [{"offset": 0, "text": "Knee pain"}]}]}))
    with pytest.raises(FormatError, match=r"b.json:1: document d1: the id is already the id of the document on line 3 of .*a.xml"):
        list(read_bioc(tmp_path / "in", VOCAB))


def test_passage_docs_of_two_documents_of_one_id_are_written_as_two_documents(tmp_path):
    source = write(tmp_path, "c.xml", COLLECTION)
    docs = list(read_bioc(source, VOCAB, doc_per="passage"))
    out = docs_to_bioc(docs + list(read_bioc(source, VOCAB, doc_per="passage")), tmp_path / "out.xml")
    with open(out, encoding="utf8") as f:
        written = biocxml.load(f)
    assert [(d.id, [p.offset for p in d.passages]) for d in written.documents] == [("d1", [0, 10]), ("d1", [0, 10])]


def many_passages(n: int, gap: bool = True) -> str:
    """One document of n passages, each with an annotation and a relation of its own; at document
    level an annotation in each passage, one in the gap between two (``gap``), and a relation."""
    passages, document_level = [], []
    for k in range(n):
        offset = 20 * k
        passages.append(
            f'<passage><offset>{offset}</offset><text>Knee pain {k:03d}</text>'
            f'<annotation id="P{k}"><infon key="type">ADR</infon><location offset="{offset}" length="4"/><text>Knee</text></annotation>'
            f'<relation id="R{k}"><node refid="P{k}" role="a"/><node refid="D{k}" role="b"/></relation></passage>'
        )
        document_level.append(f'<annotation id="D{k}"><infon key="type">ADR</infon><location offset="{offset + 5}" length="4"/><text>pain</text></annotation>')
    if gap:
        document_level.append(f'<annotation id="gap"><infon key="type">ADR</infon><location offset="{20 * (n // 2) - 5}" length="2"/></annotation>')
    document_level.append('<relation id="R"><node refid="P0" role="a"/><node refid="D1" role="b"/></relation>')
    return f"<collection><source/><date/><key/><document><id>m</id>{''.join(passages + document_level)}</document></collection>"


@pytest.mark.parametrize("doc_per", ["document", "passage"])
def test_a_document_of_many_passages_keeps_each_annotation_and_relation_in_its_place(tmp_path, doc_per):
    """Annotations and relations are sorted to their passages once per document (document-level
    ones by bisection) and the writer's ids kept as sets: the result is the scan's."""
    n = 40
    source = write(tmp_path, "m.xml", many_passages(n))
    docs = list(read_bioc(source, VOCAB, doc_per=doc_per))
    ids = [sorted(e.spans[0].id_ for e in get_entities(d)) for d in docs]
    relations = [[r["id"] for r in d.user_data.get(RELATIONS_KEY, {}).get("items", [])] for d in docs]
    if doc_per == "passage":
        assert ids == [sorted([f"P{k}", f"D{k}"]) for k in range(n)]
        assert relations == [[f"R{k}"] for k in range(n - 1)] + [[f"R{n - 1}", "R"]]
    else:
        assert (len(ids[0]), len(relations[0])) == (2 * n, n + 1)
    assert [s[:2] for d in docs for s in skipped(d)] == [("annotation gap", "outside its passage")]
    assert contents(docs_to_bioc(docs, tmp_path / "out.xml")) == contents(write(tmp_path, "expected.xml", many_passages(n, gap=False)))


def test_docs_from_plain_text_become_one_passage_documents(tmp_path):
    doc = spacy.blank("en")("Aspirin helped .")
    set_entities(doc, [("DRUG", [0], 0.875)])
    docs_to_bioc([doc], tmp_path / "p.xml")
    found = annotations(tmp_path / "p.xml")
    assert found == {"doc0": {"e0": ({"type": "DRUG", "score": "0.8750"}, [(0, 7)], "Aspirin")}}


CROSS_PASSAGES = (
    "<?xml version='1.0' encoding='UTF-8'?>\n<collection><source>t</source><date>2024</date><key>k</key>\n"
    "<document><id>D1</id>\n"
    "<passage><infon key=\"type\">title</infon><offset>0</offset><text>Breast and ovarian</text></passage>\n"
    "<passage><infon key=\"type\">abstract</infon><offset>19</offset><text>cancers are common.</text></passage>\n"
    "<annotation id=\"A1\"><infon key=\"type\">Disease</infon><location offset=\"0\" length=\"6\"/>"
    "<location offset=\"19\" length=\"7\"/><text>Breast cancers</text></annotation>\n"
    "</document></collection>\n"
)


def test_a_document_annotation_with_locations_in_two_passages_is_an_entity_of_the_documents_doc(tmp_path):
    """It was listed as outside its passage, though one Doc holds both; with a Doc per passage it
    still is (no Doc holds both)."""
    path = write(tmp_path, "c.xml", CROSS_PASSAGES)
    (doc,) = read_bioc(path, VOCAB)
    assert [(e.label, e.text) for e in get_entities(doc)] == [("Disease", "Breast cancers")]
    docs_to_bioc([doc], tmp_path / "back.xml")
    assert annotations(tmp_path / "back.xml") == annotations(path)
    assert [len(get_entities(d)) for d in read_bioc(path, VOCAB, doc_per="passage")] == [0, 0]


def test_a_character_xml_cannot_hold_names_its_document_and_offset_and_json_takes_it(tmp_path):
    """A form feed (text from a PDF) stopped the export with lxml's message and nothing named."""
    doc = spacy.blank("en")("Aspirin helped .\x0c Then pain .")
    doc.user_data["w2ner_name"] = "note7"
    with pytest.raises(ValueError, match=r"document note7: character '\\x0c' at offset 16 cannot be written in BioC XML .*BioC JSON"):
        docs_to_bioc([doc], tmp_path / "p.xml")
    docs_to_bioc([doc], tmp_path / "p.json")
    assert "\x0c" in json.loads((tmp_path / "p.json").read_text(encoding="utf8"))["documents"][0]["passages"][0]["text"]


LISTED = {  # well-formed BioC with a part the reader cannot use: listed with its line, the rest converts
    "past its passage": (COLLECTION.replace('offset="40" length="6"', 'offset="40" length="9"'),
                         ["annotation T2", "outside its passage", "(ADR) location 40+9 is outside its passage (10-47)"]),
    "beyond the text": (COLLECTION.replace('offset="40" length="6"', 'offset="90" length="6"'),
                        ["annotation T2", "outside its passage", "(ADR) location 90+6 is outside its passage (10-47)"]),
    "no type infon": (COLLECTION.replace('<infon key="type">ADR</infon><location offset="18" length="17"/>', '<location offset="18" length="17"/>'),
                      ["annotation T3", "no type", "no infon 'type' for its type (its infons: none); give the infon key with --type-key"]),
    "an element BioC does not have": (COLLECTION.replace("<passage><infon key=\"type\">abstract", "<passage><note>x</note><infon key=\"type\">abstract"),
                                      ["c.xml:7", "unknown line or element", "document d1: <note> in <passage> is not BioC; passed over"]),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(LISTED))
def test_what_cannot_be_read_is_listed_counted_and_stops_only_with_strict(tmp_path, case):
    text, listed = LISTED[case]
    path = write(tmp_path, "c.xml", text)
    (doc,) = read_bioc(path, VOCAB, tokenizer=spacy.blank("en").tokenizer)
    (what, kind, why), = skipped(doc)
    assert [what.replace(str(tmp_path) + "/", ""), kind, why] == listed
    assert len(get_entities(doc)) == 3 - (kind != "unknown line or element")
    with pytest.raises(FormatError, match="--strict"):
        list(read_bioc(path, VOCAB, tokenizer=spacy.blank("en").tokenizer, strict=True))


def test_repeated_annotation_ids_are_kept_where_no_relation_refers_to_them(tmp_path):
    source = write(tmp_path, "c.xml", COLLECTION.replace('annotation id="T3"', 'annotation id="T1"'))
    (doc,) = read_bioc(source, VOCAB, tokenizer=spacy.blank("en").tokenizer)
    assert [e.spans[0].id_ for e in get_entities(doc)] == ["T1", "T1#2", "T2"]
    out = docs_to_bioc([doc], tmp_path / "out.xml")
    assert contents(out) == contents(source)


def sentence_collection(abstract: str, annotations: str) -> str:
    return (
        "<collection><source/><date/><key/><document><id>s1</id>"
        "<passage><offset>0</offset><text>Knee pain</text></passage>"
        f"<passage><offset>10</offset>{abstract}{annotations}</passage></document></collection>"
    )


def test_sentences_from_the_file_else_the_sentencizer_never_inside_an_entity(tmp_path):
    abstract = "".join(f"<sentence><offset>{offset}</offset><text>{text}</text></sentence>" for offset, text in ((10, "She had pain."), (24, "In her knees."), (38, "And ankles.")))
    crossing = '<annotation id="A"><infon key="type">ADR</infon><location offset="18" length="18"/><text>pain. In her knees</text></annotation>'
    path = write(tmp_path, "s.xml", sentence_collection(abstract, crossing))
    for sentencizer in (True, False):  # the file's <sentence>s either way; passages start sentences
        (doc,) = read_bioc(path, VOCAB, tokenizer=spacy.blank("en").tokenizer, sentencizer=sentencizer)
        assert doc.text == "Knee pain\nShe had pain.\nIn her knees.\nAnd ankles."
        assert [s.text.strip() for s in doc.sents] == ["Knee pain", "She had pain.\nIn her knees.", "And ankles."]
        assert doc.user_data["w2ner_sentences_joined"] == 1 and len(get_entities(doc)) == 1
    plain = write(tmp_path, "p.xml", sentence_collection("<text>She had pain. In her knees. And ankles.</text>", crossing.replace("pain. In", "pain.  In")))
    (doc,) = read_bioc(plain, VOCAB, tokenizer=spacy.blank("en").tokenizer)
    assert [s.text.strip() for s in doc.sents] == ["Knee pain", "She had pain. In her knees.", "And ankles."]
    assert doc.user_data["w2ner_sentences_joined"] == 1
    (doc,) = read_bioc(plain, VOCAB, tokenizer=spacy.blank("en").tokenizer, sentencizer=False)
    assert not doc.has_annotation("SENT_START")  # neither sentences in the file nor the sentencizer
    counts = summary_line(cli("convert", "bioc", plain, tmp_path / "out"))
    assert (counts["sentences"], counts["sentences_joined_for_entities"]) == (3, 1)
    assert "sentences" not in summary_line(cli("convert", "bioc", plain, tmp_path / "out", "--no-sentencizer"))


@pytest.mark.parametrize("none", ["", "<text/>", "<text></text>"])
def test_an_annotation_without_text_comes_back_without_text(tmp_path, none):
    """An empty <text> is none: bioc's XML encoder writes one for an annotation without text."""
    source = write(tmp_path, "c.xml", COLLECTION.replace("<text>pain in her knees</text>", none))
    docs = list(read_bioc(source, VOCAB, tokenizer=spacy.blank("en").tokenizer))
    assert len(get_entities(docs[0])) == 3
    without = write(tmp_path, "without.xml", COLLECTION.replace("<text>pain in her knees</text>", ""))
    assert contents(docs_to_bioc(docs, tmp_path / "out.xml")) == contents(without)
