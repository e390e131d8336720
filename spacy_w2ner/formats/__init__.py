"""Corpus formats <-> Docs with the ``doc.spans`` contract, and ``FORMATS``, their one table.

``FORMATS`` maps a format's name to how it is read (and written) and which options
it takes; the ``convert``/``export`` commands and the registered corpus readers
(``readers.py``) are made from it.

Readers yield Docs whose entities are written with ``set_entities``; malformed
input raises ``FormatError`` naming the file and the line (or record) and what
is wrong. No entity is dropped: ``CorpusSummary`` counts what was read.

- ``read_w2ner_json``: W2NER JSON records (one Doc per sentence);
- ``read_dai_text``: Dai et al.'s inline format for discontinuous NER;
- ``read_conll``: CoNLL columns with BIO, IOB1 or BIOES tags;
- ``read_bmes``: character-level BMES (Chinese);
- ``read_brat`` / ``read_brat_collection``: brat standoff (one Doc per document);
- ``read_bioc``: BioC XML and JSON (one Doc per document or passage; the ``[bioc]`` extra);
- ``read_pubtator``: PubTator (one Doc per document);
- ``read_label_studio``: a Label Studio JSON export (one Doc per task).

Writers: ``docs_to_w2ner_json`` / ``write_w2ner_json``, ``docs_to_brat``, ``docs_to_bioc``,
``docs_to_pubtator``, ``docs_to_label_studio`` and ``write_docbin`` (.spacy). ``standoff`` is the
one rule by which annotations at character offsets (brat, BioC, PubTator, Label Studio) become
entities and go back: texts written as other tools write them, tokens split at annotation
boundaries, sentence boundaries never inside an entity, what is not read listed and counted.
"""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional, Union

from spacy.language import Language
from spacy.tokens import Doc

from .base import (
    IGNORED_KEY,
    NAME_KEY,
    NOT_A_DOCUMENT_KEY,
    RELATIONS_KEY,
    REPAIRED_KEY,
    CorpusSummary,
    FormatError,
    entity_texts,
    read_text,
    summarize,
)
from .docbin import DocBinFile, DocBinStream, write_docbin
from .bioc import BIOC_KEY, check_bioc_options, docs_to_bioc, read_bioc
from .label_studio import LABEL_STUDIO_KEY, check_label_studio_options, docs_to_label_studio, label_studio_config, read_label_studio
from .pubtator import PUBTATOR_KEY, docs_to_pubtator, read_pubtator
from .brat import docs_to_brat, read_brat, read_brat_collection
from .standoff import TOKENIZERS, check_tokenizer, whitespace_tokenize
from .dai import parse_dai_mentions, read_dai_text
from .tagged import CONLL_SCHEMES, check_conll_options, check_scheme, chunk_tags, parse_tag, read_bmes, read_conll
from .w2ner_json import docs_to_w2ner_json, read_w2ner_json, w2ner_record_to_doc, write_w2ner_json



@dataclass(frozen=True)
class Format:
    """A corpus format: how to read it into Docs (and write Docs to it), and its options.

    ``read(path, nlp, spans_key, **options)`` yields Docs (``nlp`` gives the vocab,
    and for brat the tokenizer); ``options`` maps each option the format takes to its
    default, ``check(**options)`` raises ValueError for bad ones before any file is
    read; ``write(docs, path, spans_key, problems, **write_options)`` exports, where the format
    can hold predictions (``write_options``: the options it takes, with their defaults).
    """

    read: Callable[..., Iterator[Doc]]
    one_doc_per: str  # "record", "sentence" or "document"
    options: Dict[str, Any] = field(default_factory=dict)
    check: Callable[..., Any] = lambda **options: None
    reads_directory: bool = False
    write: Optional[Callable[..., Any]] = None
    write_options: Dict[str, Any] = field(default_factory=dict)


PathLike = Union[str, Path]


def _read_w2ner_json(path: PathLike, nlp: Language, spans_key: str) -> Iterator[Doc]:
    return read_w2ner_json(path, nlp.vocab, spans_key)


def _read_dai(path: PathLike, nlp: Language, spans_key: str) -> Iterator[Doc]:
    return read_dai_text(path, nlp.vocab, spans_key)


def _read_conll(path: PathLike, nlp: Language, spans_key: str, tag_column: int, scheme: str) -> Iterator[Doc]:
    return read_conll(path, nlp.vocab, spans_key, tag_column=tag_column, scheme=scheme)


def _read_bmes(path: PathLike, nlp: Language, spans_key: str) -> Iterator[Doc]:
    return read_bmes(path, nlp.vocab, spans_key)


def _read_brat(path: PathLike, nlp: Language, spans_key: str, tokenizer: str, check_text: bool, **options) -> Iterator[Doc]:
    return read_brat_collection(path, nlp.vocab, spans_key, _tokenizer(nlp, tokenizer), check_text, **options)


