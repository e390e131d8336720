"""Issue 73's trials at base size, run as the rule in project/results/README.md ("CADEC at base
size") says, from a fresh machine or from where an earlier run of this script stopped.

    python scripts/cadec_base_trials.py [--runs ~/w2ner-runs] [--plan]
    # in the background:  setsid nohup python scripts/cadec_base_trials.py >> ~/w2ner-runs/trials.log 2>&1 &

Every step is skipped when its output is there and resumes from its newest checkpoint when it
is not, so the script is run again after any stop: CADEC converted (``RUNS/cadec``), MPNet
fetched, then the dev-only runs in the rule's order (on a machine where lever 1's encoder,
``RUNS/encoders/mpnet-cadec``, has not been adapted yet, the runs that do not need it first; it is
adapted, 1.5-2 hours, before the first that does), each a ``scripts/seeds.py`` seed scored on dev
(``project/results/cadec-w2ner-mpnet-SETTING-dev-seedN.json``) with its dev curve (``...-dev.json``
beside it), then the Choice: the setting with the highest mean dev F of those with three seeds
(the recipe's float32 seeds included) is tested once, seed by seed with lever 3's second row, and lever 4's
ensemble (a recipe that wins trains its seeds again for them: its float32 runs are gone; a seed whose
model went with an earlier machine trains again as the ensemble's member), with the model card
of the seed best on dev of those whose model is on this machine
(``project/results/cadec-w2ner-mpnet-SETTING-model-card.md``) before it. ``--plan`` prints what would run next and
the rule's decisions so far, and runs nothing. Needs the README's setup (``scripts/install.sh``
in a virtual environment) and ``../shared/corpora/cadec``.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "project" / "results"
CADEC = ROOT.parent / "shared" / "corpora" / "cadec" / "w2ner-json"
ENCODER = "all-mpnet-base-v2"
# The baseline of every comparison: the recipe's seed 1 with the encoder trained in bfloat16.
BASELINE = RESULTS / "cadec-w2ner-mpnet-bf16-seed1-dev.json"
RECIPE_SEEDS = [RESULTS / f"cadec-w2ner-mpnet-seed{seed}.json" for seed in (1, 2, 3)]
DISCONTINUOUS_MARGIN = 5.0
# The Report's model card sets the chosen seed beside these (the figures, CADEC test).
PUBLISHED = ["TriG-NER (WWW 2025; BioBERT further pre-trained on CADEC's training text)=73.43/48.55",
             "W2NER, the paper (AAAI 2022; BioBERT-base)=73.21"]  # fmt: skip
# Lever 2: 20 epochs of 334 steps, the decay stretched over them, stopped after 4 epochs without a
# better dev F.
LONGER = ["--training.max_epochs", "20", "--training.patience", "1336",
          "--training.optimizer.learn_rate.total_steps", "6680"]  # fmt: skip


def training_dtype() -> str:
    """The rule's bfloat16 (issue 71: it keeps the accuracy) on a CPU with bfloat16 instructions;
    float32 on one without, where bfloat16 passes are emulated (adapt-encoder's head steps on an
    AVX2-only AMD EPYC: 9.0 s each in bfloat16, 1.2 s in float32)."""
    from spacy_w2ner.nn.cpu import bfloat16_is_native

    return "bfloat16" if bfloat16_is_native() else "float32"


def adapted_encoder(runs: Path, dtype: str) -> Path:
    """Lever 1's encoder; one adapted in float32 has a folder of its own (never mixed with the
    bfloat16 one that lever 1's seed 1 trained on)."""
    return runs / "encoders" / ("mpnet-cadec" if dtype == "bfloat16" else f"mpnet-cadec-{dtype}")


def settings(runs: Path, dtype: str) -> dict:
    """Each trial's name and the arguments it adds to the recipe's command."""
    adapted = ["--components.transformer.model.name", str(adapted_encoder(runs, dtype))]
    return {"adapted": adapted, "longer": LONGER, "adapted-longer": adapted + LONGER}


def choices(runs: Path, dtype: str) -> dict:
    """What the Choice compares: the recipe (no arguments added) and the trials."""
    return {"recipe": [], **settings(runs, dtype)}


def recipe_command(runs: Path, extra: List[str], dtype: str) -> List[str]:
    cadec = runs / "cadec"
    return [sys.executable, "-m", "spacy_w2ner", "train", "project/configs/w2ner_mpnet_gpu.cfg",
            "--paths.train", str(cadec / "train.spacy"), "--paths.dev", str(cadec / "dev.spacy"),
            "--training.logger.progress_bar", "false",
            "--components.transformer.model.training_dtype", dtype, *extra, "--keep", "20"]  # fmt: skip


