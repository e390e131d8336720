"""BioC XML and BioC JSON collections <-> Docs, streamed one document at a time.

Reading: one Doc per BioC document (``doc_per="passage"``: per passage). Its text is the
passages' texts at their offsets (a passage without text: its sentences'), the gaps between them
filled with line breaks, so a Doc character is a BioC offset less the first passage's. An
annotation becomes an entity of the infon ``type_key`` (default ``type``), its id kept as the
``span.id_`` of its fragments; an annotation with several locations is one discontinuous entity.
Its other infons, its locations and text are kept (``standoff.SOURCE_KEY``), and the document's
id, infons, passages and sentences, and the collection's source, date, key and infons are
``doc.user_data[BIOC_KEY]``, so writing the Docs back gives the same collection.

How an annotation becomes an entity (its text against its offsets, tokens split at its
boundaries, sentence boundaries from the ``<sentence>`` elements, else the sentencizer, never inside
an entity) is ``standoff``'s one rule. An annotation that cannot be an entity (text that differs from
its offsets, a location outside its passage or beyond the text, of length 0, none, no type infon
where others of its document have one) is listed and counted; so is an element (a JSON key) that
BioC does not have, with its ``file:line``; ``strict`` stops at the first. Relations, at document,
passage or sentence level, are kept with the Doc (``standoff.RELATIONS_KEY``) and written back where
they were; they never train. Input that is not BioC raises ``FormatError`` naming the file, the line
and the document: not XML or JSON, not UTF-8, another root element, a passage that starts inside the
one before, a text or offset of the wrong kind, a duplicate document id (in the file or in another
of the directory, whose export would repeat it), an annotation id that several annotations have
and a relation refers to (elsewhere a repeated id is kept as it was), no annotation of a document
with the ``type_key`` infon (name it with ``--type-key``). An empty annotation text is none (bioc's
XML encoder writes ``<text/>`` for none).

The ``bioc`` package (the ``[bioc]`` extra) is the data model and encoder of what is written; the
reading is done here with lxml's pull parser and ``jsonstream``, because bioc's readers keep the
whole tree in memory and know no line numbers.
"""
import bisect
import math
import re
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..extras import require_bioc
from .base import NAME_KEY, FormatError, in_natural_order
from .jsonstream import ELEMENT, stream_json
from .standoff import EMPTY, NO_TYPE, OUTSIDE, Mention, Reading, Skips, keep_relations, relations_of, write_each

BIOC_KEY = "w2ner_bioc"  # the BioC document, passages and collection a Doc came from
DOC_PER = ("document", "passage")
CHUNK = 1 << 20
COLLECTION_FIELDS = ("source", "date", "key")
UNKNOWN_KEY = ("w2ner", "unknown")  # (line, what) of the parts BioC does not have: a key no JSON object has

Tokenizer = Optional[Callable[[str], Doc]]


def bioc_kind(path: Union[str, Path]) -> str:
    """'xml' or 'json', from the file's name (.xml, .json); ValueError for another name."""
    suffix = Path(path).suffix.lower()
    if suffix in (".xml", ".json"):
        return suffix[1:]
    raise ValueError(f"{path}: a BioC file is named .xml (BioC XML) or .json (BioC JSON)")


def check_bioc_options(type_key: str = "type", doc_per: str = "document", **_) -> None:
    """ValueError for an empty type key or a doc_per that is not 'document' or 'passage'."""
    if doc_per not in DOC_PER:
        raise ValueError(f"doc_per must be 'document' or 'passage', got {doc_per!r}")
    if not type_key:
        raise ValueError("type_key must name the infon that holds an annotation's type")


# ---------------------------------------------------------------- reading


def read_bioc(
    path: Union[str, Path],
    vocab: Vocab,
    spans_key: str = "w2ner",
    tokenizer: Tokenizer = None,
    type_key: str = "type",
    doc_per: str = "document",
    strict: bool = False,
    split_tokens: bool = True,
    sentencizer: bool = True,
) -> Iterator[Doc]:
    """The Docs of a BioC XML or JSON file (or of every .xml/.json file of a directory), streamed
    (``standoff.Reading`` for ``split_tokens`` and ``sentencizer``)."""
    require_bioc()
    check_bioc_options(type_key, doc_per)
    path = Path(path)
    files = in_natural_order(p for p in path.rglob("*") if p.suffix.lower() in (".xml", ".json")) if path.is_dir() else [path]
    if not files:
        raise FormatError(f"{path}: no BioC .xml or .json files in this directory")
    reading = Reading(vocab, spans_key, tokenizer, split_tokens, sentencizer, strict)
    document_ids: Dict[str, Tuple[Path, int]] = {}  # of every file: a directory is one corpus
    for file in files:
        reader = _Reader(file, reading, type_key, doc_per, document_ids)
        collection: Dict[str, Any] = {"infons": {}, UNKNOWN_KEY: []}  # its fields as they are read
        documents = _xml_documents(file, collection) if bioc_kind(file) == "xml" else _json_documents(file, collection)
        before = len(document_ids)
        for document, line in documents:
            yield from reader.docs(document, line, collection)
        if len(document_ids) == before and collection.get(UNKNOWN_KEY):
            line, what = collection[UNKNOWN_KEY][0]
            raise FormatError(f"{file}:{line}: not a BioC collection: no documents, and {what} is not BioC")


