"""brat standoff: a ``.txt`` document and its ``.ann`` annotations.

Text-bound annotations become entities::

    T3<TAB>ADR 10 15;20 25<TAB>pain knees

``TYPE START END[;START END...]`` are character offsets into the ``.txt``
(end exclusive); several ``;``-separated fragments make a discontinuous entity.
The ``.txt`` is tokenized (a spaCy tokenizer, or whitespace tokenization) and
each fragment is aligned to tokens with ``doc.char_span(..., alignment_mode=
"strict")``: a fragment that does not fall on token boundaries raises
``FormatError`` naming the ``.ann`` file, line and annotation id. The brat id
becomes the ``span.id_`` of the entity's fragments. Fragments on adjacent
tokens merge into one (the entity is then contiguous). Relations (``R``),
events (``E``), attributes (``A``/``M``), normalizations (``N``), equivalences
(``*``) and notes (``#``) are not entities: they are counted per kind in
``doc.user_data["w2ner_ignored"]`` (and in ``CorpusSummary.ignored``) and not
kept. Event triggers are text-bound (``T``) and are read as entities.
One Doc per ``.txt`` file; its name (the path without suffix, relative to the
collection) is ``doc.user_data["w2ner_name"]``.
"""
import re
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..entities import Entity, get_entities, set_entities
from .base import IGNORED_KEY, NAME_KEY, FormatError, read_text

Tokenizer = Callable[[str], Doc]

_ID = re.compile(r"([A-Za-z]+)(\d+)")
_BRAT_T_ID = re.compile(r"T\d+")
_WORD = re.compile(r"\S+")


BRAT_TOKENIZERS = ("spacy", "whitespace")


def check_brat_options(tokenizer: str, sentencizer: bool = False, check_text: bool = True) -> None:
    """ValueError for a tokenizer that is not 'spacy' (the pipeline's) or 'whitespace'."""
    if tokenizer not in BRAT_TOKENIZERS:
        raise ValueError(f"tokenizer must be 'spacy' or 'whitespace', got {tokenizer!r}")


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


def read_brat(
    txt_path: Union[str, Path],
    ann_path: Union[str, Path, None],
    vocab: Vocab,
    spans_key: str = "w2ner",
    tokenizer: Optional[Tokenizer] = None,
    name: Optional[str] = None,
    check_text: bool = True,
) -> Iterator[Doc]:
    """The Doc of one brat document (yields exactly one Doc).

    ``ann_path`` defaults to the ``.ann`` beside ``txt_path``. ``tokenizer`` maps
    the text to a Doc (e.g. ``spacy.blank("en").tokenizer``, or an ``nlp`` with a
    sentencizer to get sentence boundaries); ``None`` tokenizes on whitespace.
    With ``check_text``, the text column of each annotation must equal the
    text at its offsets (fragments joined by a space).
    """
    txt_path = Path(txt_path)
    ann_path = txt_path.with_suffix(".ann") if ann_path is None else Path(ann_path)
    if not ann_path.exists():
        raise FormatError(f"{txt_path}: no annotation file {ann_path} beside it")
    text = read_text(txt_path, newline="")
    doc = tokenize_exactly(text, vocab, tokenizer, str(txt_path))
    entities, ids, ignored = _read_ann(ann_path, doc, check_text)
    set_entities(doc, entities, spans_key, ids=ids)
    doc.user_data[NAME_KEY] = txt_path.stem if name is None else name
    if ignored:
        doc.user_data[IGNORED_KEY] = dict(ignored)
    yield doc


def read_brat_collection(
    path: Union[str, Path],
    vocab: Vocab,
    spans_key: str = "w2ner",
    tokenizer: Optional[Tokenizer] = None,
    check_text: bool = True,
) -> Iterator[Doc]:
    """Docs of a brat collection: a directory (searched recursively for ``.txt``
    files, each with its ``.ann``) or a single ``.txt`` (or ``.ann``) file."""
    path = Path(path)
    if not path.is_dir():
        txt_path = path.with_suffix(".txt")
        if not txt_path.exists():
            raise FormatError(f"{path}: no brat text file {txt_path}")
        yield from read_brat(txt_path, None, vocab, spans_key, tokenizer, check_text=check_text)
        return
    txt_paths = sorted(path.rglob("*.txt"))
    ann_paths = sorted(path.rglob("*.ann"))
    orphans = sorted(set(ann_paths) - {p.with_suffix(".ann") for p in txt_paths})
    if orphans:
        raise FormatError(f"{orphans[0]}: no text file {orphans[0].with_suffix('.txt')} beside it")
    if not txt_paths:
        raise FormatError(f"{path}: no brat .txt/.ann documents in this directory")
    for txt_path in txt_paths:
        name = txt_path.relative_to(path).with_suffix("").as_posix()
        yield from read_brat(txt_path, None, vocab, spans_key, tokenizer, name=name, check_text=check_text)


