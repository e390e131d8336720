"""Annotate documents at any size: raw inputs -> entities with character offsets.

The data flow, each step a small piece used by the ``annotate`` command and by the Ray Data
path (``annotate_ray.py``), in three modules: inputs (``annotate_input.py``), the pipeline and
documents -> records (here), records and the run's files (``annotate_output.py``):

1. ``read_inputs``: a ``.txt`` file (one document per line), a directory of ``.txt`` files (one
   document each), a ``.jsonl`` file (``{"text": ..., other keys: metadata}``), a ``.spacy``
   DocBin or standard input, ``.gz`` read transparently, as a stream of ``Item``s in input
   order. An input that cannot be a document (not UTF-8, not JSON, no text, empty) is an
   ``Item`` with a ``problem``, so it is reported in order and never silently dropped.
2. ``load_pipeline``: the trained pipeline, with ``threshold`` set on its w2ner components and
   sentence boundaries added before w2ner on request.
3. ``annotate_items``: ``nlp.pipe`` over the items' texts (in batches, on ``n_process``
   processes), each document turned into a record (``annotate_output.RECORD_SCHEMA``).
4. ``AnnotationRun``: writes the records (``.jsonl``, ``.spacy``, a brat directory, or standard
   output) and the problems (an errors file) under temporary names with a checkpoint, renames
   them when the run completes, and continues an interrupted run (``resume``) after the last
   checkpointed document.

The record of one document (``annotate_output.RECORD_SCHEMA``)::

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
import ctypes
import ctypes.util
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc

from .annotate_input import INPUT_FORMATS, Item, count_inputs, input_format_of, read_inputs
from .annotate_output import (
    RECORD_SCHEMA,
    AnnotationError,
    AnnotationRun,
    Summary,
    entity_record,
    make_record,
    write_in_order,
)

__all__ = [
    "INPUT_FORMATS", "RECORD_SCHEMA", "AnnotationError", "AnnotationRun", "Item", "Summary", "annotate",
    "annotate_items", "count_inputs", "entity_record", "input_format_of", "load_pipeline", "make_record",
    "read_inputs", "sets_sentences", "spans_key_of", "write_in_order",
]
SENTENCE_SETTERS = ("sentencizer", "senter", "parser")


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
    return bool(sentence_setters(nlp))


def sentence_setters(nlp: Language) -> List[str]:
    """The names of the pipeline's components that set sentence boundaries."""
    names = []
    for name in nlp.pipe_names:
        meta = nlp.get_pipe_meta(name)
        if meta.factory in SENTENCE_SETTERS or "token.is_sent_start" in meta.assigns or "doc.sents" in meta.assigns:
            names.append(name)
    return names


def spans_key_of(nlp: Language) -> str:
    """The doc.spans key of the pipeline's (first) w2ner component."""
    for name, pipe in nlp.pipeline:
        if nlp.get_pipe_meta(name).factory == "w2ner":
            return pipe.spans_key
    raise ValueError("the pipeline has no w2ner component")


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
    docs = nlp.pipe(inputs, as_tuples=True, batch_size=batch_size, n_process=n_process)
    for count, (doc, item) in enumerate(docs, 1):
        if count % batch_size == 0:
            release_freed_memory()
        if item.problem is None and doc.text != item.text:
            item.problem = "the pipeline's tokenizer changed the text, so character offsets would not match it"
        if item.problem is not None:
            yield item, None, None
        else:
            yield item, make_record(item, doc, spans_key), doc


def release_freed_memory() -> None:
    """Give the memory freed by the last batch back to the system (glibc's ``malloc_trim``).

    Grid batches of ever new sizes leave glibc's heap holding freed memory it keeps for
    reuse: annotating repeated CADEC sentences, the bytes in use stayed at 320-370 MB while
    the heap, and with it the resident memory, grew to 1.8 GB. Trimming after each batch keeps
    the resident memory near what is in use, at no measurable cost. Elsewhere than on glibc,
    nothing happens.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@lru_cache(maxsize=1)
def _malloc_trim() -> Optional[Callable[[int], int]]:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _within_max_length(item: Item, nlp: Language) -> Item:
    if item.problem is None and len(item.text) > nlp.max_length:
        item.problem = (
            f"{len(item.text)} characters, more than nlp.max_length={nlp.max_length}; "
            "raise it with --max-length (w2ner's memory is bounded on long documents)"
        )
    return item


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
