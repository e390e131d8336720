"""Train a recipe with several seeds, evaluate each on test, and write the mean and spread.

    python scripts/seeds.py NAME --seeds 1 2 3 --test TEST.spacy [--score w2ner_f] \\
        -- python -m spacy train CONFIG --paths.train T.spacy --paths.dev D.spacy [...]

Each seed trains with ``--system.seed SEED --output RUNS/NAME-seedSEED`` added to the command
(RUNS: ``--runs-dir``, default training/seeds), then ``spacy evaluate`` scores its model-best
(selected on dev) on the test set: ``project/results/NAME-seedSEED.json`` holds those scores with
the seed, the command, the device, the machine (``machine``: CPU, its flags, threads) and the
training time; where the pipeline's encoder is a folder that ``adapt-encoder`` wrote, ``encoder``
holds that adaptation's command, steps and final held-out loss and the SHA-256 of its weights
(``encoder_record``), so a seed names the encoder it started from on any machine. A command
``python -m spacy_w2ner train`` gets ``--resume`` too: a seed that was interrupted continues from its newest checkpoint,
one that finished training is only evaluated, and the JSON says the run's steps, training
seconds (over all its sessions) and how many times it was resumed. A training command stopped
by a signal stops this script with its exit code (run it again to continue). ``project/results/NAME-seeds.json`` holds the mean, standard deviation, minimum
and maximum of the main score and its P/R (and discontinuous/overlapping F where there are
any) over the seeds that are there, so a figure in the README is a mean with its spread.
A seed whose JSON exists is not trained again (``--force`` retrains).
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "project" / "results"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, usage="%(prog)s NAME [options] -- COMMAND"
    )
    parser.add_argument("name", help="results are project/results/NAME-seedN.json and NAME-seeds.json")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--test", required=True, help="the test set (.spacy)")
    parser.add_argument("--score", default="w2ner_f", help="the main score's key in spacy evaluate's JSON")
    parser.add_argument("--gpu-id", type=int, default=-1)
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "training" / "seeds", help="where the seeds' runs go")
    parser.add_argument("--force", action="store_true")
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("give the training command after --")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    for seed in args.seeds:
        path = RESULTS / f"{args.name}-seed{seed}.json"
        if path.exists() and not args.force:
            print(f"{path.relative_to(ROOT)} is there; --force trains seed {seed} again", flush=True)
            continue
        train_and_evaluate(args, command, seed, path)
    summary = summarize(args.name, args.score)
    print(json.dumps(summary, indent=1))
    plot_accuracy()


def plot_accuracy() -> None:
    """project/results/accuracy-by-seed.png from the summaries just written (bench/plots.py)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from plots import plot_after_run

    plot_after_run("accuracy", results=RESULTS)


def train_and_evaluate(args, command, seed: int, path: Path) -> None:
    output = args.runs_dir.expanduser() / f"{args.name}-seed{seed}"
    resumable = command[1:4] == ["-m", "spacy_w2ner", "train"]
    train = command + ["--system.seed", str(seed), "--output", str(output), "--gpu-id", str(args.gpu_id)]
    train += ["--resume"] if resumable else []
    print(f"== seed {seed}: {' '.join(train)}", flush=True)
    start = time.perf_counter()
    finished = subprocess.run(train)
    if finished.returncode != 0:
        sys.exit(finished.returncode)
    seconds = time.perf_counter() - start
    scores = path.with_suffix(".evaluate.json")
    subprocess.run(
        [sys.executable, "-m", "spacy", "evaluate", str(output / "model-best"), args.test,
         "--output", str(scores), "--gpu-id", str(args.gpu_id)],
        check=True,
    )  # fmt: skip
    result = json.loads(scores.read_text(encoding="utf8"))
    scores.unlink()
    meta = json.loads((output / "model-best" / "meta.json").read_text(encoding="utf8"))
    result.update(
        seed=seed,
        score_key=args.score,
        dev_score=meta.get("performance", {}).get(args.score),
        train_seconds=round(seconds, 1),
        command=" ".join(train),
        test_set=args.test,
        device="cpu" if args.gpu_id < 0 else f"cuda:{args.gpu_id}",
        machine=machine(),
    )
    encoder = encoder_record(output / "model-best")
    if encoder is not None:
        result.update(encoder=encoder)
    if resumable:
        from spacy_w2ner.training.run import RunDirectory

        run = RunDirectory(output).record
        result.update(train_seconds=run["seconds"], steps=run["steps"], resumes=run["resumes"], best_step=run["best_step"])
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf8")


