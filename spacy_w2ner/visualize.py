"""Pictures: entities in running text, the word-pair grid of a sentence, and error pages.

* ``render_entities``: flat, nested (stacked) and discontinuous entities drawn under the text.
  It is displaCy's span renderer (its templates, colours, page and Jupyter handling) with what
  displaCy lacks: the fragments of a discontinuous entity share one row and colour, a dashed
  connector runs under the gap between them, and one entity number (with label and score)
  names the entity at its start and each later fragment.
* ``render_grid``: the W2NER word-pair grid of one sentence as SVG: NNW (next word) cells in the
  upper triangle and THW (tail -> head, per label) cells on and below the diagonal, shaded by the
  model's probability, gold cells outlined.
* ``error_page``: gold against predicted entities per document (correct, missed, spurious) with
  the scorer's per-label table on top.

Everything is escaped; the HTML is static (no script), so long documents load as plain markup.
"""
import html
import re
from collections import Counter
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from spacy.displacy.render import SpanRenderer
from spacy.displacy.templates import TPL_PAGE, TPL_SPAN, TPL_SPAN_SLICE, TPL_SPAN_START, TPL_SPANS
from spacy.tokens import Doc
from spacy.util import escape_html, is_in_jupyter

from .entities import Entity, get_entities
from .grid import NNW, THW_OFFSET

# Label colours beyond displaCy's (which has PERSON, ORG, GPE... and grey for the rest).
PALETTE = ["#7aecec", "#bfeeb7", "#feca74", "#ff9561", "#aa9cfc", "#c887fb", "#9cc9cc", "#ffeb80",
           "#ff8197", "#f0d0ff", "#bfe1d9", "#e4e7d2", "#a8d0ff", "#ffc8dd", "#cde8a0", "#d9d0b4"]
STATUS_COLORS = {"correct": "#a6e3a1", "missed": "#f38ba8", "spurious": "#fab387"}
STATUS_MARKS = {"correct": "\u2713 ", "missed": "\u2717 ", "spurious": "+ "}
STATUS_MEANING = {"correct": "correct (gold and predicted)", "missed": "missed (gold only)",
                  "spurious": "spurious (predicted only)"}
# displaCy's figure, with less space between documents.
TPL_DOC = '<figure style="margin: 0 0 2.5rem 0">{content}</figure>'
# displaCy's span start, its label on one line (the label holds number and score too).
TPL_START = TPL_SPAN_START.replace("line-height: 1;", "line-height: 1; white-space: nowrap;")
# displaCy's token box without the line breaks around it, which would show as spaces between
# tokens that have none (Chinese); the doc's own whitespace is written after each token.
TPL_TOKEN = re.sub(r"\s*\n\s*", "", TPL_SPAN)
TPL_GAP = (
    '<span style="border-top: 2px dashed {bg}; top: {top_offset}px; height: 0; left: -1px; '
    'width: calc(100% + 2px); position: absolute;"></span>'
)
TPL_CONTINUED = (
    '<span style="background: {bg}; top: {top_offset}px; height: 4px; left: -1px; width: calc(100% + 2px); '
    'position: absolute;"><span style="background: {bg}; z-index: 10; color: #000; top: -0.5em; padding: 1px 3px; '
    'position: absolute; font-size: 0.55em; line-height: 1; border-radius: 3px">&#8618;{number}</span></span>'
)


