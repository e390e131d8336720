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

With ``--test TEST.spacy --choose-by discontinuous_f`` (a row's key) it also scores on TEST the
evaluation best on that dev score (the latest of equal ones, as model-best is chosen): the model
a run whose ``score_weights`` chose by that score would have kept, without a second run (which
evaluation's weights are kept does not change training). Its checkpoint must be there (``--keep``
at least the number of evaluations), or model-last for the final step.
"""
import argparse
import json
from pathlib import Path
from typing import Dict, List, Optional

from spacy_w2ner.nn.cpu import cpu_model
from spacy_w2ner.training.checkpoints import TRAINER, checkpoints
from spacy_w2ner.training.run import RunDirectory

SCORES = {"f": "w2ner_f", "p": "w2ner_p", "r": "w2ner_r",
          "discontinuous_f": "w2ner_discontinuous_f", "overlapping_f": "w2ner_overlapping_f"}  # fmt: skip


def percentages(scores: dict) -> Dict[str, Optional[float]]:
    """The entity scores of a spaCy score dict, in percent."""
    return {name: None if scores.get(key) is None else round(100 * scores[key], 2) for name, key in SCORES.items()}


def run_record(run_dir: Path) -> dict:
    """The run's record (``RunDirectory.record``: its config, steps, seconds, resumes, whether it
    finished); SystemExit where RUN_DIR has none."""
    record = RunDirectory(run_dir).record
    if record is None:
        raise SystemExit(f"{run_dir} has no run record: is it a `python -m spacy_w2ner train` run?")
    return record


def logged_evaluations(run_dir: Path) -> List[dict]:
    """``{"step", scores...}`` for each evaluation the loop made, the step-0 one left out."""
    found = checkpoints(run_dir)
    if not found:
        raise SystemExit(f"{run_dir} has no checkpoints: is it a `python -m spacy_w2ner train` run?")
    trainer = found[0].read_json(TRAINER)
    rows = [dict(step=step, **percentages(scores)) for _, step, scores in trainer["evaluations"] if step > 0]
    last = run_dir / "model-last" / "meta.json"
    record = run_record(run_dir)
    if record.get("finished") and last.exists() and record["steps"] - 1 > rows[-1]["step"]:
        rows.append(dict(step=record["steps"] - 1, **percentages(json.loads(last.read_text(encoding="utf8"))["performance"])))
    return rows


def scored(model: Path, corpus: Path, averages_of: Optional[Path] = None) -> Dict[str, dict]:
    """``raw``: the pipeline at ``model`` scored on ``corpus`` (percentages); ``averaged`` too,
    with the moving averages of the checkpoint at ``averages_of`` where its optimizer kept some."""
    import spacy
    from spacy.training import Corpus

    from spacy_w2ner.training.state import load_averages

    nlp = spacy.load(model)
    examples = list(Corpus(str(corpus))(nlp))
    result = {"raw": percentages(nlp.evaluate(examples))}
    averages = load_averages(nlp, averages_of) if averages_of is not None else None
    if averages:
        with nlp.use_params(averages):
            result["averaged"] = percentages(nlp.evaluate(examples))
    return result


def test_of_best(run_dir: Path, rows: List[dict], by: str, test: Path) -> dict:
    """The evaluation best on the dev score ``by`` (a row's key), scored on ``test`` with the
    weights it was evaluated with; SystemExit where they were not kept."""
    if by not in SCORES:
        raise SystemExit(f"--choose-by must be one of {', '.join(SCORES)}, got {by!r}")
    best = max(rows, key=lambda row: (row[by] if row[by] is not None else -1.0, row["step"]))
    kept = {checkpoint.step - 1: checkpoint for checkpoint in checkpoints(run_dir)}
    record = run_record(run_dir)
    if best["step"] in kept:
        model, averages_of = kept[best["step"]].model, kept[best["step"]].path
    elif best["step"] == record.get("steps", 0) - 1 and (run_dir / "model-last").is_dir():
        model, averages_of = run_dir / "model-last", None  # saved with the averages where the run kept some
    else:
        raise SystemExit(f"{run_dir}: the checkpoint of step {best['step']} (best dev {by}) was not kept: "
                         f"train with --keep at least {len(rows)}, a checkpoint an evaluation")  # fmt: skip
    result = scored(model, test, averages_of)
    uses_averages = "use_averages = true" in record["config"]
    return {"choose_by": by, "step": best["step"], "dev": {name: best[name] for name in SCORES}, "model": str(model),
            "test": result["averaged" if uses_averages and "averaged" in result else "raw"]}  # fmt: skip


def rescore(run_dir: Path, dev: Path, known: Dict[int, dict]) -> Dict[int, dict]:
    """Each kept checkpoint scored on ``dev``, keyed by the evaluation's step (a checkpoint is
    named after the steps done, one more than the step its evaluation logs): ``raw``, its own
    weights, and where its optimizer kept moving averages, ``averaged``, with them. The steps in
    ``known`` keep their scores."""
    scores = dict(known)
    for checkpoint in reversed(checkpoints(run_dir)):
        step = checkpoint.step - 1
        if step <= 0 or step in scores:
            continue
        scores[step] = scored(checkpoint.model, dev, checkpoint.path)
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


def curve(run_dir: Path, dev: Optional[Path], command: str, known: Optional[Dict[int, dict]] = None,
          test: Optional[Path] = None, choose_by: Optional[str] = None) -> dict:  # fmt: skip
    record = run_record(run_dir)
    rows = logged_evaluations(run_dir)
    if dev is not None:
        rescored = rescore(run_dir, dev, known or {})
        for row in rows:
            row["rescored"] = rescored.get(row["step"])
    best = max(rows, key=lambda row: (row["f"], row["step"]))
    chosen = {"chosen": test_of_best(run_dir, rows, choose_by, test)} if test is not None and choose_by else {}
    return {
        "run": str(run_dir), "command": command, "device": "cpu", "machine": cpu_model(),
        "uses_averages": "use_averages = true" in record["config"],
        "finished": bool(record.get("finished")), "steps": record.get("steps"), "train_seconds": record.get("seconds"),
        "resumes": record.get("resumes"), "best": {"step": best["step"], "f": best["f"]}, "evaluations": rows, **chosen,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--rescore", type=Path, help="the dev set (.spacy): score each checkpoint on it (its weights, its averages)")
    parser.add_argument("--command", default="", help="the training command, recorded as given")
    parser.add_argument("--test", type=Path, help="the test set (.spacy): score the evaluation best on --choose-by on it")
    parser.add_argument("--choose-by", choices=list(SCORES), help="the dev score that chooses the evaluation --test scores")
    args = parser.parse_args()
    if (args.test is None) != (args.choose_by is None):
        parser.error("--test and --choose-by go together")
    run_dir = args.run_dir.expanduser()
    result = curve(run_dir, args.rescore, args.command, known_scores(args.output, run_dir), args.test, args.choose_by)
    args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf8")
    print(json.dumps({key: result[key] for key in ("best", "steps", "train_seconds", "chosen") if key in result}))


if __name__ == "__main__":
    main()
