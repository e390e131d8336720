"""Annotate documents at any size: raw inputs -> entities with character offsets.

The data flow, each step a small piece used by the ``annotate`` command and by the Ray Data
path (``annotate_ray.py``):

1. ``read_inputs``: a ``.txt`` file (one document per line), a directory of ``.txt`` files (one
   document each), a ``.jsonl`` file (``{"text": ..., other keys: metadata}``), a ``.spacy``
   DocBin or standard input, ``.gz`` read transparently, as a stream of ``Item``s in input
   order. An input that cannot be a document (not UTF-8, not JSON, no text, empty) is an
   ``Item`` with a ``problem``, so it is reported in order and never silently dropped.
2. ``load_pipeline``: the trained pipeline, with ``threshold`` set on its w2ner components and
   sentence boundaries added before w2ner on request.
3. ``annotate_items``: ``nlp.pipe`` over the items' texts (in batches, on ``n_process``
   processes), each document turned into a record (``RECORD_SCHEMA``).
4. ``AnnotationRun``: writes the records (``.jsonl``, ``.spacy``, a brat directory, or standard
   output) and the problems (an errors file) under temporary names with a checkpoint, renames
   them when the run completes, and continues an interrupted run (``resume``) after the last
   checkpointed document.

The record of one document (``RECORD_SCHEMA``)::

    {"id": ...,            # the input's id key (jsonl), its file (directory) or name (DocBin);
                           # else its line number (txt, jsonl)
     "source": "notes.jsonl:12",   # where it came from: file:line, file, or file#index
     "meta": {...},        # every other key of a jsonl record ({} otherwise)
     "entities": [{"label": "ADR", "score": 0.97,
                   "text": "pain in the ankles",          # the fragments' texts joined by a space
                   "fragments": [[31, 42], [52, 58]],     # character offsets into the input text
                   "tokens": [6, 7, 8, 11],               # token indices of the spaCy Doc
                   "discontinuous": true}]}
"""
import gzip
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin

from .entities import Entity, get_entities
from .formats import NAME_KEY, docs_to_brat

RECORD_SCHEMA = {
    "id": "the input's id (jsonl --id-key, the file of --doc-per-file, a DocBin doc's name), else its line number",
    "source": "file:line (txt, jsonl), file (--doc-per-file) or file#index (DocBin); '-' is standard input",
    "meta": "every other key of a jsonl record; {} for other inputs",
    "entities": {
        "label": "entity label",
        "score": "weakest-link confidence in [0, 1] (null for entities without one)",
        "text": "the texts of the fragments joined by a space",
        "fragments": "[[start_char, end_char], ...] into the input text, end exclusive",
        "tokens": "token indices of the spaCy Doc",
        "discontinuous": "true when the entity has more than one fragment",
    },
}
INPUT_FORMATS = ("txt", "jsonl", "spacy")
SENTENCE_SETTERS = ("sentencizer", "senter", "parser")


@dataclass
class Item:
    """One input document, in input order (``position``), or the reason it cannot be one."""

    position: int
    source: str
    id: Any
    text: Optional[str] = None
    meta: Dict[str, Any] = field(default_factory=dict)
    problem: Optional[str] = None
    doc_bytes: Optional[bytes] = None  # a DocBin input's Doc, serialized (picklable, n_process)


# ---------------------------------------------------------------- 1. inputs


def input_format_of(path: Union[str, Path], doc_per_file: bool = False, given: Optional[str] = None) -> str:
    """txt, jsonl or spacy, from ``given`` or the input's name (``.gz`` ignored; '-' is txt)."""
    if given is not None:
        if given not in INPUT_FORMATS:
            raise ValueError(f"unknown input format {given!r}; choose from {', '.join(INPUT_FORMATS)}")
        return given
    if doc_per_file:
        return "txt"
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


def count_inputs(path: Union[str, Path], input_format: str, doc_per_file: bool = False) -> Optional[int]:
    """How many documents the input holds (for the progress bar's ETA); None for standard input."""
    if str(path) == "-":
        return None
    path = Path(path)
    if doc_per_file:
        return sum(1 for _ in _text_files(path))
    if input_format == "spacy":
        return len(DocBin().from_disk(path))
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
        return None, f"not valid UTF-8 ({err.reason} at byte {err.start})"


def _text_item(position: int, source: str, number: int, raw: bytes) -> Item:
    where = f"{source}:{number}"
    text, problem = _decode(raw)
    if problem is None and not text.strip():
        problem = "empty line: no document"
    return Item(position, where, number, text, problem=problem)