def _xml_documents(path: Path, collection: Dict[str, Any]) -> Iterator[Tuple[Dict[str, Any], int]]:
    """(document as BioC JSON's dict, its line), each document's elements freed once read; the
    collection's fields go to ``collection`` as they come."""
    import codecs

    from lxml import etree

    parser = etree.XMLPullParser(events=("end",), huge_tree=True, resolve_entities=False)
    utf8 = codecs.getincrementaldecoder("utf8")()
    lines = 1
    with open(path, "rb") as f:
        for data in iter(lambda: f.read(CHUNK), b""):
            try:
                utf8.decode(data)
            except UnicodeDecodeError as err:
                line = lines + data[: max(err.start, 0)].count(b"\n")
                raise FormatError(f"{path}:{line}: not valid UTF-8 ({err.reason})") from None
            lines += data.count(b"\n")
            yield from _xml_events(path, parser, lambda: parser.feed(data), collection)
        yield from _xml_events(path, parser, parser.close, collection)


def _xml_events(path: Path, parser, feed: Callable[[], Any], collection: Dict[str, Any]):
    from lxml import etree

    try:
        feed()
    except etree.XMLSyntaxError as err:
        raise FormatError(f"{path}:{err.lineno}: not valid XML ({err.msg})") from None
    for _, elem in parser.read_events():
        parent = elem.getparent()
        if parent is None:
            if elem.tag != "collection":
                raise FormatError(f"{path}:{elem.sourceline}: not a BioC collection (the root element is <{elem.tag}>)")
            continue
        if parent.getparent() is not None or parent.tag != "collection":
            continue
        if elem.tag == "document":
            yield _xml_document(elem), elem.sourceline
            elem.clear()
            while elem.getprevious() is not None:
                del parent[0]
        elif elem.tag in COLLECTION_FIELDS:
            collection[elem.tag] = elem.text or ""
        elif elem.tag == "infon":
            collection["infons"][elem.get("key")] = elem.text or ""
        elif isinstance(elem.tag, str):
            collection[UNKNOWN_KEY].append((elem.sourceline, f"<{elem.tag}> in <collection>"))


# The children each BioC element has (BioC.dtd); others are listed and passed over.
_XML_CHILDREN = {
    "document": {"id", "infon", "passage", "annotation", "relation"},
    "passage": {"infon", "offset", "text", "sentence", "annotation", "relation"},
    "sentence": {"infon", "offset", "text", "annotation", "relation"},
    "annotation": {"infon", "location", "text"},
    "relation": {"infon", "node"},
}


def _xml_unknown(elem, unknown: List[Tuple[int, str]]) -> None:
    """Note the children of ``elem`` that BioC does not have (comments and processing instructions are not elements)."""
    known = _XML_CHILDREN[elem.tag]
    for child in elem:
        if isinstance(child.tag, str) and child.tag not in known:
            unknown.append((child.sourceline, f"<{child.tag}> in <{elem.tag}>"))


def _xml_infons(elem) -> Dict[str, str]:
    return {infon.get("key"): infon.text or "" for infon in elem.findall("infon")}


def _xml_annotation(elem, unknown) -> Dict[str, Any]:
    _xml_unknown(elem, unknown)
    locations = [{"offset": loc.get("offset"), "length": loc.get("length"), "line": loc.sourceline} for loc in elem.findall("location")]
    return {"id": elem.get("id"), "infons": _xml_infons(elem), "text": elem.findtext("text"), "locations": locations, "line": elem.sourceline}


def _xml_relation(elem, unknown) -> Dict[str, Any]:
    _xml_unknown(elem, unknown)
    nodes = [{"refid": node.get("refid"), "role": node.get("role")} for node in elem.findall("node")]
    return {"id": elem.get("id"), "infons": _xml_infons(elem), "nodes": nodes, "line": elem.sourceline}


def _xml_contents(elem, unknown) -> Dict[str, Any]:
    """The infons, annotations and relations of a document, passage or sentence."""
    _xml_unknown(elem, unknown)
    return {
        "infons": _xml_infons(elem), "line": elem.sourceline,
        "annotations": [_xml_annotation(a, unknown) for a in elem.findall("annotation")],
        "relations": [_xml_relation(r, unknown) for r in elem.findall("relation")],
    }  # fmt: skip


def _xml_part(elem, unknown) -> Dict[str, Any]:
    """A passage or sentence: offset, infons, text (None when absent), annotations, relations."""
    return {"offset": elem.findtext("offset"), "text": elem.findtext("text"), **_xml_contents(elem, unknown)}


def _xml_document(elem) -> Dict[str, Any]:
    unknown: List[Tuple[int, str]] = []
    passages = []
    for passage in elem.findall("passage"):
        part = _xml_part(passage, unknown)
        part["sentences"] = [_xml_part(sentence, unknown) for sentence in passage.findall("sentence")]
        passages.append(part)
    return {"id": elem.findtext("id"), "passages": passages, **_xml_contents(elem, unknown), UNKNOWN_KEY: sorted(unknown)}


def _json_documents(path: Path, collection: Dict[str, Any]) -> Iterator[Tuple[Dict[str, Any], int]]:
    for kind, value, line in stream_json(path, "documents"):
        if kind == ELEMENT:
            if isinstance(value, dict):
                value[UNKNOWN_KEY] = _json_unknown(value, line)
            yield value, line
        elif value[0] in COLLECTION_FIELDS or value[0] == "infons":
            collection[value[0]] = value[1]
        elif value[0] != "bioctype":
            collection[UNKNOWN_KEY].append((line, f"key {value[0]!r} of the collection"))


# The keys each BioC JSON object has (bioc's encoder adds "bioctype"); others are listed and passed over.
_JSON_KEYS = {
    "document": {"id", "infons", "passages", "annotations", "relations"},
    "passage": {"offset", "infons", "text", "sentences", "annotations", "relations"},
    "sentence": {"offset", "infons", "text", "annotations", "relations"},
    "annotation": {"id", "infons", "text", "locations"},
    "relation": {"id", "infons", "nodes"},
}


