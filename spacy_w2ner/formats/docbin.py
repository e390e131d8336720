""".spacy files written and read one Doc at a time, so memory does not grow with the corpus.

spaCy's ``DocBin`` holds every Doc's arrays until it writes them, and inflates a whole file to read
it. ``DocBinStream`` writes exactly the file ``DocBin(store_user_data=True).to_disk`` writes (the
same msgpack message, zlib-compressed; spaCy reads it as any DocBin): each Doc's parts, as a
one-Doc ``DocBin`` makes them, go to temporary files beside the output, and ``close`` assembles
the message from them through zlib under a temporary name, renamed when complete. Only the
strings (the vocabulary) and four bytes per Doc stay in memory. ``write_docbin`` is the one way
the package writes a corpus.

``DocBinFile`` reads one: the file is inflated to a temporary file once, and ``docs(vocab)``
yields its Docs one at a time (each made by a one-Doc ``DocBin``'s ``get_docs``, so exactly as
spaCy makes them), as often as asked.
"""
import struct
import tempfile
import zlib
from array import array
from pathlib import Path
from typing import Any, BinaryIO, Dict, Iterable, Iterator, Optional, Tuple, Union

import srsly
from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

from ..files import move_into_place
from .base import NAME_KEY, NOT_A_DOCUMENT_KEY, CorpusSummary, FormatError

PARTS = ("cats", "flags", "span_groups", "user_data")  # one msgpack element per Doc
# A DocBin made with store_user_data=False (spaCy's default) has no user_data.
OPTIONAL_PARTS = ("user_data",)
CHUNK = 1 << 20


