"""Annotation outputs: one writer per output kind, and a run's files written safely.

A ``Writer`` writes records of one kind: ``JsonlWriter`` (``.jsonl``), ``DocBinWriter``
(``.spacy``), ``BratWriter`` (a directory of ``.txt``/``.ann`` pairs), ``BioCOutput`` (a BioC XML
or JSON collection), ``LabelStudioOutput`` (Label Studio tasks with the entities as predictions)
and ``StdoutWriter`` (JSON lines on standard output). ``AnnotationRun`` owns what every kind shares, written once:
the output goes under a temporary name (``OUTPUT.partial``) with the skipped inputs in an
errors file, a checkpoint (``OUTPUT.partial.progress``) records how far the input is done and
how long each file was then, ``resume`` cuts the files back to the checkpoint and skips that
many inputs, and the files get their own names only when the run completes.
``write_in_order`` drives a run with a progress bar.
"""
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Dict, Iterable, List, Optional, Tuple, Union

from spacy.tokens import Doc, DocBin

from ..files import move_into_place, write_atomically
from ..formats import NAME_KEY, docs_to_brat
from ..formats.bioc import BioCWriter, bioc_kind
from ..formats.label_studio import LABEL_STUDIO_KEY, LabelStudioWriter
from .inputs import Item

Result = Tuple[Item, Optional[Dict[str, Any]], Optional[Doc]]  # a record and doc, or None for a problem


class AnnotationError(Exception):
    """A problem that stops the run (exit code 1): bad output, --strict, a finished output."""


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


# ---------------------------------------------------------------- files that resume


class ResumableFile:
    """An append-only file that a resumed run cuts back to its size at the last checkpoint, opened
    at its first line or checkpoint (a run that fails before either, loading its pipeline, leaves none)."""

    def __init__(self, path: Path, size_at_checkpoint: Optional[int]):
        self.path, self._size_at_checkpoint = path, size_at_checkpoint
        self._file: Optional[BinaryIO] = None

    def _opened(self) -> BinaryIO:
        if self._file is None:
            self._file = open(self.path, "wb" if self._size_at_checkpoint is None else "ab")
            if self._size_at_checkpoint is not None:
                self._file.truncate(self._size_at_checkpoint)
                self._file.seek(0, os.SEEK_END)  # else tell() says the size before the cut
        return self._file

    def write_line(self, value: Dict[str, Any]) -> None:
        self._opened().write((json.dumps(value, ensure_ascii=False, default=str) + "\n").encode("utf8"))

    def flush(self) -> int:
        """Make what is written durable; its size, for the checkpoint."""
        self._opened().flush()
        return self._opened().tell()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


# ---------------------------------------------------------------- writers, one per output kind


class Writer:
    """Writes a run's records (``write``); ``flush`` makes them durable and returns the byte size
    a resumed run cuts the output back to (0 where the writer keeps no such size)."""

    kind = ""
    checkpoint_seconds = 1.0

    def __init__(self, partial: Optional[Path], spans_key: str, state: Optional[Dict[str, Any]]):
        self.partial, self.spans_key = partial, spans_key

    def write(self, item: Item, record: Dict[str, Any], doc: Doc) -> List[str]:
        """Write one record; the problems of entities that could not be written (left out)."""
        raise NotImplementedError

    def flush(self) -> int:
        return 0

    def state(self) -> Dict[str, Any]:
        """What a resumed run's writer needs besides the byte size (JSON; saved at checkpoints)."""
        return {}

    def close(self) -> None:
        self.flush()


class JsonlWriter(Writer):
    kind = "jsonl"

    def __init__(self, partial, spans_key, state):
        super().__init__(partial, spans_key, state)
        self._file = ResumableFile(partial, None if state is None else state["output_bytes"])

    def write(self, item, record, doc):
        self._file.write_line(record)
        return []

    def flush(self) -> int:
        return self._file.flush()

    def close(self) -> None:
        self._file.close()


