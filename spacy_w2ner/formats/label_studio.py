"""Label Studio: a project's JSON export -> Docs, and Docs -> tasks whose predictions show the entities.

A task is ``{"data": {"text": ...}, "annotations": [{"result": [...]}], "predictions": [...]}``.
One Doc per task, from its latest annotation that was not cancelled (``annotations``: ``latest``
by ``updated_at``, else ``created_at``, else its place; ``first``; ``all``: one Doc per annotation,
named ``TASK-ANNOTATION``), or from its predictions (``use="predictions"``); the annotation's id and
annotator (``completed_by``) are kept with the Doc, and what is not read (other annotations,
cancelled ones, the predictions, drafts) is counted. A ``labels`` result (a region: ``value.start``/
``end`` into the text, its ``labels``) is an entity of each of its labels, its id the region's
(``ID-LABEL`` for a region of several labels, and so the region of each label when written back);
how it becomes one is ``standoff``'s rule. A discontinuous entity is its regions joined by
``relation`` results that have no label or the label ``fragment`` (``label_studio_config`` writes
a labeling config with that relation); regions joined must share their label (a relation between
regions of several labels joins those of each label they share). Other relations, and results of
other types (choices, text areas, regions of other objects), are listed and counted, not entities.
A task with no annotation is no document: it is listed and counted (``NOT_A_DOCUMENT_KEY``), not
converted. Regions may share an id (scripts that make imports often write ``0``), unless a
relation refers to it.

Label Studio's editor counts offsets in Unicode code points, as Python does (its text object's
"global offsets"); older releases counted UTF-16 code units (JavaScript's string length), so a
region whose offsets give its own text only when read as UTF-16 units, after a character outside
the Basic Multilingual Plane (an emoji), is read as those. Malformed input (not JSON or UTF-8, a task without its text, a
relation to a region that is not there or to an id several regions have, offsets outside the text)
raises ``FormatError`` naming the file, the task and the line it starts on. The export is read one
task at a time.

``LabelStudioWriter`` writes tasks one Doc at a time: the Doc's entities as one prediction
(``model_version``, a ``score`` per region and the weakest as the prediction's), the fragments of a
discontinuous entity as regions chained by ``fragment`` relations; the task's data and region
ids as they were read, where the Doc came from Label Studio.

Also read: a JSON-MIN export (a row per task: the data's keys, each labels control's regions as a
list, ``annotator``, ``annotation_id``); data whose text is under another key than ``text``
(``text_key``, else the data's only string).
"""
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union
from xml.sax.saxutils import quoteattr

from spacy.tokens import Doc
from spacy.vocab import Vocab

from .base import NAME_KEY, NOT_A_DOCUMENT_KEY, FormatError
from .jsonstream import stream_json
from .standoff import NO_TYPE, RELATION, Mention, Reading, Skips, mentions_of, text_matches, tokenize_exactly, write_each

LABEL_STUDIO_KEY = "w2ner_label_studio"  # {"task", "data", "text_key", "from_name", "to_name", "annotation", "annotator"}
USES = ("annotations", "predictions")
CHOICES = ("latest", "first", "all")  # which of a task's annotations: --annotations
FRAGMENT = "fragment"  # the relation label that joins the regions of one entity
OTHER_RESULT = "not a labels region"


def check_label_studio_options(use: str = "annotations", annotations: str = "latest", **_) -> None:
    if use not in USES:
        raise ValueError(f"use must be 'annotations' or 'predictions', got {use!r}")
    if annotations not in CHOICES:
        raise ValueError(f"annotations must be 'latest', 'first' or 'all', got {annotations!r}")


