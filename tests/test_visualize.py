"""Pictures (spacy_w2ner.visualize): entities in text, the word-pair grid, error pages, the
show --html and visualize commands, and a screenshot in headless Chromium."""
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin

from spacy_w2ner import set_entities
from spacy_w2ner.entities import Entity
from spacy_w2ner.visualize import (
    Drawn,
    STATUS_COLORS,
    doc_errors,
    error_page,
    place_in_rows,
    render_entities,
    render_grid,
)

from .conftest import cli

NLP = spacy.blank("en")
TEXT = "New York University doctors saw pain in her knees and ankles ."  # 12 tokens


def example_doc():
    """Flat (doctors), nested (ORG > LOC) and discontinuous (pain in her ... ankles) entities."""
    doc = NLP.make_doc(TEXT)
    set_entities(doc, [
        ("ORG", (0, 1, 2), 0.98),
        ("LOC", (0, 1), 0.91),
        ("SYM", (5, 6, 7, 8), 0.95),
        ("SYM", (5, 6, 7, 10), 0.83),
        ("ROLE", (3,), 0.7),
    ])
    return doc


def test_discontinuous_entity_is_joined_nested_entities_stack():
    markup = render_entities([example_doc()], page=False, jupyter=False)
    # one label per entity, with its number and score
    for caption in ("LOC #1 0.91", "ORG #2 0.98", "ROLE #3 0.70", "SYM #4 0.95", "SYM #5 0.83"):
        assert caption in markup
    # the gap of entity 5 ("knees and") has a dashed connector; ankles carries ↪5
    assert markup.count("dashed") == 2
    assert "&#8618;5" in markup and "&#8618;4" not in markup
    # stacking: the nested LOC is drawn in a second row under ORG
    drawn = [Drawn(e, e.label, "#fff", n) for n, e in enumerate(
        [Entity("ORG", (0, 1, 2)), Entity("LOC", (0, 1)), Entity("SYM", (5, 6, 7, 8)), Entity("SYM", (5, 6, 7, 10))], 1)]
    place_in_rows(drawn, example_doc())
    assert [d.slot for d in drawn] == [1, 2, 2, 1]  # longer first; the discontinuous one keeps one row


def test_labels_never_share_a_row_they_would_overlap_in():
    doc = Doc(NLP.vocab, words=list("郭伟在哈尔滨工作"), spaces=[False] * 8)
    drawn = [Drawn(Entity("PER", (0, 1)), "PER #1 0.99", "#fff", 1), Drawn(Entity("LOC", (3, 4, 5)), "LOC #2 0.98", "#fff", 2)]
    place_in_rows(drawn, doc)
    assert drawn[0].slot != drawn[1].slot  # the first label is wider than its two characters


def test_text_is_escaped_and_odd_documents_render():
    doc = Doc(NLP.vocab, words=["<script>alert('x')</script>", "&", "more"])
    set_entities(doc, [("<b>bad</b>", (0,), 0.5)])
    markup = render_entities([doc, NLP.make_doc(""), NLP.make_doc("no entities here")], jupyter=False,
                             titles=["<i>title</i>", "empty", "plain"])
    assert "<script>" not in markup and "<b>bad</b>" not in markup and "<i>title</i>" not in markup
    assert "&lt;script&gt;" in markup and "&lt;b&gt;bad&lt;/b&gt;" in markup
    assert "(empty document)" in markup and "no entities here" in markup
    assert markup.startswith("<!DOCTYPE html>") and 'charset="utf-8"' in markup


def test_line_breaks_are_kept_and_no_space_is_invented():
    doc = Doc(NLP.vocab, words=["北", "京", "\n\n", "Paris"], spaces=[False, False, False, False])
    set_entities(doc, [("LOC", (0, 1), 0.9)])
    markup = render_entities([doc], page=False, jupyter=False)
    assert "<br><br>" in markup
    assert re.search(r"北</span>\s", markup) is None  # no space between the two characters' boxes


def test_jupyter_gets_a_display_object(monkeypatch):
    ipython = pytest.importorskip("IPython.display")
    shown = []
    monkeypatch.setattr(ipython, "display", lambda obj: shown.append(obj))
    render_entities([example_doc()], jupyter=True)
    assert shown and "SYM #4" in shown[0].data