def _json_unknown(document: Dict[str, Any], line: int) -> List[Tuple[int, str]]:
    """The keys of a BioC JSON document (and of its passages, sentences, annotations, relations)
    that BioC does not have."""
    unknown = []

    def note(item: Any, kind: str) -> None:
        if isinstance(item, dict):
            unknown.extend((line, f"key {key!r} of a {kind}") for key in item if key not in _JSON_KEYS[kind] and key not in ("bioctype", UNKNOWN_KEY))
            for annotation in item.get("annotations") or [] if kind != "annotation" and kind != "relation" else []:
                note(annotation, "annotation")
            for relation in item.get("relations") or [] if kind != "annotation" and kind != "relation" else []:
                note(relation, "relation")

    note(document, "document")
    for passage in document.get("passages") or []:
        note(passage, "passage")
        for sentence in (passage.get("sentences") or []) if isinstance(passage, dict) else []:
            note(sentence, "sentence")
    return unknown


class _Reader:
    """Turns one file's BioC documents (as BioC JSON's dicts) into Docs (see the module docstring)."""

    def __init__(self, path: Path, reading: Reading, type_key: str, doc_per: str, document_ids: Dict[str, Tuple[Path, int]]):
        self.path, self.reading, self.type_key, self.doc_per = path, reading, type_key, doc_per
        self.document_ids = document_ids  # (file, line) of each id read, in this file or another

    def docs(self, document: Any, line: int, collection: Dict[str, Any]) -> Iterator[Doc]:
        w = _Where(self.path, line)
        if not isinstance(document, dict):
            raise FormatError(w.at(None, f"a BioC document is an object, got {type(document).__name__}"))
        w.document = doc_id = _string(document.get("id"), w.at(None, "the document's id"))
        where = w.at()
        if doc_id in self.document_ids:
            file, first = self.document_ids[doc_id]
            raise FormatError(f"{where}: the id is already the id of the document on line {first}" + ("" if file == self.path else f" of {file}"))
        self.document_ids[doc_id] = (self.path, line)
        passages = [_passage(p, w, k) for k, p in enumerate(_list(document, "passages", where))]
        _check_order(passages)
        skips = self.reading.skips(where)
        unknown = collection.pop(UNKNOWN_KEY, []) + document.get(UNKNOWN_KEY, [])
        collection[UNKNOWN_KEY] = []
        for element_line, what in unknown:
            skips.unknown(f"{self.path}:{element_line}", f"document {doc_id}: {what} is not BioC; passed over")
        placed, relations = self._placed_annotations(document, passages, w, skips)
        meta = {
            "collection": {key: collection.get(key) for key in (*COLLECTION_FIELDS, "infons") if key in collection},
            "document": {"id": doc_id, "infons": _infons(document, where)},
            "passages": [_passage_meta(p) for p in passages], "type_key": self.type_key,
        }  # fmt: skip
        groups = [[k] for k in range(len(passages))] if self.doc_per == "passage" and passages else [list(range(len(passages)))]
        mentions = _by_group(placed, groups)
        kept = _by_group([(None if r["at"] is None else r["at"][0], r) for r in relations], groups)
        for number, group in enumerate(groups):
            last = number == len(groups) - 1
            part = None if self.doc_per == "document" else number
            yield self._doc(passages, group, mentions[number], kept[number], {**meta, "part": part}, skips if last else self.reading.skips(where), where)

    def _doc(self, passages, group, mentions: List[Mention], relations, meta, skips: Skips, where: str) -> Doc:
        base = passages[group[0]]["start"] if group else 0
        text = _layout(passages, group, base)
        for mention in mentions:
            mention.ranges = [(start - base, end - base) for start, end in mention.ranges]
        doc = self.reading.doc(text, mentions, skips, where, _sentence_parts(passages, group, base))
        keep_relations(doc, "bioc", [_relative(r, group) for r in relations])
        meta["passages"] = [meta["passages"][k] for k in group]
        meta["base"] = base
        doc.user_data[BIOC_KEY] = meta
        doc_id = meta["document"]["id"]
        doc.user_data[NAME_KEY] = doc_id if meta["part"] is None else f"{doc_id}-p{meta['part']}"
        return doc

    def _placed_annotations(self, document, passages, w: "_Where", skips: Skips) -> Tuple[List[Tuple[int, Mention]], List[Dict[str, Any]]]:
        """(passage index, mention) for every annotation that can be placed (the others skipped),
        and the relations, each with where it was: ``at`` [passage, sentence or None], or None."""
        placed: List[Tuple[int, Mention]] = []
        relations: List[Dict[str, Any]] = []
        ids: Dict[str, List[Optional[int]]] = {}
        untyped: List[Tuple[Dict[str, Any], Any]] = []
        typed = 0
        where = w.at()
        end = passages[-1]["end"] if passages else 0
        find = _passage_finder(passages)
        containers = [(k, j, part) for k, passage in enumerate(passages) for j, part in [(None, passage), *enumerate(passage["sentences"])]]
        for k, j, part in containers + [(None, None, document)]:
            for annotation in _list(part, "annotations", where):
                mention = self._mention(annotation, w, ids, untyped)
                typed += mention is not None
                passage = None if mention is None else self._passage_of(mention, k, passages, end, skips, find)
                if passage is not None:
                    mention.extra.update({"document": True} if k is None else {"sentence": True} if j is not None else {})
                    placed.append((passage, mention))
            relations += [_relation(r, w, None if k is None else [k, j]) for r in _list(part, "relations", where)]
        self._check_types(untyped, typed > 0, w, skips)
        _check_references(relations, ids, w)
        in_source = set(ids) | {r["id"] for r in relations}
        for relation in relations:  # a node the source itself leaves unresolved is written back as it was
            unresolved = [node["refid"] for node in relation["nodes"] if node["refid"] not in in_source]
            relation.update({"unresolved": unresolved} if unresolved else {})
        return placed, relations

    def _mention(self, annotation: Any, w: "_Where", ids: Dict[str, List[Optional[int]]], untyped: List) -> Optional[Mention]:
        """The annotation as a mention; None (noted in ``untyped``) without the type infon."""
        if not isinstance(annotation, dict):
            raise FormatError(w.at(None, f"an annotation is an object, got {type(annotation).__name__}"))
        annotation_id = _string(annotation.get("id"), w.at(annotation, "an annotation's id"))
        at = w.at(annotation, f"annotation {annotation_id}")
        ids.setdefault(annotation_id, []).append(annotation.get("line"))
        infons = _infons(annotation, at)
        ranges = [_location(location, at) for location in _list(annotation, "locations", at)]
        if self.type_key not in infons:
            untyped.append((annotation, infons))
            return None
        label = _string(infons.pop(self.type_key), f"{at}: the {self.type_key!r} infon")
        text = annotation.get("text")  # bioc's XML encoder writes an empty <text/> for none
        return Mention(annotation_id, label, ranges, text if isinstance(text, str) and text else None, {"infons": infons}, at=w.at(annotation))

    def _check_types(self, untyped: List, any_typed: bool, w: "_Where", skips: Skips) -> None:
        """An annotation without the type infon is listed; when no annotation of the document has
        it, the key is wrong: FormatError naming it and --type-key."""
        for annotation, infons in untyped:
            known = ", ".join(sorted(map(str, infons))) or "none"
            why = f"no infon {self.type_key!r} for its type (its infons: {known}); give the infon key with --type-key"
            if not any_typed:
                raise FormatError(f"{w.at(annotation, 'annotation ' + str(annotation.get('id')))}: {why}")
            skips.skip(str(annotation.get("id")), NO_TYPE, why)

    def _passage_of(self, mention: Mention, k: Optional[int], passages, end: int, skips: Skips, find: Callable[[int], Optional[int]]) -> Optional[int]:
        """The passage the mention is in (``k``, else ``find`` by its first location); None,
        skipped, for one without a location, empty, beyond the text or outside its passage. The
        locations of an annotation of the document (``k`` None) may lie in several passages, each
        in one, where the passages are one Doc (``doc_per`` "document")."""
        if not mention.ranges:
            skips.skip(mention.id, EMPTY, f"({mention.label}) has no location")
            return None
        first = k if k is not None else find(mention.ranges[0][0])
        for start, stop in mention.ranges:
            at = first if k is not None or self.doc_per == "passage" else find(start)
            passage = passages[at] if at is not None else None
            if passage is None or not passage["start"] <= start < max(passage["end"], passage["start"] + 1) or stop > passage["end"]:
                extent = (f"its passage ({passage['start']}-{passage['end']})" if passage else
                          f"the passages (the text ends at {end})" if start >= end else "every passage (it starts between two)")
                skips.skip(mention.id, OUTSIDE, f"({mention.label}) location {start}+{stop - start} is outside {extent}")
                return None
            if stop == start:
                skips.skip(mention.id, EMPTY, f"({mention.label}) location {start}+0 has no text")
                return None
        return first