def read_label_studio(
    path: Union[str, Path], vocab: Vocab, spans_key: str = "w2ner", tokenizer=None, use: str = "annotations",
    strict: bool = False, text_key: Optional[str] = None, annotations: str = "latest", split_tokens: bool = True, sentencizer: bool = True,
) -> Iterator[Doc]:  # fmt: skip
    """The Docs of a Label Studio JSON (or JSON-MIN) export, streamed: one per task, or per
    annotation with ``annotations="all"`` (see the module docstring); ``text_key``: the key of the
    task's data that holds the text (default: ``text``, else data's only string); the other options
    are ``standoff.Reading``'s."""
    check_label_studio_options(use, annotations)
    path = Path(path)
    reading = Reading(vocab, spans_key, tokenizer, split_tokens, sentencizer, strict)
    for _, task, line in stream_json(path, None):
        where = f"{path}:{line}: task {task.get('id', '?') if isinstance(task, dict) else '?'}"
        task = _standard(task, where, text_key)
        key = _text_key(task["data"], text_key, where)
        text, name = task["data"][key], str(task.get("id", line))
        skips = reading.skips(where)
        chosen = _chosen(task, use, annotations, skips)
        meta = {"task": task.get("id"), "data": {k: v for k, v in task["data"].items() if k != key}, "text_key": key}
        if not chosen:
            doc = tokenize_exactly(text, vocab, tokenizer, where)
            doc.user_data.update({NAME_KEY: name, NOT_A_DOCUMENT_KEY: f"task without {use}"})
            skips.save(doc)
            yield doc
        for k, item in enumerate(chosen):
            mentions, names = _mentions(item.get("result") or [], text, where, skips, other_texts=set(meta["data"]))
            doc = reading.doc(text, mentions, skips, where)
            doc.user_data[NAME_KEY] = name if annotations != "all" else f"{name}-{item.get('id', k)}"
            doc.user_data[LABEL_STUDIO_KEY] = {**meta, **names, "annotation": item.get("id"), "annotator": item.get("completed_by")}
            yield doc


_MIN_FIELDS = ("id", "annotator", "annotation_id", "created_at", "updated_at", "lead_time")


def _standard(task: Any, where: str, text_key: Optional[str]) -> Dict[str, Any]:
    """The task as Label Studio's JSON export has it; a JSON-MIN row (the data's keys, each labels
    control's regions as a list, ``annotator``, ``annotation_id``) is made into one."""
    if isinstance(task, dict) and isinstance(task.get("data"), dict):
        return task
    if not isinstance(task, dict) or "data" in task or not any(isinstance(v, str) for k, v in task.items() if k not in _MIN_FIELDS):
        raise FormatError(f"{where}: a task is an object with 'data' (JSON export) or with its text (JSON-MIN export)")
    controls = {key: value for key, value in task.items() if key not in _MIN_FIELDS and _regions(value)}
    data = {key: value for key, value in task.items() if key not in _MIN_FIELDS and key not in controls}
    result = [
        {"id": f"{key}-{k}", "type": "labels", "from_name": key, "value": region}
        for key, regions in controls.items() for k, region in enumerate(regions)
    ]  # fmt: skip
    annotation = {"id": task.get("annotation_id"), "completed_by": task.get("annotator"), "updated_at": task.get("updated_at"), "result": result}
    return {"id": task.get("id"), "data": data, "annotations": [annotation] if "annotation_id" in task or result else []}


def _regions(value: Any) -> bool:
    """Whether a JSON-MIN field holds text regions (a list of objects with start and end)."""
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) and "start" in item and "end" in item for item in value)


def _text_key(data: Dict[str, Any], text_key: Optional[str], where: str) -> str:
    """The key of the data that holds the text: ``text_key``, else ``text``, else the only string."""
    if text_key is None and not isinstance(data.get("text"), str):
        strings = [key for key, value in data.items() if isinstance(value, str)]
        if len(strings) == 1:
            return strings[0]
        named = ", ".join(strings) if strings else "none"
        raise FormatError(f"{where}: no text under data.text (the data's strings: {named}); name its key with --text-key")
    key = text_key or "text"
    if not isinstance(data.get(key), str):
        raise FormatError(f"{where}: no text under data.{key}")
    return key


