"""Annotations at character offsets <-> the ``doc.spans`` contract: the one place that decides how
an annotation of brat, BioC, PubTator or Label Studio becomes an entity.

Each format module only maps its records to a text and ``Mention``s: one annotation's id, label,
one ``[start, end)`` range per location (several: a discontinuous entity), the text the source
says it covers, and ``extra`` (whatever else the source holds for it: infons, concept ids,
columns; kept for the way back). ``Reading.doc`` makes the Doc, by these rules:

* **Text.** The tokenizer must keep the text exactly (offsets count its characters).
* **An annotation's text** (``text_matches``) is the text at its offsets when, whitespace runs
  being alike, it is its pieces in order separated only by whitespace or ellipsis marks (``...``,
  ``…``, ``[...]``, ``[…]``, ``(...)``; brat joins them with a space, bconv with `` ... ``), or
  the text that spans all the pieces. Otherwise the annotation is listed (``TEXT_DIFFERS``).
* **Whitespace at a range's edges** is not aligned (Label Studio selections often end in a
  space); the source's ranges are kept for the way back.
* **A boundary inside a token** splits that token there with spaCy's retokenizer, so every
  annotation its authors made becomes an entity; each split is named on the Doc
  (``TOKENS_SPLIT_KEY``: the token, its pieces, the annotation and its file:line; printed by
  ``convert`` through ``split_tokens_named``), since a boundary inside a word is often an
  annotation's mistake. With ``split_tokens=False`` the annotation is listed instead (``INSIDE_TOKEN``).
* **Sentences.** The reader gives the text's parts: where sentences start that the source states
  (BioC ``<sentence>`` elements, passages, a PubTator abstract) and where spaCy's sentencizer may
  set more (``sentencizer``; without it only the source's sentences are set). A boundary is never
  set inside an entity (from its first to its last token): those sentences stay one, counted
  (``SENTENCES_JOINED_KEY``), so a segment never cuts an entity.
* **Nothing is dropped silently.** An annotation that cannot be an entity, and a line or record the
  reader does not know, is listed on the Doc (``SKIPPED_KEY``: what, kind, why) and counted per
  kind (``IGNORED_KEY``; ``NOT_READ_KEY`` for what was not read), or, with ``strict``, raises
  ``FormatError`` at the first.

Entities keep their source ids as ``span.id_``; ``SOURCE_KEY`` keeps each source annotation's label,
ranges, extra and (where it is not the pieces joined by a space) text. ``mentions_of`` is the way
back: a doc's entities as mentions, with the source annotation's ranges, text and extra where the
entity is that annotation unchanged. Relations a reader keeps are ``RELATIONS_KEY`` (``keep_relations``),
written back by the same format's writer; they never train.
"""
import bisect
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.attrs import IDX, NORM, SENT_START
from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..entities import Entity, get_entities, set_entities
from ..messages import lone_surrogate
from .base import (
    IGNORED_KEY,
    NOT_READ_KEY,
    RELATIONS_KEY,
    SENTENCES_JOINED_KEY,
    SKIPPED_KEY,
    SOURCE_KEY,
    TOKENS_SPLIT_KEY,
    FormatError,
)

Range = Tuple[int, int]  # [start, end) characters of the Doc's text
Tokenizer = Callable[[str], Doc]
TOKENIZERS = ("spacy", "whitespace")

# Kinds of annotations that cannot be entities (the keys of the counts).
INSIDE_TOKEN = "boundary inside a token"
TEXT_DIFFERS = "text differs from its offsets"
OUTSIDE = "outside its passage"
OUTSIDE_TEXT = "outside the text"
RELATION = "relation"
EMPTY = "empty location"
NO_TYPE = "no type"
# What a reader passed over (NOT_READ_KEY).
UNKNOWN = "unknown line or element"

# A run of dots is one ellipsis, taken whole (atomic): a run that could be cut into several let a
# mismatching text with many dots backtrack exponentially (40 dots: minutes).
_ELLIPSIS = r"(?:(?>\.(?:\s?\.)+)|[\u2025\u2026\u22ef])"
_GAP = rf"(?:\s|{_ELLIPSIS}|[\[(]\s*{_ELLIPSIS}\s*[\])])*"
_WORD = re.compile(r"\S+")


@dataclass
class Mention:
    """An annotation at character offsets: id, label, ranges (one per location), the source's text, extra."""

    id: str
    label: str
    ranges: List[Range]
    text: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    score: Optional[float] = None
    at: Optional[str] = None  # where the source has it (file:line), for messages; not kept


