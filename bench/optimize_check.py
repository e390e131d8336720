"""What ``optimize`` wrote, checked as a user runs it: the int8 pipeline against the float32 one
it was made from, each in a fresh process, on the sample ``optimize`` measured on (issue 42).

    python bench/optimize_check.py training/sample-w2ner_minilm_cpu/model-best \
        training/sample-w2ner_minilm_cpu/model-int8 --output bench/results/cpu-optimize-check.json

Each case loads its pipeline in a new interpreter, runs a warm-up, then times ``nlp.pipe`` over
the sample (``release.measure.sample_texts``: the float32 pipeline's dev data, or ``--sample``);
--rounds interleaved rounds, the best counts, with the torch threads of this environment
(``OMP_NUM_THREADS``). The int8 pipeline's entities are scored against float32's
(``release.measure.agreement``). Ratios in one run count: these machines are shared.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict

ROOT = Path(__file__).resolve().parents[1]

CASE_SCRIPT = r"""
import json, sys, time
import spacy, torch
from spacy_w2ner.release.measure import WARM_UP, entity_sets
model, texts_path = sys.argv[1], sys.argv[2]
texts = json.loads(open(texts_path, encoding="utf8").read())
nlp = spacy.load(model)
list(nlp.pipe(texts[:WARM_UP]))
start = time.perf_counter()
found = entity_sets(nlp, texts)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "threads": torch.get_num_threads(), "entities": [sorted(map(list, f)) for f in found]}))
"""


def run_case(model: Path, texts: Path) -> Dict:
    done = subprocess.run([sys.executable, "-c", CASE_SCRIPT, str(model), str(texts)], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ))  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"{model}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("float32", type=Path)
    parser.add_argument("int8", type=Path)
    parser.add_argument("--sample", type=Path, help="optimize's --sample, if it was given one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    import spacy

    from spacy_w2ner.nn.int8 import cpu_features
    from spacy_w2ner.release.measure import agreement, sample_texts

    sample = sample_texts(spacy.load(args.float32), args.float32, args.sample)
    runs: Dict[str, list] = {"float32": [], "int8": []}
    with tempfile.TemporaryDirectory() as work:
        texts = Path(work) / "texts.json"
        texts.write_text(json.dumps(sample.texts), encoding="utf8")
        for round_ in range(args.rounds):
            order = ["float32", "int8"] if round_ % 2 == 0 else ["int8", "float32"]
            for name in order:
                runs[name].append(run_case(getattr(args, name), texts))
                print(name, round(runs[name][-1]["seconds"], 2), file=sys.stderr)
    best = {name: min(run["seconds"] for run in results) for name, results in runs.items()}
    as_sets = {name: [{(label, tuple(tokens)) for label, tokens in doc} for doc in results[0]["entities"]]
               for name, results in runs.items()}  # fmt: skip
    report = {"float32": str(args.float32), "int8": str(args.int8), "sample": sample.source, "documents": len(sample.texts),
              "threads": runs["float32"][0]["threads"], "rounds": args.rounds, "cpu": cpu_features(),
              "seconds": {name: [round(run["seconds"], 3) for run in results] for name, results in runs.items()},
              "int8_vs_float32_speed": round(best["float32"] / best["int8"], 3),
              "int8_vs_float32_entities": agreement(as_sets["float32"], as_sets["int8"]),
              "optimize_measured": spacy.load(args.int8).meta["spacy_w2ner"]["optimized"]}  # fmt: skip
    text = json.dumps(report, indent=2) + "\n"
    if args.output:
        args.output.write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
