"""Label Studio: a project's JSON export -> Docs, and Docs -> tasks whose predictions show the entities.

A task is ``{"data": {"text": ...}, "annotations": [{"result": [...]}], "predictions": [...]}``.
One Doc per task, from its first annotation that was not cancelled (``use="predictions"``: its
first prediction). A ``labels`` result (a region: ``value.start``/``end`` into the text, its
``labels``) is an entity of each of its labels, its id the region's. A discontinuous entity is
its regions joined by ``relation`` results that have no label or the label ``fragment``
(``label_studio_config`` writes a labeling config with that relation); regions joined must share
their label. Other relations, and results of other types (choices, text areas), are listed and
counted, not entities; so is a region that cannot be one (``standoff``). A task with no
annotation is no document: it is listed and counted (``NOT_A_DOCUMENT_KEY``), not converted.

Label Studio counts offsets in UTF-16 code units (JavaScript strings); they are turned into
Python's characters and back. Malformed input (not JSON or UTF-8, a task without its text, a
relation to a region that is not there, a region id twice, offsets outside the text) raises ``FormatError`` naming
the file, the task and the line it starts on. The export is read one task at a time.

``LabelStudioWriter`` writes tasks one Doc at a time: the Doc's entities as one prediction
(``model_version``, a ``score`` per region and the weakest as the prediction's), the fragments of a
discontinuous entity as regions chained by ``fragment`` relations; the task's data and region
ids as they were read, where the Doc came from Label Studio.
"""
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union
from xml.sax.saxutils import quoteattr

from spacy.tokens import Doc
from spacy.vocab import Vocab

from .base import NAME_KEY, NOT_A_DOCUMENT_KEY, FormatError
from .brat import tokenize_exactly
from .jsonstream import stream_json
from .standoff import RELATION, Mention, Skips, mentions_of, put_mentions, write_each

LABEL_STUDIO_KEY = "w2ner_label_studio"  # {"task": id, "data": the task's other data, "from_name", "to_name"}
USES = ("annotations", "predictions")
FRAGMENT = "fragment"  # the relation label that joins the regions of one entity
OTHER_RESULT = "not a labels region"


def check_label_studio_options(use: str = "annotations", **_) -> None:
    if use not in USES:
        raise ValueError(f"use must be 'annotations' or 'predictions', got {use!r}")


def read_label_studio(
    path: Union[str, Path], vocab: Vocab, spans_key: str = "w2ner", tokenizer=None, use: str = "annotations", strict: bool = False, text_key: str = "text"
) -> Iterator[Doc]:
    """The Docs of a Label Studio JSON export, one per task, streamed (see the module docstring)."""
    check_label_studio_options(use)
    path = Path(path)
    for _, task, line in stream_json(path, None):
        where = f"{path}:{line}: task {task.get('id', '?') if isinstance(task, dict) else '?'}"
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            raise FormatError(f"{where}: a task is an object with 'data'")
        text = task["data"].get(text_key)
        if not isinstance(text, str):
            raise FormatError(f"{where}: no text under data.{text_key}")
        doc = tokenize_exactly(text, vocab, tokenizer, where)
        doc.user_data[NAME_KEY] = str(task.get("id", line))
        chosen = _chosen(task, use)
        if not chosen:
            doc.user_data[NOT_A_DOCUMENT_KEY] = f"task without {use}"
            yield doc
            continue
        results = chosen[0].get("result") or []
        skips = Skips(where, strict)
        mentions, names = _mentions(results, text, where, skips)
        put_mentions(doc, mentions, spans_key, skips)
        data = {key: value for key, value in task["data"].items() if key != text_key}
        doc.user_data[LABEL_STUDIO_KEY] = {"task": task.get("id"), "data": data, "text_key": text_key, **names}
        yield doc


def _chosen(task: Dict[str, Any], use: str) -> List[Dict[str, Any]]:
    """The task's annotations that were not cancelled, or its predictions (an export lists their ids
    only: then the predictions its annotations were made from)."""
    items = [item for item in task.get(use) or [] if isinstance(item, dict) and not item.get("was_cancelled")]
    if use == "predictions" and not items:
        items = [a["prediction"] for a in task.get("annotations") or [] if isinstance(a, dict) and isinstance(a.get("prediction"), dict)]
    return items


