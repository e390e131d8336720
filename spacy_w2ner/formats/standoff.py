"""Annotations at character offsets <-> the ``doc.spans`` contract, for BioC, PubTator and Label Studio.

A ``Mention`` is one annotation of a source at character offsets of the Doc's text: its id, its
label, one ``[start, end)`` range per location (several: a discontinuous entity), the text the
source says it covers, and ``extra``: whatever else the source holds for it (infons, concept
ids, columns), kept for the way back.

``put_mentions`` aligns each mention's ranges to the Doc's tokens and writes those that can be
entities, with their ids as ``span.id_``. One that cannot (a boundary inside a token, a text that
differs from the text at its offsets) is never dropped silently: ``skip`` lists it in
``doc.user_data[SKIPPED_KEY]`` as ``[id, kind, why]`` and counts it per kind in
``doc.user_data[IGNORED_KEY]`` (so ``CorpusSummary`` reports it), or, with ``strict``, raises
``FormatError`` at the first. ``extra`` goes to ``doc.user_data[EXTRA_KEY][id]`` with the
mention's label and ranges (its locations as the source gave them, even where two adjacent ones
make one fragment).

``mentions_of`` is the way back: a doc's entities as mentions with character ranges, their score,
and the ``extra`` of the source annotation they still are (same id, label and ranges; a predicted
entity that differs gets none).
"""
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from spacy.tokens import Doc

from ..entities import get_entities, set_entities
from .base import IGNORED_KEY, FormatError

SKIPPED_KEY = "w2ner_skipped"  # [[annotation id, kind, why], ...]: annotations that are not entities
EXTRA_KEY = "w2ner_extra"  # {annotation id: {"label", "ranges", "extra"}}: what the source held besides

Range = Tuple[int, int]  # [start, end) characters of the Doc's text

# Kinds of annotations that cannot be entities (the keys of the counts).
INSIDE_TOKEN = "boundary inside a token"
TEXT_DIFFERS = "text differs from its offsets"
OUTSIDE = "outside its passage"
RELATION = "relation"
EMPTY = "empty location"


@dataclass
class Mention:
    """An annotation at character offsets: id, label, ranges (one per location), the source's text, extra."""

    id: str
    label: str
    ranges: List[Range]
    text: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    score: Optional[float] = None


def fragment_text(text: str, ranges: Sequence[Range]) -> str:
    """The text of ranges of ``text``, joined by a space (the text of a discontinuous annotation)."""
    return " ".join(text[start:end] for start, end in ranges)


def text_matches(doc_text: str, mention: Mention) -> bool:
    """Whether the mention's own text (when it has one) is the text at its ranges, joined by a
    space or by nothing."""
    if mention.text is None:
        return True
    pieces = [doc_text[start:end] for start, end in mention.ranges]
    return mention.text in (" ".join(pieces), "".join(pieces))


class Skips:
    """Where a reader reports annotations that are not entities: listed per doc, or raised (strict)."""

    def __init__(self, where: str, strict: bool):
        self.where, self.strict = where, strict
        self.listed: List[List[str]] = []
        self._later: List[Tuple[str, str, str]] = []

    def skip(self, annotation_id: str, kind: str, why: str) -> None:
        if self.strict:
            raise FormatError(f"{self.where}: annotation {annotation_id}: {why} (--strict)")
        self.listed.append([annotation_id, kind, why])

    def later(self, annotation_id: str, kind: str, why: str) -> None:
        """Skip once the annotations are aligned (relations), so ``strict`` stops at an annotation first."""
        self._later.append((annotation_id, kind, why))

    def save(self, doc: Doc) -> None:
        """Record the skipped annotations on the doc (added to what it holds)."""
        for later in self._later:
            self.skip(*later)
        self._later = []
        if not self.listed:
            return
        doc.user_data.setdefault(SKIPPED_KEY, []).extend(self.listed)
        counts = dict(doc.user_data.get(IGNORED_KEY, {}))
        for _, kind, _ in self.listed:
            counts[kind] = counts.get(kind, 0) + 1
        doc.user_data[IGNORED_KEY] = counts


