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


def pipeline_starting_from(tmp_path: Path, name: str) -> Path:
    from thinc.api import Config

    pipeline = tmp_path / "model-best"
    pipeline.mkdir()
    config = {"components": {"transformer": {"factory": "transformer", "model": {"@architectures": "spacy-transformers.TransformerModel.v3", "name": name}}}}
    Config(config).to_disk(pipeline / "config.cfg")
    return pipeline


def test_a_seed_names_the_adapted_encoder_it_started_from_by_its_record_and_weights(tmp_path):
    import hashlib

    encoder = tmp_path / "encoders" / "mpnet-cadec"
    encoder.mkdir(parents=True)
    (encoder / "model.safetensors").write_bytes(b"weights")
    (encoder / "vocab.txt").write_text("[PAD]\n", encoding="utf8")
    record = {"command": "python -m spacy_w2ner adapt-encoder ...", "finished": True, "steps": 6888,
              "evaluations": [{"step": 0, "held_out_loss": 12.5}, {"step": 6888, "held_out_loss": 2.41}]}  # fmt: skip
    (encoder / "adapt.json").write_text(json.dumps(record), encoding="utf8")
    found = seeds.encoder_record(pipeline_starting_from(tmp_path, str(encoder)))
    assert found == {"path": str(encoder), "command": record["command"], "finished": True, "steps": 6888,
                     "held_out_loss": 2.41, "sha256": {"model.safetensors": hashlib.sha256(b"weights").hexdigest()}}  # fmt: skip


def test_an_encoder_by_name_or_a_folder_adapt_encoder_did_not_write_has_no_record(tmp_path):
    assert seeds.encoder_record(pipeline_starting_from(tmp_path, "all-mpnet-base-v2")) is None
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "config.cfg").write_bytes((Path(__file__).resolve().parents[2] / "project" / "configs" / "w2ner_mpnet_gpu.cfg").read_bytes())
    assert seeds.encoder_record(recipe) is None  # the recipe's encoder_path.v1, a fetched encoder
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "model-best" / "config.cfg").unlink()
    (tmp_path / "model-best").rmdir()
    assert seeds.encoder_record(pipeline_starting_from(tmp_path, str(plain))) is None
