"""PubTator: a title line, an abstract line and tab-separated annotations, documents apart by blank lines::

    22051099|t|Variation in the CXCR1 gene (IL8RA) is not associated with ...
    22051099|a|BACKGROUND: The chemokine receptor 1 CXCR-1 ...
    22051099<TAB>327<TAB>336<TAB>rs2234671<TAB>SNP<TAB>rs2234671
    22051099<TAB>CID<TAB>D008750<TAB>D003866

One Doc per document: its text is the title, a line break and the abstract (PubTator's offsets
count them so); a title line also starts a document where no blank line comes before it. A
mention line (``PMID START END TEXT TYPE [ID ...]``) becomes an entity of that type (``standoff``
decides how); its id is its place among the document's mention lines (``"1"``, ``"2"``, ...) and
its columns after the type (concept ids, tmVar's ``RSID:...``) are kept for the way back. A
relation line (``PMID TYPE ID ID [...]``: BC5CDR's ``CID``, BioRED's with a novelty column) is kept
with the Doc (``standoff.RELATIONS_KEY``) and written back after the mentions; it never trains. A
line of no kind above (tmVar's ``PMID<TAB>Translation ...<TAB>...``), or of another document, is
listed with its ``file:line`` and counted, and the rest converts (``strict``: it stops there).
Input that is not PubTator raises ``FormatError`` naming ``file:line``: a document without a title
line, a repeated PMID, bytes that are not UTF-8. Read line by line: memory does not grow with the
file.

PubTator cannot hold a discontinuous entity: ``docs_to_pubtator`` is told what to write for one
(``split``: a line per fragment; ``span``: one line from its first to its last character;
``skip``: nothing), and raises ValueError at the first when not told. Nor can it hold scores.
"""
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..messages import not_utf8
from .base import NAME_KEY, FormatError
from .standoff import EMPTY, NO_TYPE, OUTSIDE_TEXT, Mention, Reading, Skips, keep_relations, mentions_of, relations_of

PUBTATOR_KEY = "w2ner_pubtator"  # {"pmid", "title_length", "abstract": whether it had an abstract line}
DISCONTINUOUS_CHOICES = ("split", "span", "skip")
_TEXT_LINE = re.compile(r"([^|\t]*)\|([ta])\|")
_RELATION_TYPE = re.compile(r"(?!\d+$)\S+")  # a word, not a number


def read_pubtator(
    path: Union[str, Path], vocab: Vocab, spans_key: str = "w2ner", tokenizer=None, strict: bool = False,
    split_tokens: bool = True, sentencizer: bool = True,
) -> Iterator[Doc]:  # fmt: skip
    """The Docs of a PubTator file, streamed (see the module docstring; ``standoff.Reading`` for
    ``split_tokens`` and ``sentencizer``)."""
    path = Path(path)
    reading = Reading(vocab, spans_key, tokenizer, split_tokens, sentencizer, strict)
    seen: Dict[str, int] = {}
    for block in _blocks(path):
        pmid, line = _pmid(block[0][1]), block[0][0]
        if pmid in seen:
            raise FormatError(f"{path}:{line}: document {pmid}: the PMID is already that of the document on line {seen[pmid]}")
        seen[pmid] = line
        yield _document(path, block, reading)


def _blocks(path: Path) -> Iterator[List[Tuple[int, str]]]:
    """Each document's (line number, line) pairs: blank lines, or a title line, start a document."""
    block: List[Tuple[int, str]] = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf8").rstrip("\n").rstrip("\r")
            except UnicodeDecodeError as err:
                raise FormatError(f"{path}:{number}: {not_utf8(err)}") from None
            if number == 1:
                line = line.lstrip("\ufeff")
            if block and (not line.strip() or _starts_a_document(line, block)):
                yield block
                block = []
            if line.strip():
                block.append((number, line))
    if block:
        yield block


def _starts_a_document(line: str, block: List[Tuple[int, str]]) -> bool:
    """Whether a title line starts a document after ``block`` (which has a title, or another PMID's lines)."""
    match = _TEXT_LINE.match(line)
    if match is None or match.group(2) != "t":
        return False
    return any(_TEXT_LINE.match(other) for _, other in block) or _pmid(block[0][1]) != match.group(1)