def _chosen(task: Dict[str, Any], use: str, choice: str, skips: Skips) -> List[Dict[str, Any]]:
    """The task's annotations (or predictions) to read, as ``choice`` says, of those not cancelled
    (an export may list its predictions' ids only: then the predictions its annotations were made
    from); what is not read is counted."""
    listed = [item for item in task.get(use) or [] if isinstance(item, dict)]
    if use == "predictions" and not listed:
        listed = [a["prediction"] for a in task.get("annotations") or [] if isinstance(a, dict) and isinstance(a.get("prediction"), dict)]
    items = [item for item in listed if not item.get("was_cancelled")]
    if len(items) < len(listed):
        skips.count(f"cancelled {use}", len(listed) - len(items))
    for other in ("annotations", "predictions", "drafts"):
        if other != use and task.get(other):
            skips.count(f"{other} (--use {use})", len(task[other]))
    if choice == "all" or not items:
        return items
    kept = items[0] if choice == "first" else max(enumerate(items), key=lambda pair: (_when(pair[1]), pair[0]))[1]
    if len(items) > 1:
        skips.count(f"{use} not chosen (--annotations {choice})", len(items) - 1)
    return [kept]


def _when(item: Dict[str, Any]) -> str:
    """When an annotation was last saved (ISO times compare as text); '' when the export does not say."""
    return str(item.get("updated_at") or item.get("created_at") or "")


def _mentions(results: List[Any], text: str, where: str, skips: Skips, other_texts=frozenset()) -> Tuple[List[Mention], Dict[str, str]]:
    """The entities of one annotation's results: regions joined by fragment relations (a region of
    another of the task's texts, its ``to_name`` one of ``other_texts``, is listed, not read)."""
    regions: List[Region] = []
    unlabelled = set()  # the ids of regions whose labels are all empty (listed)
    links: List[Tuple[str, str, List[str]]] = []
    names: Dict[str, str] = {}
    from_utf16 = _utf16_to_python(text)
    for k, result in enumerate(results):
        kind = result.get("type") if isinstance(result, dict) else None
        value = result.get("value") if isinstance(result, dict) else None
        if kind == "labels" and isinstance(value, dict) and "start" in value and "end" in value and result.get("to_name") not in other_texts:
            edges, labelled = _region_range(value, text, from_utf16, where), len(regions)
            for region_id, label in _labelled(result, k, where):
                if not label.strip():
                    skips.skip(region_id, NO_TYPE, f"region {region_id} at {edges[0]}-{edges[1]} has an empty label")
                    continue
                regions.append(Region(region_id, label, edges, value.get("text"), _result_id(result, k), k))
            if len(regions) == labelled:  # its labels were all empty
                unlabelled.add(_result_id(result, k))
            names = {"from_name": result.get("from_name", "label"), "to_name": result.get("to_name", "text")}
        elif kind == "relation":
            links.append((str(result.get("from_id")), str(result.get("to_id")), result.get("labels") or []))
        else:
            what = f"a {kind} result" if kind != "labels" else f"a labels result of {result.get('to_name')}, not of the text" if result.get("to_name") in other_texts else "a labels result without start and end (no text region)"
            skips.skip(str(result.get("id", f"#{k}")) if isinstance(result, dict) else f"#{k}", OTHER_RESULT, f"{what} is not an entity", what="result")
    unlabelled -= {region.result_id for region in regions}  # an id another region with a label has
    for from_id, to_id, _ in [link for link in links if unlabelled & set(link[:2])]:
        skips.later(f"{from_id}->{to_id}", RELATION, f"relation from {from_id} to {to_id} joins a region without a label")
    return _joined(regions, [link for link in links if not unlabelled & set(link[:2])], where, skips), names


def _result_id(result: Dict[str, Any], k: int) -> str:
    """A result's id as relations name it (0 too), or its place (#k) where it has none."""
    given = result.get("id")
    return f"#{k}" if given is None or given == "" else str(given)


def _labelled(result: Dict[str, Any], k: int, where: str) -> Iterator[Tuple[str, str]]:
    """(region id, label) for each label of a region (the region's id, or its place where it has none)."""
    labels = result["value"].get("labels")
    region_id = _result_id(result, k)
    if not isinstance(labels, list) or not labels:
        raise FormatError(f"{where}: region {region_id}: a labels result has a value with start, end and labels")
    for label in labels:
        yield (region_id if len(labels) == 1 else f"{region_id}-{label}"), str(label)


