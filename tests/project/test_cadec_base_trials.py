"""scripts/cadec_base_trials.py: issue 73's queue follows the rule written before the runs."""
import importlib.util
import json
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "cadec_base_trials.py"
spec = importlib.util.spec_from_file_location("cadec_base_trials", SCRIPT)
trials = importlib.util.module_from_spec(spec)
spec.loader.exec_module(trials)


@pytest.fixture
def results(tmp_path, monkeypatch):
    """An empty results folder holding only the baseline's dev curve (dev F 71.47, discontinuous 36.49)."""
    baseline = tmp_path / "baseline-dev.json"
    rows = [{"step": 334, "f": 42.31, "discontinuous_f": 0.0}, {"step": 3006, "f": 71.47, "discontinuous_f": 36.49}]
    baseline.write_text(json.dumps({"best": {"step": 3006, "f": 71.47}, "evaluations": rows}))
    monkeypatch.setattr(trials, "RESULTS", tmp_path)
    monkeypatch.setattr(trials, "BASELINE", baseline)
    recipe = [tmp_path / f"recipe-seed{seed}.json" for seed in (1, 2, 3)]
    for path, dev in zip(recipe, (0.7179, 0.7180, 0.7229)):
        path.write_text(json.dumps({"dev_score": dev}))
    monkeypatch.setattr(trials, "RECIPE_SEEDS", recipe)
    return tmp_path


def finish(setting: str, seed: int, f: float, discontinuous_f: float) -> None:
    trials.dev_result(setting, seed).write_text(json.dumps({"w2ner_f": f / 100, "w2ner_discontinuous_f": discontinuous_f / 100}))


def test_seed_1_of_lever_1_comes_first_and_the_queue_waits_for_its_decision(results):
    assert trials.queue() == [("adapted", 1)]


def test_a_lever_that_goes_on_runs_seeds_2_and_3_before_the_longer_schedule(results):
    finish("adapted", 1, 71.93, 35.76)  # F not below the baseline's: it goes on
    assert trials.queue() == [("adapted", 1), ("adapted", 2), ("adapted", 3), ("longer", 1), ("adapted-longer", 1)]


def test_a_lever_below_the_baseline_stops_unless_its_discontinuous_f_is_5_above(results):
    finish("adapted", 1, 71.40, 41.48)  # 0.07 below, discontinuous 4.99 above: stops
    assert trials.goes_on("adapted") is False
    assert trials.queue() == [("adapted", 1), ("longer", 1)]
    finish("adapted", 1, 71.40, 41.49)  # discontinuous 5 above: goes on
    assert trials.goes_on("adapted") is True


def test_the_longer_schedule_s_seeds_follow_the_same_rule(results):
    finish("adapted", 1, 70.0, 30.0)
    finish("longer", 1, 71.50, 30.0)
    assert trials.queue() == [("adapted", 1), ("longer", 1), ("longer", 2), ("longer", 3)]
    finish("longer", 1, 71.0, 30.0)
    assert trials.queue() == [("adapted", 1), ("longer", 1)]


def test_only_settings_with_three_seeds_are_compared_the_recipe_s_included(results):
    assert trials.mean_dev_f("recipe") == 71.96
    finish("adapted", 1, 71.93, 35.76)
    finish("adapted", 2, 72.20, 40.0)
    assert trials.mean_dev_f("adapted") is None
    finish("adapted", 3, 72.0, 38.0)
    assert trials.mean_dev_f("adapted") == 72.04


def test_the_queue_repeats_lever_1_seed_1_s_recorded_command():
    """Seeds 2 and 3 train what seed 1 trained: the command recorded in its JSON, less the seed,
    output, device and resume arguments seeds.py adds, is the one the script builds."""
    recorded = json.loads((ROOT / "project" / "results" / "cadec-w2ner-mpnet-adapted-dev-seed1.json").read_text())["command"]
    runs = Path("/root/w2ner-runs")
    built = trials.recipe_command(runs, trials.settings(runs, "bfloat16")["adapted"], "bfloat16")[1:]
    assert shlex.split(recorded)[1 : 1 + len(built)] == built


