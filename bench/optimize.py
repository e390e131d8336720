"""Fast CPU inference, as a user gets it: ``optimize``'s int8 pipeline against the float32 one
it was made from, on CADEC test, in one run (ratios count: these machines are noisy).

    python bench/optimize.py MODEL ../shared/corpora/cadec/w2ner-json/test.json \
        corpora/converted/cadec/test.spacy --old-code /tmp/w2ner-0.2.0 \
        --output bench/results/cpu-optimize.json --results project/results/cadec-w2ner-int8.json

MODEL is a trained transformer + w2ner pipeline (``spacy project run train-cadec``); the int8
pipeline is made from it as ``python -m spacy_w2ner optimize --int8 PRESET --force`` makes it
(PRESET: --int8, by default this CPU's ``default_preset()``): int8 whatever it measures, since
``optimize`` without --int8 may choose a bfloat16 candidate, which this script would call int8. --old-code is a
checkout of 0.2.0 (``git worktree add /tmp/w2ner-0.2.0 51b98c0``): its float32 pipeline and
encoder run as they did before this round's encoder passes (one padded pass per batch).

1. Accuracy: ``spacy evaluate`` of both pipelines on the test DocBin (P/R/F, discontinuous and
   overlapping F), and the int8 pipeline's entities scored against float32's.
2. Speed: each case a fresh process with --threads torch threads, timed inside after loading and
   a warm-up batch; --rounds interleaved rounds, the best counts: ``spacy_w2ner.annotate`` of the
   test sentences (JSONL in, JSONL out) with the float32 pipeline (0.2.0 code and this code) and
   the int8 one; ``nlp.pipe`` with w2ner disabled (the encoder alone: 0.2.0 and this code). Each
   at annotate's default batch size of its version (0.2.0: 64 documents; now 1000), and this
   code's float32 cases at 64 too, which tells the code's gain from the batches'.
   Peak resident memory (VmHWM) of each process: the median of the rounds counts (one process's
   peak moves by 100-300 MB with where glibc's heap happens to end a batch), each round's listed.

``--bfloat16`` adds the pipeline predicting with bfloat16 weights (``nn.bfloat16``), the encoder's
(``bfloat16``) and both networks' (``bfloat16+grid``), as ``optimize``'s bfloat16 candidates write
it but without its measurement (a copy whose config sets ``inference_dtype``): their accuracy,
their entities against float32's, and ``annotate`` beside the others. ``--no-int8`` leaves int8 out.
"""
import argparse
from dataclasses import asdict
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

from plots import plot_after_run  # noqa: E402  (bench/ is on sys.path)

from spacy_w2ner.nn.bfloat16 import cpu_bfloat16_instructions
from spacy_w2ner.nn.int8 import cpu_features
from spacy_w2ner.release.measure import agreement
from spacy_w2ner.release.measure import entity_sets as package_entity_sets

ROOT = Path(__file__).resolve().parents[1]
OLD_BATCH = 64  # annotate's default batch before 0.3.0

CASE_SCRIPT = r"""
import json, os, sys, time
import torch
torch.set_num_threads(int(sys.argv[4]))
import spacy
from spacy_w2ner.annotate.dispatch import annotate
model, texts_path, mode, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[5])
nlp = spacy.load(model)
texts = [json.loads(line)["text"] for line in open(texts_path, encoding="utf8")]
if mode == "encoder":
    run = lambda: sum(1 for _ in nlp.pipe(texts, batch_size=batch, disable=["w2ner"]))
    list(nlp.pipe(texts[:64], disable=["w2ner"]))
else:
    out = texts_path + f".{os.getpid()}.out.jsonl"
    def run():
        if os.path.exists(out):
            os.remove(out)
        return annotate(nlp, texts_path, out, progress=False, batch_size=batch).written
    list(nlp.pipe(texts[:64]))
start = time.perf_counter()
docs = run()
seconds = time.perf_counter() - start
peak = [int(l.split()[1]) / 1024 for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"seconds": seconds, "documents": docs, "peak_rss_mb": round(peak, 1)}))
"""


