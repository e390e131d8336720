"""Corpus commands: convert (a format -> .spacy), export (.spacy -> a format), label-studio-config,
split (dev from train) and filter (contiguous entities only)."""
import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional

import typer

from .. import formats
from ..common import option
from ..formats import EXPORT_FORMATS, FORMATS
from ._util import _blank_nlp, _check_keys, _fail, _output_dir, _output_file, _progress, _read_docbin, app, with_options

DOCUMENTS = "brat, bioc, pubtator, label-studio"


def _summary(sentence_docs: bool = False) -> "formats.CorpusSummary":
    """The counts a command prints, with the entities the grid cannot hold (THW conflicts)."""
    from ..grid.codec import thw_conflicts

    return formats.CorpusSummary(sentence_docs=sentence_docs, conflicts=thw_conflicts)


def _with_ents(docs: Iterable, spans_key: str) -> Iterator:
    """Pass docs through, copying their entities to doc.ents (FormatError when one cannot go)."""
    from ..entities import copy_entities_to_ents

    for doc in docs:
        try:
            copy_entities_to_ents(doc, spans_key)
        except ValueError as err:
            raise formats.FormatError(f"{err} (convert without --ents for nested or discontinuous corpora)")
        yield doc


@dataclass
class FormatOptions:
    """The options of the input formats (``formats.FORMATS``); None: the format's default. A format
    refuses an option it does not take."""

    tag_column: Optional[int] = option(None, "conll: index of the tag column (default: the last)")
    scheme: Optional[str] = option(None, "conll: tag scheme, BIO, IOB1 or BIOES (also BILOU); default BIO")
    tokenizer: Optional[str] = option(None, f"{DOCUMENTS}: 'spacy' (spacy.blank(lang)'s tokenizer, the default) or 'whitespace'")
    sentencizer: Optional[bool] = option(
        None, f"{DOCUMENTS}: sentence boundaries by spaCy's sentencizer where the file states none (BioC's <sentence>s), never inside an entity (default: on; off: only the file's)"
    )
    split_tokens: Optional[bool] = option(
        None, f"{DOCUMENTS}: split a token where an annotation starts or ends inside it, so it becomes an entity (default: on; off: listed, not converted)"
    )
    check_text: Optional[bool] = option(None, "brat: check each annotation's text against its offsets (default: on)")
    type_key: Optional[str] = option(None, "bioc: the infon that holds an annotation's type (default: type)")
    doc_per: Optional[str] = option(None, "bioc: one Doc per 'document' (the default) or per 'passage'")
    use: Optional[str] = option(None, "label-studio: read each task's 'annotations' (the default) or 'predictions'")
    annotations: Optional[str] = option(
        None, "label-studio: of a task's annotations, the 'latest' that was not cancelled (the default), the 'first', or 'all' (a Doc each)"
    )
    text_key: Optional[str] = option(None, "label-studio: the key of a task's data that holds the text (default: text, else the data's only string)")
    strict: Optional[bool] = option(
        None, f"{DOCUMENTS}: stop at the first annotation that cannot be an entity, or line the reader does not know (default: list and count them)"
    )

    def given(self) -> Dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


@app.command()
@with_options(FormatOptions)
def convert(
    input_format: str = typer.Argument(..., help=f"Input format: {', '.join(FORMATS)}"),
    input_path: Path = typer.Argument(
        ..., exists=True, help="Input file (brat: a directory of .txt/.ann pairs, or one .txt; bioc: a .xml or .json file, or a directory of them)"
    ),
    output_dir: Path = typer.Argument(..., help="Directory for the .spacy file"),
    lang: str = typer.Option("en", help="Language of the blank vocab (brat: and of its tokenizer)"),
    spans_key: str = typer.Option("w2ner", help="doc.spans key for the entities"),
    name: str = typer.Option("", help="Name of the output file, without .spacy (default: the input's name)"),
    ents: bool = typer.Option(
        False, help="Also write the entities to doc.ents, for spaCy's ner (flat corpora only)"
    ),
    options: FormatOptions = None,
):
    """Convert a corpus to a .spacy DocBin with the doc.spans contract, and print its counts as JSON.

    Malformed input stops the conversion with exit code 1 and a message naming file:line.
    With ``--ents`` a discontinuous or overlapping entity stops it too, naming the doc.
    """
    try:
        fmt = formats.format_named(input_format)
        options = options.given()
        formats.check_format_options(input_format, options)
    except ValueError as err:
        raise typer.BadParameter(str(err))
    if input_path.is_dir() and not fmt.reads_directory:
        readers = " and ".join(name for name, other in FORMATS.items() if other.reads_directory)
        raise typer.BadParameter(f"{input_path} is a directory; only the {readers} formats read a directory")
    nlp = _blank_nlp(lang)
    _output_dir(output_dir)
    try:
        docs = formats.read_corpus(input_format, input_path, nlp, spans_key, **options)
    except ValueError as err:  # bad options (scheme, tag column, tokenizer)
        raise typer.BadParameter(str(err))
    name = name or (input_path.resolve().name if input_path.is_dir() else input_path.stem)
    output_path = output_dir / (name + ".spacy")
    summary = _summary(sentence_docs=fmt.one_doc_per != "document")
    try:
        formats.write_docbin(_progress(_listing_skipped(_with_ents(docs, spans_key) if ents else docs)), output_path, spans_key, summary=summary)
    except formats.FormatError as err:
        _fail(str(err))
    except ImportError as err:  # an optional extra the format needs
        _fail(str(err))
    _report_conversion(input_path, output_path, summary)