def test_a_float32_encoder_never_takes_the_bfloat16_one_s_folder():
    runs = Path("/runs")
    assert trials.adapted_encoder(runs, "bfloat16") == runs / "encoders" / "mpnet-cadec"
    assert trials.adapted_encoder(runs, "float32") == runs / "encoders" / "mpnet-cadec-float32"
    command = trials.recipe_command(runs, trials.settings(runs, "float32")["adapted-longer"], "float32")
    assert command[command.index("--components.transformer.model.name") + 1] == "/runs/encoders/mpnet-cadec-float32"
    assert command[command.index("--components.transformer.model.training_dtype") + 1] == "float32"


def test_a_recipe_that_wins_the_choice_trains_its_seeds_again_for_levers_3_and_4(results, tmp_path, monkeypatch):
    """The recipe's float32 runs are gone, so the chosen seeds train (nothing screened to link) with
    the recipe's command as the trials run it, then each gets lever 3's row and the three an ensemble."""
    for seed, f in zip((1, 2, 3), (71.93, 71.59, 71.01)):
        finish("adapted", seed, f, 35.0)
    commands = []

    def run(command):
        commands.append(command)
        if "scripts/seeds.py" in command:  # a seed trained and tested on this machine
            seed = int(command[command.index("--seeds") + 1])
            trained = trials.chosen_run(runs, "recipe", seed)
            (trained / "model-best").mkdir(parents=True, exist_ok=True)
            (trained / "run.json").write_text("{}")
            (tmp_path / f"cadec-w2ner-mpnet-recipe-seed{seed}.json").write_text(json.dumps({"dev_score": (0.7137, 0.7201, 0.7150)[seed - 1]}))
        if "scripts/ensemble.py" in command:
            scores = {"ensemble": {"f": 72.0}, "models": [{"scores": {"f": 71.9}}] * 3}
            Path(command[command.index("--output") + 1]).write_text(json.dumps(scores))
        if "model-card" in command:
            (Path(command[command.index("model-card") + 1]) / "README.md").write_text("# the card")

    runs = tmp_path / "runs"
    monkeypatch.setattr(trials, "run", run)
    assert trials.choose(runs, "bfloat16") == "recipe"
    seeds = commands[0]
    assert seeds[1:3] == ["scripts/seeds.py", "cadec-w2ner-mpnet-recipe"]
    training = seeds[seeds.index("--") + 1 :]
    assert training == trials.recipe_command(runs, [], "bfloat16")
    assert not any(path.is_symlink() for path in (runs / "chosen").iterdir())  # none screened: seeds.py trains all three
    curves = [c for c in commands if "scripts/dev_curve.py" in c]
    assert [c[c.index("--choose-by") + 1] for c in curves] == ["discontinuous_f"] * 3
    # Seed by seed: each tested, then its lever 3 row, before the next trains.
    steps = [(c[1], c[c.index("--seeds") + 1] if "--seeds" in c else c[2]) for c in commands[:6]]
    assert steps == [(script, str(where)) for seed in (1, 2, 3)
                     for script, where in (("scripts/seeds.py", seed), ("scripts/dev_curve.py", trials.chosen_run(runs, "recipe", seed)))]  # fmt: skip
    ensembles = [c for c in commands if "scripts/ensemble.py" in c]
    assert [c[c.index("--corpus") + 1] for c in ensembles] == [str(runs / "cadec" / "dev.spacy"), str(runs / "cadec" / "test.spacy")]
    assert ensembles[0][2:5] == [str(trials.chosen_run(runs, "recipe", seed) / "model-best") for seed in (1, 2, 3)]
    # The model card, before the ensemble (whose members may train for hours): seed 2, the best
    # on dev, beside its seeds' summary and the published figures.
    card = commands[6]
    best = trials.chosen_run(runs, "recipe", 2) / "model-best"
    assert card[1:6] == ["-m", "spacy_w2ner", "model-card", str(best), str(tmp_path / "cadec-w2ner-mpnet-recipe-seed2.json")]
    assert card[card.index("--seeds") + 1] == str(tmp_path / "cadec-w2ner-mpnet-recipe-seeds.json")
    assert [card[i + 1] for i, a in enumerate(card) if a == "--published"] == trials.PUBLISHED
    assert (tmp_path / "cadec-w2ner-mpnet-recipe-model-card.md").read_text() == "# the card"
    assert len(commands) == 9  # no member trained again: the tested models are here
    trials.choose(runs, "bfloat16")  # run again: the ensemble and the card are there, so only the seeds' steps run
    assert not any("scripts/ensemble.py" in c or "model-card" in c for c in commands[9:])
    # A stop between the ensemble's dev and test runs: the next run scores test, and only test.
    (tmp_path / "cadec-w2ner-mpnet-recipe-ensemble.json").unlink()
    del commands[:]
    trials.choose(runs, "bfloat16")
    assert [c[c.index("--corpus") + 1] for c in commands if "scripts/ensemble.py" in c] == [str(runs / "cadec" / "test.spacy")]