def check_tokenizer(tokenizer: str = "spacy", **_) -> None:
    """ValueError for a tokenizer option that is not 'spacy' (the pipeline's) or 'whitespace'."""
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer must be 'spacy' or 'whitespace', got {tokenizer!r}")


# ---------------------------------------------------------------- the rules


def text_matches(doc_text: str, ranges: Sequence[Range], text: Optional[str]) -> bool:
    """Whether ``text`` (None: no text to check) is the text at ``ranges`` of ``doc_text``: its
    pieces in order (as given, or by position) separated only by whitespace or ellipsis marks, or
    the text spanning all of them; whitespace runs match any whitespace run, whitespace at the
    edges is not compared, and characters are compared composed (NFC). Linear in the annotation's
    text, not in the span of text its pieces reach over."""
    if text is None or not ranges:
        return True
    text = unicodedata.normalize("NFC", text).strip()
    if _words_are(doc_text, min(s for s, _ in ranges), max(e for _, e in ranges), text.split()):
        return True
    for order in (list(ranges), sorted(ranges)):
        pattern = _GAP.join(_alike(doc_text[start:end]) for start, end in order)
        if re.fullmatch(pattern, text):
            return True
    return False


def _words_are(doc_text: str, start: int, end: int, words: List[str]) -> bool:
    """Whether the words (whitespace-separated, composed) of ``doc_text[start:end]`` are ``words``,
    read one at a time up to the first that differs: the text spanning a discontinuous
    annotation's pieces may be most of the document (a pattern of it, compiled for each
    annotation, made reading quadratic)."""
    found = _WORD.finditer(doc_text, start, end)
    for word in words:
        match = next(found, None)
        if match is None or unicodedata.normalize("NFC", match.group()) != word:
            return False
    return next(found, None) is None


def _alike(piece: str) -> str:
    """A pattern for ``piece`` in which each whitespace run matches any whitespace run (and
    whitespace at its edges none)."""
    return r"\s+".join(re.escape(word) for word in unicodedata.normalize("NFC", piece).split())


def fragment_text(text: str, ranges: Sequence[Range]) -> str:
    """The text of ranges of ``text``, joined by a space (the text of a discontinuous annotation)."""
    return " ".join(text[start:end] for start, end in ranges)


def trimmed(text: str, start: int, end: int) -> Optional[Range]:
    """The range without whitespace at its edges; None when it is all whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


# ---------------------------------------------------------------- making the Doc


@dataclass(frozen=True)
class Reading:
    """How a standoff reader makes its Docs (one set of options for brat, BioC, PubTator and Label
    Studio): the vocab, the tokenizer (None: whitespace), whether tokens are split at annotation
    boundaries, whether spaCy's sentencizer sets sentences where the source states none, whether
    to stop at the first annotation or record that is not read (``strict``), whether to compare
    each annotation's text with its offsets."""

    vocab: Vocab
    spans_key: str = "w2ner"
    tokenizer: Optional[Tokenizer] = None
    split_tokens: bool = True
    sentencizer: bool = True
    strict: bool = False
    check_text: bool = True

    def skips(self, where: str) -> "Skips":
        return Skips(where, self.strict)

    def doc(self, text: str, mentions: Iterable[Mention], skips: "Skips", where: str, parts: Optional[List[Tuple[int, bool]]] = None) -> Doc:
        """The Doc of ``text`` with the mentions that can be entities (module docstring).

        ``parts``: (character, sentencize) where the source starts a sentence or a passage, and
        whether the sentencizer may set boundaries after it (default: the text is one part).
        Linear in the text's length: ``doc.text`` is built from the tokens on every call, so the
        text is passed on, never asked of the doc again."""
        doc = tokenize_exactly(text, self.vocab, self.tokenizer, where)
        given = [(doc[i].idx, False) for i in _sentence_starts(doc)]
        parts = sorted((parts if parts is not None else [(0, True)]) + given)
        mentions = [m for m in mentions if self._text_checked(text, m, skips)]
        cuts = _cuts(doc, text, mentions, parts, where)
        if cuts and self.split_tokens:
            doc, splits = split_tokens(doc, cuts)
            doc.user_data[TOKENS_SPLIT_KEY] = splits
        _put(doc, text, mentions, self.spans_key, skips)
        set_sentences(doc, parts, self.sentencizer, self.spans_key)
        return doc

    def _text_checked(self, doc_text: str, mention: Mention, skips: "Skips") -> bool:
        if not self.check_text or text_matches(doc_text, mention.ranges, mention.text):
            return True
        expected = fragment_text(doc_text, mention.ranges)
        skips.skip(mention.id, TEXT_DIFFERS, f"({mention.label}) its text {mention.text!r} differs from the text at its offsets {expected!r}", at=mention.at)
        return False