class StdoutWriter(Writer):
    kind = "stdout"

    def write(self, item, record, doc):
        sys.stdout.buffer.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf8"))
        return []

    def flush(self) -> int:
        sys.stdout.buffer.flush()
        return 0


class DocBinWriter(Writer):
    """The annotated Docs in a DocBin, named by their record's id (rewritten whole at a checkpoint)."""

    kind = "spacy"
    checkpoint_seconds = 30.0

    def __init__(self, partial, spans_key, state):
        super().__init__(partial, spans_key, state)
        self._docbin = DocBin(store_user_data=True)
        if state is not None:
            self._docbin.from_disk(partial)

    def write(self, item, record, doc):
        self._docbin.add(_portable(doc, str(record["id"])))
        return []

    def flush(self) -> int:
        self._docbin.to_disk(self.partial)
        return 0


class BratWriter(Writer):
    """A directory of brat pairs, each named by its record's id when that is a safe, new name."""

    kind = "brat"

    def __init__(self, partial, spans_key, state):
        super().__init__(partial, spans_key, state)
        partial.mkdir(parents=True, exist_ok=True)
        self._names = {p.relative_to(partial).as_posix()[: -len(".ann")] for p in partial.rglob("*.ann")}

    def write(self, item, record, doc):
        problems: List[str] = []  # e.g. a label brat cannot hold: that entity is left out
        docs_to_brat([_portable(doc, self._name(item))], self.partial, self.spans_key, problems=problems)
        return problems

    def _name(self, item: Item) -> str:
        """The item's id as a brat document name, unless unsafe or taken: then doc{position}."""
        name = str(item.id)
        if not name or Path(name).is_absolute() or ".." in Path(name).parts or name in self._names:
            name = f"doc{item.position:06d}"
        self._names.add(name)
        return name


class _StreamedOutput(Writer):
    """A corpus format's streaming writer (``formats``): one document at a time, resumed from the
    byte size and state of the last checkpoint."""

    def __init__(self, partial, spans_key, state):
        super().__init__(partial, spans_key, state)
        resume = None if state is None else (state["output_bytes"], state.get("writer") or {})
        self._writer = self._open(partial, spans_key, resume)

    def _open(self, partial: Path, spans_key: str, resume):
        raise NotImplementedError

    def write(self, item, record, doc):
        self._writer.write(_portable(doc, str(record["id"])), item.position)
        return []

    def flush(self) -> int:
        return self._writer.flush()

    def state(self) -> Dict[str, Any]:
        return self._writer.state()

    def close(self) -> None:
        self._writer.close()


class BioCOutput(_StreamedOutput):
    """A BioC collection (XML or JSON by the output's name): one document per input, or the
    passages and document ids a DocBin read from BioC came with."""

    kind = "bioc"

    def _open(self, partial, spans_key, resume):
        return BioCWriter(partial, spans_key, kind=bioc_kind(partial.name[: -len(".partial")]), resume=resume)


class LabelStudioOutput(_StreamedOutput):
    """Label Studio tasks (a JSON array) whose predictions are the entities, to correct; a task's
    data holds the text and, for an input that was not a Label Studio task, its id, source and
    metadata (as a record has them)."""

    kind = "label-studio"

    def __init__(self, partial, spans_key, state, model_version: str = "spacy-w2ner"):
        self.model_version = model_version
        super().__init__(partial, spans_key, state)

    def _open(self, partial, spans_key, resume):
        return LabelStudioWriter(partial, spans_key, self.model_version, resume=resume)

    def write(self, item, record, doc):
        if LABEL_STUDIO_KEY not in doc.user_data:  # not read from Label Studio: the input's id, source and metadata go with the text
            doc.user_data[LABEL_STUDIO_KEY] = {"data": {key: record[key] for key in ("id", "source", "meta") if record[key] not in (None, {})}}
        return super().write(item, record, doc)


