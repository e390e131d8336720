"""Property tests of every reader: a generated file converts with every token's text and every
entity kept, or stops with a FormatError naming the file and the line (or record); never a
traceback.

Each format gets documents with arbitrary Unicode tokens (no-break and ideographic spaces,
line and paragraph separators, control characters, combining marks, emoji) written in the
format, and then the same files with random damage (bytes cut, lines repeated, bytes that are
not UTF-8 inserted). Clean files must come back exactly (tokens, entity labels and token
indices, counts); damaged ones may convert (then the counts must be consistent) or stop with a
located FormatError. ``W2NER_PROPERTY_EXAMPLES=2000 pytest tests/formats/test_properties.py -s``
runs more cases and prints how many converted and how many stopped, per format.
"""
import json
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from spacy_w2ner import get_entities
from spacy_w2ner.formats import FormatError, read_bmes, read_brat, read_conll, read_dai_text, read_w2ner_json, write_docbin

from ..conftest import VOCAB, ZH_VOCAB

EXAMPLES = int(os.environ.get("W2NER_PROPERTY_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
OUTCOMES: Counter = Counter()

# Any character a UTF-8 file can hold except the formats' separators (space, tab, line ends).
TOKEN_CHAR = st.characters(blacklist_categories=("Cs",), blacklist_characters=" \t\r\n")
TOKEN = st.text(TOKEN_CHAR, min_size=1, max_size=4)
LABEL = st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcxyz0189ÄÖßé"), min_size=1, max_size=5)


@pytest.fixture(scope="module", autouse=True)
def report_outcomes():
    yield
    print("\nconverted / stopped with a located FormatError, per reader:", dict(sorted(OUTCOMES.items())))


def read_or_error(name, read, path, where):
    """The docs read from path, or None after checking the error names ``where``."""
    try:
        docs = list(read(path))
        write_docbin(docs, Path(path).with_suffix(".spacy"))  # serializes: no text spaCy cannot store
    except FormatError as err:
        assert re.match(re.escape(where) + r"(:\d+: |: record \d+: |: )", str(err)), str(err)
        OUTCOMES[f"{name} stopped"] += 1
        return None
    OUTCOMES[f"{name} converted"] += 1
    return docs


def found(doc):
    return sorted((e.label, e.tokens) for e in get_entities(doc))


def damaged(data: bytes, draw) -> bytes:
    """The bytes with one random change: a cut, a repeated line, or inserted (maybe invalid) bytes."""
    kind = draw(st.sampled_from(["cut", "repeat", "insert"]))
    at = draw(st.integers(0, len(data)))
    if kind == "cut":
        return data[:at] + data[at + draw(st.integers(1, 8)):]
    if kind == "repeat":
        lines = data.split(b"\n")
        k = draw(st.integers(0, len(lines) - 1))
        return b"\n".join(lines[: k + 1] + lines[k:])
    return data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]


def tokens_and_entities(min_tokens=1, max_tokens=8, contiguous=False, overlapping=True, token=TOKEN):
    """A sentence: tokens, and entities (label, sorted unique token indices)."""

    @st.composite
    def build(draw):
        words = draw(st.lists(token, min_size=min_tokens, max_size=max_tokens))
        n = len(words)
        entities = []
        taken = set()
        for _ in range(draw(st.integers(0, 3))):
            if contiguous:
                start = draw(st.integers(0, n - 1))
                end = draw(st.integers(start + 1, n))
                tokens = tuple(range(start, end))
            else:
                tokens = tuple(sorted(draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n))))
            if not overlapping and taken & set(tokens):
                continue
            taken |= set(tokens)
            entity = (draw(LABEL), tokens)
            if entity not in entities:
                entities.append(entity)
        return words, sorted(entities)

    return build()


def write_bytes(data: bytes, name: str) -> Path:
    path = Path(tempfile.mkdtemp()) / name
    path.write_bytes(data)
    return path


