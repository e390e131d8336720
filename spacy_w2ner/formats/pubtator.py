"""PubTator: a title line, an abstract line and tab-separated annotations, documents apart by blank lines::

    22051099|t|Variation in the CXCR1 gene (IL8RA) is not associated with ...
    22051099|a|BACKGROUND: The chemokine receptor 1 CXCR-1 ...
    22051099<TAB>327<TAB>336<TAB>rs2234671<TAB>SNP<TAB>rs2234671
    22051099<TAB>CID<TAB>D008750<TAB>D003866

One Doc per document: its text is the title, a line break and the abstract (PubTator's offsets
count them so). An annotation line (``PMID START END TEXT TYPE [ID ...]``) becomes an entity of
that type; its id is its place among the document's annotation lines (``"1"``, ``"2"``, ...) and
its columns after the type (concept ids and any more) are kept for the way back. A relation line
is listed and counted, not an entity; so is an annotation that cannot be one (``standoff``).
Malformed input raises ``FormatError`` naming ``file:line`` and the document: a line of no kind
above, another document's PMID inside a document, offsets that are not numbers or beyond the text,
a repeated PMID, bytes that are not UTF-8. Read line by line: memory does not grow with the file.

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
from .brat import tokenize_exactly
from .standoff import EMPTY, RELATION, Mention, Skips, mentions_of, put_mentions

PUBTATOR_KEY = "w2ner_pubtator"  # {"pmid", "title_length", "abstract": whether it had an abstract line}
DISCONTINUOUS_CHOICES = ("split", "span", "skip")


def read_pubtator(path: Union[str, Path], vocab: Vocab, spans_key: str = "w2ner", tokenizer=None, strict: bool = False) -> Iterator[Doc]:
    """The Docs of a PubTator file, streamed (see the module docstring)."""
    path = Path(path)
    seen: Dict[str, int] = {}
    for block in _blocks(path):
        pmid, line = _pmid(block[0][1]), block[0][0]
        if pmid in seen:
            raise FormatError(f"{path}:{line}: document {pmid}: the PMID is already that of the document on line {seen[pmid]}")
        seen[pmid] = line
        yield _document(path, block, vocab, spans_key, tokenizer, strict)


def _blocks(path: Path) -> Iterator[List[Tuple[int, str]]]:
    """Each document's (line number, line) pairs; blank lines separate documents."""
    block: List[Tuple[int, str]] = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf8").rstrip("\n").rstrip("\r")
            except UnicodeDecodeError as err:
                raise FormatError(f"{path}:{number}: {not_utf8(err)}") from None
            if number == 1:
                line = line.lstrip("\ufeff")
            if line.strip():
                block.append((number, line))
            elif block:
                yield block
                block = []
    if block:
        yield block


def _pmid(line: str) -> str:
    """The PMID a line starts with (up to its first '|' or tab)."""
    return re.match(r"[^|\t]*", line).group()


def _document(path: Path, block: List[Tuple[int, str]], vocab: Vocab, spans_key: str, tokenizer, strict: bool) -> Doc:
    texts: Dict[str, str] = {}
    lines = []
    pmid = _pmid(block[0][1])
    where = f"{path}:{block[0][0]}: document {pmid}"
    for number, line in block:
        kind = line[len(pmid) : len(pmid) + 3]
        if not line.startswith(pmid) or (kind not in ("|t|", "|a|") and line[len(pmid) : len(pmid) + 1] != "\t"):
            raise FormatError(f"{path}:{number}: document {pmid}: expected 'PMID|t|title', 'PMID|a|abstract' or a tab-separated line starting with {pmid}, got {line[:60]!r}")
        if kind in ("|t|", "|a|"):
            if kind in texts or lines:
                raise FormatError(f"{path}:{number}: document {pmid}: a second {kind} line, or one after the annotations")
            texts[kind] = line[len(pmid) + 3 :]
        else:
            lines.append((number, line.split("\t")))
    if "|t|" not in texts:
        raise FormatError(f"{where}: no title line ('{pmid}|t|...') before the annotations")
    text = texts["|t|"] + ("\n" + texts["|a|"] if "|a|" in texts else "")
    doc = tokenize_exactly(text, vocab, tokenizer, where)
    skips = Skips(where, strict)
    put_mentions(doc, _mentions(path, pmid, lines, len(text), skips), spans_key, skips)
    doc.user_data[PUBTATOR_KEY] = {"pmid": pmid, "title_length": len(texts["|t|"]), "abstract": "|a|" in texts}
    doc.user_data[NAME_KEY] = pmid
    return doc


