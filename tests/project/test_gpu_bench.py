"""The GPU bench's arithmetic (bench/gpu), checked on a CPU: step timing and GPU-vs-CPU comparison."""
import json
import os
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "gpu"))

from bench import code_description, code_environment, compare_outputs, grid_batches  # noqa: E402
from hooks import StepProfiler, summarize  # noqa: E402


def batch(time, sentences=12, words=120, grid_calls=0):
    return {"time": time, "sentences": sentences, "words": words, "grid_calls": grid_calls}


def test_summarize_times_the_steps_after_the_warm_up():
    # Batch k is stamped before step k: batches 2..4 are timed (from batch 2's stamp to batch 5's).
    stats = {
        "batches": [batch(0.0), batch(5.0, grid_calls=1), batch(6.0, grid_calls=2), batch(7.0, 10, 100, 3),
                    batch(8.0, grid_calls=4), batch(9.0, grid_calls=5)],
        "grid_forward_s": [9.0, 9.0, 0.25, 0.25, 0.25],
        "grid_backward_s": [9.0, 9.0, 0.25, 0.25, 0.25],
        "peak_gpu_mb": 123.0,
    }  # fmt: skip
    result = summarize(stats, warmup_steps=2)
    assert result["steps"] == 3
    assert result["sentences"] == 12 + 10 + 12
    assert result["seconds"] == 3.0
    assert result["sentences_per_s"] == round(34 / 3, 1)
    assert result["grid_network_share"] == 0.5  # 3 x (0.25 + 0.25) of 3 s
    assert result["peak_gpu_mb"] == 123.0


def test_summarize_needs_steps_after_the_warm_up():
    with pytest.raises(ValueError, match="too few"):
        summarize({"batches": [batch(0.0), batch(1.0)], "grid_forward_s": [], "grid_backward_s": []}, 1)


def write_rows(path, rows):
    path.write_text("".join(json.dumps({"words": ["w"], "entities": e}) + "\n" for e in rows))
    return path


def test_step_profiler_profiles_the_loops_steps_torch_first_then_python(tmp_path):
    """PROFILE_STEPS=2:6: torch's profiler over steps 2-3 (its operators), cProfile over 4-5
    (the Python functions called in those steps only)."""
    import torch

    def step_four():
        return torch.ones(3) * 4

    path = tmp_path / "profile.txt"
    profiler = StepProfiler("2:6", str(path))
    for index in range(8):
        profiler.at_batch(index)
        torch.ones(3).sum() if index < 4 else step_four() if index == 4 else None
    text = path.read_text()
    assert text.startswith("torch profiler, training loop steps 2..3")
    assert "aten::sum" in text.split("== cProfile")[0] and "== host time (self)" in text
    assert "training loop steps 4..5: Python functions by tottime" in text and "step_four" in text
    with pytest.raises(ValueError, match="FIRST:LAST"):
        StepProfiler("3:4", str(path))


def test_grid_batches_counts_a_steps_batches_under_each_padding_limit(tmp_path):
    """Steps of 4 sentences of 3 to 40 words: several grid batches at 1.25, one without a limit,
    and the cells that costs."""
    from spacy.tokens import Doc, DocBin
    from spacy.vocab import Vocab

    vocab = Vocab()
    data = tmp_path / "train.spacy"
    DocBin(docs=[Doc(vocab, words=["w"] * n) for n in (3, 40, 12, 30, 35, 5, 8, 40)]).to_disk(data)
    results = tmp_path / "results.jsonl"
    grid_batches(Namespace(data=str(data), config="w2ner_mpnet_gpu.cfg", batch_size=4, steps=0, seed=0,
                           paddings="1.25 inf", results=str(results)))  # fmt: skip
    found = json.loads(results.read_text())
    cpu, gpu = found["max_grid_padding 1.25"], found["max_grid_padding inf"]
    assert found["steps"] == 2 and gpu["grid_batches_per_step"] == 1.0 and cpu["grid_batches_per_step"] > 1.0
    assert gpu["cells_padded_over_real"] > cpu["cells_padded_over_real"] >= 1.0


