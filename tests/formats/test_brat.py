"""brat standoff (spacy_w2ner/formats/brat.py): discontinuous fragments, ids, tokens split at annotation
boundaries, what is not an entity listed (or stopping with strict), byte-identical round trips."""
from pathlib import Path

import pytest
import spacy

from spacy_w2ner import get_entities
from spacy_w2ner.formats import IGNORED_KEY, NAME_KEY, FormatError, docs_to_brat, read_brat, read_brat_collection, read_dai_text, summarize, write_docbin

from spacy_w2ner.formats.standoff import skipped, split_tokens_named

from ..conftest import NLP, VOCAB, cli, docbin_docs, entities, summary_line, words, write
from ..samples import BRAT_ANN, BRAT_TEXT


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
    assert summary.as_dict() == {
        "documents": 1, "sentences": 2, "tokens": 12, "entities": 2, "discontinuous": 1, "overlapping": 0,
        "per_label": {"ADR": 1, "SYM": 1}, "ignored_annotations": {"#": 1, "A": 1, "R": 1},
    }
    assert summarize([brat_doc(tmp_path, sentencizer=False)]).sentences is None


def test_brat_whitespace_tokenizer(tmp_path):
    # whitespace tokens: "ankles." is one token, split where the fragment "ankles" ends
    doc = brat_doc(tmp_path, tokenizer=None)
    assert words(doc)[5:9] == ["and", "ankles", ".", "\n"]
    assert [line.split(": ", 1)[1] for line in split_tokens_named(doc)] == [  # file:line: which annotation, which token, where
        "annotation T1 (ADR) 'ankles' at 24-30 splits the token 'ankles.' at 24-31 into 'ankles' + '.'",
        "annotation T2 (SYM) 'fever' at 35-40 splits the token 'fever.' at 35-41 into 'fever' + '.'",
    ]
    assert [line.split(": ", 1)[0] for line in split_tokens_named(doc)] == [f"{tmp_path / 'doc.ann'}:1", f"{tmp_path / 'doc.ann'}:2"]
    assert entities(doc) == [("ADR", (2, 3, 4, 6)), ("SYM", (10,))]
    doc = brat_doc(tmp_path, tokenizer=None, split_tokens=False)
    assert entities(doc) == [] and [kind for _, kind, _ in skipped(doc)] == ["boundary inside a token"] * 2
    with pytest.raises(FormatError, match=r"doc.ann:1: annotation T1: \(ADR\) 'ankles' at 24-30 does not start and end"):
        brat_doc(tmp_path, tokenizer=None, split_tokens=False, strict=True)
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
    doc = brat_doc(tmp_path, tokenizer=nlp, sentencizer=False)  # the pipeline's boundaries are kept
    assert doc.vocab is VOCAB
    assert summarize([doc]).sentences == 2
    assert entities(doc) == [("ADR", (2, 3, 4, 6)), ("SYM", (10,))]


def test_brat_no_sentence_boundary_inside_an_entity(tmp_path):
    doc = brat_doc(tmp_path, ann="T1\tADR 6 40\tpain in knees and ankles. No fever\n")
    assert [s.text for s in doc.sents] == [BRAT_TEXT]
    assert doc.user_data["w2ner_sentences_joined"] == 1


def test_brat_adjacent_fragments_merge(tmp_path):
    doc = brat_doc(tmp_path, ann="T1\tADR 6 10;11 13\tpain in\n")
    ents = get_entities(doc, "w2ner")
    assert [(e.tokens, e.fragments) for e in ents] == [((2, 3), ((2, 4),))]


def test_brat_misaligned_annotation_splits_or_names_file_line_and_id(tmp_path):
    doc = brat_doc(tmp_path, ann="T1\tADR 6 8\tpa\n")
    assert words(doc)[2:4] == ["pa", "in"] and entities(doc) == [("ADR", (2,))]
    with pytest.raises(FormatError) as err:
        brat_doc(tmp_path, ann="T1\tADR 6 8\tpa\n", split_tokens=False, strict=True)
    assert str(err.value).startswith(f"{tmp_path / 'doc.ann'}:1: annotation T1: (ADR) 'pa' at 6-8 does not start and end on token boundaries")


def test_brat_text_mismatch_is_listed_or_stops_with_strict(tmp_path):
    ann = "T2\tSYM 35 40\tfever\n\nT1\tADR 6 10\tpian\n"
    doc = brat_doc(tmp_path, ann=ann)
    assert entities(doc) == [("SYM", (10,))]
    assert skipped(doc) == [("annotation T1", "text differs from its offsets", "(ADR) its text 'pian' differs from the text at its offsets 'pain'")]
    with pytest.raises(FormatError) as err:
        brat_doc(tmp_path, ann=ann, strict=True)
    assert str(err.value).startswith(f"{tmp_path / 'doc.ann'}:3: annotation T1: (ADR) its text 'pian' differs")
    # without check_text the offsets are trusted
    doc = brat_doc(tmp_path, ann=ann, check_text=False)
    assert entities(doc) == [("ADR", (2,)), ("SYM", (10,))]