def setting_name(setting: str) -> str:
    """A setting's name: the chosen one's seeds' runs are RUNS/chosen/NAME-seedN, their JSON
    NAME-seedN.json; a dev-only trial's name adds ``-dev`` (``dev_name``)."""
    return f"cadec-w2ner-mpnet-{setting}"


def dev_name(setting: str) -> str:
    """A dev-only trial's name: its seeds' runs are RUNS/screen/NAME-seedN, their JSON NAME-seedN.json."""
    return f"{setting_name(setting)}-dev"


def dev_result(setting: str, seed: int) -> Path:
    return RESULTS / f"{dev_name(setting)}-seed{seed}.json"


def dev_scores(path: Path) -> Optional[dict]:
    """A finished dev-only seed's model-best dev F and discontinuous F, in percent (None before)."""
    if not path.exists():
        return None
    run = json.loads(path.read_text(encoding="utf8"))
    return {"f": round(100 * run["w2ner_f"], 2), "discontinuous_f": round(100 * (run["w2ner_discontinuous_f"] or 0), 2)}


def baseline() -> dict:
    curve = json.loads(BASELINE.read_text(encoding="utf8"))
    best = next(row for row in curve["evaluations"] if row["step"] == curve["best"]["step"])
    return {"f": best["f"], "discontinuous_f": best["discontinuous_f"]}


def goes_on(setting: str) -> Optional[bool]:
    """The rule for seeds 2 and 3: seed 1's dev F not below the baseline's, or its dev
    discontinuous F 5 or more above it (None while seed 1 has not finished)."""
    seed1 = dev_scores(dev_result(setting, 1))
    if seed1 is None:
        return None
    base = baseline()
    return seed1["f"] >= base["f"] or seed1["discontinuous_f"] >= base["discontinuous_f"] + DISCONTINUOUS_MARGIN


def queue() -> List[tuple]:
    """The (setting, seed) runs the rule asks for now, in its order; a decision still open ends it
    where the runs after it depend on it."""
    order: List[tuple] = [("adapted", 1)]
    lever1 = goes_on("adapted")
    if lever1 is None:
        return order
    order += [("adapted", 2), ("adapted", 3)] if lever1 else []
    order.append(("longer", 1))
    if lever1:
        order.append(("adapted-longer", 1))
        # Open, this decision holds back no run of its own: longer's seeds 2-3 may queue behind it.
        order += [("adapted-longer", 2), ("adapted-longer", 3)] if goes_on("adapted-longer") else []
    lever2 = goes_on("longer")
    if lever2 is None:
        return order
    return order + ([("longer", 2), ("longer", 3)] if lever2 else [])


def run(command: List[str]) -> None:
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)


def prepare(runs: Path) -> None:
    """CADEC converted and MPNet fetched."""
    cadec = runs / "cadec"
    for split in ("train", "dev", "test"):
        if not (cadec / f"{split}.spacy").exists():
            run([sys.executable, "-m", "spacy_w2ner", "convert", "w2ner-json", str(CADEC / f"{split}.json"), str(cadec)])
    run([sys.executable, "-m", "spacy_w2ner", "fetch-encoder", ENCODER])


def needs_adapted_encoder(setting: str) -> bool:
    return setting.startswith("adapted")


def encoder_adapted(runs: Path, dtype: str) -> bool:
    """Whether lever 1's encoder has finished adapting (adapt-encoder's record says so)."""
    from spacy_w2ner.training.adapt.directory import adaptation_directory

    record = adaptation_directory(adapted_encoder(runs, dtype)).record
    return bool(record and record.get("finished"))


def adapt(runs: Path, dtype: str) -> None:
    """MPNet adapted to CADEC's training text (lever 1's encoder), resumed where it stopped."""
    run([sys.executable, "-m", "spacy_w2ner", "adapt-encoder", ENCODER, str(runs / "cadec" / "train.spacy"),
         "--output", str(adapted_encoder(runs, dtype)), "--resume", "--training-dtype", dtype])  # fmt: skip


def next_pending(runs: Path, dtype: str, done: set) -> Optional[tuple]:
    """The run to train next (None: the Choice is next)."""
    pending = [job for job in queue() if job not in done and not finished(*job)]
    return next_run(pending, encoder_adapted(runs, dtype)) if pending else None


def next_run(pending: List[tuple], adapted: bool) -> tuple:
    """The first pending run; while lever 1's encoder is not adapted (a fresh machine: 1.5-2 hours),
    the first that does not need it. The order of the runs changes none of the rule's decisions."""
    if not adapted:
        ready = [job for job in pending if not needs_adapted_encoder(job[0])]
        if ready:
            return ready[0]
    return pending[0]


def dev_curve(setting: str, seed: int) -> Path:
    return RESULTS / f"{dev_name(setting)}-seed{seed}-dev.json"


def finished(setting: str, seed: int) -> bool:
    """A dev-only seed scored on dev, with its dev curve."""
    return dev_result(setting, seed).exists() and dev_curve(setting, seed).exists()


