"""Do BioC conversion and export stream? Peak memory of convert and export against collection size.

    python bench/formats_stream.py                      # 1,000, 5,000 and 10,000 documents
    python bench/formats_stream.py --sizes 500 2000     # other sizes (a quick look)

Writes a BioC XML collection of PubMed-like documents (a title and an abstract passage, about 230
words, 12 annotations each, 2 of them discontinuous and 2 overlapping) per size, then runs
``python -m spacy_w2ner convert bioc`` (whitespace tokens) and ``export bioc`` (back to XML) in
fresh processes, and records each one's peak resident memory (ru_maxrss of the child) and time,
and whether the export holds the same annotations (ids, types, locations, text) as the input,
checked with the bioc package's parser on the 1,000-document size. Streaming means the peak does
not grow with the number of documents. Results: bench/results/cpu-formats-stream.json.
"""
import argparse
import json
import platform
import random
import subprocess
import tempfile
import sys
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "cpu-formats-stream.json"
WORDS = ("patients", "with", "severe", "pain", "in", "the", "knees", "and", "ankles", "after", "treatment", "of",
         "aspirin", "were", "studied", "mutation", "gene", "BRCA1", "expression", "was", "reduced", "cells")  # fmt: skip


def passage_xml(rng: random.Random, offset: int, n_words: int, first_id: int):
    """A passage of random words and its annotations (some discontinuous, some overlapping)."""
    words = [rng.choice(WORDS) for _ in range(n_words)]
    starts, position = [], offset
    for word in words:
        starts.append(position)
        position += len(word) + 1
    text = " ".join(words)
    annotations = []
    for k in range(6):
        i = rng.randrange(0, n_words - 4)
        locations = [(i, i + 2)] if k % 3 else [(i, i + 1), (i + 3, i + 4)]  # every third: discontinuous
        locs = "".join(f'<location offset="{starts[a]}" length="{starts[b - 1] + len(words[b - 1]) - starts[a]}"/>' for a, b in locations)
        covered = " ".join(" ".join(words[a:b]) for a, b in locations)
        annotations.append(
            f'<annotation id="A{first_id + k}"><infon key="type">{"Disease" if k % 2 else "Chemical"}</infon>'
            f'<infon key="identifier">MESH:D{first_id + k:06d}</infon>{locs}<text>{escape(covered)}</text></annotation>'
        )
    xml = f"<passage><infon key=\"type\">p</infon><offset>{offset}</offset><text>{escape(text)}</text>{''.join(annotations)}</passage>"
    return xml, position


def write_collection(path: Path, n_documents: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf8") as f:
        f.write("<?xml version='1.0' encoding='UTF-8'?>\n<collection><source>bench</source><date>2024</date><key>k</key>\n")
        for d in range(n_documents):
            title, end = passage_xml(rng, 0, 20, 0)
            abstract, _ = passage_xml(rng, end, 210, 6)
            f.write(f"<document><id>PMID{d}</id>{title}{abstract}</document>\n")
        f.write("</collection>\n")


# Runs COMMAND and prints its peak RSS: a fresh process for each command, because a process's
# ru_maxrss of its children is the largest child it ever had.
_PEAK = (
    "import json, resource, subprocess, sys, time\n"
    "start = time.monotonic()\n"
    "result = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "print(json.dumps({'rc': result.returncode, 'seconds': time.monotonic() - start, 'stdout': result.stdout, 'stderr': result.stderr,\n"
    "                  'peak_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n"
)


def measured(command) -> dict:
    """Run a command in a fresh process: its seconds and peak resident memory (MB)."""
    report = json.loads(subprocess.run([sys.executable, "-c", _PEAK, *map(str, command)], capture_output=True, text=True, check=True).stdout)
    if report["rc"]:
        raise SystemExit(f"{' '.join(map(str, command))} failed:\n{report['stderr'][-2000:]}")
    return {"seconds": round(report["seconds"], 1), "peak_rss_mb": round(report["peak_kb"] / 1024, 1), "summary": json.loads(report["stdout"].strip().splitlines()[-1])}


def same_annotations(source: Path, exported: Path) -> bool:
    sys.path.insert(0, str(ROOT))
    from tests.formats.test_bioc import annotations

    return annotations(source) == annotations(exported)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "w2ner-formats-bench", help="Where the collections are written")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    runs = []
    for size in args.sizes:
        runs.append(json.loads(subprocess.run([sys.executable, __file__, "--one", str(size), str(args.work)], capture_output=True, text=True, check=True).stdout))
        print(json.dumps(runs[-1]), flush=True)
    result = {
        "what": "peak RSS of convert bioc and export bioc in fresh processes, per collection size",
        "command": "python bench/formats_stream.py --sizes " + " ".join(map(str, args.sizes)),
        "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
        "runs": runs,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf8")
    print(f"-> {RESULTS}")


def one(size: int, work: Path) -> None:
    source = work / f"bioc-{size}.xml"
    if not source.exists():
        write_collection(source, size)
    convert = measured([sys.executable, "-m", "spacy_w2ner", "convert", "bioc", source, work, "--tokenizer", "whitespace"])
    exported = work / f"back-{size}.xml"
    exported.unlink(missing_ok=True)
    export = measured([sys.executable, "-m", "spacy_w2ner", "export", "bioc", work / f"bioc-{size}.spacy", exported])
    run = {
        "documents": size, "input_mb": round(source.stat().st_size / 1e6, 1), "docbin_mb": round((work / f"bioc-{size}.spacy").stat().st_size / 1e6, 1),
        "convert": convert, "export": export,
    }  # fmt: skip
    if size <= 1000:
        run["same_annotations_after_round_trip"] = same_annotations(source, exported)
    print(json.dumps(run))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        one(int(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()