def run_case(model: Path, texts: Path, mode: str, batch: int, threads: int, code: Optional[Path]) -> Dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if code:
        env["PYTHONPATH"] = str(code)
    done = subprocess.run([sys.executable, "-c", CASE_SCRIPT, str(model.resolve()), str(texts), mode, str(threads), str(batch)],
                          capture_output=True, text=True, env=env, cwd=str(code or ROOT))  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"{mode} {model}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def evaluate(model: Path, test: Path, work: Path) -> Dict:
    output = work / f"{model.name}-metrics.json"
    subprocess.run([sys.executable, "-m", "spacy", "evaluate", str(model), str(test), "--output", str(output)],
                   check=True, capture_output=True)  # fmt: skip
    metrics = json.loads(output.read_text())
    keep = ("w2ner_p", "w2ner_r", "w2ner_f", "w2ner_discontinuous_f", "w2ner_overlapping_f", "w2ner_per_type", "speed")
    return {key: metrics[key] for key in keep if key in metrics}


def entity_sets(model: Path, texts: List[str], batch_size: int, one_pass: bool = False) -> List[set]:
    """Each text's entities; ``one_pass``: the encoder's spans in one padded pass per batch (0.2.0)."""
    import spacy

    from spacy_w2ner.encoders import transformer

    default = transformer.MIN_TOKENS_PER_PASS
    transformer.MIN_TOKENS_PER_PASS = 10**9 if one_pass else default
    try:
        return package_entity_sets(spacy.load(model), texts, batch_size)
    finally:
        transformer.MIN_TOKENS_PER_PASS = default


