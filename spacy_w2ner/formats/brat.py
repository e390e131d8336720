"""brat standoff: a ``.txt`` document and its ``.ann`` annotations.

Text-bound annotations become entities::

    T3<TAB>ADR 10 15;20 25<TAB>pain knees

``TYPE START END[;START END...]`` are character offsets into the ``.txt`` (end exclusive);
several ``;``-separated fragments make a discontinuous entity, its text the fragments joined by a
space. How an annotation becomes an entity is ``standoff``'s one rule, as for BioC, PubTator and
Label Studio: its text checked against its offsets (``check_text``), tokens split at its
boundaries (``split_tokens``), sentence boundaries by spaCy's sentencizer, never inside an entity
(``sentencizer``); one that cannot be an entity is listed and counted, or stops the reading
(``strict``). The brat id becomes the ``span.id_`` of the entity's fragments. Relations (``R``),
events (``E``), attributes (``A``/``M``), normalizations (``N``), equivalences (``*``) and notes
(``#``) are not entities: they are counted per kind in ``doc.user_data["w2ner_ignored"]`` (and in
``CorpusSummary.ignored``) and not kept. Event triggers are text-bound (``T``) and are read as
entities. A line that is no brat annotation is listed with its ``file:line`` and counted. Input
that is not brat raises ``FormatError`` naming the file and line: a ``.ann`` with no line brat
knows, a ``T`` line without its three fields, offsets that are not numbers or outside the text, a
repeated id. One Doc per ``.txt`` file; its name (the path without suffix, relative to the
collection) is ``doc.user_data["w2ner_name"]``.
"""
import re
from pathlib import Path, PurePosixPath
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from spacy.tokens import Doc
from spacy.vocab import Vocab

from .base import NAME_KEY, FormatError, in_natural_order, read_text
from .standoff import Mention, Reading, Skips, Tokenizer, fragment_text, mentions_of

_ID = re.compile(r"([A-Za-z]+)(\d+)")
_BRAT_T_ID = re.compile(r"T\d+")


def read_brat(
    txt_path: Union[str, Path],
    ann_path: Union[str, Path, None],
    vocab: Vocab,
    spans_key: str = "w2ner",
    tokenizer: Optional[Tokenizer] = None,
    name: Optional[str] = None,
    check_text: bool = True,
    strict: bool = False,
    split_tokens: bool = True,
    sentencizer: bool = True,
) -> Iterator[Doc]:
    """The Doc of one brat document (yields exactly one Doc).

    ``ann_path`` defaults to the ``.ann`` beside ``txt_path``. ``tokenizer`` maps the text to a Doc
    (e.g. ``spacy.blank("en").tokenizer``; an ``nlp`` that sets sentence boundaries keeps them);
    ``None`` tokenizes on whitespace. The other options are ``standoff.Reading``'s.
    """
    txt_path = Path(txt_path)
    ann_path = txt_path.with_suffix(".ann") if ann_path is None else Path(ann_path)
    if not ann_path.exists():
        raise FormatError(f"{txt_path}: no annotation file {ann_path} beside it")
    text = read_text(txt_path, newline="")
    reading = Reading(vocab, spans_key, tokenizer, split_tokens, sentencizer, strict, check_text)
    skips = reading.skips(str(ann_path))
    doc = reading.doc(text, _read_ann(ann_path, len(text), skips), skips, str(txt_path))
    doc.user_data[NAME_KEY] = txt_path.stem if name is None else name
    yield doc


def read_brat_collection(
    path: Union[str, Path],
    vocab: Vocab,
    spans_key: str = "w2ner",
    tokenizer: Optional[Tokenizer] = None,
    check_text: bool = True,
    **options,
) -> Iterator[Doc]:
    """Docs of a brat collection: a directory (searched recursively for ``.txt``
    files, each with its ``.ann``) or a single ``.txt`` (or ``.ann``) file; ``options`` are
    ``read_brat``'s (strict, split_tokens, sentencizer)."""
    path = Path(path)
    if not path.is_dir():
        txt_path = path.with_suffix(".txt")
        if not txt_path.exists():
            raise FormatError(f"{path}: no brat text file {txt_path}")
        yield from read_brat(txt_path, None, vocab, spans_key, tokenizer, check_text=check_text, **options)
        return
    txt_paths = in_natural_order(path.rglob("*.txt"))
    ann_paths = sorted(path.rglob("*.ann"))
    orphans = sorted(set(ann_paths) - {p.with_suffix(".ann") for p in txt_paths})
    if orphans:
        raise FormatError(f"{orphans[0]}: no text file {orphans[0].with_suffix('.txt')} beside it")
    if not txt_paths:
        raise FormatError(f"{path}: no brat .txt/.ann documents in this directory")
    for txt_path in txt_paths:
        name = txt_path.relative_to(path).with_suffix("").as_posix()
        yield from read_brat(txt_path, None, vocab, spans_key, tokenizer, name=name, check_text=check_text, **options)