def test_grid_shades_cells_by_probability_and_outlines_gold():
    words = ["pain", "in", "knees", "and", "ankles"]
    labels = ["SYM"]
    probs = np.zeros((5, 5, 3), dtype="float32")
    probs[..., 0] = 1.0
    probs[0, 1] = [0.2, 0.8, 0.0]  # NNW pain -> in
    probs[4, 0] = [0.1, 0.0, 0.9]  # THW ankles -> pain
    svg = render_grid(words, probs, labels, gold=[Entity("SYM", (0, 1, 4))])
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert len(re.findall(r'<rect x="[\d.]+" y="[\d.]+" width="22" height="22"', svg)) == 25
    assert 'fill="#1e66f5" fill-opacity="0.800"' in svg  # the NNW cell
    assert 'fill-opacity="0.900"' in svg  # the THW cell
    assert svg.count('stroke-width="2"') == 3  # gold: NNW pain->in, in->ankles, THW ankles->pain
    assert "gold: THW SYM" in svg and "gold: NNW" in svg


def test_error_page_tells_correct_missed_and_spurious_apart():
    from spacy.training import Example

    from spacy_w2ner.scorer import score_entities

    gold = NLP.make_doc(TEXT)
    set_entities(gold, [("ORG", (0, 1, 2)), ("SYM", (5, 6, 7, 10)), ("LOC", (0, 1))])
    predicted = NLP.make_doc(TEXT)
    set_entities(predicted, [("ORG", (0, 1, 2), 0.9), ("SYM", (5, 6, 7, 8), 0.8)])
    perfect = NLP.make_doc("Nothing to see")
    examples = [Example(predicted, gold), Example(perfect, NLP.make_doc("Nothing to see"))]
    kinds = doc_errors(gold=[Entity("ORG", (0, 1, 2)), Entity("LOC", (0, 1))], predicted=[Entity("ORG", (0, 1, 2))])
    assert [len(kinds[k]) for k in ("correct", "missed", "spurious")] == [1, 1, 0]
    page = error_page(examples, score_entities(examples), names=["note 1", "note 2"])
    assert "1 correct, 2 missed, 1 spurious" in page
    assert "note 2: 0 correct, 0 missed, 0 spurious" in page
    assert all(color in page for color in STATUS_COLORS.values())
    assert "<td>ORG</td><td>100.00</td><td>100.00</td><td>100.00</td>" in page
    errors_only = error_page(examples, score_entities(examples), errors_only=True, names=["note 1", "note 2"])
    assert "note 1:" in errors_only and "note 2:" not in errors_only


def test_show_html_and_visualize_commands(tmp_path, saved_model, trained_nlp):
    cli("show", saved_model, "She had pain in her knees and ankles .", "--html", tmp_path / "show.html", "--grid")
    page = (tmp_path / "show.html").read_text(encoding="utf8")
    assert "SYM #" in page and "&#8618;" in page and page.count("<svg") == 1
    assert "--grid draws into the --html page" in " ".join(
        cli("show", saved_model, "text", "--grid", code=2).stderr.replace("│", " ").split())
    gold = [trained_nlp.make_doc(text) for text in ("She had pain in her knees and ankles .", "New York University is in New York .")]
    set_entities(gold[0], [("SYM", (2, 3, 4, 5)), ("SYM", (2, 3, 4, 7))])
    set_entities(gold[1], [("ORG", (0, 1, 2)), ("LOC", (0, 1)), ("LOC", (5, 6)), ("LOC", (6,))])  # (6,) is a miss
    DocBin(docs=gold).to_disk(tmp_path / "gold.spacy")
    result = cli("visualize", saved_model, tmp_path / "gold.spacy", tmp_path / "errors.html", "--errors-only")
    assert "2 documents" in result.stdout
    page = (tmp_path / "errors.html").read_text(encoding="utf8")
    assert "doc 1:" in page and "doc 0:" not in page and "1 missed" in page


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def screenshot(page: Path, png: Path, width=1000, height=600) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--hide-scrollbars", f"--screenshot={png}",
             f"--window-size={width},{height}", page.as_uri()],
            capture_output=True, timeout=120, check=True,
        )


@pytest.mark.skipif(chromium() is None, reason="Chromium is not installed (apt-get install chromium; .ci/run does)")
def test_a_page_with_flat_nested_and_discontinuous_entities_renders_in_chromium(tmp_path):
    page = tmp_path / "entities.html"
    page.write_text(render_entities([example_doc()], jupyter=False), encoding="utf8")
    png = tmp_path / "entities.png"
    screenshot(page, png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1000, 600)
    assert len(data) > 5000  # not a blank page
