"""Corpus formats <-> Docs with the ``doc.spans`` contract.

Readers yield Docs whose entities are written with ``set_entities``; malformed
input raises ``FormatError`` naming the file and the line (or record) and what
is wrong. No entity is dropped: ``CorpusSummary`` counts what was read.

- ``read_w2ner_json``: W2NER JSON records (one Doc per sentence);
- ``read_dai_text``: Dai et al.'s inline format for discontinuous NER;
- ``read_conll``: CoNLL columns with BIO, IOB1 or BIOES tags;
- ``read_bmes``: character-level BMES (Chinese);
- ``read_brat`` / ``read_brat_collection``: brat standoff (one Doc per document).

Writers: ``docs_to_w2ner_json`` / ``write_w2ner_json``, ``docs_to_brat`` and
``write_docbin`` (.spacy).
"""
from .base import (
    IGNORED_KEY,
    NAME_KEY,
    REPAIRED_KEY,
    CorpusSummary,
    FormatError,
    entity_texts,
    read_text,
    summarize,
    write_docbin,
)
from .brat import docs_to_brat, read_brat, read_brat_collection, whitespace_tokenize
from .dai import parse_dai_mentions, read_dai_text
from .tagged import CONLL_SCHEMES, check_scheme, chunk_tags, parse_tag, read_bmes, read_conll
from .w2ner_json import docs_to_w2ner_json, read_w2ner_json, w2ner_record_to_doc, write_w2ner_json

__all__ = [
    "CONLL_SCHEMES",
    "CorpusSummary",
    "FormatError",
    "IGNORED_KEY",
    "NAME_KEY",
    "REPAIRED_KEY",
    "check_scheme",
    "chunk_tags",
    "docs_to_brat",
    "docs_to_w2ner_json",
    "entity_texts",
    "parse_dai_mentions",
    "parse_tag",
    "read_bmes",
    "read_brat",
    "read_brat_collection",
    "read_conll",
    "read_dai_text",
    "read_text",
    "read_w2ner_json",
    "summarize",
    "w2ner_record_to_doc",
    "whitespace_tokenize",
    "write_docbin",
    "write_w2ner_json",
]
