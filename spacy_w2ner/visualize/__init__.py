"""Pictures: entities in running text, the word-pair grid of a sentence, and error pages.

One module per picture:

* ``text``: ``render_entities``, flat, nested (stacked) and discontinuous entities drawn under the
  words (displaCy's span renderer with fragments, gaps and entity numbers), and what every picture
  shares: one colour per label (``label_colors``) and the standalone page (``html_page``);
* ``grid_picture``: ``render_grid``, the W2NER word-pair grid of one sentence as SVG with the codec's gold
  cells outlined, and ``show_page``, the ``show --html`` page (entities, then grids);
* ``errors``: ``error_page``, gold against predicted entities per document (correct, missed,
  spurious) under the scorer's per-label table; ``predicted_error_page`` runs a pipeline on gold
  docs and draws it (the ``visualize`` command).

Everything is escaped; the HTML is static (no script), so long documents load as plain markup.
The names below are the package's interface: import them from ``spacy_w2ner.visualize``.
"""
from .errors import STATUS_COLORS, doc_errors, error_page, predicted_error_page
from .grid_picture import grid_figures, grid_legend, render_grid, show_page
from .text import Drawn, EntityRenderer, caption, html_page, label_colors, place_in_rows, render_entities

__all__ = [
    "Drawn",
    "EntityRenderer",
    "STATUS_COLORS",
    "caption",
    "doc_errors",
    "error_page",
    "grid_figures",
    "grid_legend",
    "html_page",
    "label_colors",
    "place_in_rows",
    "predicted_error_page",
    "render_entities",
    "render_grid",
    "show_page",
]
