"""Pictures (spacy_w2ner.visualize): entities in text, the word-pair grid (its gold outlines are
training's cells), error pages, the show --html and visualize commands, and what headless
Chromium paints: the screenshot's pixels under the boxes Chromium laid the tokens out in."""
import html
import json
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin

from spacy_w2ner import set_entities
from spacy_w2ner.entities import Entity, get_entities
from spacy_w2ner.visualize import (
    Drawn,
    STATUS_COLORS,
    doc_errors,
    error_page,
    label_colors,
    place_in_rows,
    render_entities,
    render_grid,
)

from ..conftest import cli

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


def test_right_to_left_text_is_drawn_right_to_left_as_displacy_draws_it():
    """An Arabic doc's words in its writing direction (spaCy's ``writing_system``), each doc its own."""
    arabic = spacy.blank("ar")("تناولت الأسبرين وأصبت بصداع شديد")
    set_entities(arabic, [("DRUG", (1,), None), ("ADR", (3, 4), None)])
    english = spacy.blank("en")("She took aspirin .")
    set_entities(english, [("DRUG", (2,), None)])
    page = render_entities([arabic, english], jupyter=False)
    assert re.findall(r'class="spans" style="[^"]*direction: (\w+)', page) == ["rtl", "ltr"]


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


def test_grid_margin_fits_wide_words():
    """A word's label is drawn right-aligned before the grid: a CJK word (about double width) was cut off."""
    words = ["患者", "阿司匹林肠溶片"]
    probs = np.zeros((2, 2, 3), dtype="float32")
    probs[..., 0] = 1.0
    grid_left = float(re.search(r'<rect x="([\d.]+)" y="[\d.]+" width="44"', render_grid(words, probs, ["DRUG"])).group(1))
    assert grid_left >= round(12 + 7 * 1.8 * len("阿司匹林肠溶片"), 1)


def outlined_cells(svg: str, words) -> dict:
    """(row, column) -> relation of every cell the grid picture outlines as gold."""
    outlines = re.findall(r"<title>row '(\w+)' -> column '(\w+)'[^<]*</title></rect>"
                          r'<rect [^>]*stroke-width="2"><title>gold: ([^(<]+) \(', html.unescape(svg))
    return {(words.index(row), words.index(column)): relation for row, column, relation in outlines}


@pytest.mark.parametrize("first", ["ADR", "DRUG"])
def test_grid_outlines_exactly_the_cells_training_uses(first):
    from spacy_w2ner.grid.codec import encode_grid

    words = ["pain", "in", "knees", "and", "ankles"]
    labels = ["ADR", "DRUG"]
    second = next(label for label in labels if label != first)
    gold = [Entity(first, (0, 1, 4)), Entity(second, (0, 2, 3, 4))]  # one head, one tail, two labels
    probs = np.zeros((5, 5, 4), dtype="float32")
    probs[..., 0] = 1.0
    outlined = outlined_cells(render_grid(words, probs, labels, gold=gold), words)
    grid, conflicts = encode_grid([e.with_label(labels.index(e.label)) for e in gold], len(words))
    relations = ["NONE", "NNW"] + [f"THW {label}" for label in labels]
    assert conflicts == 1
    assert outlined == {(i, j): relations[grid[i, j]] for i, j in zip(*np.nonzero(grid))}
    assert outlined[(4, 0)] == f"THW {first}"  # the first entity keeps the cell, as in training
    assert sorted(cell for cell, relation in outlined.items() if relation == "NNW") == [
        (0, 1), (1, 4)]  # the second entity's links go with its THW cell, as in training
    with pytest.raises(ValueError, match="not among the grid's labels"):
        render_grid(words, probs, labels, gold=[Entity("DOSE", (1,))])


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
    result = cli("visualize", saved_model, tmp_path / "gold.spacy", tmp_path / "neg.html", "--limit", "-1", code=2)
    assert "should be greater than or equal to 0" in " ".join(result.stderr.replace("│", " ").split())  # it dropped the last document
    DocBin().to_disk(tmp_path / "none.spacy")
    result = cli("visualize", saved_model, tmp_path / "none.spacy", tmp_path / "none.html", code=1)
    assert result.stderr.strip() == f"error: {tmp_path / 'none.spacy'} holds no documents" and not (tmp_path / "none.html").exists()


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def run_chromium(page: Path, *args: str) -> str:
    """Headless Chromium on a page at 1000 x 300 (offline, throwaway profile); its stdout."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--hide-scrollbars", "--window-size=1000,300", *args, page.as_uri()],
            capture_output=True, timeout=120, check=True, text=True,
        ).stdout


# Added to the page under test: writes where Chromium laid out each drawn token and each dashed
# connector into a script element that --dump-dom prints (it changes nothing on screen).
LAYOUT_SCRIPT = """<script type="application/json" id="layout"></script><script>
const box = (element, token) => {
  const r = element.getBoundingClientRect();
  return {token, left: r.left, right: r.right, top: r.top, bottom: r.bottom};
};
const text = element => element.firstChild.textContent.trim();
document.getElementById("layout").textContent = JSON.stringify({
  width: innerWidth,
  tokens: [...document.querySelectorAll(".spans > span")].map(t => box(t, text(t))),
  connectors: [...document.querySelectorAll(".spans span[style*='dashed']")].map(c => box(c, text(c.parentElement))),
});
</script>"""


def layout(page: Path) -> dict:
    """The page's layout as LAYOUT_SCRIPT reports it: the viewport width and the boxes."""
    dom = run_chromium(page, "--dump-dom")
    return json.loads(re.search(r'<script type="application/json" id="layout">(.*?)</script>', dom, re.S).group(1))


