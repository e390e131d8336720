"""scripts/seeds.py's summary: the mean and spread over the seeds' result files, reproducible from them."""
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "seeds.py"
spec = importlib.util.spec_from_file_location("seeds", SCRIPT)
seeds = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seeds)


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(seeds, "RESULTS", tmp_path)
    for seed, f in [(1, 0.70), (2, 0.72), (10, 0.74)]:
        run = {"seed": seed, "w2ner_f": f, "w2ner_p": f + 0.01, "w2ner_r": f - 0.01, "train_seconds": 100.0 * seed}
        (tmp_path / f"recipe-seed{seed}.json").write_text(json.dumps(run), encoding="utf8")
    # Another recipe whose name starts with this one's, and a dev-only trial: neither is a seed of "recipe".
    (tmp_path / "recipe-big-seed1.json").write_text(json.dumps({"seed": 1, "w2ner_f": 0.1, "train_seconds": 1}))
    (tmp_path / "recipe-seed1-dev.json").write_text(json.dumps({"rows": []}))
    return tmp_path


def test_summary_is_over_this_recipes_seeds_in_seed_order(results):
    summary = seeds.summarize("recipe", "w2ner_f")
    assert summary["seeds"] == [1, 2, 10]
    assert summary["w2ner_f"]["per_seed"] == [70.0, 72.0, 74.0]
    assert summary["w2ner_f"]["mean"] == 72.0 and summary["w2ner_f"]["std"] == 2.0
    assert summary["w2ner_p"]["mean"] == 73.0
    assert summary["train_seconds_mean"] == pytest.approx(433.3)
    assert json.loads((results / "recipe-seeds.json").read_text(encoding="utf8")) == summary


def test_summarizing_again_reads_the_seeds_not_the_summary_it_wrote(results):
    first = seeds.summarize("recipe", "w2ner_f")
    assert (results / "recipe-seeds.json").exists()
    assert seeds.summarize("recipe", "w2ner_f") == first


def test_the_committed_mpnet_summary_is_reproduced_from_its_seed_files(tmp_path, monkeypatch):
    committed = Path(__file__).resolve().parents[2] / "project" / "results"
    for path in committed.glob("cadec-w2ner-mpnet-seed*.json"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    monkeypatch.setattr(seeds, "RESULTS", tmp_path)
    expected = json.loads((committed / "cadec-w2ner-mpnet-seeds.json").read_text(encoding="utf8"))
    assert seeds.summarize("cadec-w2ner-mpnet", "w2ner_f") == expected