WRITERS = {writer.kind: writer for writer in (JsonlWriter, StdoutWriter, DocBinWriter, BratWriter, BioCOutput, LabelStudioOutput)}
DOC_KINDS = ("spacy", "brat", "bioc", "label-studio")  # the writers that need the annotated Doc
OUTPUT_FORMATS = ("jsonl", "spacy", "brat", "bioc", "label-studio")


def output_kind(output: Union[str, Path], given: Optional[str] = None) -> str:
    """jsonl, spacy, brat (a directory), bioc, label-studio or stdout: ``given``, else from the
    output's name (bioc and label-studio are asked for by name)."""
    name = str(output)
    if given is not None:
        return _checked_kind(name, given)
    if name == "-":
        return "stdout"
    if name.endswith(".jsonl"):
        return "jsonl"
    if name.endswith(".spacy"):
        return "spacy"
    if "." not in Path(name).name or Path(name).is_dir():
        return "brat"
    raise AnnotationError(
        f"{output}: write to a .jsonl or .spacy file, a directory (brat), '-' (standard output), or give "
        "--output-format bioc (a .xml or .json file) or label-studio (a .json file)"
    )


def _checked_kind(name: str, given: str) -> str:
    if given not in OUTPUT_FORMATS:
        raise AnnotationError(f"unknown output format {given!r}; choose from {', '.join(OUTPUT_FORMATS)}")
    suffixes = {"jsonl": (".jsonl",), "spacy": (".spacy",), "bioc": (".xml", ".json"), "label-studio": (".json",)}
    if name == "-" and given != "jsonl":
        raise AnnotationError(f"--output-format {given} writes a file: give its name instead of '-'")
    if given in suffixes and name != "-" and not name.endswith(suffixes[given]):
        raise AnnotationError(f"{name}: --output-format {given} writes a {' or '.join(suffixes[given])} file")
    return "stdout" if name == "-" else given


def model_version(nlp) -> str:
    """The pipeline as Label Studio predictions name it: its language, name and version."""
    return f"{nlp.meta.get('lang', nlp.lang)}_{nlp.meta.get('name', 'pipeline')}-{nlp.meta.get('version', '0.0.0')}"


def _portable(doc: Doc, name: str) -> Doc:
    """The doc as written to a DocBin or brat: named, without the transformer's output
    (megabytes per doc in a DocBin)."""
    if doc.has_extension("trf_data"):
        doc._.trf_data = None
    doc.user_data[NAME_KEY] = name
    return doc


# ---------------------------------------------------------------- the run