def _tokenizer(nlp: Language, tokenizer: str):
    """The tokenizer option as a function of the text: the pipeline's (spaCy's) or whitespace."""
    return nlp.tokenizer if tokenizer == "spacy" else (lambda text: whitespace_tokenize(text, nlp.vocab))


def _read_bioc(path: PathLike, nlp: Language, spans_key: str, tokenizer: str, type_key: str, doc_per: str, **options) -> Iterator[Doc]:
    return read_bioc(path, nlp.vocab, spans_key, _tokenizer(nlp, tokenizer), type_key, doc_per, **options)


def _read_pubtator(path: PathLike, nlp: Language, spans_key: str, tokenizer: str, **options) -> Iterator[Doc]:
    return read_pubtator(path, nlp.vocab, spans_key, _tokenizer(nlp, tokenizer), **options)


def _read_label_studio(path: PathLike, nlp: Language, spans_key: str, tokenizer: str, **options) -> Iterator[Doc]:
    return read_label_studio(path, nlp.vocab, spans_key, _tokenizer(nlp, tokenizer), **options)


# The options of every document format (standoff.Reading): how annotations at character offsets
# become entities, and sentence boundaries.
DOCUMENT_OPTIONS = {"tokenizer": "spacy", "sentencizer": True, "split_tokens": True, "strict": False}

FORMATS: Dict[str, Format] = {
    "w2ner-json": Format(_read_w2ner_json, "record", write=write_w2ner_json),
    "dai": Format(_read_dai, "sentence"),
    "conll": Format(
        _read_conll, "sentence", options={"tag_column": -1, "scheme": "BIO"}, check=check_conll_options
    ),
    "bmes": Format(_read_bmes, "sentence"),
    "brat": Format(
        _read_brat,
        "document",
        options={**DOCUMENT_OPTIONS, "check_text": True},
        check=check_tokenizer,
        reads_directory=True,
        write=docs_to_brat,
    ),
    "bioc": Format(
        _read_bioc,
        "document",
        options={**DOCUMENT_OPTIONS, "type_key": "type", "doc_per": "document"},
        check=lambda **options: (check_tokenizer(**options), check_bioc_options(**options)),
        reads_directory=True,
        write=docs_to_bioc,
    ),
    "pubtator": Format(
        _read_pubtator,
        "document",
        options=dict(DOCUMENT_OPTIONS),
        check=check_tokenizer,
        write=docs_to_pubtator,
        write_options={"discontinuous": None},
    ),
    "label-studio": Format(
        _read_label_studio,
        "document",
        options={**DOCUMENT_OPTIONS, "use": "annotations", "annotations": "latest", "text_key": None},
        check=lambda **options: (check_tokenizer(**options), check_label_studio_options(**options)),
        write=docs_to_label_studio,
        write_options={"model_version": "spacy-w2ner"},
    ),
}
EXPORT_FORMATS = [name for name, fmt in FORMATS.items() if fmt.write is not None]


def format_named(name: str) -> Format:
    """The format called ``name``; ValueError naming the formats there are."""
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; choose from {', '.join(FORMATS)}")
    return FORMATS[name]


def check_format_options(name: str, options: Dict[str, Any]) -> None:
    """ValueError naming the first option (as a command-line flag) that format ``name`` does not take."""
    unknown = sorted(set(options) - set(format_named(name).options))
    if unknown:
        flag = "--" + unknown[0].replace("_", "-")
        raise ValueError(f"{flag} does not apply to the {name} format")


def read_corpus(name: str, path: PathLike, nlp: Language, spans_key: str = "w2ner", **options) -> Iterator[Doc]:
    """Docs of the corpus at ``path`` in format ``name``; options the format does not take are an error."""
    fmt = format_named(name)
    check_format_options(name, options)
    options = {**fmt.options, **options}
    fmt.check(**options)
    return fmt.read(path, nlp, spans_key, **options)


__all__ = [
    "BIOC_KEY",
    "PUBTATOR_KEY",
    "TOKENIZERS",
    "LABEL_STUDIO_KEY",
    "CONLL_SCHEMES",
    "EXPORT_FORMATS",
    "FORMATS",
    "Format",
    "read_corpus",
    "CorpusSummary",
    "FormatError",
    "IGNORED_KEY",
    "NAME_KEY",
    "NOT_A_DOCUMENT_KEY",
    "RELATIONS_KEY",
    "REPAIRED_KEY",
    "check_scheme",
    "chunk_tags",
    "docs_to_bioc",
    "docs_to_brat",
    "docs_to_label_studio",
    "label_studio_config",
    "docs_to_pubtator",
    "docs_to_w2ner_json",
    "entity_texts",
    "parse_dai_mentions",
    "parse_tag",
    "read_bioc",
    "read_bmes",
    "read_brat",
    "read_brat_collection",
    "read_conll",
    "read_dai_text",
    "read_label_studio",
    "read_pubtator",
    "read_text",
    "read_w2ner_json",
    "summarize",
    "w2ner_record_to_doc",
    "whitespace_tokenize",
    "write_docbin",
    "DocBinFile",
    "DocBinStream",
    "write_w2ner_json",
]
