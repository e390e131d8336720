"""Pre-annotation: Label Studio tasks -> one prediction each, exactly what ``annotate
--output-format label-studio`` writes for the same model and text.

A task is ``{"id": ..., "data": {TEXT_KEY: text, ...}}``; which key holds the text, and the
names the regions are written with (``from_name``, ``to_name``), come from the project's labeling
config (``config_names``: its ``<Labels>`` over a ``<Text>``), ``label-studio-config``'s
(``label``, ``text``, ``$text``) when the request has none. The texts go through
``annotate.annotate_items`` (annotate's batching: ``nlp.pipe`` in batches of ``batch_size``, a
text longer than ``nlp.max_length`` or one the tokenizer changes named as a problem) and each
Doc through ``formats.label_studio.label_studio_task`` (the writer annotate uses): ``labels``
regions at Label Studio's offsets (code points) with a score each, a discontinuous entity's regions chained by
``fragment`` relations, and ``model_version``.

The prediction's ``score`` is what Label Studio sorts tasks by for the annotator (lowest first):
``task_score``, the confidence of the task's most doubtful entity (an entity's score is its
weakest link's probability), 1.0 for a task where the model finds none. It costs nothing (the
entities have it), and its lowest 100 held 72-87 tasks predicted wrong against a random 100's
18-33 in bench/active_learning.py's simulation on CADEC (docs/label-studio-backend.md, "Which
tasks first": overall F grew no faster per task, discontinuous F did).

A task that cannot be predicted (not an object, no text under the key, an empty or too long
text) gets ``{"error": "task ID: what is wrong"}`` in its place: Label Studio logs it and skips
that task alone; the other tasks of the request get their predictions.
"""
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional

from spacy.language import Language
from spacy.tokens import Doc

from ..annotate import Item, annotate_items, text_problem
from ..entities import get_entities
from ..formats import LABEL_STUDIO_KEY
from ..formats.label_studio import label_studio_task


class ConfigProblem(ValueError):
    """A labeling config the backend cannot predict for (the message says what is wrong)."""


@dataclass(frozen=True)
class Names:
    """Where a project's regions go: the labels control, the text object and the data key of the text."""

    from_name: str = "label"
    to_name: str = "text"
    text_key: str = "text"


def config_names(label_config: Optional[str]) -> Names:
    """The first ``<Labels>`` control of the config whose ``toName`` is a ``<Text>`` object, and
    that object's data key (``value="$key"``); ``label-studio-config``'s names without a config."""
    if not label_config:
        return Names()
    try:
        root = ElementTree.fromstring(label_config)
    except ElementTree.ParseError as err:
        raise ConfigProblem(f"the labeling config is not XML ({err})") from None
    objects = [tag for tag in root.iter() if tag.tag in ("Text", "HyperText")]
    texts = {tag.get("name"): tag.get("value", "") for tag in objects}
    by_url = {tag.get("name"): tag.tag for tag in objects if tag.get("valueType") == "url"}
    for tag in root.iter("Labels"):
        to_name = tag.get("toName")
        if to_name in by_url:
            raise ConfigProblem(
                f"the <{by_url[to_name]}> object {to_name!r} reads its text from a URL (valueType=\"url\"); the backend "
                "reads the text in the task's data: leave valueType out"
            )
        if to_name in texts and texts[to_name].startswith("$"):
            return Names(tag.get("name", "label"), to_name, texts[to_name][1:])
    raise ConfigProblem(
        "the labeling config has no <Labels> control over a <Text> object with value=\"$key\" "
        "(python -m spacy_w2ner label-studio-config MODEL prints one)"
    )


def task_problem(task: Any, position: int, text_key: str, max_chars: int) -> Optional[str]:
    """Why a request's task cannot be predicted, naming it (its id, else its place), else None."""
    if not isinstance(task, dict):
        return f"task #{position}: a task is an object with 'data', got {type(task).__name__}"
    name = f"task {task.get('id', '#' + str(position))}"
    data = task.get("data")
    if not isinstance(data, dict):
        return f"{name}: no 'data' object"
    problem = text_problem(data.get(text_key), f"data.{text_key}")
    if problem is not None:
        return f"{name}: {problem}"
    if len(data[text_key]) > max_chars:
        return f"{name}: {len(data[text_key])} characters, more than --max-text-chars={max_chars}"
    return None


def task_items(tasks: List[Any], text_key: str, max_chars: int) -> List[Item]:
    """One ``annotate`` Item per task, in order: its text, or the problem that keeps it from one."""
    items = []
    for position, task in enumerate(tasks):
        problem = task_problem(task, position, text_key, max_chars)
        identifier = task.get("id") if isinstance(task, dict) else None
        text = None if problem else task["data"][text_key]
        items.append(Item(position, f"task {identifier if identifier is not None else '#' + str(position)}", identifier, text, problem=problem))
    return items


def task_score(doc: Doc, spans_key: str) -> float:
    """How sure the model is of the task: its most doubtful entity's score, 1.0 without entities
    (Label Studio shows the lowest first; see the module docstring)."""
    scores = [entity.score for entity in get_entities(doc, spans_key) if entity.score is not None]
    return round(float(min(scores)), 6) if scores else 1.0


def predict_tasks(
    nlp: Language, tasks: List[Any], names: Names, model_version: str, spans_key: str, *, batch_size: int = 64,
    max_chars: int = 1_000_000,
) -> List[Dict[str, Any]]:  # fmt: skip
    """One prediction per task, in order (or ``{"error": ...}`` for a task that cannot have one)."""
    items = task_items(tasks, names.text_key, max_chars)
    results: List[Dict[str, Any]] = []
    for item, record, doc in annotate_items(nlp, items, spans_key=spans_key, batch_size=batch_size):
        if record is None:
            results.append({"error": item.problem if item.problem.startswith(item.source) else f"{item.source}: {item.problem}"})
            continue
        results.append(prediction_of(doc, names, model_version, spans_key))
    return results


def prediction_of(doc: Doc, names: Names, model_version: str, spans_key: str) -> Dict[str, Any]:
    """The annotated doc's prediction, as ``label_studio_task`` writes it, with ``task_score``."""
    doc.user_data[LABEL_STUDIO_KEY] = {"from_name": names.from_name, "to_name": names.to_name, "text_key": names.text_key}
    prediction = label_studio_task(doc, spans_key, model_version)["predictions"][0]
    prediction["score"] = task_score(doc, spans_key)
    return prediction


def labels_missing(nlp_labels: Iterable[str], label_config: Optional[str]) -> List[str]:
    """The pipeline's labels that the config's ``<Labels>`` lacks (Label Studio would not show them)."""
    if not label_config:
        return []
    try:
        root = ElementTree.fromstring(label_config)
    except ElementTree.ParseError:
        return []
    known = {label.get("value") for labels in root.iter("Labels") for label in labels.iter("Label")}
    return [label for label in nlp_labels if label not in known]