class AnnotationRun:
    """A run's output and errors, under temporary names with checkpoints, renamed at the end.

    Nothing is left under the output's own name until the run completes. ``skip`` is how many
    inputs a resumed run has done already.
    """

    def __init__(
        self,
        output: Union[str, Path],
        errors: Optional[Union[str, Path]],
        *,
        resume: bool = False,
        spans_key: str = "w2ner",
        checkpoint_seconds: Optional[float] = None,
        output_format: Optional[str] = None,
    ):
        self.kind = output_kind(output, output_format)
        self.model_version = "spacy-w2ner"  # of Label Studio predictions: the engines set the pipeline's
        self.spans_key = spans_key
        self.output = None if self.kind == "stdout" else Path(output)
        self.errors = Path(errors) if errors else (None if self.output is None else _sibling(self.output, ".errors.jsonl"))
        for path in (self.output, self.errors):
            if path is not None and not path.absolute().parent.is_dir():
                raise AnnotationError(f"{path}: {path.absolute().parent} is not a directory (nothing was written)")
        if self.output is not None and self.output.exists() and (self.kind != "brat" or any(self.output.iterdir())):
            raise AnnotationError(f"{self.output} exists: remove it or write elsewhere (a finished run is not redone)")
        self._checkpoint_seconds = checkpoint_seconds
        self._last_checkpoint = 0.0
        self._state = self._checkpointed_state(resume)
        state = self._state
        self.skip = state["inputs"] if state else 0
        self.summary = Summary(state["read"], state["written"], state["skipped"], Counter(state["entities"])) if state else Summary()
        self._writer: Optional[Writer] = None  # opened with the first result (the spans key is known then)
        self._errors_file = None
        if self.errors is not None:
            self._errors_file = ResumableFile(_sibling(self.errors, ".partial"), state["errors_bytes"] if state else None)

    @property
    def partial(self) -> Optional[Path]:
        return None if self.output is None else _sibling(self.output, ".partial")

    @property
    def progress(self) -> Optional[Path]:
        return None if self.output is None else _sibling(self.output, ".partial.progress")

    def _checkpointed_state(self, resume: bool) -> Optional[Dict[str, Any]]:
        if self.progress is None or not self.progress.exists():
            return None
        if not resume:
            raise AnnotationError(
                f"{self.partial} is an unfinished run: continue it with --resume, or delete "
                f"{self.partial} and {self.progress} to start over"
            )
        return json.loads(self.progress.read_text(encoding="utf8"))

    @property
    def needs_docs(self) -> bool:
        """Whether the writer needs the annotated Docs (not only the records)."""
        return self.kind in DOC_KINDS

    @property
    def writer(self) -> Writer:
        if self._writer is None:
            extra = {"model_version": self.model_version} if self.kind == "label-studio" else {}
            self._writer = WRITERS[self.kind](self.partial, self.spans_key, self._state, **extra)
        return self._writer

    def add(self, item: Item, record: Optional[Dict[str, Any]], doc: Optional[Doc]) -> None:
        """Write one input document's record, or its problem, in input order."""
        self.summary.read += 1
        if record is None:
            self.summary.skipped += 1
            self._write_problem(item, item.problem)
        else:
            self.summary.written += 1
            self.summary.entities.update(entity["label"] for entity in record["entities"])
            for problem in self.writer.write(item, record, doc):
                self._write_problem(item, problem)
        now = time.monotonic()
        every = self._checkpoint_seconds if self._checkpoint_seconds is not None else self.writer.checkpoint_seconds
        if now - self._last_checkpoint >= every:
            self.checkpoint(item.position + 1)
            self._last_checkpoint = now

    def _write_problem(self, item: Item, problem: str) -> None:
        if self._errors_file is not None:
            self._errors_file.write_line({"source": item.source, "id": item.id, "problem": problem})

    def checkpoint(self, inputs_done: int) -> None:
        """Make what is written so far durable, and record how far the input is done."""
        output_bytes = self.writer.flush()
        errors_bytes = self._errors_file.flush() if self._errors_file is not None else 0
        if self.progress is None:
            return
        state = {
            "inputs": inputs_done,
            "output_bytes": output_bytes,
            "errors_bytes": errors_bytes,
            "read": self.summary.read,
            "written": self.summary.written,
            "skipped": self.summary.skipped,
            "entities": dict(self.summary.entities),
            "writer": self.writer.state(),
        }
        write_atomically(self.progress, json.dumps(state))

    def finish(self, inputs_done: int) -> None:
        """Rename the partial output and errors to their own names: the run is complete."""
        self.checkpoint(inputs_done)
        self.writer.close()
        if self._errors_file is not None:
            self._errors_file.close()
            if self._errors_file.path.stat().st_size:
                move_into_place(self._errors_file.path, self.errors)
            else:  # nothing was skipped: no errors file (nor one an earlier run left there)
                self._errors_file.path.unlink()
                self.errors.unlink(missing_ok=True)
        if self.output is not None:
            move_into_place(self.partial, self.output)  # brat: an empty directory given as the output
            self.progress.unlink()


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def write_in_order(
    run: AnnotationRun,
    results: Iterable[Result],
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