class Region(NamedTuple):
    """One label of a labels result: its id (the result's, with the label where it has several),
    label, character range, text, the result's id (relations name it) and place."""

    id: str
    label: str
    range: Tuple[int, int]
    text: Optional[str]
    result_id: str
    result: int


def _joined(regions: List[Region], links, where: str, skips: Skips) -> List[Mention]:
    """One mention per group of regions joined by fragment relations (regions of one label; a
    relation between results with several labels joins the regions of each label they share)."""
    parent = list(range(len(regions)))
    places: Dict[str, List[int]] = {}
    for k, region in enumerate(regions):
        places.setdefault(region.result_id, []).append(k)

    def root(k: int) -> int:
        while parent[k] != k:
            k = parent[k]
        return k

    for from_id, to_id, labels in links:
        for region_id in (from_id, to_id):
            if region_id not in places:
                raise FormatError(f"{where}: a relation from {from_id} to {to_id} points to region {region_id}, which is not in the annotation")
            results = {regions[k].result for k in places[region_id]}
            if len(results) > 1:
                raise FormatError(f"{where}: a relation from {from_id} to {to_id} refers to region {region_id}, the id of {len(results)} regions; region ids must be unique")
        pairs = [(a, b) for a in places[from_id] for b in places[to_id] if regions[a].label == regions[b].label]
        if (labels and FRAGMENT not in labels) or not pairs:
            skips.later(f"{from_id}->{to_id}", RELATION, f"relation {'/'.join(labels) or '(no label)'} from {from_id} to {to_id} is not a fragment of one entity")
            continue
        for a, b in pairs:
            parent[root(b)] = root(a)
    members: Dict[int, List[int]] = {}
    for k in range(len(regions)):
        members.setdefault(root(k), []).append(k)
    mentions = []
    for group in members.values():
        group.sort(key=lambda k: regions[k].range)
        texts = [regions[k].text for k in group]
        text = " ".join(texts) if all(isinstance(t, str) for t in texts) else None
        first = regions[group[0]]
        mentions.append(Mention(first.id, first.label, [regions[k].range for k in group], text, {"regions": [regions[k].id for k in group]}))
    return mentions


def _region_range(value: Dict[str, Any], text: str, from_utf16, where: str) -> Tuple[int, int]:
    """A region's [start, end) in Python characters: its offsets as they are (code points), or,
    where only those offsets read as UTF-16 code units give the region's own text or are within
    the text (an older Label Studio's export), those converted. FormatError where neither is."""
    start, end, shown = _offset(value["start"]), _offset(value["end"]), value.get("text")
    within = start is not None and end is not None and 0 <= start <= end <= len(text)
    if within and (not isinstance(shown, str) or text_matches(text, [(start, end)], shown)):
        return start, end
    edges = (from_utf16(start), from_utf16(end))
    if None not in edges and (not within or text_matches(text, [edges], shown)):
        return edges  # only they give the region's text, or only they are within the text
    if within:
        return start, end  # its text differs from the text there: ``standoff``'s rule says what then
    bad = value["start"] if start is None or not 0 <= start <= len(text) else value["end"]
    raise FormatError(f"{where}: offset {bad!r} is not within the text of {len(text)} characters")


def _offset(offset: Any) -> Optional[int]:
    """An offset as an int (a string of digits too), or None where it is none."""
    if isinstance(offset, str) and offset.isascii() and offset.isdigit():
        return int(offset)
    return offset if isinstance(offset, int) and not isinstance(offset, bool) else None


def _utf16_to_python(text: str) -> Callable[[Optional[int]], Optional[int]]:
    """A function from a UTF-16 offset of ``text`` to a Python one (None where no character
    starts there: past the end, or inside a surrogate pair)."""
    if all(ord(c) < 0x10000 for c in text):
        return lambda offset: offset if offset is not None and 0 <= offset <= len(text) else None
    table: Dict[int, int] = {}
    units = 0
    for k, c in enumerate(text):
        table[units] = k
        units += 2 if ord(c) >= 0x10000 else 1
    table[units] = len(text)
    return table.get


