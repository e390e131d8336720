"""Token-per-line tag formats: CoNLL columns (BIO, IOB1, BIOES) and character-level BMES.

Tag sequences are read into entities with conlleval's chunk rules, so a
malformed sequence never loses an entity:

- an entity starts at ``B-``/``S-``, at a change of type, and at ``I-``/``M-``/``E-``
  after ``O``, ``E-`` or ``S-`` (a "stray" inside tag starts a new entity);
- an entity ends before ``O``, ``B-``, ``S-`` or a change of type, and after ``E-``/``S-``.

Entities read from a sequence that is malformed for the scheme (a BIO entity
starting with ``I-``; a BIOES/BMES entity that starts with ``I-``/``M-``/``E-`` or
ends without ``E-``) are counted per doc in ``doc.user_data["w2ner_repaired"]``,
which ``CorpusSummary`` reports as ``repaired_entities``.
"""
import re
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..entities import set_entities
from .base import NAME_KEY, REPAIRED_KEY, FormatError, read_text

# Columns are separated by spaces and tabs only: a token may hold any other character,
# a no-break space ("New\\xa0York", "10\\xa0000") or an ideographic space (U+3000) included.
_COLUMN_SEPARATOR = re.compile(r"[ \t]+")


def _columns(line: str) -> List[str]:
    stripped = line.strip(" \t")
    return _COLUMN_SEPARATOR.split(stripped) if stripped else []

# scheme: (prefixes allowed besides O, well-formed prefix sequence of one entity)
SCHEMES = {
    "BIO": ("BI", r"BI*"),  # BIO2 / IOB2: B- begins, I- continues
    "IOB2": ("BI", r"BI*"),
    "IOB1": ("BI", r"[BI]I*"),  # I- begins unless it continues the same type
    "BIOES": ("BIES", r"S|BI*E"),
    "IOBES": ("BIES", r"S|BI*E"),
    "BILOU": ("BILU", r"U|BI*L"),  # L- = E-, U- = S-
    "BMES": ("BMIES", r"S|B[MI]*E|BI*"),  # M- = I-; I- is accepted too (BIO and BIOES files)
}
_CANONICAL = {"M": "I", "L": "E", "U": "S"}

Tag = Tuple[str, str, str]  # (prefix in "BIES" or "O", type, prefix as written)


def parse_tag(tag: str, scheme: str, where: str) -> Tag:
    """(prefix, type) of a tag; the prefix is canonical (B, I, E, S or O)."""
    if tag == "O":
        return ("O", "", "O")
    allowed = SCHEMES[scheme][0]
    prefix, dash, label = tag.partition("-")
    if not dash or len(prefix) != 1 or prefix not in allowed or not label:
        prefixes = ", ".join(f"{p}-" for p in allowed)
        raise FormatError(f"{where}: tag {tag!r} is not O or {prefixes}TYPE ({scheme} scheme)")
    return (_CANONICAL.get(prefix, prefix), label, prefix)


def chunk_tags(tags: Sequence[Tag], scheme: str = "BIO") -> List[Tuple[str, int, int, bool]]:
    """Entities (label, start, end, repaired) of a sentence's tags, conlleval-style."""
    chunks: List[Tuple[str, int, int, bool]] = []
    start: Optional[int] = None
    prev_prefix, prev_label = "O", ""
    for i, (prefix, label, _) in enumerate(list(tags) + [("O", "", "O")]):
        if start is not None and _ends(prev_prefix, prev_label, prefix, label):
            chunks.append((prev_label, start, i, _malformed(scheme, tags[start:i])))
            start = None
        if _starts(prev_prefix, prev_label, prefix, label):
            start = i
        prev_prefix, prev_label = prefix, label
    return chunks


def _ends(prev_prefix: str, prev_label: str, prefix: str, label: str) -> bool:
    if prev_prefix in "ES":
        return True
    if prefix in "BSO":
        return True
    return prev_label != label


def _starts(prev_prefix: str, prev_label: str, prefix: str, label: str) -> bool:
    if prefix == "O":
        return False
    if prefix in "BS":
        return True
    if prev_prefix in "ESO":
        return True
    return prev_label != label


def _malformed(scheme: str, tags: Sequence[Tag]) -> bool:
    return re.fullmatch(SCHEMES[scheme][1], "".join(raw for _, _, raw in tags)) is None


