"""Looking at a pipeline's entities: show (entities of texts, drawn with --html) and visualize
(an error page against gold entities)."""
from pathlib import Path
from typing import List, Optional

import typer

from ._util import _check_spans_key, _fail, _output_file, _read_docbin, app

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

    from ..formats import entity_texts

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
        from ..visualize import show_page

        _output_file(html)
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(show_page(nlp, docs, spans_key, grid=grid), encoding="utf8")
        typer.echo(f"-> {html}")


@app.command()
def visualize(
    model: str = typer.Argument(..., help="Pipeline name or path"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="A .spacy DocBin with gold entities"),
    output: Path = typer.Argument(..., help="The HTML page to write"),
    limit: int = typer.Option(0, min=0, help="Only the first N documents (0: all)"),
    errors_only: bool = typer.Option(False, help="Only documents with a missed or spurious entity"),
    spans_key: str = typer.Option("w2ner", help="doc.spans key of the gold entities"),
):
    """Write an error page: each document's gold and predicted entities (correct, missed and
    spurious told apart), with P/R/F per label, discontinuous and overlapping F on top."""
    from ..visualize import predicted_error_page

    try:
        import spacy

        nlp = spacy.load(model)
    except (OSError, ValueError) as err:
        _fail(f"cannot load the pipeline {model!r}: {err}")
    _output_file(output)
    gold = _read_docbin(data, nlp.lang)
    gold = gold[:limit] if limit else gold
    if not gold:
        _fail(f"{data} holds no documents")
    _check_spans_key(gold, spans_key, str(data))
    page, scores = predicted_error_page(nlp, gold, spans_key, errors_only=errors_only)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(page, encoding="utf8")
    typer.echo(f"{data} -> {output}: {len(gold)} documents, F {100 * scores[f'{spans_key}_f']:.2f}")

