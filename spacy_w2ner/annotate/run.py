"""The local engine: the pipeline, documents -> records, and a run from input to output.

``load_pipeline`` loads the trained pipeline with the ``PipelineOptions``; ``annotate_items``
turns ``Item``s into (item, record, doc) in input order through ``nlp.pipe``; ``prepare_run``
is what every engine does before the first document (check the options, tell the input's
format, open the run, count the input); ``annotate`` is the ``annotate`` command's work, on
this machine or, with ``engine="ray"``, on Ray (``ray.py``).
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc

from ..component import first_w2ner, w2ner_components
from .inputs import Item, count_inputs, input_format_of, read_inputs
from .options import AnnotateOptions, PipelineOptions
from .outputs import AnnotationRun, Summary, write_in_order
from .records import make_record

SENTENCE_SETTERS = ("sentencizer", "senter", "parser")
PathLike = Union[str, Path]


def load_pipeline(model: Union[PathLike, Language], options: Optional[PipelineOptions] = None, **overrides) -> Language:
    """The pipeline to annotate with (a name, a path or a loaded ``Language``).

    ``threshold`` is set on every w2ner component; ``sentencizer`` adds spaCy's sentencizer
    before the first w2ner component when no component sets sentence boundaries;
    ``max_length`` raises ``nlp.max_length`` (w2ner's memory does not grow with a document's
    length; other components' may). Options come as ``PipelineOptions`` or keywords.
    """
    import spacy

    options = options or PipelineOptions(**overrides)
    options.check()
    if options.gpu_id >= 0:
        spacy.require_gpu(options.gpu_id)
    nlp = model if isinstance(model, Language) else spacy.load(model)
    first_name, _ = first_w2ner(nlp)
    if options.threshold is not None:
        for _, pipe in w2ner_components(nlp):
            pipe.threshold = options.threshold
    if options.sentencizer and not sets_sentences(nlp):
        nlp.add_pipe("sentencizer", before=first_name)
    if options.max_length is not None:
        nlp.max_length = options.max_length
    return nlp


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
    return first_w2ner(nlp)[1].spans_key


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
    run = AnnotationRun(output, options.errors, resume=options.resume)
    total = count_inputs(input_path, input_format, options.doc_per_file)
    if options.limit:
        total = options.limit if total is None else min(total, options.limit)
    return PreparedRun(run, input_format, total)


def annotate(
    model: Union[PathLike, Language],
    input_path: PathLike,
    output: PathLike,
    options: Optional[AnnotateOptions] = None,
    *,
    on_problem: Optional[Callable[[Item], None]] = None,
    **overrides,
) -> Summary:
    """Annotate ``input_path`` with ``model`` into ``output`` (the ``annotate`` command's work).

    Options come as ``AnnotateOptions`` and/or keywords (``annotate(model, inp, out,
    batch_size=32)``). Returns the summary; raises ``AnnotationError`` when the run cannot
    start, or, with ``strict``, at the first input that is not a document (the partial output
    stays, so the run can be continued with ``resume`` once the input is fixed).
    """
    options = AnnotateOptions.of(options, **overrides)
    if options.engine == "ray":
        from .ray import annotate_with_ray

        return annotate_with_ray(model, input_path, output, options, on_problem=on_problem)
    prepared = prepare_run(input_path, output, options)
    nlp = load_pipeline(model, options.pipeline())
    spans_key = prepared.run.spans_key = spans_key_of(nlp)
    stop = options.limit or None
    items = read_inputs(input_path, prepared.input_format, vocab=nlp.vocab, start=prepared.run.skip, stop=stop, **options.reader())
    results = annotate_items(nlp, items, spans_key=spans_key, batch_size=options.batch_size, n_process=options.n_process)
    return write_in_order(
        prepared.run, results, total=prepared.total, progress=options.progress, strict=options.strict, on_problem=on_problem
    )