def _jsonl_item(position: int, source: str, number: int, raw: bytes, text_key: str, id_key: str) -> Item:
    where = f"{source}:{number}"
    line, problem = _decode(raw)
    if problem is not None:
        return Item(position, where, number, problem=problem)
    if not line.strip():
        return Item(position, where, number, problem="empty line: no document")
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        return Item(position, where, number, problem=f"not valid JSON ({err.msg}, column {err.colno})")
    if not isinstance(record, dict):
        return Item(position, where, number, problem=f"expected a JSON object, got {type(record).__name__}")
    text = record.get(text_key)
    identifier = record.get(id_key, number)
    meta = {key: value for key, value in record.items() if key not in (text_key, id_key)}
    if not isinstance(text, str):
        found = "no" if text is None else f"a {type(text).__name__} as"
        return Item(position, where, identifier, meta=meta, problem=f"{found} {text_key!r}: expected the document's text")
    if not text.strip():
        return Item(position, where, identifier, meta=meta, problem=f"empty {text_key!r}: no document")
    return Item(position, where, identifier, text, meta)


def _text_files(directory: Path) -> List[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name.endswith((".txt", ".txt.gz")))


def _read_directory(directory: Path, start: int = 0, stop: Optional[int] = None) -> Iterator[Item]:
    for position, path in islice(enumerate(_text_files(directory)), start, stop):
        name = path.relative_to(directory).as_posix()
        identifier = name[: -len(".txt.gz")] if name.endswith(".gz") else name[: -len(".txt")]
        with _open_binary(path) as f:
            text, problem = _decode(f.read())
        if problem is None and not text.strip():
            problem = "empty file: no document"
        yield Item(position, str(path), identifier, text, problem=problem)


def _read_docbin(path: Path, vocab) -> Iterator[Item]:
    for position, doc in enumerate(DocBin(store_user_data=True).from_disk(path).get_docs(vocab)):
        identifier = doc.user_data.get(NAME_KEY, position)
        yield Item(position, f"{path}#{position}", identifier, doc.text, doc_bytes=doc.to_bytes())


# ---------------------------------------------------------------- 2. the pipeline


def load_pipeline(
    model: Union[str, Path, Language],
    *,
    threshold: Optional[float] = None,
    sentencizer: bool = False,
    gpu_id: int = -1,
    max_length: Optional[int] = None,
) -> Language:
    """The pipeline to annotate with (a name, a path or a loaded ``Language``).

    ``threshold`` is set on every w2ner component; ``sentencizer`` adds spaCy's sentencizer
    before the first w2ner component when no component sets sentence boundaries;
    ``max_length`` raises ``nlp.max_length`` (w2ner's memory does not grow with a document's
    length; other components' may).
    """
    import spacy

    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
    nlp = model if isinstance(model, Language) else spacy.load(model)
    w2ner_names = [name for name, pipe in nlp.pipeline if nlp.get_pipe_meta(name).factory == "w2ner"]
    if not w2ner_names:
        raise ValueError(f"the pipeline {model!r} has no w2ner component (its components: {nlp.pipe_names})")
    if threshold is not None:
        for name in w2ner_names:
            nlp.get_pipe(name).threshold = _checked_threshold(threshold)
    if sentencizer and not sets_sentences(nlp):
        nlp.add_pipe("sentencizer", before=w2ner_names[0])
    if max_length is not None:
        nlp.max_length = max_length
    return nlp


def _checked_threshold(threshold: float) -> float:
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be between 0 and 1, got {threshold}")
    return threshold


def sets_sentences(nlp: Language) -> bool:
    """Whether a component of the pipeline sets sentence boundaries."""
    for name in nlp.pipe_names:
        meta = nlp.get_pipe_meta(name)
        if meta.factory in SENTENCE_SETTERS or "token.is_sent_start" in meta.assigns or "doc.sents" in meta.assigns:
            return True
    return False


def spans_key_of(nlp: Language) -> str:
    """The doc.spans key of the pipeline's (first) w2ner component."""
    for name, pipe in nlp.pipeline:
        if nlp.get_pipe_meta(name).factory == "w2ner":
            return pipe.spans_key
    raise ValueError("the pipeline has no w2ner component")


# ---------------------------------------------------------------- 3. documents -> records


