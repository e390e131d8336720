"""A long document drawn with its entities: the page's size, and how long headless Chromium
takes to load and paint it against an empty page (the browser's own start), in one run.

    python bench/visualize.py training/sample-w2ner_minilm_cpu/model-best --tokens 5000 \
        --output bench/results/cpu-visualize.json

The document is the English sentences of corpora/sample/dev.json repeated to --tokens tokens,
annotated by the model (with a sentencizer before w2ner when the pipeline has none). Chromium
(Debian's ``chromium``) takes a screenshot of each page (--screenshot waits for the load and
the first paint); the best of --rounds runs counts.
"""
import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def paint_seconds(page: Path, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as profile:
            start = time.perf_counter()
            subprocess.run([shutil.which("chromium"), *FLAGS, f"--user-data-dir={profile}",
                            f"--screenshot={page.with_suffix('.png')}", "--window-size=1200,900", page.as_uri()],
                           capture_output=True, check=True, timeout=300)
            best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--tokens", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    import spacy

    from spacy_w2ner.common import load_pipeline
    from spacy_w2ner.entities import get_entities
    from spacy_w2ner.visualize import render_entities

    nlp = load_pipeline(args.model, sentencizer=True)
    records = json.loads((ROOT / "corpora" / "sample" / "dev.json").read_text(encoding="utf8"))
    sentences = [" ".join(r["sentence"]) for r in records if r["sentence"][0].isascii()]
    words, k = [], 0
    while len(words) < args.tokens:
        words += sentences[k % len(sentences)].split()
        k += 1
    doc = nlp(" ".join(words[: args.tokens]))
    entities = get_entities(doc)
    start = time.perf_counter()
    page = render_entities([doc], jupyter=False)
    render_seconds = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        long_page, empty_page = Path(tmp) / "long.html", Path(tmp) / "empty.html"
        long_page.write_text(page, encoding="utf8")
        empty_page.write_text(render_entities([spacy.blank("en")("")], jupyter=False), encoding="utf8")
        empty, long = paint_seconds(empty_page, args.rounds), paint_seconds(long_page, args.rounds)
    result = {
        "tokens": len(doc), "entities": len(entities),
        "discontinuous": sum(e.is_discontinuous for e in entities),
        "html_bytes": len(page.encode("utf8")), "render_seconds": round(render_seconds, 3),
        "chromium_empty_page_seconds": round(empty, 2), "chromium_long_page_seconds": round(long, 2),
        "page_load_and_paint_seconds": round(long - empty, 2),
    }
    print(json.dumps(result, indent=1))
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
