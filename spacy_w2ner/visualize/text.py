"""Entities in running text: flat, nested (stacked) and discontinuous entities drawn under the words.

It is displaCy's span renderer (its templates, colours, page and Jupyter handling) with what
displaCy lacks: the fragments of a discontinuous entity share one row and colour, a dashed
connector runs under the gap between them, and one entity number (with label and score) names
the entity at its start and each later fragment. Rows are chosen so that no two labels overlap.

The other pictures build on this module: ``label_colors`` gives every picture the same colour per
label, and ``html_page`` wraps any of them into a standalone page.
"""
import bisect
import html
import itertools
import re
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from spacy.displacy.render import SpanRenderer
from spacy.displacy.templates import TPL_PAGE, TPL_SPAN, TPL_SPAN_SLICE, TPL_SPAN_START, TPL_SPANS
from spacy.tokens import Doc
from spacy.util import escape_html, is_in_jupyter

from ..entities import Entity, get_entities

# Label colours beyond displaCy's (which has PERSON, ORG, GPE... and grey for the rest).
PALETTE = ["#7aecec", "#bfeeb7", "#feca74", "#ff9561", "#aa9cfc", "#c887fb", "#9cc9cc", "#ffeb80",
           "#ff8197", "#f0d0ff", "#bfe1d9", "#e4e7d2", "#a8d0ff", "#ffc8dd", "#cde8a0", "#d9d0b4"]
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
LEGEND = (
    '<p style="font-size: 0.85em; color: #444">Each entity is a coloured line under its words with its label, '
    'number and score; a <b>discontinuous</b> entity keeps one line and colour, dashed under the gap, and '
    '&#8618;n marks its later fragments; nested entities stack.</p>'
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

    def numbered(self, entities: Sequence[Entity]) -> List[Drawn]:
        """The entities in their labels' colours, numbered from 1 in the given order."""
        return [Drawn(e, caption(e, n), self.color(e.label), n) for n, e in enumerate(entities, start=1)]

    def render_doc(self, doc: Doc, drawn: List[Drawn], title: Optional[str] = None) -> str:
        """One document's markup (a displaCy ``spans`` div, in its language's direction: right to left
        for Arabic, Hebrew, ...), with an escaped title."""
        self.direction = doc.vocab.writing_system.get("direction", "ltr")
        place_in_rows(drawn, doc)
        markup = "".join(self._token_markup(token, over) for token, over in zip(doc, _drawn_over_each_token(drawn, len(doc))))
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
            if _holds(d.entity.tokens, token.i):
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


def _drawn_over_each_token(drawn: List[Drawn], n_tokens: int) -> Iterator[List[Drawn]]:
    """For each token in order, the entities whose extent (first to last token: its fragments and
    gaps) holds it, in one sweep (linear in the tokens and the entities' extents)."""
    by_start = sorted(drawn, key=lambda d: d.entity.tokens[0])
    active: List[Drawn] = []
    k = 0
    for i in range(n_tokens):
        while k < len(by_start) and by_start[k].entity.tokens[0] <= i:
            active.append(by_start[k])
            k += 1
        if active:
            active = [d for d in active if d.entity.tokens[-1] >= i]
        yield active


def _holds(tokens: Sequence[int], i: int) -> bool:
    """Whether sorted ``tokens`` has ``i`` (by bisection: an entity may have many tokens)."""
    k = bisect.bisect_left(tokens, i)
    return k < len(tokens) and tokens[k] == i


def place_in_rows(drawn: List[Drawn], doc: Doc) -> None:
    """Give each entity the lowest row (1, 2, ...) free over its extent and its label's width,
    longer entities first: nested entities stack, a discontinuous entity keeps one row across
    its gaps, and no two labels overlap. One sweep in order of the first token: only the rows of
    entities placed before that reach this one's first token are taken."""
    reaching: List[Tuple[int, int]] = []  # (last token, row) of the entities placed so far that may still overlap
    for d in sorted(drawn, key=lambda d: (d.entity.tokens[0], -(d.entity.tokens[-1] - d.entity.tokens[0]), d.number)):
        first = d.entity.tokens[0]
        last = max(d.entity.tokens[-1], _label_end(doc, first, rendered_width(html.unescape(d.caption), 6.2) + 12))
        reaching = [(end, slot) for end, slot in reaching if end >= first]
        taken = {slot for _, slot in reaching}
        d.slot = next(slot for slot in itertools.count(1) if slot not in taken)
        reaching.append((last, d.slot))


def rendered_width(text: str, per_char: float) -> float:
    """Rough rendered width in pixels (wide East Asian characters count about double)."""
    return sum(per_char * (1.8 if ord(c) >= 0x2E80 else 1.0) for c in text)


def _label_end(doc: Doc, start: int, label_width: float) -> int:
    """The last token a label starting at token ``start`` reaches over (bold 16px text)."""
    covered = 0.0
    for token in doc[start:]:
        if "\n" in token.text and token.i > start:  # a line break: the label cannot reach past it
            return token.i - 1
        covered += rendered_width(token.text_with_ws or token.text + " ", 9.5)
        if covered >= label_width:
            return token.i
    return len(doc) - 1


def caption(entity: Entity, number: int, prefix: str = "") -> str:
    """The escaped text on an entity's label: [prefix] LABEL #n score."""
    score = "" if entity.score is None else f" {entity.score:.2f}"
    return html.escape(f"{prefix}{entity.label} #{number}{score}")


def html_page(content: str, lang: str = "en", head: str = "") -> str:
    """displaCy's standalone page around the markup, titled and declared UTF-8."""
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
        title = titles[k] if titles else None
        figures.append(TPL_DOC.format(content=renderer.render_doc(doc, renderer.numbered(doc_entities), title)))
    markup = html_page("".join(figures)) if page else "".join(figures)
    return _output(markup, jupyter)
