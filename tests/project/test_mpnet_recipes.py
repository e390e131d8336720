"""The all-mpnet-base-v2 recipes of project.yml: valid configs with the reference code's
per-corpus settings, and (with the encoder fetched) a few CPU steps of each, end to end."""
import math
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
import srsly

from ..conftest import HAS_MINILM, SHARED_CORPORA

ROOT = Path(__file__).resolve().parents[2]
PROJECT = srsly.read_yaml(ROOT / "project.yml")
VARS = PROJECT["vars"]
CONFIG = ROOT / "project" / "configs" / "w2ner_mpnet_gpu.cfg"
# Training sentences and batch sizes (the reference's configs), for the steps of 10 epochs.
CORPORA = {"cadec": (5340, 16, ""), "genia": (1502, 8, VARS["mpnet_genia"]), "conll03": (14041, 12, VARS["mpnet_conll03"])}


def overrides(flags: str) -> dict:
    """``--a.b value`` pairs of a project var as config overrides."""
    words = shlex.split(flags)
    return {words[k][2:]: _value(words[k + 1]) for k in range(0, len(words), 2)}


def _value(text: str):
    try:
        return srsly.json_loads(text)
    except ValueError:
        return text


def mpnet_fetched() -> bool:
    from spacy_w2ner.encoders.assets import AssetError, encoder_path

    try:
        encoder_path("all-mpnet-base-v2")
    except AssetError:
        return False
    return True


@pytest.mark.skipif(not HAS_MINILM, reason="MiniLM stands in for the encoder")
@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_each_recipe_is_a_valid_config_with_ten_epochs_of_steps(corpus):
    from spacy_w2ner import bundled_encoder_path

    sentences, batch, flags = CORPORA[corpus]
    settings = {**overrides(flags), "components.transformer.model.name": bundled_encoder_path()}
    config = spacy.util.load_config(CONFIG, overrides=settings, interpolate=True)
    spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    training = config["training"]
    per_epoch = math.ceil(sentences / batch)
    assert training["batcher"]["size"] == batch and training["max_epochs"] == 10
    assert training["optimizer"]["learn_rate"]["total_steps"] == 10 * per_epoch
    assert training["eval_frequency"] == per_epoch  # evaluated once an epoch, the best on dev kept


def test_the_baselines_take_the_mpnet_encoder():
    for name in ("spancat_minilm_cpu", "ner_minilm_cpu"):
        config = spacy.util.load_config(ROOT / "project" / "configs" / f"{name}.cfg", overrides=overrides(VARS["mpnet_encoder"]))
        assert config["components"]["transformer"]["model"]["name"] == {
            "@misc": "spacy_w2ner.encoder_path.v1", "name": "all-mpnet-base-v2"
        }


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_CORPORA / "cadec").exists(), reason="needs ../shared/corpora/cadec")
@pytest.mark.skipif(not mpnet_fetched(), reason="all-mpnet-base-v2 is not fetched (spacy project run fetch-mpnet)")
def test_mpnet_smoke_trains_each_recipe_on_a_cpu(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    shutil.copytree(ROOT / "project" / "configs", project / "project" / "configs")
    converted = ROOT / "corpora" / "converted" / "cadec"
    if not (converted / "train.spacy").exists():
        subprocess.run([sys.executable, "-m", "spacy", "project", "run", "convert-cadec", str(ROOT)], check=True, cwd=ROOT)
    shutil.copytree(converted, project / "corpora" / "converted" / "cadec")
    (project / "corpora" / "converted" / "cadec" / "test.spacy").unlink()
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", "mpnet-smoke", str(project), "--vars.shared_dir", str(SHARED_CORPORA)],
        capture_output=True, text=True, cwd=project,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for recipe in ("cadec", "genia", "conll03"):
        assert (project / "training" / f"smoke-mpnet-{recipe}" / "model-last" / "w2ner").is_dir()