def train_on_dev(runs: Path, setting: str, seed: int, dtype: str) -> None:
    """One dev-only seed (scripts/seeds.py scores its model-best on dev) and its dev curve."""
    name = dev_name(setting)
    run([sys.executable, "scripts/seeds.py", name, "--seeds", str(seed), "--test", str(runs / "cadec" / "dev.spacy"),
         "--runs-dir", str(runs / "screen"), "--", *recipe_command(runs, settings(runs, dtype)[setting], dtype)])  # fmt: skip
    curve = dev_curve(setting, seed)
    if not curve.exists():
        command = json.loads(dev_result(setting, seed).read_text(encoding="utf8"))["command"]
        run([sys.executable, "scripts/dev_curve.py", str(runs / "screen" / f"{name}-seed{seed}"),
             "--output", str(curve), "--command", command])  # fmt: skip


def train_the_queue(runs: Path, dtype: str) -> None:
    """Every run the rule asks for, lever 1's encoder adapted before the first that needs it."""
    done: set = set()
    while True:
        job = next_pending(runs, dtype, done)
        if job is None:
            return
        setting, seed = job
        if needs_adapted_encoder(setting) and not encoder_adapted(runs, dtype):
            adapt(runs, dtype)
        train_on_dev(runs, setting, seed, dtype)
        done.add(job)


def mean_dev_f(setting: str) -> Optional[float]:
    """The mean model-best dev F of a setting's three seeds (None before all three finished)."""
    if setting == "recipe":
        scores = [100 * json.loads(p.read_text(encoding="utf8"))["dev_score"] for p in RECIPE_SEEDS]
    else:
        found = [dev_scores(dev_result(setting, seed)) for seed in (1, 2, 3)]
        if None in found:
            return None
        scores = [s["f"] for s in found]
    return round(statistics.mean(scores), 2)


def choose(runs: Path, dtype: str) -> str:
    """The Choice, once every run the rule asks for has finished: the highest mean dev F of the
    settings with three seeds; a trial that wins is tested once on its finished runs. The
    recipe's float32 seeds, tested long ago, left no runs behind, so a recipe that wins trains
    its three seeds again as the trials train (``cadec-w2ner-mpnet-recipe-seedN``) for lever 3's
    second row and lever 4's ensemble."""
    means = {s: mean_dev_f(s) for s in choices(runs, dtype)}
    means = {s: f for s, f in means.items() if f is not None}
    chosen = max(means, key=means.get)
    print(f"mean dev F of the settings with three seeds: {means}; chosen: {chosen}", flush=True)
    for seed in (1, 2, 3):
        evaluate_chosen_seed(runs, chosen, seed, dtype)
    model_card(runs, chosen)  # before the ensemble, whose members may train again for hours
    ensemble(runs, chosen, dtype)
    return chosen


def ensemble(runs: Path, chosen: str, dtype: str) -> None:
    """Lever 4: the chosen seeds' ensemble on dev, and on test only if it beats their mean dev F
    (each skipped where its JSON is here)."""
    ensemble_dev, ensemble_test = (RESULTS / f"{setting_name(chosen)}-ensemble{part}.json" for part in ("-dev", ""))

    def members() -> List[str]:
        return [str(ensemble_member(runs, chosen, seed, dtype)) for seed in (1, 2, 3)]

    if not ensemble_dev.exists():
        run([sys.executable, "scripts/ensemble.py", *members(), "--corpus", str(runs / "cadec" / "dev.spacy"), "--output", str(ensemble_dev)])
    scores = json.loads(ensemble_dev.read_text(encoding="utf8"))
    if scores["ensemble"]["f"] > statistics.mean(model["scores"]["f"] for model in scores["models"]) and not ensemble_test.exists():
        run([sys.executable, "scripts/ensemble.py", *members(), "--corpus", str(runs / "cadec" / "test.spacy"),
             "--output", str(ensemble_test)])  # fmt: skip