def png_chunks(data: bytes):
    """(kind, body) of each chunk of a PNG file."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position = 8
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        yield kind, data[position + 8 : position + 8 + length]
        position += 12 + length


def png_pixels(data: bytes) -> np.ndarray:
    """An 8-bit RGB(A) PNG, as Chromium writes them, as a (height, width, 3) array (zlib; no Pillow)."""
    chunks = list(png_chunks(data))
    header = next(body for kind, body in chunks if kind == b"IHDR")
    compressed = b"".join(body for kind, body in chunks if kind == b"IDAT")
    width, height, depth, color_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert (depth, interlace) == (8, 0) and color_type in (2, 6), "only 8-bit RGB(A), not interlaced"
    channels = 3 if color_type == 2 else 4
    filtered = np.frombuffer(zlib.decompress(compressed), np.uint8).reshape(height, 1 + width * channels)
    rows = np.zeros((height + 1, width * channels), np.int64)  # rows[0]: the zeros above the image
    for y in range(height):
        rows[y + 1] = unfilter(filtered[y, 0], filtered[y, 1:].astype(np.int64), rows[y], channels)
    return rows[1:].reshape(height, width, channels)[..., :3].astype(np.uint8)


def unfilter(kind: int, line: np.ndarray, above: np.ndarray, bpp: int) -> np.ndarray:
    """One PNG scanline's bytes from its filtered bytes (PNG specification, section 9)."""
    if kind == 0:
        return line
    if kind == 1:  # Sub: a running sum per channel
        return (np.cumsum(line.reshape(-1, bpp), axis=0) % 256).ravel()
    if kind == 2:  # Up
        return (line + above) % 256
    out, up = line.tolist(), above.tolist()  # Average, Paeth: each byte needs the one before
    for x in range(len(out)):
        left, upper_left = (out[x - bpp], up[x - bpp]) if x >= bpp else (0, 0)
        guess = (left + up[x]) // 2 if kind == 3 else paeth(left, up[x], upper_left)
        out[x] = (out[x] + guess) % 256
    return np.array(out)


def paeth(left: int, up: int, upper_left: int) -> int:
    estimate = left + up - upper_left
    distances = [abs(estimate - left), abs(estimate - up), abs(estimate - upper_left)]
    return (left, up, upper_left)[distances.index(min(distances))]