def label_colors(labels: Iterable[str], overrides: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """One colour per label, the same in every picture: the caller's, else displaCy's for the
    labels it knows (ORG, PERSON, ...), else the palette in label order."""
    from spacy.displacy.render import DEFAULT_LABEL_COLORS

    labels = sorted(set(labels))
    colors = {label: (overrides or {}).get(label) or DEFAULT_LABEL_COLORS.get(label.upper()) for label in labels}
    free = [color for color in PALETTE if color not in colors.values()]
    for k, label in enumerate(label for label in labels if colors[label] is None):
        colors[label] = free[k % len(free)]
    return colors


@dataclass
class Drawn:
    """An entity as drawn: its tokens, the text on its label, colour and row."""

    entity: Entity
    caption: str
    color: str
    number: int
    slot: int = 0


class EntityRenderer(SpanRenderer):
    """displaCy's span renderer, drawing whole entities (fragments, gaps) instead of spans."""

    style = "w2ner"

    def __init__(self, options: Dict = {}):
        super().__init__(options)
        for label, color in label_colors(options.get("labels", []), options.get("colors")).items():
            self.colors[label.upper()] = color

    def color(self, label: str) -> str:
        return self.colors.get(label.upper(), self.default_color)

    def render_doc(self, doc: Doc, drawn: List[Drawn], title: Optional[str] = None) -> str:
        """One document's markup (a displaCy ``spans`` div), with an escaped title."""
        place_in_rows(drawn, doc)
        markup = "".join(self._token_markup(token, [d for d in drawn if _extent(d, token.i)]) for token in doc)
        markup = TPL_SPANS.format(content=markup or "<em>(empty document)</em>", dir=self.direction)
        if title:
            markup = f'<h3 style="margin: 0 0 0.5rem 0">{html.escape(title)}</h3>' + markup
        return markup

    def _token_markup(self, token, drawn: List[Drawn]) -> str:
        text = token.text
        if not text.strip():  # whitespace: keep line breaks, draw nothing under it
            return "<br>" * text.count("\n") if "\n" in text else escape_html(text)
        trailing = " " if token.whitespace_ else ""
        if not drawn:
            return escape_html(text) + trailing
        slices, starts = [], []
        for d in sorted(drawn, key=lambda d: d.slot):
            top = self.top_offset + self.offset_step * (d.slot - 1)
            if token.i in d.entity.tokens:
                slices.append(TPL_SPAN_SLICE.format(bg=d.color, top_offset=top))
                if token.i == d.entity.tokens[0]:
                    starts.append(TPL_START.format(bg=d.color, top_offset=top, label=d.caption, kb_link=""))
                elif token.i - 1 not in d.entity.tokens:  # a later fragment of the entity
                    starts.append(TPL_CONTINUED.format(bg=d.color, top_offset=top, number=d.number))
            else:
                slices.append(TPL_GAP.format(bg=d.color, top_offset=top + 1))
        height = self.top_offset + self.span_label_offset + self.offset_step * (max(d.slot for d in drawn) - 1)
        return TPL_TOKEN.format(text=escape_html(text), span_slices="".join(slices), span_starts="".join(starts),
                               total_height=height) + trailing


def _extent(drawn: Drawn, i: int) -> bool:
    """Whether token i lies between the entity's first and last token (a fragment or a gap)."""
    return drawn.entity.tokens[0] <= i <= drawn.entity.tokens[-1]


def place_in_rows(drawn: List[Drawn], doc: Doc) -> None:
    """Give each entity the lowest row (1, 2, ...) free over its extent and its label's width,
    longer entities first: nested entities stack, a discontinuous entity keeps one row across
    its gaps, and no two labels overlap."""
    placed: List[Tuple[int, int, Drawn]] = []
    for d in sorted(drawn, key=lambda d: (d.entity.tokens[0], -(d.entity.tokens[-1] - d.entity.tokens[0]), d.number)):
        first = d.entity.tokens[0]
        last = max(d.entity.tokens[-1], _label_end(doc, first, _width(html.unescape(d.caption), 6.2) + 12))
        taken = {other.slot for start, end, other in placed if start <= last and first <= end}
        d.slot = next(slot for slot in range(1, len(placed) + 2) if slot not in taken)
        placed.append((first, last, d))


def _width(text: str, per_char: float) -> float:
    """Rough rendered width in pixels (wide East Asian characters count about double)."""
    return sum(per_char * (1.8 if ord(c) >= 0x2E80 else 1.0) for c in text)


def _label_end(doc: Doc, start: int, label_width: float) -> int:
    """The last token a label starting at token ``start`` reaches over (bold 16px text)."""
    covered = 0.0
    for token in doc[start:]:
        if "\n" in token.text and token.i > start:  # a line break: the label cannot reach past it
            return token.i - 1
        covered += _width(token.text_with_ws or token.text + " ", 9.5)
        if covered >= label_width:
            return token.i
    return len(doc) - 1


def caption(entity: Entity, number: int, prefix: str = "") -> str:
    """The escaped text on an entity's label: [prefix] LABEL #n score."""
    score = "" if entity.score is None else f" {entity.score:.2f}"
    return html.escape(f"{prefix}{entity.label} #{number}{score}")


def _page(content: str, lang: str = "en", head: str = "") -> str:
    page = TPL_PAGE.format(content=content, lang=lang, dir="ltr").strip() + "\n"
    return page.replace("<title>displaCy</title>", f"<title>spacy-w2ner</title><meta charset=\"utf-8\">{head}")


def _output(markup: str, jupyter: Optional[bool]):
    """The markup, or (in Jupyter) displayed, as displaCy does."""
    if jupyter or (jupyter is None and is_in_jupyter()):
        from IPython.display import HTML, display

        return display(HTML(f'<span class="tex2jax_ignore">{markup}</span>'))
    return markup


def render_entities(
    docs: Iterable[Doc],
    *,
    spans_key: str = "w2ner",
    page: bool = True,
    jupyter: Optional[bool] = None,
    colors: Optional[Dict[str, str]] = None,
    titles: Optional[Sequence[str]] = None,
) -> str:
    """HTML of the docs' entities (``doc.spans[spans_key]``): standalone page, or for Jupyter."""
    docs = list(docs)
    entities = [get_entities(doc, spans_key) for doc in docs]
    labels = sorted({e.label for doc_entities in entities for e in doc_entities})
    renderer = EntityRenderer({"colors": colors or {}, "labels": labels})
    figures = []
    for k, (doc, doc_entities) in enumerate(zip(docs, entities)):
        drawn = [Drawn(e, caption(e, n), renderer.color(e.label), n) for n, e in enumerate(doc_entities, start=1)]
        title = titles[k] if titles else None
        figures.append(TPL_DOC.format(content=renderer.render_doc(doc, drawn, title)))
    markup = _page("".join(figures)) if page else "".join(figures)
    return _output(markup, jupyter)


# ---------------------------------------------------------------- the word-pair grid


def render_grid(
    words: Sequence[str],
    probs: np.ndarray,
    labels: Sequence[str],
    *,
    gold: Iterable[Entity] = (),
    colors: Optional[Dict[str, str]] = None,
    cell: int = 22,
) -> str:
    """SVG of one sentence's grid: ``probs`` is (n, n, relations) (NONE, NNW, THW per label).

    Upper triangle (i < j): cell (i, j) is the chance that word j follows word i in an entity
    (NNW), in blue. On and below the diagonal: cell (tail, head) is the chance of an entity of
    a label from that head to that tail (THW), in the colour of the likeliest label. Gold
    entities' cells (``gold``: label names, token indices within the sentence) are outlined.
    Hovering a cell shows every relation's probability.
    """
    n = len(words)
    palette = label_colors(labels, colors)
    margin = 12 + 7 * max((len(w) for w in words), default=1)
    size = margin + n * cell + 8
    gold_cells = gold_relations(gold, labels)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
        f'font-family="Helvetica, Arial, sans-serif" font-size="11">',
        f'<rect x="{margin}" y="{margin}" width="{n * cell}" height="{n * cell}" fill="#fff" stroke="#999"/>',
    ]
    for i, word in enumerate(words):
        x = margin + i * cell + cell / 2
        y = margin + i * cell + cell / 2 + 4
        parts.append(f'<text x="{margin - 4}" y="{y}" text-anchor="end">{html.escape(word)}</text>')
        parts.append(f'<text x="{x}" y="{margin - 4}" transform="rotate(-60 {x} {margin - 4})">{html.escape(word)}</text>')
    for i in range(n):
        for j in range(n):
            parts.append(_grid_cell(i, j, probs[i, j], labels, palette, gold_cells.get((i, j)), margin, cell, words))
    parts.append("</svg>")
    return "".join(parts)