def _pmid(line: str) -> str:
    """The PMID a line starts with (up to its first '|' or tab)."""
    return re.match(r"[^|\t]*", line).group()


def _document(path: Path, block: List[Tuple[int, str]], reading: Reading) -> Doc:
    pmid = _pmid(block[0][1])
    where = f"{path}:{block[0][0]}: document {pmid}"
    skips = reading.skips(where)
    texts: Dict[str, str] = {}
    lines: List[Tuple[int, List[str]]] = []
    for number, line in block:
        match = _TEXT_LINE.match(line)
        if match and match.group(1) == pmid and f"|{match.group(2)}|" not in texts and not lines:
            texts[f"|{match.group(2)}|"] = line[match.end() :]
        elif line.startswith(pmid + "\t"):
            lines.append((number, line.split("\t")))
        else:
            skips.unknown(f"{path}:{number}", f"document {pmid}: neither its title, its abstract, a mention nor a relation: {line[:80]!r}; passed over")
    if "|t|" not in texts:
        raise FormatError(f"{where}: no title line ('{pmid}|t|...') before the annotations; is this a PubTator file?")
    text = texts["|t|"] + ("\n" + texts["|a|"] if "|a|" in texts else "")
    mentions, relations = _annotations(path, pmid, lines, text, skips)
    parts = [(0, True)] + ([(len(texts["|t|"]) + 1, True)] if "|a|" in texts else [])
    doc = reading.doc(text, mentions, skips, where, parts)
    keep_relations(doc, "pubtator", relations)
    doc.user_data[PUBTATOR_KEY] = {"pmid": pmid, "title_length": len(texts["|t|"]), "abstract": "|a|" in texts}
    doc.user_data[NAME_KEY] = pmid
    return doc


def _is_number(column: str) -> bool:
    """Whether a column is an offset: ASCII digits (``str.isdigit`` takes '²', which ``int`` refuses)."""
    return column.isascii() and column.isdigit()


def _annotations(path: Path, pmid: str, lines, text: str, skips: Skips) -> Tuple[List[Mention], List[List[str]]]:
    """The mentions (those with offsets in the text) and the relations (their columns after the PMID)."""
    mentions, relations = [], []
    for number, columns in lines:
        if len(columns) >= 5 and _is_number(columns[1]) and _is_number(columns[2]):
            start, end = int(columns[1]), int(columns[2])
            mention = Mention(str(len(mentions) + 1), columns[4], [(start, end)], columns[3], {"columns": columns[5:]}, at=f"{path}:{number}: document {pmid}")
            mentions.append(mention)
            if end > len(text) or start > end:
                skips.skip(mention.id, OUTSIDE_TEXT, f"({mention.label}) {start} {end} is not within the text of {len(text)} characters", at=mention.at)
            elif start == end:
                skips.skip(mention.id, EMPTY, f"({mention.label}) {start} {end} has no text", at=mention.at)
            elif not mention.label.strip():
                skips.skip(mention.id, NO_TYPE, f"{start} {end} {columns[3]!r} has an empty type column", at=mention.at)
        elif len(columns) >= 4 and _RELATION_TYPE.fullmatch(columns[1]) and all(columns[2:4]):
            relations.append(columns[1:])
        else:
            skips.unknown(f"{path}:{number}", f"document {pmid}: neither a mention (PMID, START, END, TEXT, TYPE[, ID...]) nor a relation (PMID, TYPE, ID, ID[, ...]): {chr(9).join(columns)[:80]!r}; passed over")
    return [m for m in mentions if 0 <= m.ranges[0][0] < m.ranges[0][1] <= len(text) and m.label.strip()], relations


