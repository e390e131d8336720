"""The word-pair grid of a sentence as SVG, and the ``show --html`` page that puts it under the text.

NNW (next word) cells fill the upper triangle and THW (tail -> head, per label) cells the diagonal
and below, shaded by the model's probability. Gold cells are outlined, and they are the codec's
(``spacy_w2ner.grid.gold_cells``), so the picture outlines exactly the cells training is taught:
where two labels claim one THW cell, the first entity's label, as in the training targets.
"""
import bisect
import html
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np
from spacy.tokens import Doc

from ..component import first_w2ner
from ..entities import Entity, get_entities
from ..grid.codec import NNW, THW_OFFSET, Cell, gold_cells
from ..model.predictions import grid_probabilities
from .text import LEGEND, TPL_DOC, EntityRenderer, html_page, label_colors, rendered_width

NNW_COLOR = "#1e66f5"


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
    entities' cells (``gold``: names among ``labels``, token indices within the sentence) are
    outlined; a gold label not in ``labels`` raises ValueError. Hovering a cell shows every
    relation's probability.
    """
    n = len(words)
    palette = label_colors(labels, colors)
    margin = round(12 + max((rendered_width(w, 7) for w in words), default=7), 1)  # wide (CJK) characters count double
    size = margin + n * cell + 8
    outlined = _gold_relations(gold, labels, n)
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
            parts.append(_grid_cell(i, j, probs[i, j], labels, palette, outlined.get((i, j)), margin, cell, words))
    parts.append("</svg>")
    return "".join(parts)


def _gold_relations(gold: Iterable[Entity], labels: Sequence[str], length: int) -> Dict[Cell, int]:
    """The codec's gold cells of entities labelled by name: (row, column) -> relation id."""
    label_ids = {label: k for k, label in enumerate(labels)}
    gold = list(gold)
    unknown = sorted({str(e.label) for e in gold if e.label not in label_ids})
    if unknown:
        raise ValueError(f"gold labels {unknown} are not among the grid's labels {list(labels)}")
    return gold_cells([e.with_label(label_ids[e.label]) for e in gold], length).relations


def grid_legend(labels: Sequence[str]) -> str:
    """What the grid's colours mean (HTML)."""
    swatch = '<span style="background: {}; padding: 0 6px; border-radius: 2px">{}</span>'
    thw = " ".join(swatch.format(color, html.escape(label)) for label, color in label_colors(labels).items())
    nnw = swatch.format(NNW_COLOR, '<span style="color: #fff">NNW</span>')
    return (f"Row word &rarr; column word. Upper triangle: {nnw} "
            f"the column word is the row word's next word in an entity; on and below the diagonal: THW, an entity "
            f"from the column (head) word to the row (tail) word, by label: {thw}. Darker is more probable; hover "
            f"a cell for every relation's probability.")


def _grid_cell(i, j, p, labels, palette, gold, margin, cell, words) -> str:
    x, y = margin + j * cell, margin + i * cell
    if i < j:
        color, strength, name = NNW_COLOR, float(p[NNW]), "NNW"
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


    name, pipe = first_w2ner(nlp)
    prepared = []
    for doc in docs:  # the components before w2ner (a transformer listener reads their output)
        doc = doc.copy()
        for component_name, component in nlp.pipeline:
            if component_name == name:
                break
            doc = component(doc)
        prepared.append(doc)
    figures = []
    gold = None if gold is None else [sorted(entities, key=lambda e: e.tokens[0]) for entities in gold]
    firsts = None if gold is None else [[e.tokens[0] for e in entities] for entities in gold]
    for segment, probs in grid_probabilities(pipe.model, prepared):
        doc = prepared[segment.doc_index]
        words = [t.text for t in doc[segment.start : segment.end]]
        within = []
        if gold is not None:  # the gold entities that start in the segment, found by bisection
            entities, starts = gold[segment.doc_index], firsts[segment.doc_index]
            candidates = entities[bisect.bisect_left(starts, segment.start) : bisect.bisect_left(starts, segment.end)]
            within = [segment.to_segment(e) for e in candidates if segment.contains(e.tokens)]
        svg = render_grid(words, probs, pipe.labels, gold=within)
        figures.append(f'<figure style="margin: 1rem 0">{svg}<figcaption style="font-size: 0.8em; color: #555">'
                       f'Tokens {segment.start}-{segment.end - 1}. {grid_legend(pipe.labels)}'
                       f'{" Gold cells are outlined." if gold is not None else ""}</figcaption></figure>')
    return figures


def show_page(nlp, docs: Sequence[Doc], spans_key: str, grid: bool = False) -> str:
    """The ``show --html`` page: each text's entities, and with ``grid`` its sentences' grids."""
    _, pipe = first_w2ner(nlp)
    renderer = EntityRenderer({"labels": pipe.labels})
    parts = [LEGEND]
    for doc in docs:
        parts.append(TPL_DOC.format(content=renderer.render_doc(doc, renderer.numbered(get_entities(doc, spans_key)))))
        if grid:
            parts.extend(grid_figures(nlp, [doc], spans_key))
    return html_page("".join(parts))