def grid_legend(labels: Sequence[str]) -> str:
    """What the grid's colours mean (HTML)."""
    swatch = '<span style="background: {}; padding: 0 6px; border-radius: 2px">{}</span>'
    thw = " ".join(swatch.format(color, html.escape(label)) for label, color in label_colors(labels).items())
    nnw = swatch.format("#1e66f5", '<span style="color: #fff">NNW</span>')
    return (f"Row word &rarr; column word. Upper triangle: {nnw} "
            f"the column word is the row word's next word in an entity; on and below the diagonal: THW, an entity "
            f"from the column (head) word to the row (tail) word, by label: {thw}. Darker is more probable; hover "
            f"a cell for every relation's probability.")


def gold_relations(entities: Iterable[Entity], labels: Sequence[str]) -> Dict[Tuple[int, int], int]:
    """(row, column) -> relation id of the gold entities' cells (NNW links and THW cells)."""
    cells: Dict[Tuple[int, int], int] = {}
    for entity in entities:
        tokens = entity.tokens
        for a, b in zip(tokens, tokens[1:]):
            cells[(a, b)] = NNW
        if entity.label in labels:
            cells[(tokens[-1], tokens[0])] = THW_OFFSET + list(labels).index(entity.label)
    return cells


def _grid_cell(i, j, p, labels, palette, gold, margin, cell, words) -> str:
    x, y = margin + j * cell, margin + i * cell
    if i < j:
        color, strength, name = "#1e66f5", float(p[NNW]), "NNW"
    else:
        k = int(np.argmax(p[THW_OFFSET:])) if len(p) > THW_OFFSET else 0
        color, strength, name = palette[labels[k]], float(p[THW_OFFSET + k]), f"THW {labels[k]}"
    relations = ["NONE", "NNW"] + [f"THW {label}" for label in labels]
    tip = f"row {words[i]!r} -> column {words[j]!r}: " + ", ".join(
        f"{relation} {p[r]:.2f}" for r, relation in enumerate(relations) if p[r] >= 0.01
    )
    out = (f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{color}" fill-opacity="{strength:.3f}" '
           f'stroke="#eee"><title>{html.escape(tip)}</title></rect>')
    if gold is not None:
        expected = relations[gold]
        out += (f'<rect x="{x + 1.5}" y="{y + 1.5}" width="{cell - 3}" height="{cell - 3}" fill="none" '
                f'stroke="#000" stroke-width="2"><title>gold: {html.escape(expected)} '
                f'({html.escape(name)} {strength:.2f} predicted)</title></rect>')
    return out


