"""mkdocs hook: the command-line and configuration references, made from the code at build time.

A page holds a marker where a generated part goes; nothing of it is written by hand:

* ``<!-- generated: cli -->``: every command of the Typer app (``spacy_w2ner.cli.app``), in the
  order it registers them, with its help, usage, arguments and options (flags, type, default,
  help) read from the click command Typer makes of it.
* ``<!-- generated: settings -->``: every setting of the ``w2ner`` factory, of its registered
  architectures, scorer, corpus readers and encoder paths (name, type and default from the
  function's signature and the factory's default config, descriptions from ``name: text`` lines of
  the docstring) and of the ``annotate`` and ``serve`` options (their dataclass fields' defaults and
  help), and the default model config as the factory holds it.

An unknown marker is a warning, so ``mkdocs build --strict`` fails on it.
"""
import dataclasses
import inspect
import json
import logging
import re
from typing import Callable, Dict, List, Optional, Tuple

log = logging.getLogger("mkdocs.hooks.reference")

MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")


def on_page_markdown(markdown: str, page, config, files) -> str:
    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            log.warning(f"{page.file.src_uri}: unknown marker '{match.group(0)}' (known: {', '.join(GENERATORS)})")
            return match.group(0)
        return GENERATORS[name]()

    return MARKER.sub(replace, markdown)


# ---------------------------------------------------------------- shared formatting


def _cell(text: object) -> str:
    """Text for one table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(value: object) -> str:
    return f"`{_cell(value)}`" if value != "" else ""


def _table(header: Tuple[str, ...], rows: List[Tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _literal(value: object) -> str:
    """A default as a config file writes it."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith("@"):
        return next(iter(value.values()))  # a registered function, by its name
    try:
        return json.dumps(value, ensure_ascii=False)
    except TypeError:
        return repr(value)


def _type_name(annotation: object) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, type):
        return annotation.__name__
    return re.sub(r"\b(typing|thinc\.model|thinc\.types|spacy\.\w+)\.", "", str(annotation))


def _described(docstring: Optional[str]) -> Dict[str, str]:
    """``name: text`` lines of a docstring (continued by indented lines), by name."""
    found: Dict[str, str] = {}
    current = None
    for line in inspect.cleandoc(docstring or "").splitlines():
        match = re.match(r"^(\w+): (.+)$", line)
        if match:
            current = match.group(1)
            found[current] = match.group(2)
        elif current and line.startswith(" ") and line.strip():
            found[current] += " " + line.strip()
        else:
            current = None
    return found


def _summary(docstring: Optional[str]) -> str:
    """A docstring's first paragraph, on one line."""
    return " ".join(inspect.cleandoc(docstring or "").split("\n\n")[0].split())


# ---------------------------------------------------------------- the command line


def cli_reference() -> str:
    import typer

    from spacy_w2ner.cli import app

    group = typer.main.get_command(app)
    parts = [f"`python -m spacy_w2ner COMMAND --help` prints the same. {group.help}."]
    for name, command in group.commands.items():
        parts.append(_command_section(name, command, command.context_class(command, info_name=name)))
    return "\n\n".join(parts)


def _command_section(name: str, command, context) -> str:
    """A command as its ``--help`` has it: each parameter's help record (flags and type, help)."""
    records = [(p, p.get_help_record(context)) for p in command.params if not p.hidden]
    arguments = [(p, record) for p, record in records if p.param_type_name == "argument"]
    options = [(p, record) for p, record in records if p.param_type_name == "option"]
    usage = " ".join(["[OPTIONS]"] + [record[0].split(" <")[0].upper() for _, record in arguments])
    parts = [f"## `{name}`", inspect.cleandoc(command.help or ""), f"```\npython -m spacy_w2ner {name} {usage}\n```"]
    if arguments:
        rows = [(_code(record[0].split(" <")[0].upper()), _code(_kind(record[0])), _cell(_help(record[1])[0]))
                for _, record in arguments]
        parts.append(_table(("argument", "type", "what"), rows))
    if options:
        rows = []
        for _, (flags, text) in options:
            what, default = _help(text)
            names = " / ".join(f"`{flag.strip()}`" for flag in flags.split(" <")[0].split(" / "))
            rows.append((names, _code(_kind(flags)) or "flag", _code(default), _cell(what)))
        parts.append(_table(("option", "type", "default", "what"), rows))
    return "\n\n".join(parts)


def _kind(flags: str) -> str:
    """The type of a help record's first part, ``--lang <str>`` -> ``str``."""
    match = re.search(r"<([^>]+)>", flags)
    return match.group(1) if match else ""


def _help(text: str) -> Tuple[str, str]:
    """A help text without click's trailing ``[default: x]``/``[required]``, and the default."""
    default = ""
    match = re.search(r"\s*\[default: (.*)\]\s*$", text)
    if match:
        default, text = match.group(1), text[: match.start()]
    text = re.sub(r"\s*\[required\]\s*$", "", text)
    return text, default


# ---------------------------------------------------------------- the settings