def _by_group(items: List[Tuple[Optional[int], Any]], groups: List[List[int]]) -> List[List[Any]]:
    """The (passage index, item) items of each group of passages, in their order; one of no
    passage (None: the document's) with the last group."""
    group_of = {k: number for number, group in enumerate(groups) for k in group}
    found: List[List[Any]] = [[] for _ in groups]
    for k, item in items:
        found[group_of.get(k, len(groups) - 1)].append(item)
    return found


def _relation(relation: Any, w: "_Where", at: Optional[List[Optional[int]]]) -> Dict[str, Any]:
    """A relation as BioC JSON's dict, with ``at``: [passage, sentence or None], None for the document."""
    where = w.at(relation, "a relation")
    if not isinstance(relation, dict):
        raise FormatError(f"{where} is an object, got {type(relation).__name__}")
    nodes = []
    for node in _list(relation, "nodes", where):
        if not isinstance(node, dict) or not isinstance(node.get("refid"), (str, int)):
            raise FormatError(f"{where}: a node is an object with a refid, got {node!r}")
        nodes.append({"refid": str(node["refid"]), "role": "" if node.get("role") is None else str(node["role"])})
    relation_id = relation.get("id")
    return {"id": None if relation_id is None else str(relation_id), "infons": _infons(relation, where), "nodes": nodes, "at": at, "line": relation.get("line")}


def _check_references(relations: List[Dict[str, Any]], ids: Dict[str, List[Optional[int]]], w: "_Where") -> None:
    """FormatError where a relation refers to an id that several annotations have (elsewhere a
    repeated annotation id is no error: ids are kept as they were)."""
    for relation in relations:
        for node in relation["nodes"]:
            lines = ids.get(node["refid"], [])
            if len(lines) > 1:
                named = ", ".join(str(line) for line in lines if line) or "several"
                raise FormatError(f"{w.at(relation, 'relation ' + str(relation['id']))}: it refers to {node['refid']}, the id of the annotations on lines {named}; the id must be unique")


def _relative(relation: Dict[str, Any], group: List[int]) -> Dict[str, Any]:
    """The relation as kept with a Doc of the passages ``group``: its passage counted from the first."""
    at = relation["at"]
    kept = {key: value for key, value in relation.items() if key != "line"}
    return dict(kept, at=None if at is None else [at[0] - group[0], at[1]])


