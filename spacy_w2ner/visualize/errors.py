"""Error pages: gold against predicted entities per document, the scorer's per-label table on top.

Each entity is correct (gold and predicted), missed (gold only) or spurious (predicted only),
drawn in running text (``text.EntityRenderer``) in its status's colour and with its status's mark
(✓, ✗, +) before its label.
"""
import html
from collections import Counter
from typing import Dict, List, Sequence, Tuple

from spacy.tokens import Doc

from ..entities import Entity, aligned_gold_entities, get_entities
from .text import LEGEND, TPL_DOC, Drawn, EntityRenderer, caption, html_page

STATUS_COLORS = {"correct": "#a6e3a1", "missed": "#f38ba8", "spurious": "#fab387"}
STATUS_MARKS = {"correct": "\u2713 ", "missed": "\u2717 ", "spurious": "+ "}
STATUS_MEANING = {"correct": "correct (gold and predicted)", "missed": "missed (gold only)",
                  "spurious": "spurious (predicted only)"}


def doc_errors(gold: Sequence[Entity], predicted: Sequence[Entity]) -> Dict[str, List[Entity]]:
    """Correct (in both), missed (gold only) and spurious (predicted only) entities."""
    gold_set, predicted_set = set(gold), set(predicted)
    return {
        "correct": [e for e in predicted if e in gold_set],
        "missed": [e for e in gold if e not in predicted_set],
        "spurious": [e for e in predicted if e not in gold_set],
    }


def predicted_error_page(nlp, gold: Sequence[Doc], spans_key: str = "w2ner", errors_only: bool = False) -> Tuple[str, Dict]:
    """The error page of ``nlp``'s predictions on the gold docs' tokens, and the scores (the
    ``visualize`` command's work once the pipeline and the docs are loaded)."""
    from spacy.training import Example

    from ..formats.readers import same_tokens
    from ..scorer import score_entities

    predicted = nlp.pipe(same_tokens(doc, nlp.vocab) for doc in gold)
    examples = [Example(doc, reference) for doc, reference in zip(predicted, gold)]
    scores = score_entities(examples, spans_key=spans_key)
    names = [doc.user_data.get("w2ner_name") or f"doc {k}" for k, doc in enumerate(gold)]
    return error_page(examples, scores, spans_key, errors_only=errors_only, names=names), scores


def error_page(examples, scores: Dict, spans_key: str = "w2ner", errors_only: bool = False, names=None) -> str:
    """Gold against predicted per document, the scorer's table on top (``visualize`` command)."""
    renderer = EntityRenderer({})
    counts: Counter = Counter()
    figures = []
    for k, example in enumerate(examples):
        gold, _ = aligned_gold_entities(example, spans_key)
        kinds = doc_errors(gold, get_entities(example.predicted, spans_key))
        counts.update({kind: len(entities) for kind, entities in kinds.items()})
        if errors_only and not kinds["missed"] and not kinds["spurious"]:
            continue
        drawn, number = [], 0
        for kind in ("correct", "missed", "spurious"):
            for entity in kinds[kind]:
                number += 1
                drawn.append(Drawn(entity, caption(entity, number, STATUS_MARKS[kind]), STATUS_COLORS[kind], number))
        name = names[k] if names else f"doc {k}"
        title = f"{name}: {len(kinds['correct'])} correct, {len(kinds['missed'])} missed, {len(kinds['spurious'])} spurious"
        figures.append(TPL_DOC.format(content=renderer.render_doc(example.predicted, drawn, title)))
    header = _summary_table(scores, spans_key, counts, len(examples), len(figures), errors_only)
    return html_page(header + (("".join(figures)) or "<p>No document to show.</p>"))


def _summary_table(scores: Dict, spans_key: str, counts: Counter, n_docs: int, shown: int, errors_only: bool) -> str:
    def pct(value) -> str:
        return f"{100 * value:.2f}"

    rows = [("all", scores[f"{spans_key}_p"], scores[f"{spans_key}_r"], scores[f"{spans_key}_f"])]
    rows += [(label, prf["p"], prf["r"], prf["f"]) for label, prf in scores[f"{spans_key}_per_type"].items()]
    body = "".join(
        f"<tr><td>{html.escape(str(label))}</td><td>{pct(p)}</td><td>{pct(r)}</td><td>{pct(f)}</td></tr>" for label, p, r, f in rows
    )
    legend = " ".join(
        f'<span style="background: {color}; padding: 1px 6px; border-radius: 3px">{html.escape(STATUS_MARKS[kind] + STATUS_MEANING[kind])}</span>'
        for kind, color in STATUS_COLORS.items()
    )
    return (
        '<h2 style="margin-top: 0">Gold against predicted entities</h2>'
        f"<p>{n_docs} documents; {shown} shown{' (errors only)' if errors_only else ''}. "
        f"{counts['correct']} correct, {counts['missed']} missed, {counts['spurious']} spurious. "
        f"Discontinuous F {pct(scores[f'{spans_key}_discontinuous_f'])}, overlapping F "
        f"{pct(scores[f'{spans_key}_overlapping_f'])}.</p>"
        '<table style="border-collapse: collapse; margin-bottom: 1rem" border="1" cellpadding="4">'
        "<tr><th>label</th><th>P</th><th>R</th><th>F</th></tr>"
        f"{body}</table><p>{legend} &nbsp; {LEGEND}</p>"
    )
