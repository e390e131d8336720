"""Annotation inputs: files, directories, DocBins and standard input as a stream of ``Item``s.

An ``Item`` is one input document in input order (``position``), with where it came from
(``source``: file:line, file, file#index), its id and metadata, or the ``problem`` that keeps it
from being a document (not UTF-8, not JSON, no text, empty; ``text_problem`` is the one rule for
a text): such items flow on in order, so they are reported and counted, never silently dropped.
``.gz`` files are read transparently; nothing is loaded whole (a DocBin is read one Doc at a
time). A named pipe is read as it comes, like standard input. ``read_texts`` gives the texts
alone, strictly, for the commands that learn from raw text (``adapt-encoder``).
"""
import gzip
import json
import math
import sys
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from ..formats import NAME_KEY, DocBinFile
from ..messages import lone_surrogate, not_utf8

INPUT_FORMATS = ("txt", "jsonl", "spacy")
# The problems of an input that holds no text at all (a blank line, an empty note).
EMPTY_LINE = "empty line: no document"
EMPTY_FILE = "empty file: no document"


class InputError(ValueError):
    """An input cannot be read (the message names the file, line or document and what is wrong)."""


@dataclass
class Item:
    """One input document, in input order (``position``), or the reason it cannot be one."""

    position: int
    source: Optional[str]
    id: Any
    text: Optional[str] = None
    meta: Dict[str, Any] = field(default_factory=dict)
    problem: Optional[str] = None
    doc_bytes: Optional[bytes] = None  # a DocBin input's Doc, serialized (picklable, n_process)


def input_format_of(path: Union[str, Path], doc_per_file: bool = False, given: Optional[str] = None) -> str:
    """txt, jsonl or spacy, from ``given`` or the input's name (``.gz`` ignored; '-' is txt)."""
    if given is not None:
        if given not in INPUT_FORMATS:
            raise ValueError(f"unknown input format {given!r}; choose from {', '.join(INPUT_FORMATS)}")
        return given
    if doc_per_file:
        return "txt"
    if Path(path).is_dir():
        raise ValueError(f"{path} is a directory: give --doc-per-file to annotate each .txt file in it as one document")
    name = str(path)
    if name == "-":
        return "txt"
    name = name[: -len(".gz")] if name.endswith(".gz") else name
    for suffix in INPUT_FORMATS:
        if name.endswith("." + suffix):
            return suffix
    raise ValueError(f"{path}: cannot tell the input format from its name; use --input-format txt, jsonl or spacy")


def read_inputs(
    path: Union[str, Path],
    input_format: str,
    *,
    text_key: str = "text",
    id_key: str = "id",
    doc_per_file: bool = False,
    vocab=None,
    start: int = 0,
    stop: Optional[int] = None,
) -> Iterator[Item]:
    """The input's documents as ``Item``s, streamed in input order (see the module docstring).

    ``start``/``stop``: only the documents at those positions (a Ray read task's range); the
    ones before are skipped unparsed.
    """
    if doc_per_file:
        items = _read_directory(Path(path), start, stop)
    elif input_format == "spacy":
        items = _read_docbin(Path(path), vocab)
    else:
        source = "-" if str(path) == "-" else str(path)
        lines = islice(enumerate(_lines(path)), start, stop)
        read_line = _jsonl_item if input_format == "jsonl" else _text_item
        options = (text_key, id_key) if input_format == "jsonl" else ()
        return (read_line(k, source, number, raw, *options) for k, (number, raw) in lines)
    return islice(items, start, stop) if (start or stop is not None) and input_format == "spacy" else items


def read_texts(path: Union[str, Path], input_format: Optional[str] = None, text_key: str = "text", counts: Optional[Dict[str, int]] = None) -> Iterator[Tuple[str, str]]:
    """Every document's ``(source, text)``, in input order: a directory's ``.txt`` notes (one
    document a file), a text file's lines, a JSONL file's ``text_key`` fields, a DocBin's texts
    (the format from ``input_format`` or the name, as ``read_inputs``). Blank lines and empty
    notes hold no text and are passed over (counted in ``counts["blank"]``); any other problem
    (not UTF-8, not JSON, no ``text_key`` or an empty one) is an InputError naming file:line."""
    from spacy.vocab import Vocab

    path = Path(path)
    directory = path.is_dir()
    found = input_format_of(path, doc_per_file=directory, given=None if directory else input_format)
    counts = {} if counts is None else counts
    counts.setdefault("blank", 0)
    for item in read_inputs(path, found, text_key=text_key, doc_per_file=directory, vocab=Vocab()):
        if item.problem is None:
            yield item.source, item.text
        elif item.problem in (EMPTY_LINE, EMPTY_FILE):
            counts["blank"] += 1
        else:
            raise InputError(f"{item.source}: {item.problem}")