def test_compare_outputs_names_the_sentences_that_differ(tmp_path):
    gpu = write_rows(tmp_path / "gpu.jsonl", [[["ADR", [0, 1], 0.9]], [], [["ADR", [2], 0.8]]])
    cpu = write_rows(tmp_path / "cpu.jsonl", [[["ADR", [0, 1], 0.9001]], [["ADR", [1], 0.6]], [["ADR", [2], 0.8]]])
    result = compare_outputs(gpu, cpu, Namespace(model="m", gpu_id=-1))
    assert result["sentences"] == 3
    assert result["differing_sentences"] == 1
    assert result["entities_equal_fraction"] == round(2 / 3, 4)
    assert result["differences"][0]["doc"] == 1
    assert result["differences"][0]["cpu_only"] == [["ADR", [1], 0.6]]
    assert result["max_score_diff_where_equal"] == pytest.approx(0.0001, abs=1e-6)


@pytest.mark.parametrize("script", sorted(str(path.relative_to(ROOT)) for path in (ROOT / "bench").rglob("*.sh")))
def test_the_bench_shell_scripts_parse(script):
    """A device session has minutes: a script that bash cannot parse wastes one (a merge once
    dropped a closing brace of bench/gpu/run.sh)."""
    done = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _run_sh(tmp_path, *stages, **env):
    environment = {**os.environ, "RESULTS_DIR": str(tmp_path / "results"), "WORK": str(tmp_path / "work"), "GPU_ID": "-1",
                   "PYTHON": sys.executable, **env}  # fmt: skip
    return subprocess.run(["bash", str(ROOT / "bench" / "gpu" / "run.sh"), *stages], capture_output=True, text=True, env=environment, timeout=120)


def test_run_sh_runs_the_stages_it_is_given_and_refuses_a_bad_setting_before_any(tmp_path):
    """The check of INFER_SETTINGS once ran `set --` over the script's own arguments: every call,
    whatever its stages, ended in 'unknown stage fp32' having run nothing."""
    done = _run_sh(tmp_path, "no-such-stage", INFER_SETTINGS="fp32:32:pinf/cginf fp32:128:g1.25")
    assert done.returncode == 2 and "unknown stage no-such-stage" in done.stdout + done.stderr
    done = _run_sh(tmp_path, "no-such-stage", INFER_SETTINGS="fp32:32:inf/cginf")
    assert done.returncode == 2 and "inf/cginf is neither gN nor pN" in done.stdout + done.stderr
    assert "unknown stage" not in done.stdout + done.stderr


def test_a_baseline_commits_package_is_what_a_base_run_imports(tmp_path):
    """bench/gpu/baseline.sh writes a commit's spacy_w2ner; a train-speed run named "base" imports
    it before this tree's (checked: a run that silently timed this tree would compare it with itself)."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    baseline = tmp_path / "baseline"
    done = subprocess.run(["bash", str(ROOT / "bench/gpu/baseline.sh"), "HEAD"], env={**os.environ, "BASELINE": str(baseline)},
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (baseline / "spacy_w2ner" / "__init__.py").exists()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert code_description(str(baseline)).startswith(f"baseline {head} ")
    assert code_description("") == "this tree"
    env, cwd = code_environment(str(baseline))
    assert env["PYTHONPATH"].split(os.pathsep)[0] == cwd == str(baseline.resolve())
    assert code_environment("") == (dict(os.environ), None)
    with pytest.raises(SystemExit, match="no spacy_w2ner package"):
        code_environment(str(tmp_path / "empty"))
    (tmp_path / "not-a-package" / "spacy_w2ner").mkdir(parents=True)  # no __init__.py: this tree's is found
    with pytest.raises(SystemExit, match="imported from .*, not from there"):
        code_environment(str(tmp_path / "not-a-package"))