def model_card(runs: Path, chosen: str) -> None:
    """The Report's model card (``RESULTS/NAME-model-card.md``): of the chosen setting's seeds
    whose tested model is on this machine, the one with the best dev F (a model that went with
    an earlier machine cannot be packaged: which seed the card is and why is said), its test
    scores beside its seeds' mean and spread and the published figures, as ``spacy project run
    package`` puts the card in a wheel (CADEC's licence keeps that wheel here)."""
    name = setting_name(chosen)
    card = RESULTS / f"{name}-model-card.md"
    if card.exists():
        return
    tested = {seed: RESULTS / f"{name}-seed{seed}.json" for seed in (1, 2, 3)}
    dev = {seed: json.loads(path.read_text(encoding="utf8"))["dev_score"] for seed, path in tested.items()}
    here = [seed for seed in tested if (chosen_run(runs, chosen, seed) / "model-best").exists()]
    if not here:
        print(f"no {card.name}: every seed's tested model went with the machine that tested it", flush=True)
        return
    best, best_of_all = max(here, key=dev.get), max(dev, key=dev.get)
    if best != best_of_all:
        print(f"{card.name} is seed {best}'s, the best on dev of the tested models on this machine: seed "
              f"{best_of_all}'s (the best on dev) went with the machine that tested it", flush=True)  # fmt: skip
    model = chosen_run(runs, chosen, best) / "model-best"
    published = [argument for figure in PUBLISHED for argument in ("--published", figure)]
    run([sys.executable, "-m", "spacy_w2ner", "model-card", str(model), str(tested[best]), "--train", str(runs / "cadec" / "train.spacy"),
         "--evaluated-on", "CADEC test", "--name", "cadec_w2ner_mpnet", "--version", "0.1.0",
         "--seeds", str(RESULTS / f"{name}-seeds.json"), *published])  # fmt: skip
    shutil.copyfile(model / "README.md", card)


def chosen_run(runs: Path, chosen: str, seed: int) -> Path:
    return runs / "chosen" / f"{setting_name(chosen)}-seed{seed}"


def evaluate_chosen_seed(runs: Path, chosen: str, seed: int, dtype: str) -> None:
    """One seed of the chosen setting tested once (a seed whose JSON is here is not trained again),
    then lever 3's second row from its checkpoints: seed by seed, so a machine that goes takes one
    seed's work with it at most."""
    link, screened = chosen_run(runs, chosen, seed), runs / "screen" / f"{dev_name(chosen)}-seed{seed}"
    link.parent.mkdir(parents=True, exist_ok=True)
    # A screened run is tested where it is; one lost with an earlier machine trains again
    # (seeds.py records its own dev F beside the screened one's).
    if not link.exists() and not link.is_symlink() and (screened / "run.json").exists():
        link.symlink_to(screened)
    test = str(runs / "cadec" / "test.spacy")
    run([sys.executable, "scripts/seeds.py", setting_name(chosen), "--seeds", str(seed), "--test", test,
         "--runs-dir", str(link.parent), "--", *recipe_command(runs, choices(runs, dtype)[chosen], dtype)])  # fmt: skip
    lever_3 = RESULTS / f"{setting_name(chosen)}-seed{seed}-dev.json"
    if lever_3.exists():
        return
    if not (link / "run.json").exists():  # tested, then its machine went
        print(f"no {lever_3.name}: seed {seed}'s checkpoints went with the machine that tested it", flush=True)
    else:
        run([sys.executable, "scripts/dev_curve.py", str(link), "--output", str(lever_3), "--test", test,
             "--choose-by", "discontinuous_f"])  # fmt: skip


def ensemble_member(runs: Path, chosen: str, seed: int, dtype: str) -> Path:
    """Seed N's model in lever 4's ensemble, which needs the three on one machine: the tested one
    while this machine holds it; else the same command and seed trained again, once, in
    RUNS/chosen/members (resumed where it stopped; scored alone in the ensemble's JSON)."""
    tested = chosen_run(runs, chosen, seed) / "model-best"
    if tested.exists():
        return tested
    member = runs / "chosen" / "members" / chosen_run(runs, chosen, seed).name
    run([*recipe_command(runs, choices(runs, dtype)[chosen], dtype), "--system.seed", str(seed),
         "--output", str(member), "--gpu-id", "-1", "--resume"])  # fmt: skip
    return member / "model-best"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=Path.home() / "w2ner-runs", help="where the corpus, encoders and runs go")
    parser.add_argument("--training-dtype", choices=["bfloat16", "float32"], help="default: bfloat16 where the CPU has the instructions, else float32")
    parser.add_argument("--plan", action="store_true", help="print the rule's decisions and what runs next; run nothing")
    args = parser.parse_args()
    runs = args.runs.expanduser()
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    dtype = args.training_dtype or training_dtype()
    if args.plan:
        print(json.dumps({"training_dtype": dtype, "baseline": baseline(), "seeds 2-3": {s: goes_on(s) for s in settings(runs, dtype)},
                          "mean dev F of three seeds": {s: mean_dev_f(s) for s in choices(runs, dtype)},
                          "queue": [(s, n, dev_result(s, n).exists()) for s, n in queue()],
                          "lever 1's encoder adapted": encoder_adapted(runs, dtype), "next": next_pending(runs, dtype, set())}, indent=1))  # fmt: skip
        return
    from spacy_w2ner.nn.cpu import cpu_model

    print(f"issue 73's trials on {cpu_model()}, {os.environ['OMP_NUM_THREADS']} threads, training in {dtype}", flush=True)
    prepare(runs)
    train_the_queue(runs, dtype)
    choose(runs, dtype)


if __name__ == "__main__":
    main()
