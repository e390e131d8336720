"""Time and peak memory of w2ner against document length.

Each (length, sentences) case runs in a fresh process, so the peak RSS is its own:
    python bench/long_doc.py MODEL_DIR --lengths 1000 5000 20000 50000
Prints a table and writes JSON with --output. Growth = peak RSS - RSS after loading.

``--after-corpus W2NER.json`` first runs the corpus's sentences through the pipeline
``--corpus-passes`` times at batch 64, as a service does before a long document arrives;
growth is then measured from the RSS after the corpus (the heap the corpus left behind
included):
    python bench/long_doc.py MODEL_DIR --lengths 50000 --no-sentences-only \
        --after-corpus ../shared/corpora/cadec/w2ner-json/test.json
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

WORDS = (
    "She had severe pain in her knees and ankles after taking Lipitor for two weeks . "
    "The patient at Toronto General Hospital reported nausea , dizziness and muscle aches . "
).split()


from memory import peak_rss_mb, reset_peak, rss_mb  # noqa: E402  (bench/ is on sys.path)
from plots import plot_after_run  # noqa: E402


def run_case(model: str, length: int, sentences: bool, repeats: int = 1, corpus: str = "", passes: int = 3) -> dict:
    import spacy
    from spacy.tokens import Doc

    from spacy_w2ner.common import sentence_setters

    nlp = spacy.load(model)
    # Without sentence boundaries means windows: the project's pipelines' sentencizer is off.
    setters = sentence_setters(nlp)
    nlp(Doc(nlp.vocab, words=WORDS))  # warm up
    if corpus:
        run_corpus(nlp, corpus, passes, disable=[] if sentences else setters)
    loaded_mb = rss_mb()
    reset_peak()
    words = (WORDS * (length // len(WORDS) + 1))[:length]
    sent_starts = [w == "." for w in [None] + words[:-1]] if sentences else None
    if sent_starts:
        sent_starts[0] = True
    times = []
    for repeat in range(repeats):  # the peak memory is the first run's; the time the fastest run's
        doc = Doc(nlp.vocab, words=words, sent_starts=sent_starts)
        start = time.perf_counter()
        with nlp.select_pipes(disable=[] if sentences else setters):
            doc = nlp(doc)
        times.append(time.perf_counter() - start)
        if repeat == 0:
            peak = peak_rss_mb()
        if repeat < repeats - 1:
            del doc
    seconds = min(times)
    key = next(p.spans_key for _, p in nlp.pipeline if hasattr(p, "spans_key"))
    return {
        "tokens": length,
        "sentences": sentences,
        "after_corpus": f"{corpus} x {passes}" if corpus else None,
        "seconds": round(seconds, 2),
        "tokens_per_s": round(length / seconds, 1),
        "rss_loaded_mb": round(loaded_mb),
        "rss_peak_mb": round(peak),
        "rss_growth_mb": round(peak - loaded_mb),
        "entities": len({s.id_ for s in doc.spans[key]}),
    }


def run_corpus(nlp, path: str, passes: int, disable: list) -> None:
    """The sentences of a W2NER JSON file through the pipeline, ``passes`` times at batch 64."""
    from spacy.tokens import Doc

    sentences = [record["sentence"] for record in json.load(open(path, encoding="utf8")) if record["sentence"]]
    with nlp.select_pipes(disable=disable):
        for _ in range(passes):
            for _doc in nlp.pipe((Doc(nlp.vocab, words=words) for words in sentences), batch_size=64):
                pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 5000, 20000, 50000])
    parser.add_argument("--repeats", type=int, default=2, help="Runs per case; the fastest counts")
    parser.add_argument("--after-corpus", default="", help="W2NER JSON whose sentences run through first")
    parser.add_argument("--corpus-passes", type=int, default=3)
    parser.add_argument("--no-sentences-only", action="store_true", help="only the cases without sentence boundaries")
    parser.add_argument("--output")
    parser.add_argument("--case", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        row = run_case(args.model, int(args.case[0]), args.case[1] == "1", args.repeats, args.after_corpus, args.corpus_passes)
        print(json.dumps(row))
        return
    rows = []
    for sentences in (False,) if args.no_sentences_only else (False, True):
        for length in args.lengths:
            out = subprocess.run(
                [sys.executable, __file__, args.model, "--case", str(length), str(int(sentences)),
                 "--repeats", str(args.repeats), "--after-corpus", args.after_corpus,
                 "--corpus-passes", str(args.corpus_passes)],
                capture_output=True, text=True, check=True,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    ratios = {}
    for sentences in (False, True):
        by_length = {row["tokens"]: row for row in rows if row["sentences"] == sentences}
        if not by_length:
            continue
        longest = max(by_length)
        shortest = 5000 if 5000 in by_length else min(by_length)  # the target: 50k within 12x of 5k
        if longest != shortest:
            name = f"time_{longest}_vs_{shortest}_{'sentences' if sentences else 'no_sentences'}"
            ratios[name] = round(by_length[longest]["seconds"] / by_length[shortest]["seconds"], 2)
    print(json.dumps(ratios))
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        with open(args.output, "w") as f:
            json.dump({"cases": rows, "ratios": ratios}, f, indent=2)
        plot_after_run("memory", long_doc=Path(args.output), output=Path(args.output).parent / "memory-by-length.png")


if __name__ == "__main__":
    main()
