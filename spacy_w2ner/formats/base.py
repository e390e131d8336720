"""What every format shares: the error type, the counts of a conversion, reading text files."""
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Union

from spacy.tokens import Doc

from ..entities import Entity, get_entities, overlapping
from ..messages import not_utf8

# Keys of ``doc.user_data`` written by the readers (kept in a DocBin with user data).
NAME_KEY = "w2ner_name"  # brat: the document's name (path of the .txt without suffix)
IGNORED_KEY = "w2ner_ignored"  # brat: {kind: count} of annotations that are not entities
REPAIRED_KEY = "w2ner_repaired"  # tag formats: entities whose tag sequence was malformed
# Why an input a reader met is no document (a Label Studio task without annotations): such a Doc is
# counted and listed, never written or trained on.
NOT_A_DOCUMENT_KEY = "w2ner_not_a_document"
# Written by the standoff readers (brat, BioC, PubTator, Label Studio; see standoff.py):
SKIPPED_KEY = "w2ner_skipped"  # [[what, kind, why], ...]: what of the source did not become an entity
NOT_READ_KEY = "w2ner_not_read"  # {kind: count}: lines, elements, annotations of the source not read
SOURCE_KEY = "w2ner_source_annotations"  # {entity id: {"label", "ranges", "extra"[, "text"]}}: the source annotation
RELATIONS_KEY = "w2ner_relations"  # {"format": name, "items": [...]}: relations, written back by that format
TOKENS_SPLIT_KEY = "w2ner_tokens_split"  # [{token, start, end, pieces, by}]: tokens split where an annotation's boundary fell inside one
SENTENCES_JOINED_KEY = "w2ner_sentences_joined"  # sentence boundaries not set because an entity crosses them


class FormatError(ValueError):
    """Malformed corpus input; the message names the file and the line, record or doc."""


@dataclass
class CorpusSummary:
    """Counts kept by a conversion: what went in must come out.

    ``sentences`` is known when every doc is a sentence (``sentence_docs=True``,
    as for W2NER JSON, Dai, CoNLL and BMES input) or when every doc has sentence
    boundaries (then ``doc.sents`` is counted); otherwise it stays ``None`` and
    ``as_dict`` leaves it out. ``ignored`` counts annotations that are not entities
    (brat relations, events, attributes, notes), per kind; ``repaired`` counts
    entities read from a malformed tag sequence (e.g. a BIO entity starting with
    ``I-``); ``thw_conflicts`` counts, with ``conflicts`` (the grid codec's ``thw_conflicts``, given
    by the commands, so that formats need not know the grid), entities with the same first and last token as an
    entity of another label, which W2NER cannot learn (one label per tail-to-head grid
    cell: the first entity's). The three are left out of ``as_dict`` when there are none, as are
    ``not_documents``: inputs that were no document (``NOT_A_DOCUMENT_KEY``), per reason;
    ``relations``: relations kept with the docs (never entities); ``not_read``: lines, elements
    and annotations of the source a reader passed over, per kind; ``tokens_split``: tokens split
    so that an annotation's boundary falls between tokens; ``sentences_joined``: sentence
    boundaries left out because an entity crosses them.
    """

    documents: int = 0
    tokens: int = 0
    entities: int = 0
    discontinuous: int = 0
    overlapping: int = 0
    per_label: Counter = field(default_factory=Counter)
    sentence_docs: bool = False
    ignored: Counter = field(default_factory=Counter)
    repaired: int = 0
    thw_conflicts: int = 0
    not_documents: Counter = field(default_factory=Counter)
    relations: int = 0
    not_read: Counter = field(default_factory=Counter)
    tokens_split: int = 0
    sentences_joined: int = 0
    conflicts: Optional[Callable[[List[Entity]], int]] = field(default=None, repr=False, compare=False)
    _sentences: int = field(default=0, repr=False)
    _sentences_known: bool = field(default=True, repr=False)

    def add(self, doc: Doc, spans_key: str) -> None:
        self.not_read.update(doc.user_data.get(NOT_READ_KEY, {}))
        if NOT_A_DOCUMENT_KEY in doc.user_data:
            self.not_documents[doc.user_data[NOT_A_DOCUMENT_KEY]] += 1
            return
        entities = get_entities(doc, spans_key)
        self.documents += 1
        self.tokens += len(doc)
        self.entities += len(entities)
        self.discontinuous += sum(e.is_discontinuous for e in entities)
        self.overlapping += len(overlapping(entities))
        self.thw_conflicts += self.conflicts(entities) if self.conflicts is not None else 0
        self.per_label.update(e.label for e in entities)
        self.ignored.update(doc.user_data.get(IGNORED_KEY, {}))
        self.repaired += int(doc.user_data.get(REPAIRED_KEY, 0))
        self.relations += len((doc.user_data.get(RELATIONS_KEY) or {}).get("items", []))
        self.tokens_split += tokens_split(doc)
        self.sentences_joined += int(doc.user_data.get(SENTENCES_JOINED_KEY, 0))
        if self.sentence_docs:
            self._sentences += 1
        elif doc.has_annotation("SENT_START"):
            self._sentences += sum(1 for _ in doc.sents)
        elif len(doc):
            self._sentences_known = False

    @property
    def sentences(self) -> Optional[int]:
        return self._sentences if self._sentences_known else None

    def as_dict(self) -> Dict[str, object]:
        result: Dict[str, object] = {"documents": self.documents}
        if self.sentences is not None:
            result["sentences"] = self.sentences
        result.update(
            {
                "tokens": self.tokens,
                "entities": self.entities,
                "discontinuous": self.discontinuous,
                "overlapping": self.overlapping,
                "per_label": dict(sorted(self.per_label.items())),
            }
        )
        if self.repaired:
            result["repaired_entities"] = self.repaired
        if self.thw_conflicts:
            result["thw_conflicts"] = self.thw_conflicts
        optional = {
            "relations": self.relations, "tokens_split": self.tokens_split,
            "sentences_joined_for_entities": self.sentences_joined, "ignored_annotations": dict(sorted(self.ignored.items())),
            "not_read": dict(sorted(self.not_read.items())), "not_documents": dict(sorted(self.not_documents.items())),
        }  # fmt: skip
        result.update((key, value) for key, value in optional.items() if value)
        return result


