"""formats.jsonstream: a big JSON array read an element at a time gives what ``json.loads`` gives,
wherever the chunks it reads end (inside a literal, an escape, a number, a string, a multi-byte
character), and malformed JSON is a FormatError naming file:line."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_w2ner.formats import FormatError, jsonstream
from spacy_w2ner.formats.jsonstream import ELEMENT, FIELD, stream_json

SCALARS = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | st.text("aé😀\"\\\n\u2028", max_size=8)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text("ab\"é", max_size=3), inner, max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(VALUES, max_size=6), st.integers(1, 24), st.booleans(), st.booleans())
def test_every_chunk_boundary_reads_the_same_elements(tmp_path_factory, elements, chunk, ascii_only, indent):
    path = tmp_path_factory.mktemp("json") / "tasks.json"
    path.write_text(json.dumps(elements, ensure_ascii=ascii_only, indent=1 if indent else None), encoding="utf8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonstream, "CHUNK", chunk)
        assert [value for kind, value, _ in stream_json(path, None) if kind == ELEMENT] == elements
        path.write_text(json.dumps({"source": "x", "documents": elements}, ensure_ascii=ascii_only), encoding="utf8")
        read = list(stream_json(path, "documents"))
    assert [value for kind, value, _ in read if kind == ELEMENT] == elements
    assert [value for kind, value, _ in read if kind == FIELD] == [("source", "x")]


@pytest.mark.parametrize("text, line", [('[\n{"a": 1},\n{"a": tru}\n]', 3), ('[{"a": 1}\n{"a": 2}]', 2), ('[{"a": "\\uZZZZ"}]', 1)])
def test_malformed_json_names_its_line_whatever_the_chunks(tmp_path, monkeypatch, text, line):
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf8")
    for size in (3, 1 << 20):
        monkeypatch.setattr(jsonstream, "CHUNK", size)
        with pytest.raises(FormatError, match=rf"bad.json:{line}: not valid JSON"):
            list(stream_json(path, None))