def put_mentions(doc: Doc, mentions: Iterable[Mention], spans_key: str, skips: Skips) -> None:
    """Write the mentions that can be entities to ``doc.spans[spans_key]`` (ids kept, extra saved);
    report the others to ``skips``, which is saved on the doc."""
    entities, ids, extras = [], [], {}
    for mention in mentions:
        tokens = _aligned_tokens(doc, mention, skips)
        if tokens is None:
            continue
        entities.append((mention.label, tokens, mention.score))
        ids.append(mention.id)
        extras[mention.id] = _saved(doc.text, mention)
    if entities and any(score is None for _, _, score in entities):
        entities = [(label, tokens, None) for label, tokens, _ in entities]
    set_entities(doc, entities, spans_key, ids=ids)
    if extras:
        doc.user_data[EXTRA_KEY] = extras
    skips.save(doc)


def _saved(doc_text: str, mention: Mention) -> Dict[str, Any]:
    """What the way back needs of a source annotation: label, ranges (locations), extra, and its
    text where it is not the ranges' text joined by a space."""
    saved: Dict[str, Any] = {"label": mention.label, "ranges": [list(r) for r in mention.ranges], "extra": mention.extra}
    if mention.text is not None and mention.text != fragment_text(doc_text, mention.ranges):
        saved["text"] = mention.text
    return saved


def _aligned_tokens(doc: Doc, mention: Mention, skips: Skips) -> Optional[List[int]]:
    if not text_matches(doc.text, mention):
        expected = fragment_text(doc.text, mention.ranges)
        skips.skip(mention.id, TEXT_DIFFERS, f"({mention.label}) its text {mention.text!r} differs from the text at its offsets {expected!r}")
        return None
    tokens: List[int] = []
    for start, end in mention.ranges:
        span = doc.char_span(start, end, alignment_mode="strict")
        if span is None or len(span) == 0:
            skips.skip(
                mention.id, INSIDE_TOKEN,
                f"({mention.label}) {doc.text[start:end]!r} at {start}-{end} does not start and end on token boundaries "
                f"(tokens there: {_tokens_near(doc, start, end)})",
            )  # fmt: skip
            return None
        tokens.extend(range(span.start, span.end))
    return tokens


def _tokens_near(doc: Doc, start: int, end: int) -> str:
    tokens = [t for t in doc if t.idx < max(end, start + 1) and t.idx + len(t) > start]
    return ", ".join(f"{t.text!r}@{t.idx}" for t in tokens) or "none"


def mentions_of(doc: Doc, spans_key: str) -> List[Mention]:
    """The doc's entities as mentions: ranges in characters (one per fragment), id, score, and the
    source's extra where the entity is the source annotation unchanged."""
    extras = doc.user_data.get(EXTRA_KEY, {})
    mentions = []
    for entity in get_entities(doc, spans_key):
        entity_id = entity.spans[0].id_ if entity.spans else ""
        saved = extras.get(entity_id)
        if saved is not None and saved["label"] == entity.label and _tokens_of_ranges(doc, saved["ranges"]) == entity.tokens:
            ranges = [tuple(r) for r in saved["ranges"]]
            text = saved.get("text", fragment_text(doc.text, ranges))
            mentions.append(Mention(entity_id, str(entity.label), ranges, text, dict(saved["extra"]), entity.score))
            continue
        ranges = [(doc[start].idx, doc[end - 1].idx + len(doc[end - 1])) for start, end in entity.fragments]
        mentions.append(Mention(entity_id, str(entity.label), ranges, fragment_text(doc.text, ranges), {}, entity.score))
    return mentions


def _tokens_of_ranges(doc: Doc, ranges: Sequence[Sequence[int]]) -> Optional[Tuple[int, ...]]:
    tokens = set()
    for start, end in ranges:
        span = doc.char_span(start, end, alignment_mode="strict")
        if span is None:
            return None
        tokens.update(range(span.start, span.end))
    return tuple(sorted(tokens))


def skipped(doc: Doc) -> List[Tuple[str, str, str]]:
    """The annotations of the source that did not become entities: (id, kind, why)."""
    return [tuple(item) for item in doc.user_data.get(SKIPPED_KEY, [])]


def write_each(writer, docs: Iterable[Doc]) -> None:
    """Write docs one at a time with a streaming writer (``write(doc, index)``, ``close()``)."""
    try:
        for index, doc in enumerate(docs):
            writer.write(doc, index)
    finally:
        writer.close()