def _read_ann(ann_path: Path, n_chars: int, skips: Skips) -> List[Mention]:
    """The text-bound annotations of a .ann file as mentions; the other kinds counted, unknown lines listed."""
    mentions: List[Mention] = []
    seen: Dict[str, int] = {}
    unknown: List[Tuple[str, str]] = []
    known = 0
    # Offsets count the characters of the .txt, so a byte order mark of the .ann is not content.
    for number, line in enumerate(read_text(ann_path, newline="").lstrip("\ufeff").split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        where = f"{ann_path}:{number}"
        first = line.split("\t", 1)[0]
        match = _ID.fullmatch(first)
        known += match is not None or line[0] in "#*"
        if match is None and line[0] not in "#*":
            unknown.append((where, f"{first[:40]!r} is not a brat annotation id (a letter and a number)"))
        elif match is None or match.group(1) != "T":
            skips.ignore(line[0] if match is None else match.group(1))
        else:
            if first in seen:
                raise FormatError(f"{where}: {first} is already defined on line {seen[first]}")
            seen[first] = number
            mentions.append(_text_bound(line, where, first, n_chars))
    if unknown and not known:
        raise FormatError(f"{unknown[0][0]}: not a brat annotation file: {unknown[0][1]}")
    for where, why in unknown:
        skips.unknown(where, f"{why}; passed over")
    return mentions


def _text_bound(line: str, where: str, ann_id: str, n_chars: int) -> Mention:
    fields = line.split("\t", 2)  # as brat reads it: the text is all after the second tab, tabs included
    if len(fields) != 3:
        raise FormatError(f"{where}: {ann_id}: expected 'ID<TAB>TYPE START END[;START END...]<TAB>TEXT', got {len(fields)} tab-separated fields")
    label, fragments = _parse_offsets(fields[1], where, ann_id, n_chars)
    return Mention(ann_id, label, fragments, fields[2], at=where)


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


def _clean(text: str) -> str:
    """The text column of an annotation: no line breaks (a tab stays: brat reads all after the
    second tab as the text, and compares it with the document's)."""
    return re.sub(r"[\r\n]", " ", text)


def docs_to_brat(
    docs: Iterable[Doc], out_dir: Union[str, Path], spans_key: str = "w2ner", problems: Optional[List[str]] = None
) -> List[Path]:
    """Write each doc as ``name.txt`` and ``name.ann``; returns the .ann paths.

    The name is ``doc.user_data["w2ner_name"]`` (set by the converters: the brat
    document's path, or the input file's name and the line or record of the doc) or
    ``doc{index:05d}``. Each entity becomes ``T{n}<TAB>LABEL start end[;start
    end...]<TAB>text`` with the character offsets of its fragments in position
    order (those of the source annotation, and its text, where the entity is one unchanged:
    ``standoff.mentions_of``); its brat id is kept when every entity of the doc has a distinct
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
        text = doc.text  # built from the tokens on every call: once per doc
        lines = [_ann_line(entity_id, mention, text, where, report) for entity_id, mention in _numbered(mentions_of(doc, spans_key))]
        written.append(_write_brat_document(out_dir / Path(*relative.parts), text, [line for line in lines if line]))
    return written


def _numbered(mentions: List[Mention]) -> List[Tuple[str, Mention]]:
    """(brat id, mention): the entities' own ``T<number>`` ids in id order when they all have a
    distinct one (read from brat), else T1, T2... in position order."""
    ids = [mention.id for mention in mentions]
    if all(_BRAT_T_ID.fullmatch(i) for i in ids) and len(set(ids)) == len(ids):
        return sorted(zip(ids, mentions), key=lambda pair: int(pair[0][1:]))  # T1, T2, ... T10
    return [(f"T{k + 1}", mention) for k, mention in enumerate(mentions)]


def _ann_line(entity_id: str, mention: Mention, text: str, where: str, report: Callable[[str], None]) -> Optional[str]:
    """The entity's line of the .ann file (the source annotation's offsets and text where it is
    one, unchanged); None (reported) when brat cannot hold its label."""
    if not mention.label or any(c.isspace() for c in mention.label):
        report(f"{where}: the {mention.label!r} entity {mention.text!r} cannot be written in brat (its label has whitespace); left out")
        return None
    offsets = ";".join(f"{start} {end}" for start, end in mention.ranges)
    return f"{entity_id}\t{mention.label} {offsets}\t{_clean(mention.text if mention.text is not None else fragment_text(text, mention.ranges))}\n"


def _write_brat_document(base: Path, text: str, lines: List[str]) -> Path:
    """Write ``base.txt`` and ``base.ann`` exactly as given (no newline translation); the .ann path."""
    base.parent.mkdir(parents=True, exist_ok=True)
    with open(base.with_name(base.name + ".txt"), "w", encoding="utf8", newline="") as f:
        f.write(text)
    ann_path = base.with_name(base.name + ".ann")
    with open(ann_path, "w", encoding="utf8", newline="") as f:
        f.writelines(lines)
    return ann_path