def _listing_skipped(docs: Iterable) -> Iterator:
    """Pass docs through, printing each annotation of the source that is not an entity, each
    line or element a reader passed over (and why), and each token split at an annotation's boundary."""
    from ..formats.standoff import UNKNOWN, skipped, split_tokens_named

    for doc in docs:
        name = doc.user_data.get(formats.NAME_KEY, "?")
        if formats.NOT_A_DOCUMENT_KEY in doc.user_data:
            typer.echo(f"warning: {name}: {doc.user_data[formats.NOT_A_DOCUMENT_KEY]}: not converted", err=True)
        for what, kind, why in skipped(doc):  # what: 'annotation ID', or file:line for a line not read
            typer.echo(f"warning: {what if kind == UNKNOWN else f'{name}: {what}'}: {why}", err=True)
        for split in split_tokens_named(doc):
            typer.echo(f"warning: {split}", err=True)
        yield doc


def _report_conversion(input_path: Path, output_path: Path, summary) -> None:
    """Warn about an empty corpus and labels brat cannot write; print the counts as JSON."""
    if summary.documents == 0:
        typer.echo(f"warning: {input_path} holds no documents: {output_path} is empty", err=True)
    spaced = sorted(label for label in summary.per_label if any(c.isspace() for c in label))
    if spaced:
        typer.echo(
            f"warning: labels with whitespace ({', '.join(repr(label) for label in spaced)}): spaCy and "
            "W2NER JSON keep them, brat cannot write them (export brat leaves those entities out)",
            err=True,
        )
    typer.echo(f"{input_path} -> {output_path}")
    typer.echo(json.dumps(summary.as_dict(), ensure_ascii=False))


@app.command()
def export(
    output_format: str = typer.Argument(..., help=f"Output format: {', '.join(EXPORT_FORMATS)}"),
    input_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="A .spacy DocBin"),
    output: Path = typer.Argument(..., help="brat: a directory; bioc: a .xml or .json file; the others: the file"),
    lang: str = typer.Option("en", help="Language of the blank vocab"),
    spans_key: str = typer.Option("w2ner", help="doc.spans key of the entities"),
    discontinuous: Optional[str] = typer.Option(
        None, help="pubtator: write a discontinuous entity as a line per fragment (split), one line from its first to its last character (span), or not (skip)"
    ),
    model_version: Optional[str] = typer.Option(None, help="label-studio: the predictions' model_version (default: spacy-w2ner)"),
):
    """Write the entities of a .spacy DocBin in a corpus format, and print their counts as JSON.

    Nothing is left under OUTPUT's name unless the export completes.
    """
    if output_format not in EXPORT_FORMATS:
        raise typer.BadParameter(f"unknown format {output_format!r}; choose from {', '.join(EXPORT_FORMATS)}")
    fmt = FORMATS[output_format]
    options = {key: value for key, value in {"discontinuous": discontinuous, "model_version": model_version}.items() if value is not None}
    unknown = sorted(set(options) - set(fmt.write_options))
    if unknown:
        raise typer.BadParameter(f"--{unknown[0].replace('_', '-')} does not apply to exporting {output_format}")
    if output_format == "brat":
        _output_dir(output)
    else:
        _output_file(output)
    vocab = _blank_nlp(lang).vocab
    try:
        source = formats.DocBinFile(input_path)
    except formats.FormatError as err:
        _fail(str(err))
    with source:  # read twice, one Doc at a time: counted and checked, then written
        keys: set = set()
        relations: Counter = Counter()  # relations kept with the docs, per format they were read from
        summary = formats.summarize((_noting_keys(doc, keys, relations) for doc in _progress(source.docs(vocab))), spans_key, summary=_summary())
        _check_keys(summary.documents, keys, spans_key, str(input_path))
        if output_format == "pubtator" and summary.discontinuous and "discontinuous" not in options:
            _fail(f"{input_path}: {summary.discontinuous} discontinuous entities, which PubTator cannot hold: "
                  "choose --discontinuous split (a line per fragment), span (one line from the first to the last character) or skip")
        problems = _export(fmt, source.docs(vocab), output, spans_key, options)
    problems += [f"{n} relations read from {name} are not written: only the {name} exporter writes them" for name, n in relations.items() if name != output_format]
    for problem in problems:
        typer.echo(f"warning: {problem}", err=True)
    typer.echo(f"{input_path} -> {output}")
    counts = summary.as_dict()
    if problems:
        counts["not_exported"] = len(problems)
    if options.get("discontinuous") and summary.discontinuous:
        counts["discontinuous_written_as"] = options["discontinuous"]
    typer.echo(json.dumps(counts, ensure_ascii=False))