def test_the_ensemble_trains_again_only_the_seeds_whose_models_went_with_an_earlier_machine(results, tmp_path, monkeypatch, capsys):
    """Seeds 1 and 3 were tested on an earlier machine (their JSON is here, their models are not;
    seed 3's machine went before its lever 3 row, which is said, not crashed on): seed 2 trains and
    is tested here, and the ensemble takes seed 2's tested model beside seeds 1 and 3 trained
    again, with the same command and seed, as members."""
    runs = tmp_path / "runs"
    for seed, dev in ((1, 0.7201), (3, 0.7150)):
        (tmp_path / f"cadec-w2ner-mpnet-recipe-seed{seed}.json").write_text(json.dumps({"dev_score": dev}))
    (tmp_path / "cadec-w2ner-mpnet-recipe-seed1-dev.json").write_text("{}")
    commands = []

    def run(command):
        commands.append(command)
        if "scripts/seeds.py" in command and command[command.index("--seeds") + 1] == "2":
            (trials.chosen_run(runs, "recipe", 2) / "model-best").mkdir(parents=True)
            (trials.chosen_run(runs, "recipe", 2) / "run.json").write_text("{}")
            (tmp_path / "cadec-w2ner-mpnet-recipe-seed2.json").write_text(json.dumps({"dev_score": 0.7137}))
        if "--output" in command and "scripts/ensemble.py" in command:
            scores = {"ensemble": {"f": 71.0}, "models": [{"scores": {"f": 71.9}}] * 3}
            Path(command[command.index("--output") + 1]).write_text(json.dumps(scores))
        if "model-card" in command:
            (Path(command[command.index("model-card") + 1]) / "README.md").write_text("# the card")

    monkeypatch.setattr(trials, "run", run)
    assert trials.choose(runs, "bfloat16") == "recipe"
    curves = [c[2] for c in commands if "scripts/dev_curve.py" in c]
    assert curves == [str(trials.chosen_run(runs, "recipe", 2))]  # seed 1's row is here, seed 3's cannot be
    out = capsys.readouterr().out
    assert "no cadec-w2ner-mpnet-recipe-seed3-dev.json: seed 3's checkpoints went with the machine" in out
    members = [c for c in commands if c[1:4] == ["-m", "spacy_w2ner", "train"]]
    recipe = trials.recipe_command(runs, [], "bfloat16")
    member = runs / "chosen" / "members"
    assert members == [recipe + ["--system.seed", str(seed), "--output", str(member / f"cadec-w2ner-mpnet-recipe-seed{seed}"),
                                 "--gpu-id", "-1", "--resume"] for seed in (1, 3)]  # fmt: skip
    ensemble = next(c for c in commands if "scripts/ensemble.py" in c)
    assert ensemble[2:5] == [str(member / "cadec-w2ner-mpnet-recipe-seed1" / "model-best"),
                             str(trials.chosen_run(runs, "recipe", 2) / "model-best"),
                             str(member / "cadec-w2ner-mpnet-recipe-seed3" / "model-best")]  # fmt: skip
    assert len([c for c in commands if "scripts/ensemble.py" in c]) == 1  # below its seeds' mean on dev: no test
    # Seed 1 is the best on dev, and its tested model went with its machine (a member trained
    # again was not tested): the card is seed 2's, the only tested model here, written before the
    # members train, and that is said.
    cards = [c for c in commands if "model-card" in c]
    assert [c[5] for c in cards] == [str(tmp_path / "cadec-w2ner-mpnet-recipe-seed2.json")]
    assert commands.index(cards[0]) < commands.index(members[0])
    assert ("cadec-w2ner-mpnet-recipe-model-card.md is seed 2's, the best on dev of the tested models on this machine: "
            "seed 1's (the best on dev) went with the machine that tested it") in out  # fmt: skip