def count_inputs(path: Union[str, Path], input_format: str, doc_per_file: bool = False) -> Optional[int]:
    """How many documents the input holds (for the progress bar's ETA); None for standard input."""
    if str(path) == "-":
        return None
    path = Path(path)
    if not (path.is_file() or path.is_dir()):  # a pipe (FIFO, <(zcat ...)): read once, as it comes
        return None
    if doc_per_file:
        return sum(1 for _ in _text_files(path))
    if input_format == "spacy":
        with DocBinFile(path) as source:
            return len(source)
    count, last = 0, b"\n"
    with _open_binary(path) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _lines(path: Union[str, Path]) -> Iterator[Tuple[int, bytes]]:
    """(line number, the line's bytes without its line end), streamed."""
    stream = sys.stdin.buffer if str(path) == "-" else _open_binary(Path(path))
    try:
        for number, raw in enumerate(stream, start=1):
            if raw.endswith(b"\n"):
                raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a byte order mark is not text
            yield number, raw
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _decode(raw: bytes) -> Tuple[Optional[str], Optional[str]]:
    try:
        return raw.decode("utf8"), None
    except UnicodeDecodeError as err:
        return None, not_utf8(err)


def _text_item(position: int, source: str, number: int, raw: bytes) -> Item:
    where = f"{source}:{number}"
    text, problem = _decode(raw)
    if problem is None and not text.strip():
        problem = EMPTY_LINE
    return Item(position, where, number, text, problem=problem)


def text_problem(text: Any, text_key: str = "text") -> Optional[str]:
    """Why ``text`` cannot be a document (not a string, nothing but whitespace, or a lone
    surrogate, which JSON's ``\\ud800`` escapes can make and no encoding can write), else None."""
    if not isinstance(text, str):
        name = type(text).__name__
        found = "no" if text is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name} as"
        return f"{found} {text_key!r}: expected the document's text"
    if not text.strip():
        return f"empty {text_key!r}: no document"
    surrogate = lone_surrogate(text)
    return None if surrogate is None else f"{text_key!r} {surrogate}"


def loads_json(text: str) -> Any:
    """``json.loads``, refusing (ValueError) what JSON does not hold but Python's parser takes:
    NaN, Infinity and numbers beyond a float's range, which no JSON output could write back."""
    return json.loads(text, parse_constant=_not_a_json_number, parse_float=_finite)


def _not_a_json_number(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal} is beyond a number's range")
    return value


def record_item(position: int, source: Optional[str], fields: Dict[str, Any], default_id: Any, text_key: str, id_key: str) -> Item:
    """The Item of a record with a text field (a jsonl line, a Ray row): the other fields are its metadata."""
    text = fields.get(text_key)
    identifier = fields.get(id_key, default_id)
    meta = {key: value for key, value in fields.items() if key not in (text_key, id_key)}
    problem = text_problem(text, text_key)
    return Item(position, source, identifier, text if problem is None else None, meta, problem)


def _jsonl_item(position: int, source: str, number: int, raw: bytes, text_key: str, id_key: str) -> Item:
    where = f"{source}:{number}"
    line, problem = _decode(raw)
    if problem is not None:
        return Item(position, where, number, problem=problem)
    if not line.strip():
        return Item(position, where, number, problem=EMPTY_LINE)
    try:
        record = loads_json(line)
    except json.JSONDecodeError as err:
        return Item(position, where, number, problem=f"not valid JSON ({err.msg}, column {err.colno})")
    except ValueError as err:
        return Item(position, where, number, problem=f"not valid JSON ({err})")
    if not isinstance(record, dict):
        return Item(position, where, number, problem=f"expected a JSON object, got {type(record).__name__}")
    return record_item(position, where, record, number, text_key, id_key)


def _text_files(directory: Path) -> List[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name.endswith((".txt", ".txt.gz")))


def _read_directory(directory: Path, start: int = 0, stop: Optional[int] = None) -> Iterator[Item]:
    for position, path in islice(enumerate(_text_files(directory)), start, stop):
        name = path.relative_to(directory).as_posix()
        identifier = name[: -len(".txt.gz")] if name.endswith(".gz") else name[: -len(".txt")]
        with _open_binary(path) as f:
            text, problem = _decode(f.read())
        if problem is None and not text.strip():
            problem = EMPTY_FILE
        yield Item(position, str(path), identifier, text, problem=problem)


def _read_docbin(path: Path, vocab) -> Iterator[Item]:
    with DocBinFile(path) as source:  # one Doc at a time
        for position, doc in enumerate(source.docs(vocab)):
            identifier = doc.user_data.get(NAME_KEY, position)
            yield Item(position, f"{path}#{position}", identifier, doc.text, doc_bytes=doc.to_bytes())