def _mentions(results: List[Any], text: str, where: str, skips: Skips) -> Tuple[List[Mention], Dict[str, str]]:
    """The entities of one annotation's results: regions joined by fragment relations."""
    regions: Dict[str, Tuple[str, Tuple[int, int], str]] = {}  # region id -> (label, range, text)
    links: List[Tuple[str, str]] = []
    names: Dict[str, str] = {}
    to_python = _python_offsets(text)
    for result in results:
        kind = result.get("type") if isinstance(result, dict) else None
        if kind == "labels":
            for region_id, label, value in _labelled(result, where):
                if region_id in regions:
                    raise FormatError(f"{where}: region {region_id} is in the annotation twice; region ids must be unique")
                regions[region_id] = (label, (to_python(value["start"], where), to_python(value["end"], where)), value.get("text"))
            names = {"from_name": result.get("from_name", "label"), "to_name": result.get("to_name", "text")}
        elif kind == "relation":
            links.append((str(result.get("from_id")), str(result.get("to_id")), result.get("labels") or []))
        else:
            skips.skip(str(result.get("id", "?")) if isinstance(result, dict) else "?", OTHER_RESULT, f"a {kind} result is not an entity")
    return _joined(regions, links, where, skips), names


def _labelled(result: Dict[str, Any], where: str) -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    value = result.get("value")
    region_id = str(result.get("id", ""))
    if not region_id or not isinstance(value, dict) or not isinstance(value.get("labels"), list) or not value["labels"]:
        raise FormatError(f"{where}: region {region_id or '?'}: a labels result has an id and a value with start, end and labels")
    labels = value["labels"]
    for label in labels:
        yield (region_id if len(labels) == 1 else f"{region_id}-{label}"), str(label), value


def _joined(regions, links, where: str, skips: Skips) -> List[Mention]:
    parent = {region_id: region_id for region_id in regions}

    def root(region_id: str) -> str:
        while parent[region_id] != region_id:
            region_id = parent[region_id]
        return region_id

    for from_id, to_id, labels in links:
        missing = [i for i in (from_id, to_id) if i not in regions]
        if missing:
            raise FormatError(f"{where}: a relation from {from_id} to {to_id} points to region {missing[0]}, which is not in the annotation")
        if (labels and FRAGMENT not in labels) or regions[from_id][0] != regions[to_id][0]:
            skips.later(f"{from_id}->{to_id}", RELATION, f"relation {'/'.join(labels) or '(no label)'} from {from_id} to {to_id} is not a fragment of one entity")
            continue
        parent[root(to_id)] = root(from_id)
    members: Dict[str, List[str]] = {}
    for region_id in regions:
        members.setdefault(root(region_id), []).append(region_id)
    mentions = []
    for ids in members.values():
        ids.sort(key=lambda i: regions[i][1])
        ranges = [regions[i][1] for i in ids]
        texts = [regions[i][2] for i in ids]
        text = " ".join(texts) if all(isinstance(t, str) for t in texts) else None
        mentions.append(Mention(ids[0], regions[ids[0]][0], ranges, text, {"regions": ids}))
    return mentions


def _python_offsets(text: str):
    """A function from a UTF-16 offset of ``text`` (Label Studio's) to a Python one."""
    if all(ord(c) < 0x10000 for c in text):
        limit = len(text)
        table = None
    else:
        table = {}
        units = 0
        for k, c in enumerate(text):
            table[units] = k
            units += 2 if ord(c) >= 0x10000 else 1
        table[units] = len(text)
        limit = units

    def convert(offset: Any, where: str) -> int:
        if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= limit or (table is not None and offset not in table):
            raise FormatError(f"{where}: offset {offset!r} is not within the text of {limit} characters")
        return offset if table is None else table[offset]

    return convert


def utf16_offset(text: str, offset: int) -> int:
    """The UTF-16 offset (Label Studio's) of Python offset ``offset`` of ``text``."""
    return offset + sum(1 for c in text[:offset] if ord(c) >= 0x10000)


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
    for mention in mentions_of(doc, spans_key):
        ids = _region_ids(mention, used)
        for region_id, (start, end) in zip(ids, mention.ranges):
            value = {"start": utf16_offset(doc.text, start), "end": utf16_offset(doc.text, end), "text": doc.text[start:end], "labels": [mention.label]}
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
    data = {meta.get("text_key", "text"): doc.text, **meta.get("data", {})}
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
