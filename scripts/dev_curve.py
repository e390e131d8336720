"""A training run's dev scores, one row per evaluation, as JSON: what a dev-only run is judged on.

    python scripts/dev_curve.py RUN_DIR --output project/results/NAME-dev.json \\
        [--raw DEV.spacy] [--command "python -m spacy_w2ner train ..."]

The rows are the training loop's own evaluations (the newest checkpoint's ``trainer.json``; the
final step's from model-last's meta where the loop evaluated it after the last checkpoint), so
the file repeats what the run's log printed. With ``--raw DEV.spacy`` each checkpoint kept in
``RUN_DIR/checkpoints`` has its model evaluated on DEV as well: a checkpoint holds the weights
themselves, and where the run used ``use_averages`` the loop evaluated the optimizer's moving
averages instead, so ``raw`` is the same run without averaging, step for step (a paired
comparison; train with ``--keep`` above the number of evaluations to keep every checkpoint).
"""
import argparse
import json
from pathlib import Path
from typing import Dict, List, Optional

TRAINER_STATE = "trainer.json"
SCORES = {"f": "w2ner_f", "p": "w2ner_p", "r": "w2ner_r",
          "discontinuous_f": "w2ner_discontinuous_f", "overlapping_f": "w2ner_overlapping_f"}  # fmt: skip


def percentages(scores: dict) -> Dict[str, Optional[float]]:
    """The entity scores of a spaCy score dict, in percent."""
    return {name: None if scores.get(key) is None else round(100 * scores[key], 2) for name, key in SCORES.items()}


def checkpoint_dirs(run_dir: Path) -> List[Path]:
    """The run's checkpoints, oldest first."""
    return sorted((run_dir / "checkpoints").glob("step-*"), key=lambda path: int(path.name.split("-")[1]))


def logged_evaluations(run_dir: Path) -> List[dict]:
    """``{"step", scores...}`` for each evaluation the loop made, the step-0 one left out."""
    checkpoints = checkpoint_dirs(run_dir)
    if not checkpoints:
        raise SystemExit(f"{run_dir} has no checkpoints: is it a `python -m spacy_w2ner train` run?")
    trainer = json.loads((checkpoints[-1] / TRAINER_STATE).read_text(encoding="utf8"))
    rows = [dict(step=step, **percentages(scores)) for _, step, scores in trainer["evaluations"] if step > 0]
    last = run_dir / "model-last" / "meta.json"
    record = json.loads((run_dir / "run.json").read_text(encoding="utf8"))
    if record.get("finished") and last.exists() and record["steps"] - 1 > rows[-1]["step"]:
        rows.append(dict(step=record["steps"] - 1, **percentages(json.loads(last.read_text(encoding="utf8"))["performance"])))
    return rows


def raw_scores(run_dir: Path, dev: Path) -> Dict[int, dict]:
    """Each kept checkpoint's own weights scored on ``dev``, keyed by the evaluation's step (a
    checkpoint is named after the steps done, one more than the step its evaluation logs)."""
    import spacy
    from spacy.training import Corpus

    scores = {}
    for checkpoint in checkpoint_dirs(run_dir):
        step = int(checkpoint.name.split("-")[1]) - 1
        if step <= 0:
            continue
        nlp = spacy.load(checkpoint / "model")
        scores[step] = percentages(nlp.evaluate(Corpus(str(dev))(nlp)))
        print(f"{checkpoint.name}: raw F {scores[step]['f']}", flush=True)
    return scores


def cpu_name() -> str:
    """The CPU's model name (these runs' figures compare only on one machine)."""
    for line in Path("/proc/cpuinfo").read_text(encoding="utf8").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def curve(run_dir: Path, dev: Optional[Path], command: str) -> dict:
    record = json.loads((run_dir / "run.json").read_text(encoding="utf8"))
    rows = logged_evaluations(run_dir)
    if dev is not None:
        raw = raw_scores(run_dir, dev)
        for row in rows:
            row["raw"] = raw.get(row["step"])
    best = max(rows, key=lambda row: (row["f"], row["step"]))
    return {
        "run": str(run_dir), "command": command, "device": "cpu", "machine": cpu_name(),
        "uses_averages": "use_averages = true" in record["config"],
        "finished": bool(record.get("finished")), "steps": record.get("steps"), "train_seconds": record.get("seconds"),
        "resumes": record.get("resumes"), "best": {"step": best["step"], "f": best["f"]}, "evaluations": rows,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--raw", type=Path, help="the dev set (.spacy): evaluate each checkpoint's own weights on it")
    parser.add_argument("--command", default="", help="the training command, recorded as given")
    args = parser.parse_args()
    result = curve(args.run_dir.expanduser(), args.raw, args.command)
    args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf8")
    print(json.dumps({key: result[key] for key in ("best", "steps", "train_seconds")}))


if __name__ == "__main__":
    main()
