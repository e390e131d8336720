"""Annotation outputs: the record of a document, and a run's files written safely.

``RECORD_SCHEMA`` is the one definition of a record (see ``annotate.py``); ``AnnotationRun``
writes records (``.jsonl``, ``.spacy``, a brat directory, or standard output) and problems (an
errors file) under temporary names with checkpoints, renames them when the run completes, and
continues an interrupted run (``resume``); ``write_in_order`` drives it with a progress bar.
"""
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from spacy.tokens import Doc, DocBin

from .annotate_input import Item
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