class DocBinStream:
    """A .spacy file written one Doc at a time (see the module docstring); ``close`` completes it."""

    def __init__(self, path: Union[str, Path]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._spool = tempfile.TemporaryDirectory(dir=self.path.parent, prefix=f".{self.path.name}.")
        self._files = {name: open(Path(self._spool.name) / name, "w+b") for name in ("tokens", "spaces", *PARTS)}
        self._lengths = array("i")
        self._strings: set = set()
        # srsly.msgpack_dumps' packer, made once: srsly makes one per call, and each looks its
        # encoders up in the entry points (about a millisecond where many packages are installed).
        self._pack = srsly.msgpack.Packer(use_bin_type=True).pack
        empty = DocBin()
        self.attrs, self.version = empty.attrs, empty.version

    def add(self, doc: Doc) -> None:
        try:
            one = DocBin(store_user_data=True, docs=[doc])  # packs the user data, before anything is written
        except OverflowError:  # msgpack's, naming nothing: where the integer is, found only then
            raise FormatError(
                f"document {len(self._lengths) + 1} ({doc.user_data.get(NAME_KEY) or doc.text[:40]!r}): "
                f"its {_too_big_for_msgpack(doc.user_data)} is an integer beyond 64 bits, which a .spacy file "
                "cannot store; write it as a string"
            ) from None
        self._files["tokens"].write(one.tokens[0].tobytes("C"))
        self._files["spaces"].write(one.spaces[0].tobytes("C"))
        for name in PARTS:
            self._files[name].write(self._pack(getattr(one, name)[0]))
        self._lengths.append(len(doc))
        self._strings.update(one.strings)

    def close(self) -> None:
        """Write the file: DocBin's message, its big parts streamed from the spool through zlib."""
        partial = self.path.with_name(f".{self.path.name}.partial")
        compress = zlib.compressobj()
        with open(partial, "wb") as out:
            def put(data: bytes) -> None:
                out.write(compress.compress(data))

            put(b"\x8a")  # a map of 10 keys, in DocBin.to_bytes' order
            put(_key("version") + srsly.msgpack_dumps(self.version) + _key("attrs") + srsly.msgpack_dumps(self.attrs))
            for name in ("tokens", "spaces"):
                put(_key(name) + b"\xc6" + struct.pack(">I", self._files[name].tell()))
                _copy(self._files[name], put)
            put(_key("lengths") + srsly.msgpack_dumps(self._lengths.tobytes()))
            put(_key("strings") + srsly.msgpack_dumps(sorted(self._strings)))
            for name in PARTS:
                put(_key(name) + b"\xdd" + struct.pack(">I", len(self._lengths)))
                _copy(self._files[name], put)
            out.write(compress.flush())
        self._discard()
        move_into_place(partial, self.path)

    def discard(self) -> None:
        """Give up: no file is written."""
        self._discard()

    def _discard(self) -> None:
        for f in self._files.values():
            f.close()
        self._spool.cleanup()


def write_docbin(
    docs: Iterable[Doc],
    path: Union[str, Path],
    spans_key: str = "w2ner",
    summary: Optional[CorpusSummary] = None,
) -> CorpusSummary:
    """Save docs to a .spacy file, streamed, and return their counts (added to ``summary`` if
    given); a doc marked as no document (``NOT_A_DOCUMENT_KEY``) is counted, not saved. Nothing is
    written when reading the docs fails."""
    summary = CorpusSummary() if summary is None else summary
    stream = DocBinStream(path)
    try:
        for doc in docs:
            summary.add(doc, spans_key)
            if NOT_A_DOCUMENT_KEY not in doc.user_data:
                stream.add(doc)
    except BaseException:
        stream.discard()
        raise
    stream.close()
    return summary


def _key(name: str) -> bytes:
    return srsly.msgpack_dumps(name)


def _copy(source: BinaryIO, put) -> None:
    source.seek(0)
    for data in iter(lambda: source.read(CHUNK), b""):
        put(data)


class DocBinFile:
    """A .spacy file's Docs, one at a time (see the module docstring); a context manager."""

    def __init__(self, path: Union[str, Path]):
        self.path = Path(path)
        self._file = tempfile.NamedTemporaryFile(prefix="w2ner-docbin-")
        inflate = zlib.decompressobj()
        try:
            with open(self.path, "rb") as f:
                for data in iter(lambda: f.read(CHUNK), b""):
                    while data:  # at most CHUNK bytes out at a time: arrays of ids inflate a hundredfold
                        self._file.write(inflate.decompress(data, CHUNK))
                        data = inflate.unconsumed_tail
            self._file.write(inflate.flush())
            self._file.flush()
            self._where = _layout(self._file)
        except (zlib.error, ValueError, KeyError, IndexError, struct.error, srsly.msgpack.UnpackException) as err:
            self.close()
            raise FormatError(f"{self.path}: cannot read a .spacy DocBin ({err})") from None

    def __enter__(self) -> "DocBinFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def __len__(self) -> int:
        return len(self._lengths())

    def _lengths(self) -> array:
        lengths = array("i")
        lengths.frombytes(self._value("lengths"))
        return lengths

    def _value(self, name: str) -> Any:
        kind, start, size = self._where[name]
        if kind == "bin":
            return _read(self._file, start, size)
        return list(_elements(self._file.name, start, size)) if kind == "array" else _unpack_one(self._file, start)[0]

    def docs(self, vocab: Vocab) -> Iterator[Doc]:
        import numpy

        attrs = self._value("attrs")
        for string in _elements(self._file.name, *self._where["strings"][1:]):
            vocab[string]
        parts = {name: _elements(self._file.name, *self._where[name][1:]) for name in PARTS if name in self._where}
        width = len(attrs)
        token_at, space_at = self._where["tokens"][1], self._where["spaces"][1]
        for length in self._lengths():
            one = DocBin(store_user_data="user_data" in parts)
            one.attrs = attrs
            one.tokens = [numpy.frombuffer(_read(self._file, token_at, length * width * 8), dtype="uint64").reshape((length, width))]
            one.spaces = [numpy.frombuffer(_read(self._file, space_at, length), dtype=bool).reshape((length, 1))]
            token_at, space_at = token_at + length * width * 8, space_at + length
            for name, elements in parts.items():
                setattr(one, name, [next(elements)])
            yield next(one.get_docs(vocab))


def _read(f: BinaryIO, at: int, size: int) -> bytes:
    f.seek(at)
    return f.read(size)


def _layout(f: BinaryIO) -> Dict[str, Tuple[str, int, int]]:
    """Each top-level value's (kind, start, size): a bin's bytes, an array's elements (count), or a
    value ("value", its position, 0)."""
    head = _read(f, 0, 1)
    if not head or head[0] & 0xF0 != 0x80:
        raise ValueError("the message is not a DocBin's map")
    where: Dict[str, Tuple[str, int, int]] = {}
    position = 1
    for _ in range(head[0] & 0x0F):
        key, position = _unpack_one(f, position)
        where[key], position = _place(f, position)
    required = [name for name in PARTS if name not in OPTIONAL_PARTS]
    missing = [name for name in ("attrs", "tokens", "spaces", "lengths", "strings", *required) if name not in where]
    if missing:
        raise KeyError(f"no {missing[0]!r}")
    return where


def _unpack_one(f: BinaryIO, position: int) -> Tuple[Any, int]:
    """A small msgpack value at ``position`` and where the next one starts."""
    f.seek(position)
    unpacker = srsly.msgpack.Unpacker(f, raw=False, read_size=4096)
    value = unpacker.unpack()
    return value, position + unpacker.tell()


def _place(f: BinaryIO, position: int) -> Tuple[Tuple[str, int, int], int]:
    """The (kind, start, size) of the value at ``position``, and where the next value starts."""
    first = _read(f, position, 5)
    if first[0] in (0xC4, 0xC5, 0xC6):
        width = {0xC4: 1, 0xC5: 2, 0xC6: 4}[first[0]]
        size = int.from_bytes(first[1 : 1 + width], "big")
        return ("bin", position + 1 + width, size), position + 1 + width + size
    if first[0] in (0xDC, 0xDD) or first[0] & 0xF0 == 0x90:
        width = {0xDC: 2, 0xDD: 4}.get(first[0], 0)
        count = int.from_bytes(first[1 : 1 + width], "big") if width else first[0] & 0x0F
        start = position + 1 + width
        f.seek(start)
        unpacker = srsly.msgpack.Unpacker(f, raw=False, read_size=1 << 16)
        for _ in range(count):
            unpacker.skip()
        return ("array", start, count), start + unpacker.tell()
    _, end = _unpack_one(f, position)
    return ("value", position, 0), end


def _elements(name: str, start: int, count: int) -> Iterator[Any]:
    """The elements of the array at ``start`` of file ``name``, one at a time (a handle of its own)."""
    with open(name, "rb") as handle:
        handle.seek(start)
        unpacker = srsly.msgpack.Unpacker(handle, raw=False, read_size=1 << 16)
        for _ in range(count):
            yield unpacker.unpack()


def _too_big_for_msgpack(value: Any, where: str = "") -> Optional[str]:
    """Where in ``value`` (user data: dicts, lists, scalars) an integer is that msgpack cannot pack
    (outside -2**63 .. 2**64 - 1: valid JSON, an OverflowError and a traceback at DocBin's packing),
    as "'key' -> 0 -> 'id'"; None when there is none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return where or "value" if not -(2**63) <= value < 2**64 else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = _too_big_for_msgpack(item, f"{where} -> {key!r}" if where else repr(key))
        if found is not None:
            return found
    return None