def tokenize_exactly(text: str, vocab: Vocab, tokenizer: Optional[Tokenizer], where: str) -> Doc:
    """The Doc of ``text`` in ``vocab`` (whitespace tokens without a tokenizer; sentence boundaries
    kept); FormatError naming ``where`` if the text holds a lone surrogate (JSON readers) or the
    tokenizer changed it (offsets need it exact)."""
    surrogate = lone_surrogate(text)
    if surrogate is not None:
        raise FormatError(f"{where}: the text {surrogate}")
    if tokenizer is None:
        return whitespace_tokenize(text, vocab)
    doc = tokenizer(text)
    if doc.text != text:
        raise FormatError(f"{where}: the tokenizer changed the text; character offsets need the exact text")
    if doc.vocab is not vocab:
        sent_starts = doc.to_array([SENT_START]).astype("int64").tolist() if doc.has_annotation("SENT_START") else None
        words, spaces = [token.text for token in doc], [bool(token.whitespace_) for token in doc]
        doc = Doc(vocab, words=words, spaces=spaces, sent_starts=sent_starts)
    return doc


def _sentence_starts(doc: Doc) -> List[int]:
    """The tokens a sentence starts at, where the doc has sentence boundaries (else none)."""
    if not len(doc) or not doc.has_annotation("SENT_START"):
        return []
    starts = numpy.flatnonzero(doc.to_array([SENT_START]).astype("int64") == 1).tolist()
    return starts if starts[:1] == [0] else [0, *starts]  # the first token starts one, set or not


def whitespace_tokenize(text: str, vocab: Vocab) -> Doc:
    """A Doc of the whitespace-separated words of ``text``, with ``doc.text == text``.

    A single space after a word is its trailing whitespace; other whitespace
    (newlines, runs of spaces) becomes whitespace tokens, as spaCy's tokenizer does.
    """
    words: List[str] = []
    spaces: List[bool] = []

    def add_gap(gap: str) -> None:
        if gap and words and not spaces[-1] and not words[-1].isspace() and gap[0] == " ":
            spaces[-1] = True
            gap = gap[1:]
        if gap:
            words.append(gap)
            spaces.append(False)

    position = 0
    for match in _WORD.finditer(text):
        add_gap(text[position : match.start()])
        words.append(match.group())
        spaces.append(False)
        position = match.end()
    add_gap(text[position:])
    return Doc(vocab, words=words, spaces=spaces)


def _cuts(doc: Doc, text: str, mentions: List[Mention], parts: List[Tuple[int, bool]], where: str) -> Dict[int, Dict[int, List[str]]]:
    """{token index: {character inside it: why it is cut there}}: where tokens must split, at the
    edges of each mention's ranges and where the source starts a part."""
    starts = doc.to_array(IDX).tolist()  # no Token object per token
    cuts: Dict[int, Dict[int, List[str]]] = {}

    def cut(char: int, why: str) -> None:
        i = bisect.bisect_right(starts, char) - 1
        if i >= 0 and starts[i] < char < starts[i] + len(doc[i]) and not doc[i].is_space:
            reasons = cuts.setdefault(i, {}).setdefault(char, [])
            if why not in reasons:
                reasons.append(why)

    for mention in mentions:
        for start, end in mention.ranges:
            edges = trimmed(text, start, end) or (start, start)
            why = f"{mention.at or where}: annotation {mention.id} ({mention.label}) {text[start:end]!r} at {start}-{end}"
            for char in sorted(set(edges)):
                cut(char, why)
    for char, _ in parts:
        cut(char, f"{where}: a passage or sentence the source starts at {char}")
    return cuts


