"""Command line: ``python -m spacy_w2ner convert|show``."""
import json
from pathlib import Path
from typing import List

import typer

app = typer.Typer(help="spacy-w2ner: unified (flat, nested, discontinuous) NER for spaCy", no_args_is_help=True)

FORMATS = ["w2ner-json"]


@app.command()
def convert(
    input_format: str = typer.Argument(..., help=f"Input format: {', '.join(FORMATS)}"),
    input_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="Input file"),
    output_dir: Path = typer.Argument(..., help="Directory for the .spacy file"),
    lang: str = typer.Option("en", help="Language of the blank vocab"),
    spans_key: str = typer.Option("w2ner", help="doc.spans key for the entities"),
):
    """Convert a corpus file to a .spacy DocBin with the doc.spans contract, and print its counts."""
    import spacy

    from .formats import FormatError, read_w2ner_json, write_docbin

    if input_format not in FORMATS:
        raise typer.BadParameter(f"unknown format {input_format!r}; choose from {FORMATS}")
    nlp = spacy.blank(lang)
    output_path = output_dir / (input_path.stem + ".spacy")
    try:
        summary = write_docbin(read_w2ner_json(input_path, nlp.vocab, spans_key), output_path, spans_key)
    except FormatError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1)
    typer.echo(f"{input_path} -> {output_path}")
    typer.echo(json.dumps(summary.as_dict(), ensure_ascii=False))


@app.command()
def show(
    model: str = typer.Argument(..., help="Pipeline name or path"),
    texts: List[str] = typer.Argument(..., help="Texts to annotate"),
    spans_key: str = typer.Option("w2ner", help="doc.spans key of the entities"),
):
    """Print the entities a pipeline finds, with the fragments of discontinuous ones."""
    import spacy

    from .formats import entity_texts

    nlp = spacy.load(model)
    for doc in nlp.pipe(texts):
        typer.echo(doc.text)
        for line in entity_texts(doc, spans_key) or ["  (no entities)"]:
            typer.echo("  " + line)