def bfloat16_copy(model: Path, output: Path, candidate: str) -> Path:
    """``model`` copied to ``output`` with the config of ``optimize``'s bfloat16 candidate (its float32
    state is made bfloat16 when it loads)."""
    import shutil

    from spacy.util import load_config

    from spacy_w2ner.component import first_w2ner
    from spacy_w2ner.release.bfloat16 import CANDIDATES
    from spacy_w2ner.release.optimize import encoder_component

    import spacy

    shutil.copytree(model, output)
    nlp = spacy.load(model)
    config = load_config(output / "config.cfg", interpolate=False)
    CANDIDATES[candidate].configure(config, encoder_component(nlp), first_w2ner(nlp)[0])
    config.to_disk(output / "config.cfg")
    return output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("corpus", type=Path, help="W2NER JSON test file (CADEC)")
    parser.add_argument("test", type=Path, help="The same test set as a DocBin (for spacy evaluate)")
    parser.add_argument("--old-code", type=Path, help="A checkout of 0.2.0 (the float32 baseline before this round)")
    parser.add_argument("--int8", help="optimize's --int8 (default: this CPU's default preset)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--results", type=Path, help="Where the accuracy JSON goes (project/results/...)")
    parser.add_argument("--bfloat16", action="store_true", help="Also the pipeline in bfloat16 (encoder; both networks)")
    parser.add_argument("--no-int8", action="store_true", help="Leave the int8 pipeline out")
    args = parser.parse_args()

    from spacy_w2ner.annotate.options import AnnotateOptions
    from spacy_w2ner.nn.int8 import default_preset, int8_option
    from spacy_w2ner.release.optimize import optimize_pipeline

    texts = [" ".join(r["sentence"]) for r in json.loads(args.corpus.read_text(encoding="utf8")) if r["sentence"]]
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        int8_model = work / "int8"
        patterns = int8_option(args.int8 or default_preset())
        report = None if args.no_int8 else optimize_pipeline(args.model, int8_model, patterns, force=True)
        jsonl = work / "test.jsonl"
        jsonl.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)), encoding="utf8")
        batch = AnnotateOptions().batch_size  # annotate's default, as a user runs it
        float32 = entity_sets(args.model, texts, batch)
        accuracy = {"float32": evaluate(args.model, args.test, work),
                    "float32_vs_float32_one_padded_pass_entities": agreement(entity_sets(args.model, texts, OLD_BATCH, True), float32),
                    f"float32_vs_float32_batches_of_{OLD_BATCH}_entities": agreement(entity_sets(args.model, texts, OLD_BATCH), float32)}  # fmt: skip
        optimized = {} if args.no_int8 else {"int8": int8_model}
        if args.bfloat16:
            optimized.update({name: bfloat16_copy(args.model, work / name, name) for name in ("bfloat16", "bfloat16+grid")})
        for name, model in optimized.items():
            accuracy[name] = evaluate(model, args.test, work)
            accuracy[f"{name}_vs_float32_entities"] = agreement(float32, entity_sets(model, texts, batch))
        cases = {"float32 annotate (0.2.0)": (args.model, "annotate", OLD_BATCH, args.old_code),
                 "encoder alone (0.2.0)": (args.model, "encoder", OLD_BATCH, args.old_code),
                 "float32 annotate": (args.model, "annotate", batch, None),
                 f"float32 annotate, batches of {OLD_BATCH}": (args.model, "annotate", OLD_BATCH, None),
                 "encoder alone": (args.model, "encoder", batch, None),
                 f"encoder alone, batches of {OLD_BATCH}": (args.model, "encoder", OLD_BATCH, None),
                 **{f"{name} annotate": (model, "annotate", batch, None) for name, model in optimized.items()}}  # fmt: skip
        if not args.old_code:
            cases = {name: case for name, case in cases.items() if "0.2.0" not in name}
        runs: Dict[str, List[Dict]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (model, mode, batch_size, code) in cases.items():
                runs[name].append(run_case(model, jsonl, mode, batch_size, args.threads, code))
                print(name, runs[name][-1], file=sys.stderr)
    speed = {}
    for name, results in runs.items():
        best = min(r["seconds"] for r in results)
        speed[name] = {"docs_per_s": round(len(texts) / best, 1), "seconds": [round(r["seconds"], 3) for r in results],
                       "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in results),
                       "peak_rss_mb_rounds": [r["peak_rss_mb"] for r in results]}  # fmt: skip
    ratios = {f"{kind} annotate / {name}": round(speed[f"{kind} annotate"]["docs_per_s"] / s["docs_per_s"], 3)
              for kind in optimized for name, s in speed.items() if name != f"{kind} annotate"}  # fmt: skip
    ratios["float32 annotate / float32 annotate (0.2.0)"] = (
        round(speed["float32 annotate"]["docs_per_s"] / speed["float32 annotate (0.2.0)"]["docs_per_s"], 3) if args.old_code else None
    )
    deltas = {f"{kind}_minus_float32_test_f": round(100 * (accuracy[kind]["w2ner_f"] - accuracy["float32"]["w2ner_f"]), 2) for kind in optimized}
    report_dict = {"model": str(args.model), "corpus": str(args.corpus), "command": " ".join(sys.argv),
                   "optimize": report and {k: v for k, v in asdict(report).items() if k != "output"}, "optimize_summary": report and report.lines(),
                   "documents": len(texts), "annotate_batch_size": batch, "threads": args.threads, "rounds": args.rounds, "accuracy": accuracy,
                   **deltas, "speed": speed, "ratios": ratios,
                   "torch": __import__("torch").__version__, "python": platform.python_version(),
                   "cpu": platform.processor() or platform.machine(), "cpu_model": cpu_features()["model"],
                   "bfloat16_instructions": cpu_bfloat16_instructions()}  # fmt: skip
    text = json.dumps(report_dict, indent=2) + "\n"
    print(text)
    for path in (args.output, args.results):
        if path:
            path.write_text(text)
    if args.output and "int8" in optimized:
        plot_after_run("speed", optimize=args.output, output=args.output.parent / "speed.png")


if __name__ == "__main__":
    sys.exit(main())