def _mentions(path: Path, pmid: str, lines, n_chars: int, skips: Skips) -> List[Mention]:
    mentions = []
    for number, columns in lines:
        at = f"{path}:{number}: document {pmid}"
        if len(columns) >= 5 and columns[1].isdigit() and columns[2].isdigit():
            start, end = int(columns[1]), int(columns[2])
            mention = Mention(str(len(mentions) + 1), columns[4], [(start, end)], columns[3], {"columns": columns[5:]})
            if end > n_chars or start > end:
                raise FormatError(f"{at}: annotation {mention.id}: offsets {start} {end} are not within the text of {n_chars} characters")
            if start == end:
                skips.skip(mention.id, EMPTY, f"({mention.label}) {start} {end} has no text")
            mentions.append(mention)
        elif len(columns) >= 4 and not columns[1].isdigit():
            skips.later(f"line {number}", RELATION, f"relation {columns[1]} between {', '.join(columns[2:4])} is not an entity")
        else:
            raise FormatError(f"{at}: expected 'PMID<TAB>START<TAB>END<TAB>TEXT<TAB>TYPE[<TAB>ID...]' or a relation 'PMID<TAB>TYPE<TAB>ID1<TAB>ID2', got {len(columns)} columns")
    return [mention for mention in mentions if mention.ranges[0][0] < mention.ranges[0][1]]


def docs_to_pubtator(
    docs, path: Union[str, Path], spans_key: str = "w2ner", problems: Optional[List[str]] = None, discontinuous: Optional[str] = None
) -> Dict[str, int]:
    """Write docs as a PubTator file; returns how many discontinuous entities were met.

    Each doc's PMID is the one it was read with, else its name, else ``doc{index}``; its text must be a
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
    title_length = meta.get("title_length", doc.text.find("\n") if "\n" in doc.text else len(doc.text))
    title, abstract = doc.text[:title_length], doc.text[title_length + 1 :]
    has_abstract = meta.get("abstract", "\n" in doc.text)
    if any(c in title + abstract for c in "\n\r") or (has_abstract and doc.text[title_length : title_length + 1] != "\n"):
        report(f"doc {index} ({pmid}): PubTator holds a title line and an abstract line, and its text has more line breaks; left out")
        return []
    annotations = []
    for mention in mentions_of(doc, spans_key):
        for start, end, text in _pieces(doc, mention, discontinuous, counts, f"doc {index} ({pmid})"):
            columns = [pmid, str(start), str(end), text, mention.label, *mention.extra.get("columns", [""])]
            if any(c in column for column in columns[3:] for c in "\t\n\r"):
                report(f"doc {index} ({pmid}): the {mention.label!r} entity {text!r} has a tab or line break PubTator cannot hold; left out")
                continue
            annotations.append(((start, end, mention.id), "\t".join(columns)))
    annotations.sort(key=lambda pair: pair[0])
    return [f"{pmid}|t|{title}"] + ([f"{pmid}|a|{abstract}"] if has_abstract else []) + [line for _, line in annotations]


def _pieces(doc: Doc, mention: Mention, discontinuous: Optional[str], counts: Dict[str, int], where: str) -> List[Tuple[int, int, str]]:
    """(start, end, text) of the lines of one entity, as ``discontinuous`` says for a discontinuous one."""
    if len(mention.ranges) == 1:
        start, end = mention.ranges[0]
        return [(start, end, mention.text if mention.text is not None else doc.text[start:end])]
    counts["discontinuous"] += 1
    if discontinuous is None:
        raise ValueError(f"{where}: the {mention.label!r} entity {mention.text!r} is discontinuous, which PubTator cannot hold: choose --discontinuous split, span or skip")
    if discontinuous == "skip":
        return []
    if discontinuous == "span":
        start, end = mention.ranges[0][0], mention.ranges[-1][1]
        return [(start, end, doc.text[start:end])]
    return [(start, end, doc.text[start:end]) for start, end in mention.ranges]