def split_tokens(doc: Doc, cuts: Dict[int, Dict[int, List[str]]]) -> Tuple[Doc, List[Dict[str, Any]]]:
    """The doc with each token split at its cuts, and each split named: the token, its characters,
    its pieces and what cut it (``split_tokens_named``).

    The Doc is made anew from its words, in one pass: spaCy's retokenizer shifts the whole Doc for
    each split, so a long document with a split every few hundred tokens took quadratic time. What
    a tokenizer sets is kept as the retokenizer keeps it: a token's norm (a piece's is its text's),
    sentence starts (the first piece's is the token's; a later piece starts none), the user data."""
    words: List[str] = []
    spaces: List[bool] = []
    kept: List[int] = []  # for each new token, the old token it is (-1: a piece after a token's first)
    splits = []
    for token in doc:
        chars = cuts.get(token.i)
        if not chars:
            words.append(token.text)
            spaces.append(bool(token.whitespace_))
            kept.append(token.i)
            continue
        edges = [0, *(char - token.idx for char in sorted(chars)), len(token.text)]
        pieces = [token.text[a:b] for a, b in zip(edges, edges[1:])]
        by = [why for char in sorted(chars) for why in chars[char]]
        splits.append({"token": token.text, "start": token.idx, "end": token.idx + len(token.text), "pieces": pieces, "by": list(dict.fromkeys(by))})
        words += pieces
        spaces += [False] * (len(pieces) - 1) + [bool(token.whitespace_)]
        kept += [-token.i - 2] + [-1] * (len(pieces) - 1)
    split = Doc(doc.vocab, words=words, spaces=spaces)
    old = doc.to_array([NORM, SENT_START]).astype("int64").reshape(len(doc), 2)
    kept_rows = numpy.asarray(kept, dtype="int64")  # i: token i; -i-2: the first piece of token i; -1: a later piece
    values = numpy.zeros((len(words), 2), dtype="int64")  # norm 0: the lexeme's (the piece's text's)
    values[kept_rows >= 0] = old[kept_rows[kept_rows >= 0]]
    values[kept_rows <= -2, 1] = old[-kept_rows[kept_rows <= -2] - 2, 1]
    if doc.has_annotation("SENT_START"):
        values[kept_rows == -1, 1] = -1
    columns = [0, 1] if doc.has_annotation("SENT_START") else [0]
    split.from_array([(NORM, SENT_START)[c] for c in columns], values[:, columns].astype("uint64"))
    split.user_data.update(doc.user_data)
    return split, splits


def split_tokens_named(doc: Doc) -> List[str]:
    """One line per token a reader split at an annotation's boundary: where (file:line), which
    annotation, the token and its pieces."""
    lines = []
    for split in doc.user_data.get(TOKENS_SPLIT_KEY) or []:
        if not isinstance(split, dict):  # a count (DocBins converted before 0.4.0)
            continue
        pieces = " + ".join(repr(piece) for piece in split["pieces"])
        for why in split["by"]:
            lines.append(f"{why} splits the token {split['token']!r} at {split['start']}-{split['end']} into {pieces}")
    return lines


def _put(doc: Doc, text: str, mentions: List[Mention], spans_key: str, skips: "Skips") -> None:
    """Write the mentions that align to tokens as entities (ids kept, unique; extra saved)."""
    entities, ids, extras = [], [], {}
    for mention in mentions:
        tokens = _aligned_tokens(doc, text, mention, skips)
        if tokens is None:
            continue
        entity_id = mention.id
        while entity_id in extras:  # a repeated source id: unique on the doc, the source's kept to write back
            entity_id = f"{mention.id}#{len(extras)}"
            mention.extra = {**mention.extra, "source_id": mention.id}
        entities.append((mention.label, tokens, mention.score))
        ids.append(entity_id)
        extras[entity_id] = _saved(text, mention)
    if entities and any(score is None for _, _, score in entities):
        entities = [(label, tokens, None) for label, tokens, _ in entities]
    set_entities(doc, entities, spans_key, ids=ids)
    if extras:
        doc.user_data[SOURCE_KEY] = extras
    skips.save(doc)


def _saved(doc_text: str, mention: Mention) -> Dict[str, Any]:
    """What the way back needs of a source annotation: label, ranges (locations), extra, and its
    text (or None: it had none) where it is not the ranges' text joined by a space."""
    saved: Dict[str, Any] = {"label": mention.label, "ranges": [list(r) for r in mention.ranges], "extra": mention.extra}
    if mention.text != fragment_text(doc_text, mention.ranges):
        saved["text"] = mention.text  # None where the source had no text
    return saved