def _noting_keys(doc, keys: set, relations: Counter):
    keys.update(doc.spans)
    kept = doc.user_data.get(formats.RELATIONS_KEY) or {}
    if kept.get("items"):
        relations[kept["format"]] += len(kept["items"])
    return doc


def _export(fmt, docs: Iterable, output: Path, spans_key: str, options: dict) -> List[str]:
    """Write docs under a temporary name, renamed to ``output`` once complete; the problems met."""
    from ..files import move_into_place, remove_tree

    problems: List[str] = []
    if output.is_dir() and any(output.iterdir()):
        _fail(f"{output} is a directory that is not empty: give a new or an empty one (nothing was written)")
    partial = output.with_name(f"{output.stem}.partial{output.suffix}")  # the suffix tells the kind (bioc)
    remove_tree(partial)  # what a killed export left: never written into this one
    try:
        fmt.write(docs, partial, spans_key, problems=problems, **options)
        move_into_place(partial, output)  # brat: an empty directory given as the output
    except BaseException as err:
        remove_tree(partial)
        if isinstance(err, (ValueError, ImportError, OSError)):
            _fail(str(err))
        raise
    return problems


@app.command("label-studio-config")
def label_studio_config(
    model: str = typer.Argument(..., help="Pipeline name or path"),
):
    """Print a Label Studio labeling config for the pipeline's entity labels: the regions to correct
    its predictions (export label-studio, annotate --output-format label-studio), and the
    'fragment' relation that joins the regions of a discontinuous entity."""
    import spacy

    from ..component import first_w2ner

    try:
        nlp = spacy.load(model)
        component = first_w2ner(nlp)[1]
    except (OSError, ValueError) as err:
        _fail(f"cannot load the pipeline {model!r}: {err}")
    typer.echo(formats.label_studio_config(list(component.labels)), nl=False)


@app.command()
def split(
    input_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="A .spacy DocBin"),
    output_dir: Path = typer.Argument(..., help="Directory for train.spacy and dev.spacy"),
    every: int = typer.Option(10, help="Every N-th doc (the N-th, 2N-th, ...) goes to dev.spacy"),
    lang: str = typer.Option("en", help="Language of the blank vocab"),
    spans_key: str = typer.Option("w2ner", help="doc.spans key of the entities"),
):
    """Split a DocBin into train.spacy and dev.spacy, deterministically (every N-th doc to dev).

    For corpora without a dev split (e.g. GENIA's dev set used for training): model selection
    then uses held-out data, never the test set. Prints both parts' counts as JSON.
    """
    if every < 2:
        raise typer.BadParameter(f"--every must be at least 2, got {every}")
    _output_dir(output_dir)
    docs = _read_docbin(input_path, lang)
    dev = [doc for i, doc in enumerate(docs, start=1) if i % every == 0]
    train = [doc for i, doc in enumerate(docs, start=1) if i % every != 0]
    if not dev:
        typer.echo(f"warning: {input_path} has {len(docs)} documents, fewer than --every {every}: dev.spacy is empty and "
                   f"cannot select a model; split with a smaller --every (at least 2), or convert held-out documents with --name dev", err=True)  # fmt: skip
    for name, part in (("train", train), ("dev", dev)):
        summary = formats.write_docbin(part, output_dir / f"{name}.spacy", spans_key, summary=_summary())
        typer.echo(f"{name}: " + json.dumps(summary.as_dict(), ensure_ascii=False))


@app.command("filter")
def filter_entities(
    input_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="A .spacy DocBin"),
    output_path: Path = typer.Argument(..., help="The .spacy DocBin to write"),
    contiguous_only: bool = typer.Option(False, help="Keep only contiguous entities (for span baselines)"),
    lang: str = typer.Option("en", help="Language of the blank vocab"),
    spans_key: str = typer.Option("w2ner", help="doc.spans key of the entities"),
):
    """Write a copy of a DocBin with only some entities (all docs kept), and say what was removed.

    ``--contiguous-only`` makes the like-for-like corpus for systems that cannot represent
    discontinuous entities, such as spaCy's spancat: the removed entities are counted.
    """
    from ..entities import get_entities, set_entities

    if not contiguous_only:
        raise typer.BadParameter("choose what to keep, e.g. --contiguous-only")
    removed = 0
    _output_file(output_path)
    docs = _read_docbin(input_path, lang)
    for doc in docs:
        entities = get_entities(doc, spans_key)
        kept = [entity for entity in entities if not entity.is_discontinuous]
        removed += len(entities) - len(kept)
        set_entities(doc, [(e.label, e.tokens, e.score) for e in kept], spans_key)
    summary = formats.write_docbin(docs, output_path, spans_key, summary=_summary())
    typer.echo(f"{input_path} -> {output_path}: removed {removed} discontinuous entities")
    typer.echo(json.dumps(summary.as_dict(), ensure_ascii=False))

