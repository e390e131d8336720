"""The local engine: documents -> records through ``nlp.pipe`` in this process (``--n-process``
for more), and what every engine does before its first document.

``annotate_items`` turns ``Item``s into (item, record, doc) in input order; ``prepare_run``
checks the options, tells the input's format, opens the run and counts the input (the Ray
engine does the same); ``annotate_locally`` is the ``annotate`` command's work on this machine.
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc

from ..common import PathLike, load_pipeline, spans_key_of
from .inputs import Item, count_inputs, input_format_of, read_inputs
from .options import AnnotateOptions
from .outputs import AnnotationRun, Summary, model_version, write_in_order
from .records import make_record


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
            yield item, make_record(item.id, item.source, item.meta, doc, spans_key), doc


def _pipe_input(item: Item, vocab) -> Union[str, Doc]:
    if item.problem is not None:
        return ""  # passes through in order, costs nothing
    if item.doc_bytes is not None:
        return Doc(vocab).from_bytes(item.doc_bytes)
    return item.text


def _within_max_length(item: Item, nlp: Language) -> Item:
    if item.problem is None and len(item.text) > nlp.max_length:
        item.problem = (
            f"{len(item.text)} characters, more than nlp.max_length={nlp.max_length}; "
            "raise it with --max-length (w2ner's memory is bounded on long documents)"
        )
    return item


@dataclass
class PreparedRun:
    """What every engine knows before the first document: the run, the input's format and size."""

    run: AnnotationRun
    input_format: str
    total: Optional[int]  # documents to read, for the progress bar; None for a stream


def prepare_run(input_path: PathLike, output: PathLike, options: AnnotateOptions) -> PreparedRun:
    """Check the options, tell the input's format, open the run (fails fast on a finished or
    unfinished output), count the input."""
    options.check()
    input_format = input_format_of(input_path, options.doc_per_file, options.input_format)
    run = AnnotationRun(output, options.errors, resume=options.resume, output_format=options.output_format)
    total = count_inputs(input_path, input_format, options.doc_per_file)
    if options.limit:
        total = options.limit if total is None else min(total, options.limit)
    return PreparedRun(run, input_format, total)


def annotate_locally(
    model: Union[PathLike, Language],
    input_path: PathLike,
    output: PathLike,
    options: AnnotateOptions,
    *,
    on_problem: Optional[Callable[[Item], None]] = None,
) -> Summary:
    """The ``annotate`` command's work in this process (``dispatch.annotate`` picks the engine)."""
    prepared = prepare_run(input_path, output, options)
    nlp = load_pipeline(model, options.pipeline())
    spans_key = prepared.run.spans_key = spans_key_of(nlp)
    prepared.run.model_version = model_version(nlp)
    stop = options.limit or None
    items = read_inputs(input_path, prepared.input_format, vocab=nlp.vocab, start=prepared.run.skip, stop=stop, **options.reader())
    results = annotate_items(nlp, items, spans_key=spans_key, batch_size=options.batch_size, n_process=options.n_process)
    return write_in_order(
        prepared.run, results, total=prepared.total, progress=options.progress, strict=options.strict, on_problem=on_problem
    )