def assert_sentences_come_back(name, read, lines, filename, sentences, damage, draw):
    """Write the lines (damaged or not), read them: clean files give the sentences back exactly.
    Not a file whose first token starts with U+FEFF: there it is the byte order mark, which every
    reader drops, as ``utf-8-sig`` does (test_pubtator's BOM case); later in a file it is a token's."""
    assume(not lines[0].startswith("\ufeff"))
    raw = "\n".join(lines).encode("utf8")
    if damage:
        raw = damaged(raw, draw)
    path = write_bytes(raw, filename)
    docs = read_or_error(name, read, path, str(path))
    assert docs is not None or damage, "a valid file was refused"
    if damage:
        return
    assert [[t.text for t in doc] for doc in docs] == [words for words, _ in sentences]
    assert [found(doc) for doc in docs] == [entities for _, entities in sentences]


# ---------------------------------------------------------------- W2NER JSON

JSON_TOKEN = st.one_of(TOKEN, st.text(max_size=3))  # also empty, whitespace and lone surrogates
JSON_INDEX = st.one_of(st.integers(-1, 9), st.booleans(), st.floats(allow_nan=True), st.text(max_size=1), st.just([1]))


@st.composite
def w2ner_records(draw):
    records = []
    for _ in range(draw(st.integers(0, 3))):
        words = draw(st.lists(JSON_TOKEN, min_size=0, max_size=6))
        ner = [
            {"index": draw(st.lists(JSON_INDEX, min_size=0, max_size=4)), "type": draw(st.one_of(LABEL, st.just("")))}
            for _ in range(draw(st.integers(0, 3)))
        ]
        record = {"sentence": words}
        if draw(st.booleans()):
            record["ner"] = ner if draw(st.integers(0, 9)) else None
        records.append(record)
    return records


@SETTINGS
@given(records=w2ner_records(), damage=st.booleans(), data=st.data())
def test_w2ner_json_converts_exactly_or_stops_at_a_record(records, damage, data):
    text = json.dumps(records)  # surrogates are written as \ud800 escapes
    raw = text.encode("utf8")
    if damage:
        raw = damaged(raw, data.draw)
    path = write_bytes(raw, "data.json")
    docs = read_or_error("w2ner-json", lambda p: read_w2ner_json(p, VOCAB), path, str(path))
    if docs is None or damage:
        return
    assert [[t.text for t in doc] for doc in docs] == [r["sentence"] for r in records]
    for doc, record in zip(docs, records):
        expected = sorted((e["type"], tuple(sorted(e["index"]))) for e in record.get("ner") or [])
        assert found(doc) == expected


# ---------------------------------------------------------------- Dai


def dai_mention(label, tokens):
    ranges, start = [], tokens[0]
    for a, b in zip(tokens, tokens[1:] + (None,)):
        if b != a + 1:
            ranges.append(f"{start},{a}")
            start = b
    return ",".join(ranges) + " " + label


@SETTINGS
@given(sentences=st.lists(tokens_and_entities(), min_size=1, max_size=4), damage=st.booleans(), data=st.data())
def test_dai_converts_exactly_or_stops_at_a_line(sentences, damage, data):
    lines = []
    for words, entities in sentences:
        lines += [" ".join(words), "|".join(dai_mention(label, tokens) for label, tokens in entities), ""]
    assert_sentences_come_back("dai", lambda p: read_dai_text(p, VOCAB), lines, "cadec.txt", sentences, damage, data.draw)


# ---------------------------------------------------------------- CoNLL and BMES


def bio_tags(n, entities):
    tags = ["O"] * n
    for label, tokens in entities:
        tags[tokens[0]] = f"B-{label}"
        for i in tokens[1:]:
            tags[i] = f"I-{label}"
    return tags


def bmes_tags(n, entities):
    tags = ["O"] * n
    for label, tokens in entities:
        if len(tokens) == 1:
            tags[tokens[0]] = f"S-{label}"
        else:
            tags[tokens[0]] = f"B-{label}"
            for i in tokens[1:-1]:
                tags[i] = f"M-{label}"
            tags[tokens[-1]] = f"E-{label}"
    return tags


FLAT = tokens_and_entities(contiguous=True, overlapping=False)