def _sentence_parts(passages: List[Dict[str, Any]], group: List[int], base: int) -> List[Tuple[int, bool]]:
    """Where sentences start in the Doc of ``group``: each passage, and its <sentence>s where it has
    them (then the sentencizer does not split inside it)."""
    parts = []
    for k in group:
        sentences = passages[k]["sentences"]
        parts.append((passages[k]["start"] - base, not sentences))
        parts += [(sentence["offset"] - base, False) for sentence in sentences]
    return parts


class _Where:
    """Where in the file: ``at(item, what)`` is 'file:line: document ID: what', the line the item's
    (an XML element's) or else the document's."""

    def __init__(self, path: Path, line: int):
        self.path, self.line, self.document = path, line, ""

    def at(self, item: Any = None, what: str = "") -> str:
        line = item.get("line") if isinstance(item, dict) and item.get("line") else self.line
        document = f": document {self.document}" if self.document else ""
        return f"{self.path}:{line}{document}" + (f": {what}" if what else "")


def _string(value: Any, what: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value:
        raise FormatError(f"{what} is missing or not a string ({value!r})")
    return value


def _integer(value: Any, what: str) -> int:
    if isinstance(value, str) and re.fullmatch("-?[0-9]+", value.strip()):  # ASCII digits only: isdigit() takes '²', int() does not
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FormatError(f"{what} is not a whole number of characters at least 0 ({value!r})")
    return value


def _list(value: Dict[str, Any], key: str, where: str) -> List[Any]:
    items = value.get(key, [])
    if items is None:
        return []
    if not isinstance(items, list):
        raise FormatError(f"{where}: {key!r} is not a list")
    return items


def _infons(value: Dict[str, Any], where: str) -> Dict[str, Any]:
    infons = value.get("infons") or {}
    if not isinstance(infons, dict):
        raise FormatError(f"{where}: 'infons' is not an object of keys and values")
    return dict(infons)


def _location(location: Any, at: str) -> Tuple[int, int]:
    if not isinstance(location, dict):
        raise FormatError(f"{at}: a location is an object with offset and length")
    offset = _integer(location.get("offset"), f"{at}: the location's offset")
    return offset, offset + _integer(location.get("length"), f"{at}: the location's length")


def _passage(passage: Any, w: _Where, k: int) -> Dict[str, Any]:
    """A passage with its text segments ((offset, text): its own, or its sentences') and extent."""
    where = w.at(passage, f"passage {k}")
    if not isinstance(passage, dict):
        raise FormatError(f"{where}: a passage is an object, got {type(passage).__name__}")
    passage = dict(passage, offset=_integer(passage.get("offset"), f"{where}: the passage's offset"))
    sentences = []
    for k, sentence in enumerate(_list(passage, "sentences", where)):
        if not isinstance(sentence, dict):
            raise FormatError(f"{where}: sentence {k} is not an object")
        _part_text(sentence, f"{where}: sentence {k}'s text")
        sentences.append(dict(sentence, offset=_integer(sentence.get("offset"), f"{where}: sentence {k}'s offset")))
    passage["sentences"] = sentences
    own = _part_text(passage, f"{where}: the passage's text")
    segments = [(passage["offset"], own)] if own or not sentences else [(s["offset"], s.get("text") or "") for s in sentences]
    passage["segments"] = [(offset, text or "") for offset, text in segments]
    passage["start"] = min([passage["offset"]] + [offset for offset, _ in passage["segments"]])
    passage["end"] = max(offset + len(text) for offset, text in passage["segments"])
    passage["where"] = where
    return passage


def _passage_finder(passages: List[Dict[str, Any]]) -> Callable[[int], Optional[int]]:
    """The first passage whose extent holds an offset, by bisection: the passages' ends never
    decrease (``_check_order``), nor do their starts unless a passage's offset lies before the
    end of the one before (then all from the first that ends after the offset are candidates)."""
    starts, ends = [p["start"] for p in passages], [p["end"] for p in passages]
    follow = all(a <= b for a, b in zip(starts, starts[1:]))

    def find(offset: int) -> Optional[int]:
        candidates = range(bisect.bisect_right(ends, offset), bisect.bisect_right(starts, offset) if follow else len(passages))
        return next((k for k in candidates if starts[k] <= offset), None)

    return find


def _part_text(part: Dict[str, Any], what: str) -> Optional[str]:
    """A passage's or sentence's text, None where it has none; FormatError where it is not a string."""
    text = part.get("text")
    if text is not None and not isinstance(text, str):
        raise FormatError(f"{what} is not a string ({text!r})")
    return text


def _check_order(passages: List[Dict[str, Any]]) -> None:
    end = 0
    for passage in passages:
        for offset, text in passage["segments"]:
            if offset < end:
                raise FormatError(f"{passage['where']}: text at offset {offset} starts before the end of the text before it ({end}); passages and sentences must follow each other")
            end = offset + len(text)


def _layout(passages: List[Dict[str, Any]], group: List[int], base: int) -> str:
    """The texts of the passages in ``group`` at their offsets less ``base``, gaps as line breaks."""
    pieces, position = [], base
    for k in group:
        for offset, text in passages[k]["segments"]:
            pieces.append("\n" * (offset - position) + text)
            position = offset + len(text)
    return "".join(pieces)


def _passage_meta(passage: Dict[str, Any]) -> Dict[str, Any]:
    """What writing the passage back needs besides its annotations: offset, infons, text length
    (None without text) and its sentences' offsets, infons and text lengths."""
    own = passage.get("text")
    sentences = [
        {"offset": s["offset"], "infons": _infons(s, passage["where"]), "length": None if s.get("text") is None else len(s["text"])}
        for s in passage["sentences"]
    ]
    return {"offset": passage["offset"], "infons": _infons(passage, passage["where"]), "length": None if own is None else len(own), "sentences": sentences}


# ---------------------------------------------------------------- writing


class BioCWriter:
    """A BioC XML or JSON collection written one Doc at a time, memory bounded by one document.

    Consecutive Docs of one BioC document (read with ``doc_per="passage"``), from its first passage
    (``part`` 0) on, are its passages again.
    A Doc that came from BioC (``BIOC_KEY``) is written with its document id, infons, passages,
    sentences and collection fields; another is one document (id: its name, else ``doc{index}``)
    of one passage at offset 0. Each entity is an annotation: the type infon (the one it was read
    from, else ``type``) its label, ``score`` its score where it has one, one location per
    fragment (the source's locations where it is the source annotation unchanged), its id (made
    unique in the document where it is not, unless the source repeated it) and the source's other
    infons. The relations read with a Doc are written where they were (document, passage or
    sentence), each whose nodes all refer to annotations (or relations) of the document written,
    or to what the source itself did not have; the others (a relation of an annotation that was no
    entity, gold relations beside predicted entities) are left out and named in ``problems`` (a
    list given to the writer).

    ``resume``: (byte size, ``state()``) at a checkpoint, to go on writing after it (annotate).
    """

    def __init__(
        self, path: Union[str, Path], spans_key: str = "w2ner", kind: Optional[str] = None,
        resume: Optional[Tuple[int, Dict[str, Any]]] = None, problems: Optional[List[str]] = None,
    ):  # fmt: skip
        require_bioc()
        self.path, self.spans_key, self.problems = Path(path), spans_key, problems
        self.encoding = _XML() if (kind or bioc_kind(path)) == "xml" else _JSON()
        self.file = open(self.path, "wb" if resume is None else "r+b")
        self.open: Optional[Dict[str, Any]] = None  # the document being written: id, ids, passages, annotations
        self.started = False
        self.documents = 0
        if resume is not None:
            self.file.truncate(resume[0])
            self.file.seek(resume[0])
            state = resume[1]
            self.open, self.started, self.documents = state["open"], state["started"], state["documents"]
        self._index_open()

    def state(self) -> Dict[str, Any]:
        """What a resumed writer needs (JSON): the open document, whether the collection started."""
        return {"open": self.open, "started": self.started, "documents": self.documents}

    def write(self, doc: Doc, index: int = 0) -> None:
        meta = doc.user_data.get(BIOC_KEY) or _plain_meta(doc, index)
        if not self.started:
            self._put(self.encoding.header(meta.get("collection", {})))
            self.started = True
        doc_id = meta["document"]["id"]
        if self.open is None or self.open["id"] != doc_id or not meta.get("part"):  # a document's first passage, or all
            self._close_document()
            self.open = {"id": doc_id, "ids": [], "passages": 0, "annotations": [], "relations": []}
            self._index_open()
            self._put(self.encoding.open_document(doc_id, meta["document"]["infons"], self.documents))
            self.documents += 1
        passages, annotations = _bioc_passages(doc, meta, self.spans_key, self.open["ids"], self.annotation_ids)
        self.open["annotations"].extend(_plain(a) for a in annotations)
        relations = relations_of(doc, "bioc")
        relation_ids = [r["id"] for r in relations if r["id"] is not None]
        self.open.setdefault("relation_ids", []).extend(relation_ids)
        self.relation_ids.update(relation_ids)
        for relation in relations:
            if relation["at"] is None:
                self.open.setdefault("relations", []).append(relation)
            elif self._complete(relation):
                _add_relation(passages, relation)
        for passage in passages:
            try:
                self._put(self.encoding.passage(passage, self.open["passages"]))
            except ValueError as err:  # a character XML cannot hold
                raise ValueError(f"document {doc_id}: {err}") from None
            self.open["passages"] += 1

    def flush(self) -> int:
        self.file.flush()
        return self.file.tell()

    def close(self) -> None:
        if not self.started:
            self._put(self.encoding.header({}))
        self._close_document()
        self._put(self.encoding.footer())
        self.file.close()

    def _close_document(self) -> None:
        if self.open is not None:
            relations = [_plain_relation(r) for r in self.open.get("relations", []) if self._complete(r)]
            try:
                self._put(self.encoding.close_document(self.open["annotations"], relations))
            except ValueError as err:  # lxml's, for a character XML cannot hold in an annotation's infons
                raise ValueError(f"document {self.open['id']}: an annotation or relation: {err}") from None
            self.open = None

    def _index_open(self) -> None:
        """The open document's annotation and relation ids as sets, beside its lists (what a
        checkpoint keeps), so that each Doc of a document looks them up in constant time."""
        self.annotation_ids = set(self.open["ids"]) if self.open else set()
        self.relation_ids = set(self.open.get("relation_ids", [])) if self.open else set()

    def _complete(self, relation: Dict[str, Any]) -> bool:
        """Whether every node of the relation refers to an annotation or relation of the open
        document, or to an id its source did not have either; one that does not is named in
        ``problems``."""
        unresolved = set(relation.get("unresolved", []))
        known = (self.annotation_ids, self.relation_ids, unresolved)
        missing = [node["refid"] for node in relation["nodes"] if not any(node["refid"] in ids for ids in known)]
        if missing and self.problems is not None:
            self.problems.append(f"document {self.open['id']}: relation {relation['id']} refers to {', '.join(missing)}, not written as an annotation; left out")
        return not missing

    def _put(self, text: str) -> None:
        self.file.write(text.encode("utf8"))


def docs_to_bioc(docs, path: Union[str, Path], spans_key: str = "w2ner", problems: Optional[List[str]] = None) -> Path:
    """Write docs as one BioC collection (XML for .xml, JSON for .json; see ``BioCWriter``)."""
    write_each(BioCWriter(path, spans_key, problems=problems), docs)
    return Path(path)


def _plain_meta(doc: Doc, index: int) -> Dict[str, Any]:
    name = str(doc.user_data.get(NAME_KEY) or f"doc{index}")
    passage = {"offset": 0, "infons": {}, "length": len(doc.text), "sentences": []}
    return {"collection": {}, "document": {"id": name, "infons": {}}, "passages": [passage], "base": 0, "type_key": "type", "part": None}


def _bioc_passages(doc: Doc, meta: Dict[str, Any], spans_key: str, used_ids: List[str], used: set):
    """The doc's passages as bioc objects with their annotations, and the document-level
    annotations; their ids are added to ``used_ids`` and its set ``used``."""
    from bioc import BioCPassage, BioCSentence

    from .standoff import mentions_of

    base = meta.get("base", 0)
    text = doc.text  # built from the tokens on every call: once per doc

    def text_at(offset: int, length: Optional[int]) -> Optional[str]:
        return None if length is None else text[offset - base : offset - base + length]

    passages = []
    for saved in meta["passages"]:
        passage = BioCPassage()
        passage.offset, passage.infons, passage.text = saved["offset"], dict(saved["infons"]), text_at(saved["offset"], saved["length"])
        for sentence_meta in saved.get("sentences", []):
            sentence = BioCSentence()
            sentence.offset, sentence.infons = sentence_meta["offset"], dict(sentence_meta["infons"])
            sentence.text = text_at(sentence_meta["offset"], sentence_meta["length"])
            passage.add_sentence(sentence)
        passages.append(passage)
    document_level = []
    containers = _Containers(passages)
    for mention in mentions_of(doc, spans_key):
        annotation = _annotation(mention, base, meta.get("type_key", "type"), used_ids, used)
        container = None if mention.extra.get("document") else containers.of(annotation.locations[0].offset, bool(mention.extra.get("sentence")))
        (document_level if container is None else container.annotations).append(annotation)
    return passages, document_level


def _annotation(mention, base: int, type_key: str, used_ids: List[str], used: set):
    from bioc import BioCAnnotation, BioCLocation

    annotation = BioCAnnotation()
    annotation_id = mention.extra.get("source_id") or mention.id or "e0"  # the source's id, repeated or not
    while annotation_id in used and "source_id" not in mention.extra:
        annotation_id = f"{mention.id or 'e'}-{len(used_ids)}"
    used_ids.append(annotation_id)
    used.add(annotation_id)
    annotation.id = annotation_id
    annotation.infons = {type_key: mention.label, **mention.extra.get("infons", {})}
    if mention.score is not None:
        annotation.infons["score"] = f"{mention.score:.4f}"
    annotation.text = mention.text
    for start, end in mention.ranges:
        annotation.add_location(BioCLocation(start + base, end - start))
    return annotation


def _plain_relation(relation: Dict[str, Any]) -> Dict[str, Any]:
    """A kept relation as BioC JSON's dict (its place dropped)."""
    return {"id": relation["id"], "infons": dict(relation["infons"]), "nodes": [dict(node) for node in relation["nodes"]]}


def _add_relation(passages, relation: Dict[str, Any]) -> None:
    """Add a kept relation to the passage (or sentence) it was read from."""
    from bioc.biocjson.decoder import parse_relation

    k, j = relation["at"]
    container = passages[k] if j is None else passages[k].sentences[j]
    container.add_relation(parse_relation(_plain_relation(relation)))


def _xml_relation_element(relation: Dict[str, Any]):
    """A relation's XML element (without an id attribute where it had none)."""
    from bioc.biocjson.decoder import parse_relation
    from bioc.biocxml.encoder import encode_relation

    element = encode_relation(_xml_safe(parse_relation(dict(_plain_relation(relation), id=relation["id"] or ""))))
    if relation["id"] is None:
        del element.attrib["id"]
    return element


class _Containers:
    """Which passage (or sentence) of a document holds an annotation: the first passage, in
    document order, that holds its first location; a sentence of it where the annotation was read
    from one (``in_sentence``) or the passage has no text of its own; None: the document.

    Found by bisection where the passages' reaches and their sentences' follow each other (the
    reader requires it of what it reads), so a document of many passages and sentences is written
    in linear time; by a scan otherwise."""

    def __init__(self, passages):
        self.passages = passages
        self.sentences = [[(s.offset, _sentence_end(s)) for s in p.sentences] for p in passages]
        self.ends = [max([_passage_end(p)] + [s.offset + len(s.text or "") for s in p.sentences]) for p in passages]
        reaches = [(min([p.offset] + [a for a, _ in spans]), max([end] + [b for _, b in spans])) for p, end, spans in zip(passages, self.ends, self.sentences)]
        self.reach_starts, self.reach_ends = ([r[0] for r in reaches], [r[1] for r in reaches]) if _follow(reaches) else (None, None)
        self.sentence_starts = [[a for a, _ in spans] if _follow(spans) else None for spans in self.sentences]

    def of(self, offset: int, in_sentence: bool):
        if self.reach_starts is not None:
            candidates = range(bisect.bisect_right(self.reach_ends, offset), bisect.bisect_right(self.reach_starts, offset))
        else:
            candidates = range(len(self.passages))
        for k in candidates:
            passage = self.passages[k]
            if passage.sentences and (in_sentence or passage.text is None):
                j = self._sentence(k, offset)
                if j is not None:
                    return passage.sentences[j]
            if passage.offset <= offset < self.ends[k]:
                return passage
        return None

    def _sentence(self, k: int, offset: int) -> Optional[int]:
        """The last sentence of passage k that holds ``offset``."""
        spans, starts = self.sentences[k], self.sentence_starts[k]
        for j in range(len(spans) - 1 if starts is None else bisect.bisect_right(starts, offset) - 1, -1, -1):
            start, end = spans[j]
            if start <= offset < end:
                return j
            if starts is not None and end <= offset:
                return None  # and so do all before it
        return None


def _passage_end(passage) -> int:
    return passage.offset + len(passage.text or "")


def _sentence_end(sentence) -> float:
    """Where a sentence's text ends (one without text holds all after its offset)."""
    return math.inf if sentence.text is None else sentence.offset + len(sentence.text)


def _follow(extents: List[Tuple[int, float]]) -> bool:
    """Whether the (start, end) extents' starts and ends both never decrease."""
    return all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(extents, extents[1:]))


