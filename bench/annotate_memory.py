"""Resident memory against the memory in use while `annotate` streams documents, in one process.

    python bench/annotate_memory.py MODEL ../shared/corpora/cadec/w2ner-json/test.json
        [--docs 14000] [--no-trim] [--output bench/results/cpu-annotate-memory-trend.json]

Every 10 s: documents written, VmRSS, and glibc's bytes in use (``mallinfo2``: uordblks +
hblkhd) and heap size. A leak grows the bytes in use; a heap that keeps freed memory grows
only the resident memory. ``--no-trim`` turns off every ``release_freed_memory`` (glibc's
``malloc_trim`` after each batch, after each large encoder pass, every so many grid cells) to
compare: ``memory.heap.malloc_trim`` says the C library has none.
"""
import argparse
import ctypes
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from annotate import write_input  # noqa: E402
from memory import rss_mb  # noqa: E402
from plots import plot_after_run  # noqa: E402


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--docs", type=int, default=14000)
    parser.add_argument("--no-trim", action="store_true")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    import spacy

    import spacy_w2ner.annotate as annotate_module
    import spacy_w2ner.memory.heap as heap

    if args.no_trim:
        heap.malloc_trim = lambda: None  # what every release_freed_memory asks for
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    nlp = spacy.load(args.model)
    trend, done = [], threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        source, output = Path(tmp) / "docs.jsonl", Path(tmp) / "out.jsonl"
        write_input(args.corpus, args.docs, source)
        partial = Path(f"{output}.partial")

        def sample() -> None:
            start = time.perf_counter()
            while not done.wait(10):
                info = libc.mallinfo2()
                written = sum(1 for _ in open(partial, encoding="utf8")) if partial.exists() else args.docs
                trend.append({"seconds": round(time.perf_counter() - start), "docs": written, "rss_mb": round(rss_mb()),
                              "in_use_mb": (info.uordblks + info.hblkhd) >> 20, "heap_mb": info.arena >> 20})

        threading.Thread(target=sample, daemon=True).start()
        start = time.perf_counter()
        annotate_module.annotate(nlp, source, output, progress=False)
        seconds = time.perf_counter() - start
        done.set()
    result = {"docs": args.docs, "trim": not args.no_trim, "seconds": round(seconds, 1),
              "docs_per_s": round(args.docs / seconds, 1), "peak_rss_mb": max(r["rss_mb"] for r in trend),
              "peak_in_use_mb": max(r["in_use_mb"] for r in trend), "trend": trend}
    print(json.dumps({k: v for k, v in result.items() if k != "trend"}))
    if args.output:
        results = json.loads(args.output.read_text()) if args.output.exists() else {}
        results["trim" if result["trim"] else "no_trim"] = result
        args.output.write_text(json.dumps(results, indent=1) + "\n")
        plot_after_run("memory", annotate_trend=args.output, output=args.output.parent / "memory-by-length.png")


if __name__ == "__main__":
    main()
