"""Entities on a Doc: the ``doc.spans`` contract.

An entity is a label and a sorted tuple of token indices. In
``doc.spans[spans_key]`` it is written as its fragments (maximal runs of
consecutive tokens), one ``Span`` each, with the entity's label. All fragments
of an entity share one ``span.id_``, unique within the doc; spans without an id
are entities of their own (so a ``spancat``-style group reads as contiguous
entities). ``doc.spans[spans_key].attrs["scores"]`` holds one confidence per
span; the fragments of an entity share its score.
"""
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from spacy.tokens import Doc, Span
from spacy.training import Example

TokenIndices = Tuple[int, ...]
Fragment = Tuple[int, int]  # token offsets [start, end)

SCORES_ATTR = "scores"


@dataclass(frozen=True)
class Entity:
    """One entity of a doc: label, token indices, fragments, text and score."""

    label: str
    tokens: TokenIndices
    fragments: Tuple[Fragment, ...]
    text: str
    score: Optional[float] = None
    spans: Tuple[Span, ...] = field(default=(), compare=False, repr=False)

    @property
    def is_discontinuous(self) -> bool:
        return len(self.fragments) > 1

    @property
    def key(self) -> Tuple[str, TokenIndices]:
        """(label, token indices): the identity used for exact-match scoring."""
        return (self.label, self.tokens)


def fragments_of(tokens: Sequence[int]) -> Tuple[Fragment, ...]:
    """Maximal runs of consecutive token indices, as [start, end) offsets."""
    fragments: List[Fragment] = []
    for i in sorted(set(tokens)):
        if fragments and fragments[-1][1] == i:
            fragments[-1] = (fragments[-1][0], i + 1)
        else:
            fragments.append((i, i + 1))
    return tuple(fragments)


def tokens_of(fragments: Iterable[Fragment]) -> TokenIndices:
    return tuple(sorted({i for start, end in fragments for i in range(start, end)}))


def entity_sort_key(label: str, tokens: TokenIndices):
    return (tokens, label)


def get_entities(doc: Doc, spans_key: str = "w2ner") -> List[Entity]:
    """The entities in ``doc.spans[spans_key]``, ordered by position.

    Spans sharing an ``id_`` are the fragments of one entity; spans without an
    id are entities on their own. Raises ValueError when the spans of one id
    carry different labels.
    """
    if spans_key not in doc.spans:
        return []
    group = doc.spans[spans_key]
    scores = group.attrs.get(SCORES_ATTR)
    if scores is not None and len(scores) != len(group):
        raise ValueError(
            f"doc.spans['{spans_key}'].attrs['{SCORES_ATTR}'] has {len(scores)} scores "
            f"for {len(group)} spans in doc {_doc_excerpt(doc)}"
        )
    by_id: Dict[str, List[int]] = {}
    singletons: List[List[int]] = []
    for i, span in enumerate(group):
        if span.id_:
            by_id.setdefault(span.id_, []).append(i)
        else:
            singletons.append([i])
    entities = []
    for entity_id, members in list(by_id.items()) + [("", m) for m in singletons]:
        spans = tuple(group[i] for i in members)
        labels = {span.label_ for span in spans}
        if len(labels) != 1:
            raise ValueError(
                f"Spans with id '{entity_id}' in doc.spans['{spans_key}'] of doc "
                f"{_doc_excerpt(doc)} have different labels {sorted(labels)}: the fragments "
                "of one entity must share its label"
            )
        score = None if scores is None else float(min(scores[i] for i in members))
        entities.append(_make_entity(doc, labels.pop(), spans, score))
    entities.sort(key=lambda e: entity_sort_key(e.label, e.tokens))
    return entities


def _make_entity(doc: Doc, label: str, spans: Sequence[Span], score: Optional[float]) -> Entity:
    tokens = tuple(sorted({i for span in spans for i in range(span.start, span.end)}))
    fragments = fragments_of(tokens)
    text = " ".join(doc[start:end].text for start, end in fragments)
    return Entity(label, tokens, fragments, text, score, tuple(spans))


def entity_from_tokens(
    doc: Doc, label: str, tokens: Sequence[int], score: Optional[float] = None
) -> Entity:
    """Build an Entity from token indices of ``doc``."""
    tokens = tuple(sorted(set(tokens)))
    if not tokens or tokens[0] < 0 or tokens[-1] >= len(doc):
        raise ValueError(
            f"Entity tokens {tokens} are out of range for doc {_doc_excerpt(doc)} "
            f"of {len(doc)} tokens"
        )
    fragments = fragments_of(tokens)
    text = " ".join(doc[start:end].text for start, end in fragments)
    return Entity(label, tokens, fragments, text, score)