def tokenize_exactly(text: str, vocab: Vocab, tokenizer: Optional[Tokenizer], where: str) -> Doc:
    """The Doc of ``text`` in ``vocab`` (whitespace tokens without a tokenizer; sentence boundaries
    kept); FormatError naming ``where`` if the tokenizer changed the text (offsets need it exact)."""
    if tokenizer is None:
        return whitespace_tokenize(text, vocab)
    doc = tokenizer(text)
    if doc.text != text:
        raise FormatError(f"{where}: the tokenizer changed the text; character offsets need the exact text")
    if doc.vocab is not vocab:
        sent_starts = None
        if doc.has_annotation("SENT_START"):
            sent_starts = [token.is_sent_start for token in doc]
        doc = Doc(
            vocab,
            words=[token.text for token in doc],
            spaces=[bool(token.whitespace_) for token in doc],
            sent_starts=sent_starts,
        )
    return doc


def _read_ann(
    ann_path: Path, doc: Doc, check_text: bool
) -> Tuple[List[Tuple[str, List[int], None]], List[str], Counter]:
    text = doc.text
    entities: List[Tuple[str, List[int], None]] = []
    ids: List[str] = []
    seen: Dict[str, int] = {}
    ignored: Counter = Counter()
    # Offsets count the characters of the .txt, so a byte order mark of the .ann is not content.
    for number, line in enumerate(read_text(ann_path, newline="").lstrip("\ufeff").split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        where = f"{ann_path}:{number}"
        if line[0] in "#*":
            ignored[line[0]] += 1
            continue
        first = line.split("\t", 1)[0]
        match = _ID.fullmatch(first)
        if match is None:
            raise FormatError(f"{where}: {first!r} is not a brat annotation id (a letter and a number)")
        if match.group(1) != "T":
            ignored[match.group(1)] += 1
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise FormatError(
                f"{where}: {first}: expected 'ID<TAB>TYPE START END[;START END...]<TAB>TEXT', "
                f"got {len(fields)} tab-separated fields"
            )
        if first in seen:
            raise FormatError(f"{where}: {first} is already defined on line {seen[first]}")
        seen[first] = number
        label, fragments = _parse_offsets(fields[1], where, first, len(text))
        if check_text:
            expected = _fragment_text(text, fragments)
            if _clean(fields[2]) != expected:
                raise FormatError(
                    f"{where}: {first} ({label}): the annotation text {fields[2]!r} differs from the "
                    f"text at its offsets {expected!r}"
                )
        tokens: List[int] = []
        for start, end in fragments:
            span = doc.char_span(start, end, alignment_mode="strict")
            if span is None:
                raise FormatError(
                    f"{where}: {first} ({label}): fragment {start} {end} {text[start:end]!r} does not "
                    f"align to token boundaries (tokens there: {_tokens_near(doc, start, end)})"
                )
            tokens.extend(range(span.start, span.end))
        entities.append((label, sorted(set(tokens)), None))
        ids.append(first)
    return entities, ids, ignored


def _parse_offsets(field: str, where: str, ann_id: str, n_chars: int) -> Tuple[str, List[Tuple[int, int]]]:
    label, _, offsets = field.partition(" ")
    if not label or not offsets:
        raise FormatError(f"{where}: {ann_id}: expected 'TYPE START END[;START END...]', got {field!r}")
    fragments = []
    for fragment in offsets.split(";"):
        parts = fragment.split()
        try:
            start, end = (int(p) for p in parts)
        except ValueError:
            raise FormatError(
                f"{where}: {ann_id} ({label}): fragment {fragment!r} is not 'START END' (two integers)"
            ) from None
        if not 0 <= start < end <= n_chars:
            raise FormatError(
                f"{where}: {ann_id} ({label}): fragment {start} {end} is empty or outside the text "
                f"of {n_chars} characters"
            )
        fragments.append((start, end))
    return label, fragments


def _fragment_text(text: str, fragments: Iterable[Tuple[int, int]]) -> str:
    return _clean(" ".join(text[start:end] for start, end in fragments))


def _clean(text: str) -> str:
    """The text column of an annotation: no tabs or line breaks."""
    return re.sub(r"[\t\r\n]", " ", text)


def _tokens_near(doc: Doc, start: int, end: int) -> str:
    tokens = [t for t in doc if t.idx < end and t.idx + len(t) > start]
    return ", ".join(f"{t.text!r}@{t.idx}" for t in tokens) or "none"


def docs_to_brat(
    docs: Iterable[Doc], out_dir: Union[str, Path], spans_key: str = "w2ner", problems: Optional[List[str]] = None
) -> List[Path]:
    """Write each doc as ``name.txt`` and ``name.ann``; returns the .ann paths.

    The name is ``doc.user_data["w2ner_name"]`` (set by the converters: the brat
    document's path, or the input file's name and the line or record of the doc) or
    ``doc{index:05d}``. Each entity becomes ``T{n}<TAB>LABEL start end[;start
    end...]<TAB>text`` with the character offsets of its fragments in position
    order; its brat id is kept when every entity of the doc has a distinct
    ``T<number>`` id (docs read from brat; lines are then in id order, so a
    brat file with its entities in id order round-trips unchanged), otherwise
    entities are numbered T1, T2... in position order. Only text-bound annotations are written.

    What brat cannot hold (a label with whitespace; a name that is absolute, has '..' or
    repeats another doc's) is reported in ``problems``, naming the doc, and left out: the
    entity, or the doc for a bad name; the rest is written. Without ``problems`` it raises
    ValueError.
    """
    out_dir = Path(out_dir)
    written: List[Path] = []
    names = set()

    def report(message: str) -> None:
        if problems is None:
            raise ValueError(message)
        problems.append(message)

    for index, doc in enumerate(docs):
        name = doc.user_data.get(NAME_KEY) or f"doc{index:05d}"
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or name in names:
            report(f"doc {index}: cannot write brat document {name!r} (absolute, '..' or a duplicate name); left out")
            continue
        names.add(name)
        where = f"doc {index} ({name!r})"
        lines = [_ann_line(doc, entity_id, entity, where, report) for entity_id, entity in _numbered(get_entities(doc, spans_key))]
        written.append(_write_brat_document(out_dir / Path(*relative.parts), doc.text, [line for line in lines if line]))
    return written


def _numbered(entities: List[Entity]) -> List[Tuple[str, Entity]]:
    """(brat id, entity): the entities' own ``T<number>`` ids in id order when they all have a
    distinct one (read from brat), else T1, T2... in position order."""
    ids = [entity.spans[0].id_ if entity.spans else "" for entity in entities]
    if all(_BRAT_T_ID.fullmatch(i) for i in ids) and len(set(ids)) == len(ids):
        return sorted(zip(ids, entities), key=lambda pair: int(pair[0][1:]))  # T1, T2, ... T10
    return [(f"T{k + 1}", entity) for k, entity in enumerate(entities)]


def _ann_line(doc: Doc, entity_id: str, entity: Entity, where: str, report: Callable[[str], None]) -> Optional[str]:
    """The entity's line of the .ann file; None (reported) when brat cannot hold its label."""
    if not entity.label or any(c.isspace() for c in entity.label):
        report(f"{where}: the {entity.label!r} entity {entity.text!r} cannot be written in brat (its label has whitespace); left out")
        return None
    chars = [(doc[s:e].start_char, doc[s:e].end_char) for s, e in entity.fragments]
    offsets = ";".join(f"{start} {end}" for start, end in chars)
    return f"{entity_id}\t{entity.label} {offsets}\t{_fragment_text(doc.text, chars)}\n"


def _write_brat_document(base: Path, text: str, lines: List[str]) -> Path:
    """Write ``base.txt`` and ``base.ann`` exactly as given (no newline translation); the .ann path."""
    base.parent.mkdir(parents=True, exist_ok=True)
    with open(base.with_name(base.name + ".txt"), "w", encoding="utf8", newline="") as f:
        f.write(text)
    ann_path = base.with_name(base.name + ".ann")
    with open(ann_path, "w", encoding="utf8", newline="") as f:
        f.writelines(lines)
    return ann_path
