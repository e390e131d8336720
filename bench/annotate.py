"""The annotate command at scale: its overhead over nlp.pipe, against spacy apply + export,
processes, Ray, and peak memory against the input's size, in one run (ratios count: these
machines are noisy).

    python bench/annotate.py MODEL ../shared/corpora/cadec/w2ner-json/test.json \
        --docs 10000 --big-docs 100000 --output bench/results/cpu-annotate.json

The input is CADEC's test sentences (their tokens joined by spaces) repeated to --docs
documents, as JSONL ({"id", "text"}). Every case runs as a fresh process, timed from outside
(wall clock, the pipeline's loading included, as a user sees it):

- pipe: a script that loads the pipeline, reads the same JSONL and runs ``nlp.pipe`` over the
  texts, keeping nothing (the floor: no records, offsets or writing);
- annotate: ``python -m spacy_w2ner annotate MODEL docs.jsonl out.jsonl``;
- apply+export: ``spacy apply`` to a DocBin, then ``spacy_w2ner export brat``;
- annotate --n-process 2, and --engine ray --workers 2 (Ray started by the command);
- memory: the annotate command on --docs and on --big-docs documents, peak RSS of the process
  (VmHWM, read by a wrapper that polls /proc while it runs: the command's own process).
"""
import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from plots import ANNOTATE_RUNS, plot_after_run, runs_beside  # noqa: E402  (bench/ is on sys.path)

PIPE_SCRIPT = """
import json, sys, spacy
nlp = spacy.load(sys.argv[1])
texts = (json.loads(line)["text"] for line in open(sys.argv[2], encoding="utf8"))
n = sum(len(doc.spans["w2ner"]) for doc in nlp.pipe(texts, batch_size=int(sys.argv[3])))
print(n)
"""


def write_input(corpus: Path, n_docs: int, path: Path) -> None:
    sentences = [" ".join(record["sentence"]) for record in json.loads(corpus.read_text(encoding="utf8"))]
    with open(path, "w", encoding="utf8") as f:
        for i in range(n_docs):
            f.write(json.dumps({"id": i, "text": sentences[i % len(sentences)]}) + "\n")


def peak_rss_of(process: subprocess.Popen) -> float:
    """Wait for the process, polling its VmHWM (MB) from /proc; the last reading is its peak."""
    peak = 0.0
    while process.poll() is None:
        try:
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
        except OSError:
            pass
        time.sleep(0.2)
    return peak


def run(name: str, commands, n_docs: int) -> dict:
    start = time.perf_counter()
    peak = 0.0
    for command in commands:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak = max(peak, peak_rss_of(process))
        out, err = process.communicate()
        if process.returncode:
            raise RuntimeError(f"{name}: {' '.join(map(str, command))} failed:\n{err[-3000:]}")
    seconds = time.perf_counter() - start
    figures = {"docs": n_docs, "seconds": round(seconds, 2), "docs_per_s": round(n_docs / seconds, 1),
               "peak_rss_mb": round(peak)}
    print(name, figures, flush=True)
    return figures


def annotate_command(model, source, output, *options):
    return [sys.executable, "-m", "spacy_w2ner", "annotate", str(model), str(source), str(output), "--no-progress", *options]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("corpus", type=Path, help="CADEC test.json (W2NER JSON)")
    parser.add_argument("--docs", type=int, default=10000)
    parser.add_argument("--big-docs", type=int, default=100000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--skip", nargs="*", default=[], help="cases to leave out (pipe, annotate, apply, np2, ray, memory)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    results = {"machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
               "settings": {k: str(v) for k, v in vars(args).items()}}
    batch = ["--batch-size", str(args.batch_size)]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        docs = tmp / "docs.jsonl"
        write_input(args.corpus, args.docs, docs)
        n = args.docs
        if "pipe" not in args.skip:
            results["pipe"] = run("pipe", [[sys.executable, "-c", PIPE_SCRIPT, args.model, str(docs), str(args.batch_size)]], n)
        if "annotate" not in args.skip:
            results["annotate"] = run("annotate", [annotate_command(args.model, docs, tmp / "a.jsonl", *batch)], n)
        if "apply" not in args.skip:
            results["apply_export"] = run("apply+export", [
                [sys.executable, "-m", "spacy", "apply", args.model, str(docs), str(tmp / "applied.spacy"),
                 "--batch-size", str(args.batch_size)],
                [sys.executable, "-m", "spacy_w2ner", "export", "brat", str(tmp / "applied.spacy"), str(tmp / "brat")],
            ], n)
        if "np2" not in args.skip:
            results["annotate_n_process_2"] = run(
                "annotate --n-process 2", [annotate_command(args.model, docs, tmp / "np2.jsonl", "--n-process", "2", *batch)], n)
        if "ray" not in args.skip:
            results["annotate_ray_2_workers"] = run(
                "annotate --engine ray --workers 2",
                [annotate_command(args.model, docs, tmp / "ray.jsonl", "--engine", "ray", "--workers", "2", *batch)], n)
        if "memory" not in args.skip:
            big = tmp / "big.jsonl"
            write_input(args.corpus, args.big_docs, big)
            results["memory_small"] = results.get("annotate") or run("annotate (memory)", [annotate_command(args.model, docs, tmp / "m1.jsonl", *batch)], n)
            results["memory_big"] = run("annotate, big input", [annotate_command(args.model, big, tmp / "m2.jsonl", *batch)], args.big_docs)
    ratios = {}
    if "pipe" in results and "annotate" in results:
        ratios["annotate_vs_nlp_pipe"] = round(results["annotate"]["docs_per_s"] / results["pipe"]["docs_per_s"], 3)
    if "apply_export" in results and "annotate" in results:
        ratios["annotate_vs_apply_export"] = round(results["annotate"]["docs_per_s"] / results["apply_export"]["docs_per_s"], 3)
    if "annotate_n_process_2" in results and "annotate" in results:
        ratios["n_process_2_vs_1"] = round(results["annotate_n_process_2"]["docs_per_s"] / results["annotate"]["docs_per_s"], 3)
    if "annotate_ray_2_workers" in results and "annotate_n_process_2" in results:
        ratios["ray_2_workers_vs_n_process_2"] = round(
            results["annotate_ray_2_workers"]["docs_per_s"] / results["annotate_n_process_2"]["docs_per_s"], 3)
    if "memory_big" in results:
        ratios["peak_rss_big_vs_small"] = round(results["memory_big"]["peak_rss_mb"] / results["memory_small"]["peak_rss_mb"], 3)
    results["ratios"] = ratios
    print(json.dumps(ratios, indent=1))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=1) + "\n")
        plot_after_run("speed", annotate=runs_beside(args.output, *ANNOTATE_RUNS), output=args.output.parent / "speed.png")


if __name__ == "__main__":
    main()