def entity_record(entity: Entity, doc: Doc) -> Dict[str, Any]:
    """One entity of the record: label, score, text, character fragments, tokens, discontinuous."""
    fragments = [[doc[start].idx, doc[end - 1].idx + len(doc[end - 1])] for start, end in entity.fragments]
    return {
        "label": entity.label,
        "score": None if entity.score is None else round(float(entity.score), 6),
        "text": entity.text,
        "fragments": fragments,
        "tokens": list(entity.tokens),
        "discontinuous": entity.is_discontinuous,
    }


def make_record(item: Item, doc: Doc, spans_key: str) -> Dict[str, Any]:
    return {
        "id": item.id,
        "source": item.source,
        "meta": item.meta,
        "entities": [entity_record(entity, doc) for entity in get_entities(doc, spans_key)],
    }


def _pipe_input(item: Item, vocab) -> Union[str, Doc]:
    if item.problem is not None:
        return ""  # passes through in order, costs nothing
    if item.doc_bytes is not None:
        return Doc(vocab).from_bytes(item.doc_bytes)
    return item.text


def annotate_items(
    nlp: Language,
    items: Iterable[Item],
    *,
    spans_key: Optional[str] = None,
    batch_size: int = 64,
    n_process: int = 1,
) -> Iterator[Tuple[Item, Optional[Dict[str, Any]], Optional[Doc]]]:
    """(item, record, doc) in input order; record and doc are None for an item with a problem.

    A document the pipeline cannot take (longer than ``nlp.max_length``) or whose text it
    changed becomes an item with a problem; the text is never changed or cut.
    """
    spans_key = spans_key or spans_key_of(nlp)
    inputs = ((_pipe_input(_within_max_length(item, nlp), nlp.vocab), item) for item in items)
    for doc, item in nlp.pipe(inputs, as_tuples=True, batch_size=batch_size, n_process=n_process):
        if item.problem is None and doc.text != item.text:
            item.problem = "the pipeline's tokenizer changed the text, so character offsets would not match it"
        if item.problem is not None:
            yield item, None, None
        else:
            yield item, make_record(item, doc, spans_key), doc


def _within_max_length(item: Item, nlp: Language) -> Item:
    if item.problem is None and len(item.text) > nlp.max_length:
        item.problem = (
            f"{len(item.text)} characters, more than nlp.max_length={nlp.max_length}; "
            "raise it with --max-length (w2ner's memory is bounded on long documents)"
        )
    return item


# ---------------------------------------------------------------- 4. output, errors, resume


class AnnotationError(Exception):
    """A problem that stops the run (exit code 1): bad output, --strict, a finished output."""


def output_kind(output: Union[str, Path]) -> str:
    """jsonl, spacy, brat (a directory) or stdout, from the output's name."""
    name = str(output)
    if name == "-":
        return "stdout"
    if name.endswith(".jsonl"):
        return "jsonl"
    if name.endswith(".spacy"):
        return "spacy"
    if "." not in Path(name).name or Path(name).is_dir():
        return "brat"
    raise AnnotationError(f"{output}: write to a .jsonl or .spacy file, a directory (brat) or '-' (standard output)")


@dataclass
class Summary:
    read: int = 0
    written: int = 0
    skipped: int = 0
    entities: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def as_dict(self) -> Dict[str, Any]:
        return {
            "documents_read": self.read,
            "written": self.written,
            "skipped": self.skipped,
            "read_equals_written_plus_skipped": self.read == self.written + self.skipped,
            "entities": sum(self.entities.values()),
            "entities_per_label": dict(sorted(self.entities.items())),
            "seconds": round(self.seconds, 2),
            "docs_per_second": round(self.read / self.seconds, 1) if self.seconds else None,
        }