def _aligned_tokens(doc: Doc, text: str, mention: Mention, skips: "Skips") -> Optional[List[int]]:
    tokens: List[int] = []
    for start, end in mention.ranges:
        span = _token_span(doc, text, start, end)
        if span is None:
            if trimmed(text, start, end) is None:
                skips.skip(mention.id, EMPTY, f"({mention.label}) {start}-{end} has no text", at=mention.at)
            else:
                skips.skip(
                    mention.id, INSIDE_TOKEN,
                    f"({mention.label}) {text[start:end]!r} at {start}-{end} does not start and end on token boundaries "
                    f"(tokens there: {_tokens_near(doc, text, start, end)}; tokens are split there unless --no-split-tokens)", at=mention.at,
                )  # fmt: skip
            return None
        tokens.extend(range(span.start, span.end))
    return sorted(set(tokens))


def _token_span(doc: Doc, text: str, start: int, end: int):
    """The tokens of [start, end) without whitespace at its edges, or None where they do not align."""
    edges = trimmed(text, start, end)
    span = None if edges is None else doc.char_span(*edges, alignment_mode="strict")
    return span if span is not None and len(span) else None


def _tokens_near(doc: Doc, text: str, start: int, end: int) -> str:
    edges = trimmed(text, start, end) or (start, max(end, start + 1))
    span = doc.char_span(*edges, alignment_mode="expand")
    return ", ".join(f"{t.text!r}@{t.idx}" for t in span or ()) or "none"


# ---------------------------------------------------------------- sentences


def set_sentences(doc: Doc, parts: List[Tuple[int, bool]], sentencizer: bool, spans_key: str) -> None:
    """Sentence starts at the parts' characters (the first token there that is not whitespace),
    and, with ``sentencizer``, spaCy's sentencizer's inside the parts that allow it; none inside
    an entity (joined, counted). Without the sentencizer and without a part the source states
    (``sentencize=False``), the doc gets no sentence boundaries."""
    if not len(doc) or not (sentencizer or any(not sentencize for _, sentencize in parts)):
        return
    starts = doc.to_array(IDX).tolist()  # no Token object per token
    is_start = [False] * len(doc)
    for char, _ in parts:
        _mark(doc, is_start, bisect.bisect_left(starts, char))
    if sentencizer:
        part_starts = [char for char, _ in parts]
        guesses = _sentencizer().predict([doc])[0]
        for i, guess in enumerate(guesses):
            part = bisect.bisect_right(part_starts, starts[i]) - 1
            if guess and (part < 0 or parts[part][1]):
                _mark(doc, is_start, i)
    is_start[0] = True
    is_start = numpy.array(is_start)
    inside = _inside_an_entity(len(doc), get_entities(doc, spans_key))
    joined = int((is_start & inside).sum())
    is_start &= ~inside
    # In one array operation: spaCy's token.is_sent_start setter checks the whole Doc each time.
    values = numpy.where(is_start, 1, -1).astype("int64").astype("uint64").reshape(-1, 1)
    doc.from_array([SENT_START], values)
    if joined:
        doc.user_data[SENTENCES_JOINED_KEY] = joined


def _inside_an_entity(n_tokens: int, entities: Sequence[Entity]) -> numpy.ndarray:
    """(n_tokens,) bool: the tokens after an entity's first and up to its last, in one pass over
    the entities (not over each one's tokens: a discontinuous entity may reach across the document)."""
    edges = numpy.zeros(n_tokens + 1, dtype="int64")
    numpy.add.at(edges, [e.tokens[0] + 1 for e in entities], 1)
    numpy.add.at(edges, [e.tokens[-1] + 1 for e in entities], -1)
    return numpy.cumsum(edges[:-1]) > 0


def _mark(doc: Doc, is_start: List[bool], i: int) -> None:
    """Mark the first token from ``i`` on that is not whitespace as a sentence start."""
    while i < len(doc) and doc[i].is_space:
        i += 1
    if i < len(doc):
        is_start[i] = True


_SENTENCIZER = []


def _sentencizer():
    if not _SENTENCIZER:
        from spacy.pipeline import Sentencizer

        _SENTENCIZER.append(Sentencizer())
    return _SENTENCIZER[0]


# ---------------------------------------------------------------- what is not an entity