def set_entities(
    doc: Doc,
    entities: Iterable[Tuple[str, Sequence[int], Optional[float]]],
    spans_key: str = "w2ner",
    ids: Optional[Sequence[str]] = None,
) -> None:
    """Write (label, token indices, score) entities to ``doc.spans[spans_key]``.

    Entities are written in position order; entity k gets id ``e{k}``, or, when
    ``ids`` is given (one non-empty, unique id per entity, in the order of
    ``entities``), its own id (e.g. a brat ``T3``). Scores go to
    ``attrs["scores"]`` when every entity has one.
    """
    entities = list(entities)
    if ids is not None:
        ids = list(ids)
        if len(ids) != len(entities):
            raise ValueError(f"set_entities got {len(ids)} ids for {len(entities)} entities")
        if not all(isinstance(i, str) and i for i in ids) or len(set(ids)) != len(ids):
            raise ValueError(f"set_entities needs unique, non-empty string ids, got {ids}")
    ordered = sorted(
        (
            (label, tuple(sorted(set(tokens))), score, None if ids is None else ids[k])
            for k, (label, tokens, score) in enumerate(entities)
        ),
        key=lambda e: entity_sort_key(e[0], e[1]),
    )
    spans: List[Span] = []
    span_scores: List[float] = []
    for k, (label, tokens, score, entity_id) in enumerate(ordered):
        for start, end in fragments_of(tokens):
            spans.append(Span(doc, start, end, label=label, span_id=entity_id or f"e{k}"))
            span_scores.append(np.nan if score is None else score)
    doc.spans[spans_key] = spans
    if ordered and all(score is not None for _, _, score, _ in ordered):
        doc.spans[spans_key].attrs[SCORES_ATTR] = np.asarray(span_scores, dtype="float32")
    elif not ordered:
        doc.spans[spans_key].attrs[SCORES_ATTR] = np.zeros((0,), dtype="float32")


def flat_entities(entities: Sequence[Entity]) -> List[Entity]:
    """Contiguous, non-overlapping entities for ``doc.ents``.

    Overlaps are resolved greedily: higher score first, then the longer entity,
    then the earlier one.
    """
    candidates = [e for e in entities if not e.is_discontinuous]
    candidates.sort(key=lambda e: (-(e.score or 0.0), -len(e.tokens), e.tokens, e.label))
    taken: set = set()
    chosen = []
    for entity in candidates:
        if taken.isdisjoint(entity.tokens):
            chosen.append(entity)
            taken.update(entity.tokens)
    chosen.sort(key=lambda e: e.tokens)
    return chosen


def aligned_gold_entities(
    example: Example, spans_key: str
) -> Tuple[List[Tuple[str, TokenIndices]], List[Entity]]:
    """Gold entities of ``example.reference`` as token indices of ``example.predicted``.

    Returns the aligned (label, token indices) entities, and the gold entities
    that could not be aligned (a fragment boundary falls inside a predicted token).
    """
    gold = get_entities(example.reference, spans_key)
    if _same_tokens(example.predicted, example.reference):
        return [(e.label, e.tokens) for e in gold], []
    aligned: List[Tuple[str, TokenIndices]] = []
    misaligned: List[Entity] = []
    for entity in gold:
        fragments = []
        for start, end in entity.fragments:
            span = example.reference[start:end]
            projected = example.get_aligned_spans_y2x([span], allow_overlap=True)
            if len(projected) != 1 or projected[0].text != span.text:
                misaligned.append(entity)
                break
            fragments.append((projected[0].start, projected[0].end))
        else:
            aligned.append((entity.label, tokens_of(fragments)))
    return aligned, misaligned


def _same_tokens(a: Doc, b: Doc) -> bool:
    return len(a) == len(b) and all(x.idx == y.idx and len(x) == len(y) for x, y in zip(a, b))


def overlapping(entities: Sequence[Tuple[str, TokenIndices]]) -> set:
    """Indices of the entities that share a token with another entity of the list."""
    owners: Dict[int, List[int]] = {}
    for k, (_, tokens) in enumerate(entities):
        for i in tokens:
            owners.setdefault(i, []).append(k)
    result = set()
    for members in owners.values():
        if len(members) > 1:
            result.update(members)
    return result


def _doc_excerpt(doc: Doc, width: int = 60) -> str:
    text = doc.text if len(doc.text) <= width else doc.text[:width] + "..."
    return repr(text)


def copy_entities_to_ents(doc: Doc, spans_key: str = "w2ner") -> None:
    """Also write the entities of ``doc.spans[spans_key]`` to ``doc.ents`` (for spaCy's ``ner``).

    Only flat corpora fit ``doc.ents``: a discontinuous entity or two overlapping entities
    raise ValueError naming the doc and the entities, nothing is dropped.
    """
    entities = get_entities(doc, spans_key)
    spans = []
    for entity in entities:
        if entity.is_discontinuous:
            raise ValueError(
                f"doc {_doc_excerpt(doc)}: the {entity.label} entity '{entity.text}' is "
                "discontinuous and cannot be written to doc.ents"
            )
        start, end = entity.fragments[0]
        if spans and start < spans[-1].end:
            raise ValueError(
                f"doc {_doc_excerpt(doc)}: the {entity.label} entity '{entity.text}' overlaps "
                f"the {spans[-1].label_} entity '{spans[-1].text}'; doc.ents holds flat entities only"
            )
        spans.append(Span(doc, start, end, label=entity.label))
    doc.ents = spans
