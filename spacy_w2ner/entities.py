"""Entities on a Doc: the ``doc.spans`` contract, and the one entity type of the package.

An entity is a label and a sorted tuple of token indices (``Entity``). In
``doc.spans[spans_key]`` it is written as its fragments (maximal runs of
consecutive tokens), one ``Span`` each, with the entity's label. All fragments
of an entity share one ``span.id_``, unique within the doc; spans without an id
are entities of their own (so a ``spancat``-style group reads as contiguous
entities). ``doc.spans[spans_key].attrs["scores"]`` holds one confidence per
span; the fragments of an entity share its score.
"""
from dataclasses import dataclass, field, replace
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
from spacy.tokens import Doc, Span
from spacy.training import Example

TokenIndices = Tuple[int, ...]
Fragment = Tuple[int, int]  # token offsets [start, end)
Label = Union[str, int]  # the label's name on a Doc; its id inside the model and the grid codec

SCORES_ATTR = "scores"


@dataclass(frozen=True)
class Entity:
    """One entity: a label and the sorted, unique indices of its tokens.

    Two entities are equal when their label and tokens are (exact-match scoring);
    ``score`` (the weakest-link confidence, None for gold), ``text`` (the fragments'
    texts joined by a space) and ``spans`` (its ``doc.spans`` fragments) are extras
    filled in where known. The grid codec and the model use the label's id as label.
    """

    label: Label
    tokens: TokenIndices
    score: Optional[float] = field(default=None, compare=False)
    text: str = field(default="", compare=False)
    spans: Tuple[Span, ...] = field(default=(), compare=False, repr=False)

    @property
    def fragments(self) -> Tuple[Fragment, ...]:
        return fragments_of(self.tokens)

    @property
    def is_discontinuous(self) -> bool:
        return any(b != a + 1 for a, b in zip(self.tokens, self.tokens[1:]))

    @property
    def key(self) -> Tuple[Label, TokenIndices]:
        """(label, token indices): what makes two entities the same."""
        return (self.label, self.tokens)

    def with_label(self, label: Label) -> "Entity":
        return replace(self, label=label)

    def shifted(self, offset: int) -> "Entity":
        """The same entity with ``offset`` added to its token indices."""
        return replace(self, tokens=tuple(i + offset for i in self.tokens))


EntityLike = Union[Entity, Tuple[Label, Sequence[int]], Tuple[Label, Sequence[int], Optional[float]]]


def as_entity(entity: EntityLike) -> Entity:
    """An ``Entity`` with sorted, unique tokens, from an Entity or a (label, tokens[, score]) tuple."""
    if isinstance(entity, Entity):
        label, tokens, score = entity.label, entity.tokens, entity.score
    else:
        label, tokens, *rest = entity
        score = rest[0] if rest else None
    normalized = tuple(sorted({int(i) for i in tokens}))
    if not normalized:
        raise ValueError(f"The {label} entity has no tokens")
    if isinstance(entity, Entity) and normalized == entity.tokens:
        return entity
    return Entity(label, normalized, score)


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


def _position(entity: Entity):
    """Entities are ordered by their tokens, then label."""
    return (entity.tokens, str(entity.label))


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
                "of one entity must share its label (a doc merged by Doc.from_docs keeps each part's "
                "ids: merge the entities with set_entities, as docs/doc-contract.md shows)"
            )
        score = None if scores is None else float(min(scores[i] for i in members))
        entities.append(_make_entity(doc, labels.pop(), spans, score))
    entities.sort(key=_position)
    return entities


def _make_entity(doc: Doc, label: str, spans: Sequence[Span], score: Optional[float]) -> Entity:
    tokens = tuple(sorted({i for span in spans for i in range(span.start, span.end)}))
    return Entity(label, tokens, score, _text(doc, tokens), tuple(spans))


def _text(doc: Doc, tokens: TokenIndices) -> str:
    return " ".join(doc[start:end].text for start, end in fragments_of(tokens))


