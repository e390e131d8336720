"""W2NER JSON (the format of the reference code and most public benchmarks).

A JSON array of ``{"sentence": [tokens], "ner": [{"index": [token ids], "type": label}]}``.
Each record becomes one Doc whose entities are written with ``set_entities``.
Malformed input raises ``FormatError`` naming the file, the record and the problem.
Extra keys of a record (such as the ``word`` segmentation of some Chinese
corpora) are not kept.
"""
import json
from pathlib import Path
from typing import Iterable, Iterator, List, Union

from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..entities import get_entities, set_entities
from .base import FormatError


def read_w2ner_json(path: Union[str, Path], vocab: Vocab, spans_key: str = "w2ner") -> Iterator[Doc]:
    """Docs from a W2NER JSON file, one per record."""
    path = Path(path)
    try:
        records = json.loads(path.read_text(encoding="utf8"))
    except json.JSONDecodeError as err:
        raise FormatError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError as err:
        raise FormatError(f"{path}: not valid UTF-8 ({err.reason} at byte {err.start})") from None
    if not isinstance(records, list):
        raise FormatError(f"{path}: expected a JSON array of records, got {type(records).__name__}")
    for i, record in enumerate(records):
        yield w2ner_record_to_doc(record, vocab, spans_key, where=f"{path}: record {i}")


def w2ner_record_to_doc(record: dict, vocab: Vocab, spans_key: str, where: str) -> Doc:
    if not isinstance(record, dict) or not isinstance(record.get("sentence"), list):
        raise FormatError(f"{where}: expected an object with a 'sentence' list of tokens")
    words = record["sentence"]
    for k, word in enumerate(words):
        if not isinstance(word, str) or not word or any(c.isspace() for c in word):
            raise FormatError(f"{where}: token {k} ({word!r}) must be a non-empty string without whitespace")
    doc = Doc(vocab, words=words)
    entities = []
    for j, entity in enumerate(record.get("ner", [])):
        if not isinstance(entity, dict) or "index" not in entity or "type" not in entity:
            raise FormatError(f"{where}: entity {j} needs 'index' and 'type'")
        index, label = entity["index"], entity["type"]
        if not isinstance(label, str) or not label:
            raise FormatError(f"{where}: entity {j} has an empty or non-string type {label!r}")
        if not index or not all(isinstance(t, int) and 0 <= t < len(words) for t in index):
            raise FormatError(
                f"{where}: entity {j} ({label}) has token indices {index} outside the "
                f"sentence of {len(words)} tokens"
            )
        if len(set(index)) != len(index):
            raise FormatError(f"{where}: entity {j} ({label}) repeats a token index: {index}")
        entities.append((label, sorted(index), None))
    set_entities(doc, entities, spans_key)
    return doc


def docs_to_w2ner_json(docs: Iterable[Doc], spans_key: str = "w2ner") -> List[dict]:
    """W2NER JSON records for docs (gold or predicted), entities in position order.

    W2NER tokens cannot contain whitespace, so whitespace tokens (the line breaks
    and runs of spaces that spaCy's tokenizer keeps, e.g. in docs read from brat)
    are left out of ``sentence`` and the entity indices are renumbered. An entity
    that includes a whitespace token raises ValueError naming the doc.
    """
    records = []
    for doc_index, doc in enumerate(docs):
        kept = [token.i for token in doc if not token.is_space]
        new_index = {old: new for new, old in enumerate(kept)}
        ner = []
        for entity in get_entities(doc, spans_key):
            if any(t not in new_index for t in entity.tokens):
                raise ValueError(
                    f"doc {doc_index}: entity {entity.label} {entity.text!r} (tokens {list(entity.tokens)}) "
                    "includes a whitespace token, which W2NER JSON cannot represent"
                )
            ner.append({"index": [new_index[t] for t in entity.tokens], "type": entity.label})
        records.append({"sentence": [doc[i].text for i in kept], "ner": ner})
    return records


def write_w2ner_json(docs: Iterable[Doc], path: Union[str, Path], spans_key: str = "w2ner") -> int:
    """Write docs as a W2NER JSON file (one array on one line); returns the number of records."""
    records = docs_to_w2ner_json(docs, spans_key)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf8")
    return len(records)