def painted(pixels: np.ndarray, color: str) -> str:
    """How a row of pixels shows a colour: 'none'; 'solid', with no background in the row (label
    text, black on the colour, may cover parts of a line); 'dashed', background between pixels
    of the colour; or 'partly' (such as a label ending inside the row)."""
    rgb = np.array([int(color[k : k + 2], 16) for k in (1, 3, 5)])
    where = np.flatnonzero((np.abs(pixels.astype(int) - rgb) <= 3).all(axis=1))
    is_background = (pixels >= 250).all(axis=1)
    if not len(where):
        return "none"
    if not is_background.any():
        return "solid"
    return "dashed" if is_background[where[0] : where[-1]].any() else "partly"


def under(pixels: np.ndarray, box: dict, color: str) -> dict:
    """y -> how each pixel row of a token's box shows the colour (its edges left out)."""
    columns = slice(int(np.ceil(box["left"])) + 1, int(np.floor(box["right"])) - 1)
    return {y: painted(pixels[y, columns], color) for y in range(int(box["top"]), int(np.ceil(box["bottom"])))}


needs_chromium = pytest.mark.skipif(
    chromium() is None, reason="Chromium is not installed (apt-get install chromium; .ci/run does)")


@pytest.fixture(scope="module")
def in_chromium(tmp_path_factory):
    """example_doc's page as Chromium paints it: (screenshot pixels, layout boxes, label colours)."""
    page = tmp_path_factory.mktemp("chromium") / "entities.html"
    markup = render_entities([example_doc()], jupyter=False)
    page.write_text(markup.replace("</body>", LAYOUT_SCRIPT + "</body>"), encoding="utf8")
    png = page.with_suffix(".png")
    run_chromium(page, f"--screenshot={png}")
    pixels, boxes = png_pixels(png.read_bytes()), layout(page)
    assert pixels.shape == (300, 1000, 3) and boxes["width"] == 1000  # one layout in both runs
    return pixels, boxes, label_colors(e.label for e in get_entities(example_doc()))


@needs_chromium
def test_chromium_paints_each_entity_colour_under_its_own_tokens(in_chromium):
    pixels, boxes, colors = in_chromium
    doc = example_doc()
    entities = get_entities(doc)
    tokens_of = {label: {doc[i].text for e in entities if e.label == label for i in e.tokens} for label in colors}
    # A solid line of a colour under exactly the tokens of its label's entities: not under "and",
    # in the gap of SYM #5 (pain in her ... ankles); LOC (New York) not under "University".
    for box in boxes["tokens"]:
        for label, color in colors.items():
            rows = under(pixels, box, color)
            assert ("solid" in rows.values()) == (box["token"] in tokens_of[label]), (box["token"], label)


@needs_chromium
def test_chromium_paints_the_dashed_connector_under_the_gap_only(in_chromium):
    pixels, boxes, colors = in_chromium
    sym = colors["SYM"]
    connectors = boxes["connectors"]
    assert sorted(c["token"] for c in connectors) == ["and", "knees"]
    row = range(int(connectors[0]["top"]), int(np.ceil(connectors[0]["bottom"])))
    # SYM #5's row: dashed under the gap, solid under the fragments, no SYM colour beyond them.
    box_of = {box["token"]: box for box in boxes["tokens"]}
    for token, expected in [("pain", "solid"), ("in", "solid"), ("her", "solid"), ("knees", "dashed"),
                            ("and", "dashed"), ("ankles", "solid")]:
        assert {under(pixels, box_of[token], sym)[y] for y in row} == {expected}, token
    before, after = int(box_of["pain"]["left"]) - 2, int(np.ceil(box_of["ankles"]["right"])) + 2
    assert all(painted(pixels[y, :before], sym) == painted(pixels[y, after:], sym) == "none" for y in row)
    # Nothing else is dashed: no other row, token or colour (SYM #4, in the row below, is solid).
    for box in boxes["tokens"]:
        for label, color in colors.items():
            dashed = {y for y, kind in under(pixels, box, color).items() if kind == "dashed"}
            in_gap = label == "SYM" and box["token"] in ("knees", "and")
            assert dashed <= (set(row) if in_gap else set()), (box["token"], label)
