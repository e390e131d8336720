"""Corpus formats <-> Docs with the ``doc.spans`` contract.

W2NER JSON (the format of the reference code and most public benchmarks): a
JSON array of ``{"sentence": [tokens], "ner": [{"index": [token ids], "type": label}]}``.
Each record becomes one Doc whose entities are written with ``set_entities``.
Malformed input raises ``FormatError`` naming the file, the record and the problem.
"""
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Union

from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

from .entities import get_entities, overlapping, set_entities


class FormatError(ValueError):
    """Malformed corpus input; the message names the file and the record."""


@dataclass
class CorpusSummary:
    """Counts kept by a conversion: what went in must come out."""

    documents: int = 0
    tokens: int = 0
    entities: int = 0
    discontinuous: int = 0
    overlapping: int = 0
    per_label: Counter = field(default_factory=Counter)

    def add(self, doc: Doc, spans_key: str) -> None:
        entities = get_entities(doc, spans_key)
        self.documents += 1
        self.tokens += len(doc)
        self.entities += len(entities)
        self.discontinuous += sum(e.is_discontinuous for e in entities)
        self.overlapping += len(overlapping([(e.label, e.tokens) for e in entities]))
        self.per_label.update(e.label for e in entities)

    def as_dict(self) -> Dict[str, object]:
        return {
            "documents": self.documents,
            "tokens": self.tokens,
            "entities": self.entities,
            "discontinuous": self.discontinuous,
            "overlapping": self.overlapping,
            "per_label": dict(sorted(self.per_label.items())),
        }


def read_w2ner_json(path: Union[str, Path], vocab: Vocab, spans_key: str = "w2ner") -> Iterator[Doc]:
    """Docs from a W2NER JSON file, one per record."""
    path = Path(path)
    try:
        records = json.loads(path.read_text(encoding="utf8"))
    except json.JSONDecodeError as err:
        raise FormatError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
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
    """W2NER JSON records for docs (gold or predicted), entities in position order."""
    records = []
    for doc in docs:
        records.append(
            {
                "sentence": [token.text for token in doc],
                "ner": [{"index": list(e.tokens), "type": e.label} for e in get_entities(doc, spans_key)],
            }
        )
    return records


def write_docbin(docs: Iterable[Doc], path: Union[str, Path], spans_key: str = "w2ner") -> CorpusSummary:
    """Save docs to a .spacy file and return their counts."""
    summary = CorpusSummary()
    docbin = DocBin(store_user_data=True)
    for doc in docs:
        summary.add(doc, spans_key)
        docbin.add(doc)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    docbin.to_disk(path)
    return summary


def entity_texts(doc: Doc, spans_key: str = "w2ner") -> List[str]:
    """Human-readable entities: label, text and fragments (for CLI output)."""
    lines = []
    for entity in get_entities(doc, spans_key):
        fragments = " + ".join(f"[{doc[s:e].text}]" for s, e in entity.fragments)
        score = "" if entity.score is None else f" ({entity.score:.2f})"
        lines.append(f"{entity.label:>6}  {entity.text}{score}  {fragments if entity.is_discontinuous else ''}".rstrip())
    return lines