class _XML:
    """BioC XML, written piece by piece with bioc's element encoders."""

    def header(self, collection: Dict[str, Any]) -> str:
        from lxml import etree

        parts = ["<?xml version='1.0' encoding='UTF-8' standalone='yes'?>\n<collection>\n"]
        for key in COLLECTION_FIELDS:
            element = etree.Element(key)
            element.text = _xml_text(collection.get(key, ""))
            parts.append(etree.tostring(element, encoding="unicode") + "\n")
        parts += [self._infon(k, v) + "\n" for k, v in (collection.get("infons") or {}).items()]
        return "".join(parts)

    def _infon(self, key: Any, value: Any) -> str:
        from bioc.biocxml.encoder import encode_infon
        from lxml import etree

        return etree.tostring(encode_infon(key, _xml_text(value)), encoding="unicode")

    def open_document(self, doc_id: str, infons: Dict[str, Any], index: int) -> str:
        from lxml import etree

        element = etree.Element("id")
        element.text = doc_id
        infon_lines = "".join(f"{self._infon(k, v)}\n" for k, v in infons.items())
        return f"<document>\n{etree.tostring(element, encoding='unicode')}\n{infon_lines}"

    def passage(self, passage, index: int) -> str:
        from bioc.biocxml.encoder import encode_passage

        for text, offset in [(passage.text, passage.offset)] + [(s.text, s.offset) for s in passage.sentences]:
            bad = _NOT_XML.search(text or "")
            if bad:
                raise ValueError(
                    f"character {bad.group()!r} at offset {offset + bad.start()} cannot be written in BioC XML (XML 1.0 "
                    "has no control character but tab, line feed and carriage return): write BioC JSON (.json), "
                    "or take it out of the text"
                )
        return _element(encode_passage(_xml_safe(passage)))

    def close_document(self, annotations: List[Dict[str, Any]], relations: List[Dict[str, Any]]) -> str:
        from bioc.biocjson.decoder import parse_annotation
        from bioc.biocxml.encoder import encode_annotation

        written = [_element(encode_annotation(_xml_safe(parse_annotation(a)))) for a in annotations]
        return "".join(written + [_element(_xml_relation_element(r)) for r in relations]) + "</document>\n"

    def footer(self) -> str:
        return "</collection>\n"