def settings_reference() -> str:
    import spacy
    from spacy.language import Language

    from spacy_w2ner.annotate.options import AnnotateOptions
    from spacy_w2ner.component import DEFAULT_MODEL_CONFIG, make_w2ner
    from spacy_w2ner.serve.options import ServeOptions

    meta = Language.get_factory_meta("w2ner")
    parts = [
        "## The `w2ner` component", "In `[components.w2ner]`; `nlp.add_pipe(\"w2ner\", config={...})` takes the same.",
        _function_table(make_w2ner, meta.default_config, skip=("nlp", "name"), nested={"model": "the model below"}),
        "## The model: `spacy_w2ner.W2NER.v1`", "In `[components.w2ner.model]`.",
        _registered("architectures", "spacy_w2ner.W2NER.v1", _config_defaults(DEFAULT_MODEL_CONFIG), skip=("nO",),
                    nested={"tok2vec": "a CNN `spacy.Tok2Vec.v2` (below)"}),
        "The factory's default model, as `nlp.add_pipe(\"w2ner\")` builds it:",
        "```ini" + DEFAULT_MODEL_CONFIG.rstrip() + "\n```",
        "## Encoders",
    ]
    for name in ("spacy_w2ner.ChunkedTransformerModel.v1", "spacy_w2ner.ChunkedTransformerModel.v2"):
        parts += [f"### `{name}`", "In `[components.transformer.model]`.", _registered("architectures", name)]
    parts += [
        "### `spacy_w2ner.TransformerListener.v1`", "In `[components.w2ner.model.tok2vec]`.",
        _registered("architectures", "spacy_w2ner.TransformerListener.v1"),
        "### `spacy_w2ner.ChunkedTok2VecTransformer.v1`",
        "In `[components.w2ner.model.tok2vec]` after `nlp.replace_listeners` (which writes it).",
        _registered("architectures", "spacy_w2ner.ChunkedTok2VecTransformer.v1"),
        "### `spacy_w2ner.reduce_max.v1`", "In `[components.w2ner.model.tok2vec.pooling]` (`@layers`).",
        _registered("layers", "spacy_w2ner.reduce_max.v1"),
        "### Encoder paths", "In `[components.transformer.model.name]` (`@misc`).",
    ]
    for name in ("spacy_w2ner.bundled_encoder_path.v1", "spacy_w2ner.encoder_path.v1"):
        parts += [f"`{name}`", _registered("misc", name)]
    parts += ["## The scorer: `spacy_w2ner.entity_scorer.v1`", "The component's `scorer` (`@scorers`).",
              _registered("scorers", "spacy_w2ner.entity_scorer.v1"),
              "## Corpus readers", "In `[corpora.train]` and `[corpora.dev]` (`@readers`): a corpus read from its files, not converted first."]
    for name in sorted(n for n in spacy.registry.readers.get_all() if n.startswith("spacy_w2ner.")):
        parts += [f"### `{name}`", _registered("readers", name)]
    parts += [
        "## `annotate` options",
        "`AnnotateOptions`: the `annotate` command's flags (`--batch-size` for `batch_size`), "
        "`spacy_w2ner.annotate.annotate(..., options)` and the Ray engine all take these.",
        _options_table(AnnotateOptions),
        "## `serve` options",
        "`ServeOptions`: the `serve` command's flags, and `spacy_w2ner.serve.serve(model, ServeOptions(...))`.",
        _options_table(ServeOptions),
    ]
    return "\n\n".join(parts)


def _config_defaults(config_text: str) -> dict:
    from thinc.api import Config

    return dict(Config().from_str(config_text)["model"])


def _registered(registry: str, name: str, defaults: Optional[dict] = None, skip=(), nested=None) -> str:
    import spacy

    function = getattr(spacy.registry, registry).get(name)
    summary = _summary(function.__doc__)
    return summary + "\n\n" + _function_table(function, defaults or {}, skip, nested or {})


def _function_table(function: Callable, defaults: dict, skip=(), nested=None) -> str:
    """One row per parameter: its default from ``defaults`` (a default config), else the signature's."""
    descriptions = _described(function.__doc__)
    rows = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name in skip:
            continue
        if nested and parameter.name in nested:
            default = nested[parameter.name]
        elif parameter.name in defaults:
            default = _code(_literal(defaults[parameter.name]))
        elif parameter.default is not inspect.Parameter.empty:
            default = _code(_literal(parameter.default))
        else:
            default = "required"
        rows.append((f"`{parameter.name}`", _code(_type_name(parameter.annotation)), default,
                     _cell(descriptions.get(parameter.name, ""))))
    return _table(("setting", "type", "default", "what"), rows)


def _options_table(options_type) -> str:
    rows = []
    for field in dataclasses.fields(options_type):
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        where = "" if field.metadata.get("cli", True) else " (Python only)"
        rows.append((f"`{field.name}`", _code(_type_name(field.type)), _code(_literal(default)),
                     _cell(field.metadata.get("help", "")) + where))
    return _table(("setting", "type", "default", "what"), rows)


GENERATORS: Dict[str, Callable[[], str]] = {"cli": cli_reference, "settings": settings_reference}
