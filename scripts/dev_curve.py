"""A training run's dev scores, one row per evaluation, as JSON: what a dev-only run is judged on.

    python scripts/dev_curve.py RUN_DIR --output project/results/NAME-dev.json \\
        [--rescore DEV.spacy] [--command "python -m spacy_w2ner train ..."]

The rows are the training loop's own evaluations (the newest checkpoint's ``trainer.json``; the
final step's from model-last's meta where the loop evaluated it after the last checkpoint), so
the file repeats what the run's log printed. With ``--rescore DEV.spacy`` each checkpoint kept in
``RUN_DIR/checkpoints`` is scored on DEV as well (``rescored``): ``raw`` with the weights it
holds, and, where the run used ``use_averages``, ``averaged`` with its optimizer's moving
averages, as the loop evaluates such a run: the same run with and without averaging, step for
step (a paired comparison; train with ``--keep`` above the number of evaluations to keep every
checkpoint). Run again on a run still training, it scores only the checkpoints OUTPUT has no
scores for yet.
"""
import argparse
import json
from pathlib import Path
from typing import Dict, List, Optional

from spacy_w2ner.nn.int8 import cpu_features
from spacy_w2ner.training.checkpoints import TRAINER, checkpoints

SCORES = {"f": "w2ner_f", "p": "w2ner_p", "r": "w2ner_r",
          "discontinuous_f": "w2ner_discontinuous_f", "overlapping_f": "w2ner_overlapping_f"}  # fmt: skip


def percentages(scores: dict) -> Dict[str, Optional[float]]:
    """The entity scores of a spaCy score dict, in percent."""
    return {name: None if scores.get(key) is None else round(100 * scores[key], 2) for name, key in SCORES.items()}


def logged_evaluations(run_dir: Path) -> List[dict]:
    """``{"step", scores...}`` for each evaluation the loop made, the step-0 one left out."""
    found = checkpoints(run_dir)
    if not found:
        raise SystemExit(f"{run_dir} has no checkpoints: is it a `python -m spacy_w2ner train` run?")
    trainer = found[0].read_json(TRAINER)
    rows = [dict(step=step, **percentages(scores)) for _, step, scores in trainer["evaluations"] if step > 0]
    last = run_dir / "model-last" / "meta.json"
    record = json.loads((run_dir / "run.json").read_text(encoding="utf8"))
    if record.get("finished") and last.exists() and record["steps"] - 1 > rows[-1]["step"]:
        rows.append(dict(step=record["steps"] - 1, **percentages(json.loads(last.read_text(encoding="utf8"))["performance"])))
    return rows


def rescore(run_dir: Path, dev: Path, known: Dict[int, dict]) -> Dict[int, dict]:
    """Each kept checkpoint scored on ``dev``, keyed by the evaluation's step (a checkpoint is
    named after the steps done, one more than the step its evaluation logs): ``raw``, its own
    weights, and where its optimizer kept moving averages, ``averaged``, with them. The steps in
    ``known`` keep their scores."""
    import spacy
    from spacy.training import Corpus

    from spacy_w2ner.training.state import load_averages

    scores = dict(known)
    for checkpoint in reversed(checkpoints(run_dir)):
        step = checkpoint.step - 1
        if step <= 0 or step in scores:
            continue
        nlp = spacy.load(checkpoint.model)
        examples = list(Corpus(str(dev))(nlp))
        scores[step] = {"raw": percentages(nlp.evaluate(examples))}
        averages = load_averages(nlp, checkpoint.path)
        if averages:
            with nlp.use_params(averages):
                scores[step]["averaged"] = percentages(nlp.evaluate(examples))
        print(checkpoint.path.name, {kind: value["f"] for kind, value in scores[step].items()}, flush=True)
    return scores


def known_scores(output: Path, run_dir: Path) -> Dict[int, dict]:
    """The checkpoints' scores an earlier ``curve`` of the same run wrote to ``output``."""
    if not output.exists():
        return {}
    earlier = json.loads(output.read_text(encoding="utf8"))
    if earlier.get("run") != str(run_dir):
        return {}
    return {row["step"]: row["rescored"] for row in earlier["evaluations"] if row.get("rescored")}


def curve(run_dir: Path, dev: Optional[Path], command: str, known: Optional[Dict[int, dict]] = None) -> dict:
    record = json.loads((run_dir / "run.json").read_text(encoding="utf8"))
    rows = logged_evaluations(run_dir)
    if dev is not None:
        rescored = rescore(run_dir, dev, known or {})
        for row in rows:
            row["rescored"] = rescored.get(row["step"])
    best = max(rows, key=lambda row: (row["f"], row["step"]))
    return {
        "run": str(run_dir), "command": command, "device": "cpu", "machine": cpu_features()["model"],
        "uses_averages": "use_averages = true" in record["config"],
        "finished": bool(record.get("finished")), "steps": record.get("steps"), "train_seconds": record.get("seconds"),
        "resumes": record.get("resumes"), "best": {"step": best["step"], "f": best["f"]}, "evaluations": rows,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--rescore", type=Path, help="the dev set (.spacy): score each checkpoint on it (its weights, its averages)")
    parser.add_argument("--command", default="", help="the training command, recorded as given")
    args = parser.parse_args()
    run_dir = args.run_dir.expanduser()
    result = curve(run_dir, args.rescore, args.command, known_scores(args.output, run_dir))
    args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf8")
    print(json.dumps({key: result[key] for key in ("best", "steps", "train_seconds")}))


if __name__ == "__main__":
    main()