class Skips:
    """Where a reader reports what of its source is not an entity or not read: listed on the doc
    and counted per kind, or raised at the first (strict)."""

    def __init__(self, where: str, strict: bool):
        self.where, self.strict = where, strict
        self.listed: List[List[str]] = []
        self.ignored: Dict[str, int] = {}
        self.not_read: Dict[str, int] = {}
        self._later: List[Tuple[str, str, str]] = []

    def skip(self, annotation_id: str, kind: str, why: str, what: str = "annotation", at: Optional[str] = None) -> None:
        """An annotation (or relation, ``what``) that is not an entity; ``at``: where it is, if
        more precisely than the document (file:line)."""
        if self.strict:
            raise FormatError(f"{at or self.where}: {what} {annotation_id}: {why} (--strict)")
        self.listed.append([f"{what} {annotation_id}", kind, why])
        self.ignore(kind)

    def ignore(self, kind: str) -> None:
        """Count an annotation that is not an entity without listing it (brat's relations, events, notes)."""
        self.ignored[kind] = self.ignored.get(kind, 0) + 1

    def later(self, annotation_id: str, kind: str, why: str) -> None:
        """Skip once the annotations are aligned (relations), so ``strict`` stops at an annotation first."""
        self._later.append((annotation_id, kind, why))

    def unknown(self, location: str, why: str, kind: str = UNKNOWN) -> None:
        """A line or record the reader does not know, at ``location`` (file:line): passed over."""
        if self.strict:
            raise FormatError(f"{location}: {why} (--strict)")
        self.listed.append([location, kind, why])
        self.count(kind)

    def count(self, kind: str, n: int = 1) -> None:
        """Count something of the source that was not read (not listed: e.g. annotations not chosen)."""
        self.not_read[kind] = self.not_read.get(kind, 0) + n

    def save(self, doc: Doc) -> None:
        """Record what was skipped and not read on the doc (added to what it holds)."""
        for later in self._later:
            self.skip(*later, what="relation")
        self._later = []
        if self.listed:
            doc.user_data.setdefault(SKIPPED_KEY, []).extend(self.listed)
        for key, counts in ((IGNORED_KEY, self.ignored), (NOT_READ_KEY, self.not_read)):
            if counts:
                total = dict(doc.user_data.get(key, {}))
                for kind, n in counts.items():
                    total[kind] = total.get(kind, 0) + n
                doc.user_data[key] = total
        self.listed, self.ignored, self.not_read = [], {}, {}


def skipped(doc: Doc) -> List[Tuple[str, str, str]]:
    """What of the source did not become an entity or was not read: (what, kind, why)."""
    return [tuple(item) for item in doc.user_data.get(SKIPPED_KEY, [])]


def keep_relations(doc: Doc, format_name: str, relations: List[Any]) -> None:
    """Keep a source's relations with the doc, for the writer of ``format_name`` (never entities)."""
    if relations:
        doc.user_data[RELATIONS_KEY] = {"format": format_name, "items": relations}


def relations_of(doc: Doc, format_name: str) -> List[Any]:
    """The relations read from ``format_name`` that the doc keeps ([] for another format's)."""
    kept = doc.user_data.get(RELATIONS_KEY) or {}
    return list(kept.get("items", [])) if kept.get("format") == format_name else []


# ---------------------------------------------------------------- the way back


def mentions_of(doc: Doc, spans_key: str) -> List[Mention]:
    """The doc's entities as mentions: ranges in characters (one per fragment), id, score, and the
    source's ranges, text and extra where the entity is the source annotation unchanged."""
    extras = doc.user_data.get(SOURCE_KEY, {})
    doc_text = doc.text
    mentions = []
    for entity in get_entities(doc, spans_key):
        entity_id = entity.spans[0].id_ if entity.spans else ""
        saved = extras.get(entity_id)
        if saved is not None and saved["label"] == entity.label and _tokens_of_ranges(doc, doc_text, saved["ranges"]) == entity.tokens:
            ranges = [tuple(r) for r in saved["ranges"]]
            text = saved.get("text", fragment_text(doc_text, ranges))
            mentions.append(Mention(entity_id, str(entity.label), ranges, text, dict(saved["extra"]), entity.score))
            continue
        ranges = [(doc[start].idx, doc[end - 1].idx + len(doc[end - 1])) for start, end in entity.fragments]
        mentions.append(Mention(entity_id, str(entity.label), ranges, fragment_text(doc_text, ranges), {}, entity.score))
    return mentions


def _tokens_of_ranges(doc: Doc, text: str, ranges: Sequence[Sequence[int]]) -> Optional[Tuple[int, ...]]:
    tokens = set()
    for start, end in ranges:
        span = _token_span(doc, text, start, end)
        if span is None:
            return None
        tokens.update(range(span.start, span.end))
    return tuple(sorted(tokens))


def write_each(writer, docs: Iterable[Doc]) -> None:
    """Write docs one at a time with a streaming writer (``write(doc, index)``, ``close()``)."""
    try:
        for index, doc in enumerate(docs):
            writer.write(doc, index)
    finally:
        writer.close()
