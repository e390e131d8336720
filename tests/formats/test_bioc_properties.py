"""Property tests of BioC: random collections (several documents and passages, overlapping,
adjacent and discontinuous annotations, extra infons, non-ASCII text), written by the bioc package
itself as XML and JSON, come back through Docs with the same annotations: ids, infons, every
location's offset and length, text; one Doc per document or per passage."""
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bioc
from bioc import biocjson, biocxml

from spacy_w2ner import get_entities
from spacy_w2ner.formats import docs_to_bioc, read_bioc
from spacy_w2ner.formats.bioc import _passage_finder

from ..conftest import VOCAB
from .test_bioc import annotations

EXAMPLES = int(os.environ.get("W2NER_PROPERTY_EXAMPLES", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
WORD = st.text(st.sampled_from("abcxyzé测😀"), min_size=1, max_size=5)
LABELS = st.sampled_from(["Disease", "Chemical", "Gene"])


@st.composite
def passages(draw, offset):
    """(passage, end): words joined by a space, annotations on word boundaries."""
    words = draw(st.lists(WORD, min_size=1, max_size=8))
    starts = [sum(len(w) + 1 for w in words[:k]) for k in range(len(words))]
    passage = bioc.BioCPassage()
    passage.offset, passage.text = offset, " ".join(words)
    passage.infons = {"type": draw(st.sampled_from(["title", "abstract", "paragraph"]))}
    for _ in range(draw(st.integers(0, 4))):
        chosen = sorted(draw(st.sets(st.integers(0, len(words) - 1), min_size=1, max_size=3)))
        annotation = bioc.BioCAnnotation()
        annotation.infons = {"type": draw(LABELS)}
        if draw(st.booleans()):
            annotation.infons["identifier"] = draw(st.sampled_from(["MESH:D001", "-", "7157"]))
        for k in chosen:
            annotation.add_location(bioc.BioCLocation(offset + starts[k], len(words[k])))
        annotation.text = " ".join(words[k] for k in chosen)
        passage.add_annotation(annotation)
    return passage, offset + len(passage.text)


@st.composite
def collections(draw):
    collection = bioc.BioCCollection()
    collection.source, collection.date, collection.key = "hypothesis", "2024", "k"
    number = 0
    for d in range(draw(st.integers(1, 3))):
        document = bioc.BioCDocument()
        document.id = f"doc{d}"
        end = draw(st.integers(0, 3))
        for _ in range(draw(st.integers(1, 3))):
            passage, end = draw(passages(end))
            end += draw(st.integers(1, 3))
            for annotation in passage.annotations:
                annotation.id = f"A{number}"
                number += 1
            document.add_passage(passage)
        collection.add_document(document)
    return collection


def write_with_bioc(collection, path: Path) -> Path:
    with open(path, "w", encoding="utf8") as f:
        (biocxml if path.suffix == ".xml" else biocjson).dump(collection, f)
    return path


@SETTINGS
@given(collection=collections(), suffix=st.sampled_from([".xml", ".json"]), out_suffix=st.sampled_from([".xml", ".json"]),
       doc_per=st.sampled_from(["document", "passage"]))  # fmt: skip
def test_random_collections_round_trip(tmp_path_factory, collection, suffix, out_suffix, doc_per):
    directory = tmp_path_factory.mktemp("bioc")
    source = write_with_bioc(collection, directory / f"in{suffix}")
    docs = list(read_bioc(source, VOCAB, doc_per=doc_per))
    generated = sum(len(p.annotations) for d in collection.documents for p in d.passages)
    assert sum(len(get_entities(doc)) for doc in docs) == generated  # every annotation is on word boundaries
    out = docs_to_bioc(docs, directory / f"out{out_suffix}")
    assert annotations(out) == annotations(source)
    passages_in = [(p.offset, p.text, p.infons) for d in collection.documents for p in d.passages]
    with open(out, encoding="utf8") as f:
        written = (biocxml if out_suffix == ".xml" else biocjson).load(f)
    assert [(p.offset, p.text, p.infons) for d in written.documents for p in d.passages] == passages_in


@st.composite
def passage_extents(draw):
    """Passages as the reader requires them: texts that follow each other; a passage's offset may
    lie before its first text (its sentences'), even before the end of the passage before."""
    passages, end = [], 0
    for _ in range(draw(st.integers(0, 8))):
        first = end + draw(st.integers(0, 3))
        end = first + draw(st.integers(0, 4))
        passages.append({"start": first - draw(st.integers(0, 5) if draw(st.booleans()) else st.just(0)), "end": end})
    return passages


@SETTINGS
@given(passages=passage_extents())
def test_the_passage_of_an_offset_is_the_first_that_holds_it(passages):
    """Bisection finds what a scan of the passages in order finds."""
    find = _passage_finder(passages)
    for offset in range(-1, (passages[-1]["end"] if passages else 0) + 2):
        assert find(offset) == next((k for k, p in enumerate(passages) if p["start"] <= offset < p["end"]), None)