def docs_to_pubtator(
    docs, path: Union[str, Path], spans_key: str = "w2ner", problems: Optional[List[str]] = None, discontinuous: Optional[str] = None
) -> Dict[str, int]:
    """Write docs as a PubTator file; returns how many discontinuous entities were met.

    Each doc's mentions (in the order they were read, where they all are the source's unchanged;
    else by position), then the relations it was read with. Each doc's PMID is the one it was read with, else its name, else ``doc{index}``; its text must be a
    title and at most one abstract line. What PubTator cannot hold (another text, a tab or line break
    in a label or an entity's text) is reported in ``problems`` naming the doc and left out (ValueError
    without ``problems``); a discontinuous entity is written as ``discontinuous`` says.
    """
    if discontinuous is not None and discontinuous not in DISCONTINUOUS_CHOICES:
        raise ValueError(f"discontinuous must be split, span or skip, got {discontinuous!r}")
    counts = {"discontinuous": 0}
    with open(path, "w", encoding="utf8", newline="\n") as f:
        for index, doc in enumerate(docs):
            lines = _document_lines(doc, index, spans_key, discontinuous, counts, _reporter(problems))
            if lines:
                f.write("".join(line + "\n" for line in lines) + "\n")
    return counts


def _reporter(problems: Optional[List[str]]):
    def report(message: str) -> None:
        if problems is None:
            raise ValueError(message)
        problems.append(message)

    return report


def _document_lines(doc: Doc, index: int, spans_key: str, discontinuous: Optional[str], counts: Dict[str, int], report) -> List[str]:
    meta: Dict[str, Any] = doc.user_data.get(PUBTATOR_KEY) or {}
    pmid = str(meta.get("pmid") or doc.user_data.get(NAME_KEY) or f"doc{index}")
    text = doc.text  # built from the tokens on every call: once per doc
    title_length = meta.get("title_length", text.find("\n") if "\n" in text else len(text))
    title, abstract = text[:title_length], text[title_length + 1 :]
    has_abstract = meta.get("abstract", "\n" in text)
    if any(c in title + abstract for c in "\n\r") or (has_abstract and text[title_length : title_length + 1] != "\n"):
        report(f"doc {index} ({pmid}): PubTator holds a title line and an abstract line, and its text has more line breaks; left out")
        return []
    annotations = []
    mentions = mentions_of(doc, spans_key)
    as_read = all("columns" in mention.extra and mention.id.isdigit() for mention in mentions)  # the source's lines: their order
    for mention in mentions:
        for start, end, piece in _pieces(text, mention, discontinuous, counts, f"doc {index} ({pmid})"):
            columns = [pmid, str(start), str(end), piece, mention.label, *mention.extra.get("columns", [""])]
            if any(c in column for column in columns[3:] for c in "\t\n\r"):
                report(f"doc {index} ({pmid}): the {mention.label!r} entity {piece!r} has a tab or line break PubTator cannot hold; left out")
                continue
            annotations.append(((int(mention.id) if as_read else 0, start, end, mention.id), "\t".join(columns)))
    annotations.sort(key=lambda pair: pair[0])
    relations = ["\t".join([pmid, *columns]) for columns in relations_of(doc, "pubtator")]
    return [f"{pmid}|t|{title}"] + ([f"{pmid}|a|{abstract}"] if has_abstract else []) + [line for _, line in annotations] + relations


def _pieces(text: str, mention: Mention, discontinuous: Optional[str], counts: Dict[str, int], where: str) -> List[Tuple[int, int, str]]:
    """(start, end, text) of the lines of one entity, as ``discontinuous`` says for a discontinuous one."""
    if len(mention.ranges) == 1:
        start, end = mention.ranges[0]
        return [(start, end, mention.text if mention.text is not None else text[start:end])]
    counts["discontinuous"] += 1
    if discontinuous is None:
        raise ValueError(f"{where}: the {mention.label!r} entity {mention.text!r} is discontinuous, which PubTator cannot hold: choose --discontinuous split, span or skip")
    if discontinuous == "skip":
        return []
    if discontinuous == "span":
        start, end = mention.ranges[0][0], mention.ranges[-1][1]
        return [(start, end, text[start:end])]
    return [(start, end, text[start:end]) for start, end in mention.ranges]
