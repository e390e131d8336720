"""An ensemble of trained w2ner pipelines scored on a corpus: each pipeline's relation
probabilities on every segment grid, averaged over the pipelines, then decoded once as the first
pipeline's w2ner component decodes (arg-max, every path): issue 73's lever 4 (the seeds of one
setting, whose disagreements sit at entity boundaries).

    python scripts/ensemble.py RUN1/model-best RUN2/model-best RUN3/model-best \\
        --corpus ~/w2ner-runs/cadec/test.spacy --output project/results/NAME-ensemble.json

The JSON has the ensemble's P/R/F, discontinuous and overlapping F, each pipeline's alone (the
same decoding) with its training record where its run folder has one (steps, seconds, resumes,
best step), what the ensemble costs (each pipeline's seconds for the corpus's grids: the ensemble
pays their sum, plus the averaging and one decoding), and the machine and code it ran on. The
pipelines must cut the corpus into the same segments (the same sentence and window settings); they
may differ in anything else.
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence

import numpy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", type=Path, help="the pipelines (two or more)")
    parser.add_argument("--corpus", type=Path, required=True, help="a .spacy corpus with gold entities")
    parser.add_argument("--output", type=Path, required=True, help="the JSON to write")
    args = parser.parse_args()
    if len(args.models) < 2:
        parser.error("an ensemble takes two pipelines or more")
    from seeds import machine

    result = {"command": "python " + " ".join(sys.argv), "machine": machine(), "code": code_version(),
              **ensemble([m.expanduser() for m in args.models], args.corpus.expanduser())}  # fmt: skip
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf8")
    print(json.dumps({"ensemble": result["ensemble"], "alone": [m["scores"]["f"] for m in result["models"]]}))


def ensemble(models: Sequence[Path], corpus: Path) -> dict:
    """The ensemble's scores and each pipeline's (see the module docstring)."""
    import spacy
    from spacy.tokens import DocBin

    from spacy_w2ner.component import first_w2ner
    from spacy_w2ner.release.decoding import DecodingSetting, dev_probabilities, score_setting, words_only

    pipelines = [spacy.load(model) for model in models]
    gold = list(DocBin().from_disk(corpus).get_docs(pipelines[0].vocab))
    grids, rows = [], []
    for model, nlp in zip(models, pipelines):
        started = time.perf_counter()
        grids.append(dev_probabilities(nlp, words_only(nlp, gold)))
        rows.append({"model": str(model), "grid_seconds": round(time.perf_counter() - started, 4), "training": training_record(model)})
    check_same_segments(models, grids)
    averaged = [(segment, numpy.mean([model_grids[k][1] for model_grids in grids], axis=0)) for k, (segment, _) in enumerate(grids[0])]
    _, pipe = first_w2ner(pipelines[0])
    words = words_only(pipelines[0], gold)

    def scores(probabilities) -> dict:
        figures = score_setting(pipe, words, gold, probabilities, DecodingSetting())
        return {name: getattr(figures, name) for name in ("p", "r", "f", "discontinuous_f", "overlapping_f")}

    for row, model_grids in zip(rows, grids):
        row["scores"] = scores(model_grids)
    return {"corpus": str(corpus), "documents": len(gold), "ensemble": scores(averaged), "models": rows,
            "grid_seconds": round(sum(row["grid_seconds"] for row in rows), 4)}  # fmt: skip


def training_record(model: Path) -> Optional[dict]:
    """How the pipeline in RUN/model-best trained, from RUN's record (``spacy_w2ner train``'s
    ``RunDirectory``; None without one): its steps, seconds, resumes and best step and dev score."""
    from spacy_w2ner.training.run import RunDirectory

    run = RunDirectory(model.parent).record
    return None if run is None else {key: run.get(key) for key in ("finished", "steps", "seconds", "resumes", "best_step", "best_score")}


def code_version() -> str:
    """The commit the script ran from, ``-dirty`` when the tree had changes (``git describe``)."""
    return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def check_same_segments(models: Sequence[Path], grids: List[list]) -> None:
    """SystemExit naming the first pipeline that cut the corpus into other segments than the first."""
    first = [(segment.doc_index, segment.start, segment.end) for segment, _ in grids[0]]
    for model, model_grids in zip(models[1:], grids[1:]):
        if [(segment.doc_index, segment.start, segment.end) for segment, _ in model_grids] != first:
            sys.exit(f"{model} cuts the corpus into other segments than {models[0]}: an ensemble averages the same grids")


if __name__ == "__main__":
    main()