@SETTINGS
@given(sentences=st.lists(FLAT, min_size=1, max_size=4), damage=st.booleans(), data=st.data())
def test_conll_converts_exactly_or_stops_at_a_line(sentences, damage, data):
    sentences = [(words, entities) for words, entities in sentences if "-DOCSTART-" not in words]
    lines = ["-DOCSTART- -X- O", ""]
    for words, entities in sentences:
        lines += [f"{word}\tNN {tag}" for word, tag in zip(words, bio_tags(len(words), entities))] + [""]
    assert_sentences_come_back("conll", lambda p: read_conll(p, VOCAB, scheme="BIO"), lines, "train.conll", sentences, damage, data.draw)


CHARACTERS = tokens_and_entities(contiguous=True, overlapping=False).map(
    lambda sentence: ([word[0] for word in sentence[0]], sentence[1])
)


@SETTINGS
@given(sentences=st.lists(CHARACTERS, min_size=1, max_size=4), damage=st.booleans(), data=st.data())
def test_bmes_converts_exactly_or_stops_at_a_line(sentences, damage, data):
    lines = []
    for chars, entities in sentences:
        lines += [f"{char} {tag}" for char, tag in zip(chars, bmes_tags(len(chars), entities))] + [""]
    assert_sentences_come_back("bmes", lambda p: read_bmes(p, ZH_VOCAB), lines, "resume.char.bmes", sentences, damage, data.draw)


# ---------------------------------------------------------------- brat


# brat text is tokenized on Unicode whitespace (\\S+ runs): its tokens hold no whitespace of any kind.
WORD = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")), min_size=1, max_size=4).filter(
    lambda word: not any(c.isspace() for c in word)
)


@SETTINGS
@given(document=tokens_and_entities(max_tokens=10, token=WORD), breaks=st.lists(st.booleans(), max_size=10),
       damage=st.booleans(), data=st.data())
def test_brat_converts_exactly_or_stops_at_a_line(document, breaks, damage, data):
    words, entities = document
    separators = ["\n" if i < len(breaks) and breaks[i] else " " for i in range(len(words) - 1)] + [""]
    text = "".join(word + separator for word, separator in zip(words, separators))
    starts = [sum(len(w) + len(s) for w, s in zip(words[:i], separators)) for i in range(len(words))]
    ann = []
    for k, (label, tokens) in enumerate(entities, start=1):
        fragments, start = [], tokens[0]
        for a, b in zip(tokens, tokens[1:] + (None,)):
            if b != a + 1:
                fragments.append((starts[start], starts[a] + len(words[a])))
                start = b
        offsets = ";".join(f"{s} {e}" for s, e in fragments)
        shown = " ".join(text[s:e] for s, e in fragments).replace("\n", " ")
        ann.append(f"T{k}\t{label} {offsets}\t{shown}")
    ann_raw = "\n".join(ann).encode("utf8")
    if damage:
        ann_raw = damaged(ann_raw, data.draw)
    txt_path = write_bytes(text.encode("utf8"), "doc.txt")
    txt_path.with_suffix(".ann").write_bytes(ann_raw)
    docs = read_or_error("brat", lambda p: read_brat(p, None, VOCAB), txt_path, str(txt_path.with_suffix(".ann")))
    assert docs is not None or damage, "a valid file was refused"
    if docs is None:
        return
    (doc,) = docs
    assert doc.text == text  # never changed, damaged annotations or not
    if damage:
        return
    # Each entity keeps its characters (fragments on adjacent words are one fragment).
    kept = sorted((e.label, tuple((doc[s].idx, doc[e - 1].idx + len(doc[e - 1])) for s, e in e.fragments)) for e in get_entities(doc))
    expected = []
    for label, tokens in entities:
        chars = []
        for i in tokens:
            if chars and chars[-1][1] + len(separators[i - 1]) == starts[i] and i - 1 in tokens:
                chars[-1] = (chars[-1][0], starts[i] + len(words[i]))
            else:
                chars.append((starts[i], starts[i] + len(words[i])))
        expected.append((label, tuple(chars)))
    assert kept == sorted(expected)