def machine() -> dict:
    """The CPU the seed ran on (its model name and its bfloat16 and AVX-512 flags) and the torch
    threads it was given (OMP_NUM_THREADS): what a seed's time and speed depend on."""
    import os

    from spacy_w2ner.nn.cpu import cpu_flags, cpu_model

    flags = cpu_flags()
    return {"cpu": cpu_model(), "flags": [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16") if f in flags],
            "threads": os.environ.get("OMP_NUM_THREADS")}  # fmt: skip


def encoder_record(pipeline: Path) -> Optional[dict]:
    """The adapted encoder a pipeline's transformer started from (None for an encoder by name, by a
    registered function such as the recipes' ``spacy_w2ner.encoder_path.v1``, or in a folder
    ``adapt-encoder`` did not write): its folder, the adaptation's command, whether it
    finished, its steps and last held-out MLM loss (its ``adapt.json``), and each weights file's
    SHA-256."""
    from thinc.api import Config

    from spacy_w2ner.files import sha256_file
    from spacy_w2ner.training.adapt.directory import RECORD

    config = Config().from_disk(pipeline / "config.cfg", interpolate=False)
    name = config.get("components", {}).get("transformer", {}).get("model", {}).get("name")
    folder = Path(name).expanduser() if isinstance(name, str) else None
    if folder is None or not (folder / RECORD).is_file():
        return None
    adaptation = json.loads((folder / RECORD).read_text(encoding="utf8"))
    evaluations = adaptation.get("evaluations") or [{}]
    weights = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())
    return {"path": str(name), "command": adaptation.get("command"), "finished": adaptation.get("finished"),
            "steps": adaptation.get("steps"), "held_out_loss": evaluations[-1].get("held_out_loss"),
            "sha256": {p.name: sha256_file(p) for p in weights}}  # fmt: skip


def seed_results(name: str) -> list[Path]:
    """NAME-seedN.json for every seed there, by seed (never NAME-seeds.json, the summary itself)."""
    seed_file = re.compile(re.escape(name) + r"-seed(\d+)\.json")
    by_seed = {}
    for path in RESULTS.glob(f"{name}-seed*.json"):
        match = seed_file.fullmatch(path.name)
        if match:
            by_seed[int(match.group(1))] = path
    return [by_seed[seed] for seed in sorted(by_seed)]


def summarize(name: str, score: str) -> dict:
    runs = [json.loads(p.read_text(encoding="utf8")) for p in seed_results(name)]
    prefix = score[: -len("_f")] if score.endswith("_f") else score
    keys = [score, f"{prefix}_p", f"{prefix}_r", f"{prefix}_discontinuous_f", f"{prefix}_overlapping_f"]
    summary = {"name": name, "score": score, "seeds": [run["seed"] for run in runs]}
    for key in keys:
        values = [100 * run[key] for run in runs if isinstance(run.get(key), (int, float))]
        if values:
            summary[key] = {
                "mean": round(statistics.mean(values), 2),
                "std": round(statistics.stdev(values), 2) if len(values) > 1 else 0.0,
                "min": round(min(values), 2),
                "max": round(max(values), 2),
                "per_seed": [round(v, 2) for v in values],
            }
    summary["train_seconds_mean"] = round(statistics.mean(run["train_seconds"] for run in runs), 1) if runs else None
    (RESULTS / f"{name}-seeds.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf8")
    return summary


if __name__ == "__main__":
    main()
