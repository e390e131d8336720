"""The model in the annotation loop: label-studio-backend (a Label Studio ML backend)."""
import logging

import typer

from ..label_studio_backend.options import API_KEY_ENV, BackendOptions
from ._util import _fail, app, with_options


@app.command("label-studio-backend")
@with_options(BackendOptions)
def label_studio_backend(
    model: str = typer.Argument(..., help="Pipeline name or path: the model that pre-annotates first"),
    options: BackendOptions = None,
):
    """A Label Studio ML backend: pre-annotates tasks (discontinuous entities as regions joined by
    'fragment' relations), scores each task for sorting (the most doubtful first), and retrains
    from the annotators' corrections.

    Connect it in Label Studio (project Settings > Model > Connect Model, URL
    http://127.0.0.1:9090). Every --retrain-every new, changed or deleted annotations (or on Start
    Training) it trains from the serving model in the background (python -m spacy_w2ner train
    --resume, in --runs), and serves the new model only when its F on the held-out dev share is not
    lower. Stopped (Ctrl-C) or killed while training, it resumes the run when started again with
    the same --runs. Label Studio's API key, where --label-studio-url is given, comes from
    $LABEL_STUDIO_API_KEY only. Needs the [label-studio] extra.
    """
    try:
        options.check()
    except ValueError as err:
        raise typer.BadParameter(str(err))
    from ..extras import require_label_studio_backend

    try:
        require_label_studio_backend()
    except ImportError as err:
        _fail(str(err))
    from ..label_studio_backend import serve_backend

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if options.wide_open:
        typer.echo(f"warning: listening on {options.host}: anyone who reaches it can read predictions and post webhooks "
                   "(Label Studio's ML backend protocol has no key)", err=True)  # fmt: skip
    if options.label_studio_url and not options.api_key:
        typer.echo(f"warning: --label-studio-url without ${API_KEY_ENV}: runs learn from the webhooks' annotations", err=True)
    typer.echo(f"loading {model} ...", err=True)
    try:
        serve_backend(model, options)
    except (OSError, ValueError) as err:
        _fail(f"cannot serve {model!r}: {err}")