# A character XML 1.0 cannot hold, even as a character reference (a form feed from a PDF's text).
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(value: Any) -> str:
    return "" if value is None else str(value)


def _xml_safe(item):
    """The bioc object with infon values as text (None as empty), for bioc's XML encoders."""
    item.infons = {str(k): _xml_text(v) for k, v in item.infons.items()}
    for child in list(getattr(item, "annotations", [])) + list(getattr(item, "sentences", [])):
        _xml_safe(child)
    return item


def _element(element) -> str:
    """The element as XML text (indented between elements, texts unchanged; an annotation's
    <text> left out where it has none, as in its source)."""
    from lxml import etree

    for annotation in element.iter("annotation"):
        for text in annotation.findall("text"):
            if text.text is None:
                annotation.remove(text)
    return etree.tostring(element, encoding="unicode", pretty_print=True)


def _plain(item) -> Dict[str, Any]:
    """A bioc object as BioC JSON's dict."""
    from bioc.biocjson.encoder import BioCJSONEncoder

    return BioCJSONEncoder().default(item)


class _JSON:
    """BioC JSON, written piece by piece with bioc's JSON encoder (the document's annotations are
    kept as plain dicts until it closes, so a resumed run can hold them in its checkpoint)."""

    def header(self, collection: Dict[str, Any]) -> str:
        fields = {key: collection.get(key, "") for key in COLLECTION_FIELDS}
        fields["infons"] = collection.get("infons") or {}
        return json_dumps(fields)[:-1] + ', "documents": [\n'

    def open_document(self, doc_id: str, infons: Dict[str, Any], index: int) -> str:
        head = json_dumps({"bioctype": "BioCDocument", "id": doc_id, "infons": infons})[:-1]
        return ("" if index == 0 else ",\n") + head + ', "passages": ['

    def passage(self, passage, index: int) -> str:
        return ("" if index == 0 else ", ") + json_dumps(_plain(passage))

    def close_document(self, annotations: List[Dict[str, Any]], relations: List[Dict[str, Any]]) -> str:
        return '], "annotations": ' + json_dumps(annotations) + ', "relations": ' + json_dumps(relations) + "}"

    def footer(self) -> str:
        return "\n]}\n"


def json_dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