def test_no_card_when_every_tested_model_went_with_an_earlier_machine(results, tmp_path, capsys):
    for seed in (1, 2, 3):
        (tmp_path / f"cadec-w2ner-mpnet-recipe-seed{seed}.json").write_text(json.dumps({"dev_score": 0.71}))
    trials.model_card(tmp_path / "runs", "recipe")
    assert "no cadec-w2ner-mpnet-recipe-model-card.md: every seed's tested model went with the machine" in capsys.readouterr().out
    assert not (tmp_path / "cadec-w2ner-mpnet-recipe-model-card.md").exists()


def test_longer_s_seeds_2_and_3_queue_behind_the_open_decision_on_both_levers(results):
    """adapted-longer's decision is open while its seed 1 runs; longer's seeds do not depend on it."""
    finish("adapted", 1, 71.93, 35.76)
    finish("longer", 1, 71.54, 31.21)
    tail = [("longer", 1), ("adapted-longer", 1), ("longer", 2), ("longer", 3)]
    assert trials.queue()[-4:] == tail
    finish("adapted-longer", 1, 71.60, 30.0)  # goes on: its seeds come before longer's
    assert trials.queue()[-5:] == [("adapted-longer", 1), ("adapted-longer", 2), ("adapted-longer", 3), ("longer", 2), ("longer", 3)]


def test_a_machine_without_lever_1_s_encoder_trains_what_does_not_need_it_first(results, tmp_path, monkeypatch):
    """A fresh machine trains longer's seeds before it spends 1.5-2 hours adapting the encoder, then
    adapts it once, before the first run that needs it; finished runs are not trained again."""
    for seed in (1, 2, 3):
        finish("adapted", seed, 71.5, 35.0)
        trials.dev_curve("adapted", seed).write_text("{}")
    finish("longer", 1, 71.54, 31.21)
    trials.dev_curve("longer", 1).write_text("{}")
    runs = tmp_path / "runs"
    order = []

    def adapt(runs_, dtype):
        order.append("adapt")
        encoder = trials.adapted_encoder(runs_, dtype)
        encoder.mkdir(parents=True)
        (encoder / "adapt.json").write_text(json.dumps({"finished": True}))

    def train_on_dev(runs_, setting, seed, dtype):
        order.append((setting, seed))
        finish(setting, seed, 71.0, 30.0)  # below the baseline: adapted-longer stops at seed 1
        trials.dev_curve(setting, seed).write_text("{}")

    monkeypatch.setattr(trials, "adapt", adapt)
    monkeypatch.setattr(trials, "train_on_dev", train_on_dev)
    assert trials.next_pending(runs, "bfloat16", set()) == ("longer", 2)
    trials.train_the_queue(runs, "bfloat16")
    assert order == [("longer", 2), ("longer", 3), "adapt", ("adapted-longer", 1)]
    assert trials.encoder_adapted(runs, "bfloat16")
    assert trials.next_pending(runs, "bfloat16", set()) is None