def read_conll(
    path: Union[str, Path],
    vocab: Vocab,
    spans_key: str = "w2ner",
    tag_column: int = -1,
    scheme: str = "BIO",
) -> Iterator[Doc]:
    """Docs (one per sentence) from a CoNLL column file.

    Columns are separated by spaces and tabs (a token may hold other whitespace, such as a
    no-break space); the token is column 0 and the tag
    column ``tag_column`` (default: the last). Sentences are separated by blank
    lines; ``-DOCSTART-`` lines separate documents and are not sentences.
    ``scheme`` is ``BIO`` (BIO2: every entity starts with ``B-``), ``IOB1``
    (the original CoNLL-2003 tags: ``I-`` starts an entity unless it continues
    one of the same type, ``B-`` only separates two adjacent entities of one
    type) or ``BIOES`` (``S-`` single-token entities, ``B-``/``I-``/``E-``; also
    ``BILOU``). Malformed sequences are read as conlleval does: in BIO an
    ``I-`` after ``O`` or after another type starts an entity; in BIOES an
    ``I-``/``E-`` without ``B-`` starts one and a ``B-``/``I-`` not followed
    by ``I-``/``E-`` ends one. Such entities are counted as repaired.
    A bad ``scheme`` or ``tag_column`` raises ValueError at the call.
    """
    scheme = check_conll_options(scheme, tag_column)
    return _read_conll(Path(path), vocab, spans_key, tag_column, scheme)


def _read_conll(path: Path, vocab: Vocab, spans_key: str, tag_column: int, scheme: str) -> Iterator[Doc]:
    words: List[str] = []
    tags: List[Tag] = []
    first_line = 0
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        columns = _columns(line)
        if not columns or columns[0] == "-DOCSTART-":
            if words:
                yield _tagged_doc(vocab, words, None, tags, scheme, spans_key, f"{path.stem}-line{first_line}")
                words, tags = [], []
            continue
        where = f"{path}:{number}"
        if len(columns) < 2:
            raise FormatError(f"{where}: expected a token and a tag column, got {line.strip()!r}")
        try:
            tag = columns[tag_column]
        except IndexError:
            raise FormatError(
                f"{where}: no tag column {tag_column} in a line of {len(columns)} columns: {line.strip()!r}"
            ) from None
        if (tag_column % len(columns)) == 0:
            raise FormatError(f"{where}: tag column {tag_column} is the token column in {line.strip()!r}")
        if not words:
            first_line = number
        words.append(columns[0])
        tags.append(parse_tag(tag, scheme, where))
    if words:
        yield _tagged_doc(vocab, words, None, tags, scheme, spans_key, f"{path.stem}-line{first_line}")


def read_bmes(path: Union[str, Path], vocab: Vocab, spans_key: str = "w2ner") -> Iterator[Doc]:
    """Docs (one per sentence) from a character-level BMES file (Chinese NER).

    One ``char TAG`` per line, a blank line between sentences; the tokens are
    the characters, with no whitespace between them. Tags are ``B-``/``M-``/
    ``E-``/``S-`` and ``O``; ``I-`` is accepted as ``M-`` (BIO files). A
    sentence may start inside an entity (Resume's train file has two sentence
    breaks inside an ORG): an ``M-``/``I-``/``E-`` without ``B-`` starts a new
    entity, and an entity still open at the end of a sentence ends there; both
    are counted as repaired (a ``B-`` or ``B-I-...`` run without ``E-`` is a
    well-formed BIO entity and is not).
    """
    path = Path(path)
    words: List[str] = []
    tags: List[Tag] = []
    first_line = 0
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        columns = _columns(line)
        if not columns:
            if words:
                name = f"{path.stem}-line{first_line}"
                yield _tagged_doc(vocab, words, [False] * len(words), tags, "BMES", spans_key, name)
                words, tags = [], []
            continue
        where = f"{path}:{number}"
        if len(columns) != 2:
            raise FormatError(f"{where}: expected 'char TAG', got {line.strip()!r}")
        if not words:
            first_line = number
        words.append(columns[0])
        tags.append(parse_tag(columns[1], "BMES", where))
    if words:
        name = f"{path.stem}-line{first_line}"
        yield _tagged_doc(vocab, words, [False] * len(words), tags, "BMES", spans_key, name)


def _tagged_doc(
    vocab: Vocab, words: List[str], spaces: Optional[List[bool]], tags: List[Tag], scheme: str, spans_key: str,
    name: str,
) -> Doc:
    doc = Doc(vocab, words=words, spaces=spaces)
    doc.user_data[NAME_KEY] = name
    chunks = chunk_tags(tags, scheme)
    set_entities(doc, [(label, range(start, end), None) for label, start, end, _ in chunks], spans_key)
    repaired = sum(r for *_, r in chunks)
    if repaired:
        doc.user_data[REPAIRED_KEY] = repaired
    return doc


CONLL_SCHEMES = ("BIO", "IOB2", "IOB1", "BIOES", "IOBES", "BILOU")


def check_scheme(scheme: str, allowed: Sequence[str] = CONLL_SCHEMES) -> str:
    """The scheme's canonical (upper-case) name; ValueError if it is not allowed."""
    if not isinstance(scheme, str) or scheme.upper() not in allowed:
        raise ValueError(f"unknown tag scheme {scheme!r}; choose from {', '.join(allowed)}")
    return scheme.upper()


def check_conll_options(scheme: str, tag_column: int) -> str:
    """The canonical scheme name; ValueError for an unknown scheme or the token column as tags."""
    if tag_column == 0:
        raise ValueError("tag_column 0 is the token column; the tags must be in another column")
    return check_scheme(scheme)
