"""A JSON file's big array read one element at a time, so memory does not grow with the file.

``stream_json(path, array_key)`` yields the elements of the file's top-level array
(``array_key=None``: a Label Studio export) or of the array under one key of its top-level object
(``"documents"`` of a BioC JSON collection), each with the line it starts on; the object's other
keys come as ``(key, value, line)`` too, marked as fields. The bytes are checked as UTF-8 as they
are read. Malformed JSON, bytes that are not UTF-8 or a top level of another shape raise
``FormatError`` naming ``file:line``.
"""
import codecs
import json
from pathlib import Path
from typing import Any, Iterator, Optional, Tuple, Union

from ..messages import not_utf8
from .base import FormatError

CHUNK = 1 << 20
_LONGEST_CUT = 16  # characters: an escaped surrogate pair is 12
_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"

ELEMENT, FIELD = "element", "field"


class _Buffer:
    """Decoded text of the file from ``line``'s start on, refilled on demand."""

    def __init__(self, path: Path):
        self.path, self.file = path, open(path, "rb")
        self.decoder = codecs.getincrementaldecoder("utf8")()
        self.text, self.pos, self.line, self.eof, self.offset = "", 0, 1, False, 0

    def close(self) -> None:
        self.file.close()

    def fail(self, what: str, pos: Optional[int] = None) -> FormatError:
        line = self.line + self.text.count("\n", 0, self.pos if pos is None else pos)
        return FormatError(f"{self.path}:{line}: {what}")

    def refill(self) -> bool:
        """Read more (at least as much again as is buffered); False at the end of the file."""
        if self.eof:
            return False
        self.line += self.text.count("\n", 0, self.pos)
        self.text = self.text[self.pos:]
        self.pos = 0
        data = self.file.read(max(CHUNK, len(self.text)))
        self.eof = not data
        try:
            self.text += self.decoder.decode(data, final=self.eof)
        except UnicodeDecodeError as err:
            line = self.line + self.text.count("\n") + data[: max(err.start, 0)].count(b"\n")
            err.start += self.offset
            raise FormatError(f"{self.path}:{line}: {not_utf8(err)}") from None
        self.offset += len(data)
        if self.line == 1 and self.text.startswith("\ufeff"):
            self.text = self.text[1:]
        return True

    def peek(self) -> str:
        """The next character that is not whitespace ('' at the end of the file)."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _SPACE:
                self.pos += 1
            if self.pos < len(self.text) or not self.refill():
                return self.text[self.pos : self.pos + 1]

    def expect(self, chars: str, what: str) -> str:
        char = self.peek()
        if not char or char not in chars:
            found = "the end of the file" if not char else repr(char)
            raise self.fail(f"not valid JSON: expected {what}, found {found}")
        self.pos += 1
        return char

    def value(self) -> Tuple[Any, int]:
        """The next JSON value and the line it starts on (refilling until it is whole)."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as err:
                if _may_be_cut(err, self.text) and self.refill():
                    continue
                raise self.fail(f"not valid JSON ({err.msg})", err.pos) from None
            if end > len(self.text) - _LONGEST_CUT and self.refill():
                continue  # a number may go on in the next chunk (``0`` of ``0.5``)
            line = self.line + self.text.count("\n", 0, self.pos)
            self.pos = end
            return value, line


def _may_be_cut(err: json.JSONDecodeError, text: str) -> bool:
    """Whether the error may only mean that the value goes on after the buffer's end: a string
    cut, or an error within the longest token a cut can leave behind (``fa`` of ``false``, half a
    ``\\ud83d\\ude00`` escape pair) of the end."""
    return err.pos >= len(text) - _LONGEST_CUT or err.msg.startswith("Unterminated string")


def stream_json(path: Union[str, Path], array_key: Optional[str]) -> Iterator[Tuple[str, Any, int]]:
    """``(ELEMENT, element, line)`` for each element of the array; ``(FIELD, (key, value), line)``
    for the top-level object's other keys (see the module docstring)."""
    buffer = _Buffer(Path(path))
    try:
        if array_key is None:
            buffer.expect("[", "a JSON array of tasks ('[')")
            yield from _elements(buffer)
        else:
            yield from _object(buffer, array_key)
        if buffer.peek():
            raise buffer.fail("not valid JSON: more after the end of the top-level value")
    finally:
        buffer.close()


def _elements(buffer: _Buffer) -> Iterator[Tuple[str, Any, int]]:
    if buffer.peek() == "]":
        buffer.pos += 1
        return
    while True:
        value, line = buffer.value()
        yield ELEMENT, value, line
        if buffer.expect(",]", "',' or ']' after an element") == "]":
            return


def _object(buffer: _Buffer, array_key: str) -> Iterator[Tuple[str, Any, int]]:
    buffer.expect("{", f"a JSON object with {array_key!r} ('{{')")
    if buffer.peek() == "}":
        buffer.pos += 1
        return
    while True:
        key, line = buffer.value()
        if not isinstance(key, str):
            raise buffer.fail("not valid JSON: an object key must be a string")
        buffer.expect(":", "':' after a key")
        if key == array_key and buffer.peek() == "[":
            buffer.pos += 1
            yield from _elements(buffer)
        else:
            value, line = buffer.value()
            yield FIELD, (key, value), line
        if buffer.expect(",}", "',' or '}' in the top-level object") == "}":
            return