def tokens_split(doc: Doc) -> int:
    """How many tokens a reader split: the splits named on the doc (``standoff.split_tokens_named``),
    or the count that DocBins converted before 0.4.0 hold."""
    value = doc.user_data.get(TOKENS_SPLIT_KEY) or 0
    return value if isinstance(value, int) else len(value)


def summarize(docs: Iterable[Doc], spans_key: str = "w2ner", sentence_docs: bool = False, summary: Optional[CorpusSummary] = None) -> CorpusSummary:
    """The counts of docs, without writing them (added to ``summary`` if given)."""
    summary = CorpusSummary(sentence_docs=sentence_docs) if summary is None else summary
    for doc in docs:
        summary.add(doc, spans_key)
    return summary


def entity_texts(doc: Doc, spans_key: str = "w2ner") -> List[str]:
    """Human-readable entities: label, text and fragments (for CLI output)."""
    lines = []
    for entity in get_entities(doc, spans_key):
        fragments = " + ".join(f"[{doc[s:e].text}]" for s, e in entity.fragments)
        score = "" if entity.score is None else f" ({entity.score:.2f})"
        lines.append(f"{entity.label:>6}  {entity.text}{score}  {fragments if entity.is_discontinuous else ''}".rstrip())
    return lines


def in_natural_order(paths: Iterable[Path]) -> List[Path]:
    """The paths with the numbers in their names compared as numbers ("note2" before "note10", as a
    file manager lists them, and as ``export`` numbers the documents it names), else as text."""

    def natural(name: str) -> list:
        return [int(part) if k % 2 else part for k, part in enumerate(re.split(r"(\d+)", name))]

    return sorted(paths, key=lambda path: ([natural(part) for part in Path(path).parts], str(path)))  # "d01" after "d1"


def read_text(path: Union[str, Path], newline: Optional[str] = None) -> str:
    """A UTF-8 file's text; undecodable bytes raise FormatError naming file:line.

    With ``newline=None`` line ends are translated to ``\\n`` and a byte order mark
    is dropped; with ``newline=""`` the text is returned exactly as decoded (for
    formats that count characters, such as brat).
    """
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise FormatError(f"{path}:{line}: {not_utf8(err)}") from None
    if newline is None:  # universal newlines, as open() reads text
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        if text.startswith("\ufeff"):
            text = text[1:]
    return text