@pytest.mark.parametrize("shown", ["pain in knees ... ankles", "pain in knees … ankles", "pain in knees [...] ankles", "pain in knees and ankles", "pain in\u00a0knees ankles"])
def test_brat_discontinuous_text_as_other_tools_write_it(tmp_path, shown):
    """Pieces joined by whitespace or an ellipsis, or the text that spans them all, and written back as it was."""
    doc = brat_doc(tmp_path, ann=f"T1\tADR 6 19;24 30\t{shown}\n")
    assert entities(doc) == [("ADR", (2, 3, 4, 6))]
    docs_to_brat([doc], tmp_path / "out")
    assert (tmp_path / "out" / "doc.ann").read_text(encoding="utf8") == f"T1\tADR 6 19;24 30\t{shown}\n"


def test_brat_lines_of_no_kind_are_listed(tmp_path):
    doc = brat_doc(tmp_path, ann="X\tADR 6 10\tpain\nT2\tSYM 35 40\tfever\n")
    assert entities(doc) == [("SYM", (10,))]
    assert [(what.rsplit("/", 1)[-1], kind) for what, kind, _ in skipped(doc)] == [("doc.ann:1", "unknown line or element")]
    assert summarize([doc]).as_dict()["not_read"] == {"unknown line or element": 1}


@pytest.mark.parametrize(
    "ann, message",
    [
        ("T1\tADR 6 10\tpain\nT1\tSYM 35 40\tfever\n", ":2: T1 is already defined on line 1"),
        ("T1\tADR 6 10\n", ":1: T1: expected 'ID<TAB>TYPE START END[;START END...]<TAB>TEXT'"),
        ("T1\tADR 6 x\tpain\n", ":1: T1 (ADR): fragment '6 x' is not 'START END'"),
        ("T1\tADR 6 99\tpain\n", ":1: T1 (ADR): fragment 6 99 is empty or outside the text of 41 characters"),
        ("T1\tADR 6 6\t\n", ":1: T1 (ADR): fragment 6 6 is empty"),
        ("X\tADR 6 10\tpain\n", ":1: not a brat annotation file: 'X' is not a brat annotation id"),
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
    assert counts["sentences"] == 4
    t_lines = sum(line.startswith("T") for name, text in files.items() if name.endswith(".ann") for line in text.splitlines())
    assert counts["documents"] == 3 and counts["entities"] == t_lines == 13
    exported = cli("export", "brat", tmp_path / "spacy" / "brat.spacy", tmp_path / "out")
    assert summary_line(exported) == counts
    assert tree(tmp_path / "out") == tree(tmp_path / "brat")


def test_brat_export_renumbers_entities_without_brat_ids(tmp_path):
    path = write(tmp_path, "dai.txt", "a b c\n2,2 Y|0,0,2,2 X\n\n")
    (doc,) = read_dai_text(path, VOCAB)
    docs_to_brat([doc], tmp_path / "out")
    # Named after its file and line by the converter, so the brat files map back to the input.
    assert (tmp_path / "out" / "dai-line1.txt").read_text() == "a b c "
    assert (tmp_path / "out" / "dai-line1.ann").read_text() == "T1\tX 0 1;4 5\ta c\nT2\tY 4 5\tc\n"
    del doc.user_data["w2ner_name"]  # a doc without a name: numbered
    docs_to_brat([doc], tmp_path / "unnamed")
    assert (tmp_path / "unnamed" / "doc00000.ann").exists()


def test_brat_annotation_file_with_a_byte_order_mark(tmp_path):
    doc = brat_doc(tmp_path, ann="\ufeff" + BRAT_ANN)
    assert entities(doc) == [("ADR", (2, 3, 4, 6)), ("SYM", (10,))]


def test_brat_an_annotation_whose_text_holds_a_tab_is_read_and_written_back_as_brat_has_it(tmp_path):
    """brat reads all after the second tab as the text (tabs included) and compares it with the
    document's text: a tab in an entity's text is read, and written back unchanged."""
    (tmp_path / "in").mkdir()
    write(tmp_path / "in", "doc.txt", "She had knee\tpain today.\n")
    write(tmp_path / "in", "doc.ann", "T1\tSymptom 8 17\tknee\tpain\n")
    (doc,) = read_brat_collection(tmp_path / "in", VOCAB, tokenizer=NLP.tokenizer)
    assert [(e.label, e.spans[0].id_) for e in get_entities(doc)] == [("Symptom", "T1")] and not skipped(doc)
    docs_to_brat([doc], tmp_path / "out")
    assert (tmp_path / "out" / "doc.ann").read_text(encoding="utf8") == "T1\tSymptom 8 17\tknee\tpain\n"


def test_a_directory_is_read_in_the_natural_order_of_its_names(tmp_path):
    """export names documents s-line1 ... s-line13: read back as text sorts, s-line13 came before s-line2."""
    for k in (1, 2, 10, 13):
        (tmp_path / f"s-line{k}.txt").write_text(f"Document {k} .", encoding="utf8")
        (tmp_path / f"s-line{k}.ann").write_text("", encoding="utf8")
    assert [doc.text for doc in read_brat_collection(tmp_path, VOCAB)] == [f"Document {k} ." for k in (1, 2, 10, 13)]