class LabelStudioWriter:
    """Label Studio tasks (a JSON array) written one Doc at a time; ``resume``: (byte size, state)."""

    def __init__(self, path: Union[str, Path], spans_key: str = "w2ner", model_version: str = "spacy-w2ner", resume: Optional[Tuple[int, Dict[str, Any]]] = None):
        self.file = open(path, "wb" if resume is None else "r+b")
        self.spans_key, self.model_version = spans_key, model_version
        self.tasks = 0
        if resume is not None:
            self.file.truncate(resume[0])
            self.file.seek(resume[0])
            self.tasks = resume[1]["tasks"]
        else:
            self.file.write(b"[")

    def state(self) -> Dict[str, Any]:
        return {"tasks": self.tasks}

    def write(self, doc: Doc, index: int = 0) -> None:
        import json

        task = label_studio_task(doc, self.spans_key, self.model_version)
        self.file.write(((",\n" if self.tasks else "\n") + json.dumps(task, ensure_ascii=False)).encode("utf8"))
        self.tasks += 1

    def flush(self) -> int:
        self.file.flush()
        return self.file.tell()

    def close(self) -> None:
        self.file.write(b"\n]\n")
        self.file.close()


def label_studio_task(doc: Doc, spans_key: str, model_version: str) -> Dict[str, Any]:
    """The doc as a Label Studio task with its entities as a prediction (see the module docstring)."""
    meta = doc.user_data.get(LABEL_STUDIO_KEY) or {}
    from_name, to_name = meta.get("from_name", "label"), meta.get("to_name", "text")
    results, scores, used = [], [], set()
    text = doc.text  # built from the tokens on every call: once per doc
    for mention in mentions_of(doc, spans_key):
        ids = _region_ids(mention, used)
        for region_id, (start, end) in zip(ids, mention.ranges):
            value = {"start": start, "end": end, "text": text[start:end], "labels": [mention.label]}
            region = {"id": region_id, "from_name": from_name, "to_name": to_name, "type": "labels", "value": value}
            if mention.score is not None:
                region["score"] = round(float(mention.score), 6)
            results.append(region)
        results += [{"type": "relation", "from_id": a, "to_id": b, "direction": "right", "labels": [FRAGMENT]} for a, b in zip(ids, ids[1:])]
        if mention.score is not None:
            scores.append(float(mention.score))
    prediction: Dict[str, Any] = {"model_version": model_version, "result": results}
    if scores:
        prediction["score"] = round(min(scores), 6)
    data = {meta.get("text_key", "text"): text, **meta.get("data", {})}
    return {"data": data, "predictions": [prediction]}


def _region_ids(mention: Mention, used: set) -> List[str]:
    """One region id per range: the regions it was read from, else the entity's id and -1, -2..."""
    ids = [str(i) for i in mention.extra.get("regions", [])]
    if len(ids) != len(mention.ranges):
        base = mention.id or f"r{len(used)}"
        ids = [base if k == 0 else f"{base}-{k}" for k in range(len(mention.ranges))]
    ids = [i if i not in used else f"{i}-{len(used)}" for i in ids]
    used.update(ids)
    return ids


def docs_to_label_studio(docs, path: Union[str, Path], spans_key: str = "w2ner", problems: Optional[List[str]] = None, model_version: str = "spacy-w2ner") -> Path:
    """Write docs as a Label Studio task file (see ``LabelStudioWriter``)."""
    write_each(LabelStudioWriter(path, spans_key, model_version), docs)
    return Path(path)


def label_studio_config(labels: List[str]) -> str:
    """A labeling config for named entities with these labels, and the relation that joins the
    regions of a discontinuous entity (``fragment``)."""
    label_lines = "".join(f"    <Label value={quoteattr(label)}/>\n" for label in labels)
    return (
        "<View>\n"
        f"  <Relations>\n    <Relation value=\"{FRAGMENT}\"/>\n  </Relations>\n"
        f"  <Labels name=\"label\" toName=\"text\">\n{label_lines}  </Labels>\n"
        "  <Text name=\"text\" value=\"$text\" granularity=\"word\"/>\n"
        "</View>\n"
    )