class AnnotationRun:
    """Writes records and problems safely: under temporary names with a checkpoint, renamed at the end.

    ``OUTPUT.partial`` (a file, or a directory for brat) and ``ERRORS.partial`` grow as
    documents are done; ``OUTPUT.partial.progress`` records, at most every ``checkpoint_seconds``,
    how many input documents are done and the byte size of both files then. ``resume`` cuts the
    partial files back to the checkpoint and skips that many inputs. Nothing is left under the
    output's own name until the run completes.
    """

    def __init__(
        self,
        output: Union[str, Path],
        errors: Optional[Union[str, Path]],
        *,
        resume: bool = False,
        spans_key: str = "w2ner",
        checkpoint_seconds: float = 1.0,
    ):
        self.kind = output_kind(output)
        self.spans_key = spans_key
        # A DocBin is rewritten whole at each checkpoint: less often.
        checkpoint_seconds = max(checkpoint_seconds, 30.0) if self.kind == "spacy" else checkpoint_seconds
        self.output = None if self.kind == "stdout" else Path(output)
        self.errors = Path(errors) if errors else (None if self.output is None else _sibling(self.output, ".errors.jsonl"))
        self.summary = Summary()
        self.checkpoint_seconds = checkpoint_seconds
        self._last_checkpoint = 0.0
        self.skip = 0
        if self.output is not None and self.output.exists() and (self.kind != "brat" or any(self.output.iterdir())):
            raise AnnotationError(f"{self.output} exists: remove it or write elsewhere (a finished run is not redone)")
        self._open(resume)

    # files
    @property
    def partial(self) -> Optional[Path]:
        return None if self.output is None else _sibling(self.output, ".partial")

    @property
    def progress(self) -> Optional[Path]:
        return None if self.output is None else _sibling(self.output, ".partial.progress")

    def _open(self, resume: bool) -> None:
        state = None
        if self.progress is not None and self.progress.exists():
            if not resume:
                raise AnnotationError(
                    f"{self.partial} is an unfinished run: continue it with --resume, or delete "
                    f"{self.partial} and {self.progress} to start over"
                )
            state = json.loads(self.progress.read_text(encoding="utf8"))
        if self.errors is not None:
            self._errors_partial = _sibling(self.errors, ".partial")
            self._errors_file = open(self._errors_partial, "ab" if state else "wb")
            if state:
                self._errors_file.truncate(state["errors_bytes"])
        else:
            self._errors_file = None
        self._docbin = None
        if self.kind == "jsonl":
            self._out = open(self.partial, "ab" if state else "wb")
            if state:
                self._out.truncate(state["output_bytes"])
        elif self.kind == "stdout":
            self._out = sys.stdout.buffer
        elif self.kind == "spacy":
            self._out = None
            self._docbin = DocBin(store_user_data=True)
            if state:
                self._docbin.from_disk(self.partial)
        else:  # brat: a directory of finished document pairs
            self._out = None
            self.partial.mkdir(parents=True, exist_ok=True)
            self._brat_names = {p.relative_to(self.partial).as_posix()[: -len(".ann")] for p in self.partial.rglob("*.ann")}
        if state:
            self.skip = state["inputs"]
            self.summary = Summary(state["read"], state["written"], state["skipped"], Counter(state["entities"]))

    def add(self, item: Item, record: Optional[Dict[str, Any]], doc: Optional[Doc]) -> None:
        """Write one input document's record, or its problem, in input order."""
        self.summary.read += 1
        if record is None:
            self.summary.skipped += 1
            self._write_problem(item)
        else:
            self.summary.written += 1
            self.summary.entities.update(entity["label"] for entity in record["entities"])
            self._write_record(item, record, doc)
        now = time.monotonic()
        if now - self._last_checkpoint >= self.checkpoint_seconds:
            self.checkpoint(item.position + 1)
            self._last_checkpoint = now

    def _write_problem(self, item: Item, problem: Optional[str] = None) -> None:
        line = {"source": item.source, "id": item.id, "problem": problem or item.problem}
        if self._errors_file is not None:
            self._errors_file.write((json.dumps(line, ensure_ascii=False, default=str) + "\n").encode("utf8"))

    def _write_record(self, item: Item, record: Dict[str, Any], doc: Doc) -> None:
        if self.kind in ("jsonl", "stdout"):
            self._out.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf8"))
        elif self.kind == "spacy":
            self._docbin.add(_portable(doc, str(record["id"])))
        else:
            name = self._brat_name(item)
            problems: List[str] = []
            docs_to_brat([_portable(doc, name)], self.partial, self.spans_key, problems=problems)
            for problem in problems:  # e.g. a label brat cannot hold: that entity is left out
                self._write_problem(item, problem)

    def _brat_name(self, item: Item) -> str:
        """The item's id as a brat document name, unless unsafe or taken: then doc{position}."""
        name = str(item.id)
        parts = Path(name).parts
        if not name or Path(name).is_absolute() or ".." in parts or name in self._brat_names:
            name = f"doc{item.position:06d}"
        self._brat_names.add(name)
        return name

    def checkpoint(self, inputs_done: int) -> None:
        """Make what is written so far durable, and record how far the input is done."""
        if self.kind in ("jsonl", "stdout"):
            self._out.flush()
        if self._errors_file is not None:
            self._errors_file.flush()
        if self.progress is None:
            return
        if self.kind == "spacy":
            self._docbin.to_disk(self.partial)
        state = {
            "inputs": inputs_done,
            "output_bytes": self.partial.stat().st_size if self.kind == "jsonl" else 0,
            "errors_bytes": self._errors_file.tell() if self._errors_file is not None else 0,
            "read": self.summary.read,
            "written": self.summary.written,
            "skipped": self.summary.skipped,
            "entities": dict(self.summary.entities),
        }
        temporary = _sibling(self.progress, ".tmp")
        temporary.write_text(json.dumps(state), encoding="utf8")
        os.replace(temporary, self.progress)

    def finish(self, inputs_done: int) -> None:
        """Rename the partial output and errors to their own names: the run is complete."""
        self.checkpoint(inputs_done)
        if self.kind == "jsonl":
            self._out.close()
        if self._errors_file is not None:
            self._errors_file.close()
            os.replace(self._errors_partial, self.errors)
        if self.output is not None:
            if self.kind == "brat" and self.output.exists():
                self.output.rmdir()  # an empty directory given as the output
            os.replace(self.partial, self.output)
            self.progress.unlink()


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _portable(doc: Doc, name: str) -> Doc:
    """The doc as written to a DocBin or brat: named, without the transformer's output
    (megabytes per doc in a DocBin)."""
    if doc.has_extension("trf_data"):
        doc._.trf_data = None
    doc.user_data[NAME_KEY] = name
    return doc