def set_entities(
    doc: Doc,
    entities: Iterable[EntityLike],
    spans_key: str = "w2ner",
    ids: Optional[Sequence[str]] = None,
) -> None:
    """Write entities to ``doc.spans[spans_key]``.

    ``entities``: ``Entity`` objects or ``(label, token indices[, score])`` tuples.
    Entities are written in position order; entity k gets id ``e{k}``, or, when
    ``ids`` is given (one non-empty, unique id per entity, in the order of
    ``entities``), its own id (e.g. a brat ``T3``). Scores go to
    ``attrs["scores"]`` when every entity has one.
    """
    entities = [as_entity(entity) for entity in entities]
    if ids is not None:
        ids = list(ids)
        if len(ids) != len(entities):
            raise ValueError(f"set_entities got {len(ids)} ids for {len(entities)} entities")
        if not all(isinstance(i, str) and i for i in ids) or len(set(ids)) != len(ids):
            raise ValueError(f"set_entities needs unique, non-empty string ids, got {ids}")
    order = sorted(range(len(entities)), key=lambda k: _position(entities[k]))
    spans: List[Span] = []
    span_scores: List[float] = []
    for position, k in enumerate(order):
        entity = entities[k]
        entity_id = f"e{position}" if ids is None else ids[k]
        for start, end in fragments_of(entity.tokens):
            spans.append(Span(doc, start, end, label=entity.label, span_id=entity_id))
            span_scores.append(np.nan if entity.score is None else entity.score)
    doc.spans[spans_key] = spans
    if entities and all(entity.score is not None for entity in entities):
        doc.spans[spans_key].attrs[SCORES_ATTR] = np.asarray(span_scores, dtype="float32")
    elif not entities:
        doc.spans[spans_key].attrs[SCORES_ATTR] = np.zeros((0,), dtype="float32")


def check_threshold(value) -> float:
    """``value`` as a float if it can be an entity score threshold (0 to 1); ValueError if not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"threshold must be between 0 and 1, got {value!r}")
    return float(value)


def scoring_at_least(entities: Iterable[Entity], threshold: float) -> List[Entity]:
    """The entities whose score is at least ``threshold`` (unscored ones are kept; 0 keeps all):
    the rule of the component's ``threshold``, annotate's records and the service's drawings."""
    if threshold <= 0.0:
        return list(entities)
    return [entity for entity in entities if entity.score is None or entity.score >= threshold]


def without_edge_whitespace(entities: Iterable[Entity], doc: Doc) -> List[Entity]:
    """The entities with the whitespace tokens (line breaks, runs of spaces) at the edges of
    their fragments removed, so no entity or fragment starts or ends on one.

    Whitespace inside a fragment stays ("stomach \\n pain" is one contiguous entity). An entity
    of whitespace tokens only is no entity and goes; entities made equal by trimming are kept
    once, with the higher score.
    """
    kept: Dict[Entity, Entity] = {}
    for entity in entities:
        tokens = tuple(i for start, end in entity.fragments for i in _trimmed(doc, start, end))
        if not tokens:
            continue
        trimmed = entity if tokens == entity.tokens else replace(entity, tokens=tokens)
        previous = kept.get(trimmed)
        if previous is None or (trimmed.score or 0.0) > (previous.score or 0.0):
            kept[trimmed] = trimmed
    return list(kept.values())


def _trimmed(doc: Doc, start: int, end: int) -> range:
    while start < end and doc[start].is_space:
        start += 1
    while end > start and doc[end - 1].is_space:
        end -= 1
    return range(start, end)


def set_flat_ents(doc: Doc, spans_key: str) -> None:
    """``doc.ents``: the contiguous, non-overlapping entities of ``doc.spans[spans_key]``
    (``flat_entities``), every other token outside."""
    chosen = flat_entities(get_entities(doc, spans_key))
    doc.set_ents([Span(doc, e.tokens[0], e.tokens[-1] + 1, label=e.label) for e in chosen], default="outside")


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


def aligned_gold_entities(example: Example, spans_key: str) -> Tuple[List[Entity], List[Entity]]:
    """Gold entities of ``example.reference`` with token indices of ``example.predicted``.

    Returns the aligned entities, and the gold entities that could not be aligned
    (a fragment boundary falls inside a predicted token).
    """
    gold = get_entities(example.reference, spans_key)
    if _same_tokens(example.predicted, example.reference):
        return gold, []
    aligned: List[Entity] = []
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
            aligned.append(replace(entity, tokens=tokens_of(fragments), spans=()))
    return aligned, misaligned


def _same_tokens(a: Doc, b: Doc) -> bool:
    return len(a) == len(b) and all(x.idx == y.idx and len(x) == len(y) for x, y in zip(a, b))


def overlapping(entities: Sequence[Entity]) -> set:
    """Indices of the entities that share a token with another entity of the list."""
    owners: Dict[int, List[int]] = {}
    for k, entity in enumerate(entities):
        for i in entity.tokens:
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
