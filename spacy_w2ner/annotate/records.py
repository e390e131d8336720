"""The record of one annotated document: its schema, and how a document becomes one.

``Record`` and ``EntityRecord`` are the schema (pydantic models): ``RECORD_SCHEMA`` is their
JSON Schema (``python -m spacy_w2ner schema`` prints it), tests validate records against it,
and the HTTP service declares them as its response. ``make_record`` writes plain dicts of that
shape straight from a Doc (no model objects per record: annotation streams millions)::

    {"id": "n1", "source": "notes.jsonl:12", "meta": {"site": "forum"},
     "entities": [{"label": "ADR", "score": 0.97, "text": "pain in the ankles",
                   "fragments": [[31, 42], [52, 58]], "tokens": [6, 7, 8, 11],
                   "discontinuous": true}]}
"""
from typing import Any, Dict, List, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field
from spacy.tokens import Doc

from ..entities import Entity, get_entities, scoring_at_least


class EntityRecord(BaseModel):
    """One entity: where its fragments are in the input text, and which tokens it has."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(description="entity label")
    score: Optional[float] = Field(description="weakest-link confidence in [0, 1] (null for entities without one)")
    text: str = Field(description="the texts of the fragments joined by a space")
    fragments: List[Tuple[int, int]] = Field(
        description="[[start_char, end_char], ...] into the input text, end exclusive", min_length=1
    )
    tokens: List[int] = Field(description="token indices of the spaCy Doc", min_length=1)
    discontinuous: bool = Field(description="true when the entity has more than one fragment")


class Record(BaseModel):
    """One input document's entities, with where the document came from."""

    model_config = ConfigDict(extra="forbid")

    id: Any = Field(
        description="the input's id (jsonl --id-key, the file of --doc-per-file, a DocBin doc's name, a request's "
        "id), else its line number"
    )
    source: Optional[str] = Field(
        description="file:line (txt, jsonl), file (--doc-per-file) or file#index (DocBin); '-' is standard input; "
        "null where there is no file (a Ray dataset's rows, HTTP requests)"
    )
    meta: Dict[str, Any] = Field(description="every other key of a jsonl record or request document; {} for other inputs")
    entities: List[EntityRecord]


RECORD_SCHEMA: Dict[str, Any] = Record.model_json_schema()


def validate_record(record: Dict[str, Any]) -> Record:
    """The record checked against the schema (pydantic's ValidationError says what is wrong)."""
    return Record.model_validate(record)


def entity_record(entity: Entity, doc: Doc) -> Dict[str, Any]:
    """One entity of the record: label, score, text, character fragments, tokens, discontinuous."""
    fragments = [[doc[start].idx, doc[end - 1].idx + len(doc[end - 1])] for start, end in entity.fragments]
    return {
        "label": entity.label,
        "score": None if entity.score is None else round(float(entity.score), 6),
        "text": entity.text,
        "fragments": fragments,
        "tokens": list(entity.tokens),
        "discontinuous": entity.is_discontinuous,
    }


def make_record(
    identifier: Any, source: Optional[str], meta: Dict[str, Any], doc: Doc, spans_key: str, threshold: float = 0.0
) -> Dict[str, Any]:
    """The record of an annotated doc; with ``threshold``, only the entities scoring at least that
    (compared as the component's ``threshold`` compares, before rounding)."""
    entities = scoring_at_least(get_entities(doc, spans_key), threshold)
    return {"id": identifier, "source": source, "meta": meta, "entities": [entity_record(entity, doc) for entity in entities]}