def annotate(
    model: Union[str, Path, Language],
    input_path: Union[str, Path],
    output: Union[str, Path],
    *,
    input_format: Optional[str] = None,
    text_key: str = "text",
    id_key: str = "id",
    doc_per_file: bool = False,
    batch_size: int = 64,
    n_process: int = 1,
    gpu_id: int = -1,
    threshold: Optional[float] = None,
    sentencizer: bool = False,
    limit: int = 0,
    strict: bool = False,
    resume: bool = False,
    errors: Optional[Union[str, Path]] = None,
    max_length: Optional[int] = None,
    progress: bool = True,
    on_problem: Optional[Callable[[Item], None]] = None,
) -> Summary:
    """Annotate ``input_path`` with ``model`` into ``output`` (the ``annotate`` command's work).

    Returns the summary; raises ``AnnotationError`` when the run cannot start, or, with
    ``strict``, at the first input that is not a document (the partial output stays, so the run
    can be continued with ``resume`` once the input is fixed).
    """
    input_format = input_format_of(input_path, doc_per_file, input_format)
    run = AnnotationRun(output, errors, resume=resume)  # fails fast on a finished or unfinished output
    nlp = load_pipeline(model, threshold=threshold, sentencizer=sentencizer, gpu_id=gpu_id, max_length=max_length)
    spans_key = run.spans_key = spans_key_of(nlp)
    total = count_inputs(input_path, input_format, doc_per_file)
    if limit:
        total = limit if total is None else min(total, limit)
    items = read_inputs(input_path, input_format, text_key=text_key, id_key=id_key, doc_per_file=doc_per_file, vocab=nlp.vocab)
    items = (item for item in items if item.position >= run.skip and (not limit or item.position < limit))
    results = annotate_items(nlp, items, spans_key=spans_key, batch_size=batch_size, n_process=n_process)
    return write_in_order(run, results, total=total, progress=progress, strict=strict, on_problem=on_problem)


def write_in_order(
    run: AnnotationRun,
    results: Iterable[Tuple[Item, Optional[Dict[str, Any]], Optional[Doc]]],
    *,
    total: Optional[int],
    progress: bool,
    strict: bool,
    on_problem: Optional[Callable[[Item], None]] = None,
) -> Summary:
    """Write (item, record, doc) results as they come, in input order, with a progress bar;
    finish the run (rename its files) and return its summary."""
    from tqdm import tqdm

    bar = tqdm(total=total, initial=run.skip, unit="doc", file=sys.stderr, disable=not progress, dynamic_ncols=True)
    start, done = time.monotonic(), run.skip
    try:
        for item, record, doc in results:
            if record is None:
                if on_problem is not None:
                    on_problem(item)
                if strict:
                    run.checkpoint(item.position)
                    raise AnnotationError(f"{item.source}: {item.problem}")
            run.add(item, record, doc)
            done = item.position + 1
            bar.update(1)
    finally:
        bar.close()
    run.summary.seconds += time.monotonic() - start
    run.finish(done)
    return run.summary