def grid_figures(nlp, docs: Sequence[Doc], spans_key: str, gold: Optional[Sequence[Sequence[Entity]]] = None) -> List[str]:
    """The grid SVG of every sentence (or window) of the docs, run through ``nlp``'s w2ner."""
    from .model import grid_probabilities

    name = next(name for name, _ in nlp.pipeline if nlp.get_pipe_meta(name).factory == "w2ner")
    pipe = nlp.get_pipe(name)
    prepared = []
    for doc in docs:  # the components before w2ner (a transformer listener reads their output)
        doc = doc.copy()
        for component_name, component in nlp.pipeline:
            if component_name == name:
                break
            doc = component(doc)
        prepared.append(doc)
    figures = []
    for segment, probs in grid_probabilities(pipe.model, prepared):
        doc = prepared[segment.doc_index]
        words = [t.text for t in doc[segment.start : segment.end]]
        within = [] if gold is None else [
            segment.to_segment(e) for e in gold[segment.doc_index] if segment.contains(e.tokens)
        ]
        svg = render_grid(words, probs, pipe.labels, gold=within)
        figures.append(f'<figure style="margin: 1rem 0">{svg}<figcaption style="font-size: 0.8em; color: #555">'
                       f'Tokens {segment.start}-{segment.end - 1}. {grid_legend(pipe.labels)}'
                       f'{" Gold cells are outlined." if gold is not None else ""}</figcaption></figure>')
    return figures


def show_page(nlp, docs: Sequence[Doc], spans_key: str, grid: bool = False) -> str:
    """The ``show --html`` page: each text's entities, and with ``grid`` its sentences' grids."""
    labels = nlp.get_pipe(next(n for n, _ in nlp.pipeline if nlp.get_pipe_meta(n).factory == "w2ner")).labels
    renderer = EntityRenderer({"labels": labels})
    parts = [LEGEND]
    for doc in docs:
        entities = get_entities(doc, spans_key)
        drawn = [Drawn(e, caption(e, n), renderer.color(e.label), n) for n, e in enumerate(entities, start=1)]
        parts.append(TPL_DOC.format(content=renderer.render_doc(doc, drawn)))
        if grid:
            parts.extend(grid_figures(nlp, [doc], spans_key))
    return _page("".join(parts))


LEGEND = (
    '<p style="font-size: 0.85em; color: #444">Each entity is a coloured line under its words with its label, '
    'number and score; a <b>discontinuous</b> entity keeps one line and colour, dashed under the gap, and '
    '&#8618;n marks its later fragments; nested entities stack.</p>'
)


# ---------------------------------------------------------------- error pages


def doc_errors(gold: Sequence[Entity], predicted: Sequence[Entity]) -> Dict[str, List[Entity]]:
    """Correct (in both), missed (gold only) and spurious (predicted only) entities."""
    gold_set, predicted_set = set(gold), set(predicted)
    return {
        "correct": [e for e in predicted if e in gold_set],
        "missed": [e for e in gold if e not in predicted_set],
        "spurious": [e for e in predicted if e not in gold_set],
    }


def error_page(examples, scores: Dict, spans_key: str = "w2ner", errors_only: bool = False, names=None) -> str:
    """Gold against predicted per document, the scorer's table on top (``visualize`` command)."""
    from .entities import aligned_gold_entities

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
    return _page(header + (("".join(figures)) or "<p>No document to show.</p>"))


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
