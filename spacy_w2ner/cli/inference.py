"""Using a trained pipeline on documents: annotate (files at any scale, local or on Ray), schema
(the record's JSON Schema) and serve (an HTTP service)."""
import json
import sys
from pathlib import Path

import typer

from ..annotate.options import AnnotateOptions
from ..serve.options import ServeOptions
from ._util import _fail, app, with_options

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
    from ..annotate import AnnotationError, annotate as run_annotate

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
    from ..annotate import RECORD_SCHEMA

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
    from ..extras import require_ray_serve, require_serving

    try:
        require_serving()
        if options.engine == "ray":
            require_ray_serve()
    except ImportError as err:
        _fail(str(err))
    from ..serve import serve as run_server

    if options.wide_open:
        typer.echo(f"warning: listening on {options.host} without an API key: anyone who reaches it can use it "
                   "(--api-key or $SPACY_W2NER_API_KEY)", err=True)
    typer.echo(f"loading {model} ...", err=True)
    try:
        run_server(model, options)
    except (OSError, ValueError) as err:
        _fail(f"cannot serve {model!r}: {err}")

