"""What the commands share: the Typer app they register on, one-line failures, progress, checks
of paths and span keys, and options made from an options dataclass."""
import functools
import inspect
from pathlib import Path
from typing import Iterable, Iterator, NoReturn

import typer

from ..common import cli_fields
from ..messages import missing_spans_key

app = typer.Typer(help="spacy-w2ner: unified (flat, nested, discontinuous) NER for spaCy", no_args_is_help=True,
                  rich_markup_mode=None)  # help texts as written: "the [ray] extra" is no markup

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
    return _under_a_directory(path)


def _output_file(path: Path) -> Path:
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a directory; give the path of the file to write")
    return _under_a_directory(path)


def _under_a_directory(path: Path) -> Path:
    """``path``, whose nearest existing parent is a directory (the missing ones are made)."""
    parent = next((parent for parent in Path(path).absolute().parents if parent.exists()), None)
    if parent is not None and not parent.is_dir():
        raise typer.BadParameter(f"{parent} is a file: {path} cannot be written under it")
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
    if n_docs and spans_key not in keys:
        _fail(f"{where}: {missing_spans_key(spans_key, keys)}. Choose the key with --spans-key")


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
