"""bench/gpu/rules.py: the next GPU loan's inference rules, applied to made-up results."""
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_rules", ROOT / "bench" / "gpu" / "rules.py")
rules = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rules)

SETTINGS = {
    32: ["1.25", "cg1.25", "cginf", "ag1.25", "aginf", "oag1.25", "oaginf", "tag1.25"],
    128: ["1.25", "cg1.25", "cginf", "ag1.25", "aginf", "oag1.25", "oaginf"],
}


def record(batch_size, setting, speed, **checks):
    values = {
        "bench": "infer", "batch_size": batch_size, "max_pass_padding": setting, "sentences_per_s": speed,
        "entities_equal_first_setting": True, "encoder_max_abs_diff_from_first_setting": 0.0,
        "grid_max_abs_diff_from_first_setting": 0.0,
    }  # fmt: skip
    if rules.parse_setting(setting)["kind"]:
        values.update(cuda_graphs_failed=None)
    return {**values, **checks}


def write_results(tmp_path, speeds, gpu_tests_exit=0, **checks_of):
    """results.jsonl with each setting's sentences/s (``speeds[batch][setting]``) and log.txt."""
    lines = []
    for batch_size, settings in SETTINGS.items():
        for setting in settings:
            lines.append(record(batch_size, setting, speeds[batch_size][setting], **checks_of.get(setting, {})))
    lines.append({"bench": "infer-interim", "batch_size": 32, "rounds_done": 1, "seconds": {}})
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    log = tmp_path / "log.txt"
    log.write_text(f"== 10:00:00 gpu-tests: python -m pytest ...\n3 passed\n== gpu-tests: exit {gpu_tests_exit} after 30 s\n")
    return rules.decide(rules.infer_records(results), rules.gpu_tests_passed(log))


def speeds(changes=None):
    """Both networks' graphs fastest, overlap faster still, no limit fastest: every rule passes."""
    base = {"1.25": 800, "cg1.25": 900, "cginf": 950, "ag1.25": 1000, "aginf": 1100, "oag1.25": 1200, "oaginf": 1300, "tag1.25": 990}
    table = {32: dict(base), 128: dict(base)}
    for key, value in (changes or {}).items():  # "b32_aginf": ...
        batch, setting = key.split("_", 1)
        table[int(batch[1:])][setting] = value
    return table


def test_the_settings_parse_into_their_parts():
    assert rules.parse_setting("toag1.25") == {"tf32": True, "overlap": True, "kind": "ag", "padding": "1.25"}
    assert rules.parse_setting("cginf") == {"tf32": False, "overlap": False, "kind": "cg", "padding": "inf"}
    assert rules.parse_setting("default")["padding"] == "1.25" and rules.parse_setting("1.25")["kind"] == ""
    assert rules.parse_setting("device") == {"tf32": False, "overlap": False, "kind": "", "padding": "device"}
    from spacy_w2ner.grid.segments import MAX_PADDING

    assert float(rules.DEFAULT_PADDING) == MAX_PADDING  # what bench.py's "default" predicts with


def test_every_rule_passes_when_graphs_and_overlap_win_everywhere(tmp_path):
    decided = write_results(tmp_path, speeds())
    assert decided["encoder_cuda_graphs"] and decided["grid_cuda_graphs"] and decided["overlap_batches"]
    assert decided["kind_chosen"] == "ag" and decided["max_pass_padding"] == "inf" and decided["max_pass_padding_decided"]
    assert decided["oag_faster_than_ag"] == {"inf": [True, True]}  # the padding chosen only
    assert decided["fastest_plain_setting"] == {32: "aginf", 128: "aginf"}  # oag and tag are not plain
    assert decided["tf32_faster_at_batch_32"] is False


def test_failed_gpu_tests_or_a_grid_off_by_more_than_the_tolerance_keep_every_graph_off(tmp_path):
    assert not write_results(tmp_path, speeds(), gpu_tests_exit=1)["encoder_cuda_graphs"]
    decided = write_results(tmp_path, speeds(), **{"ag1.25": {"grid_max_abs_diff_from_first_setting": 2e-4}})
    assert not decided["encoder_cuda_graphs"] and not decided["grid_cuda_graphs"] and decided["overlap_batches"] is None
    assert decided["kind_chosen"] == "eager" and decided["max_pass_padding"] == "1.25"
    # TF32's own differences are not held against the graphs
    assert write_results(tmp_path, speeds(), **{"tag1.25": {"grid_max_abs_diff_from_first_setting": 1e-2}})["grid_cuda_graphs"]


def test_eager_fastest_at_one_batch_size_keeps_the_graphs_off(tmp_path):
    decided = write_results(tmp_path, speeds({"b128_1.25": 5000}))
    assert not decided["encoder_cuda_graphs"] and decided["fastest_plain_setting"][128] == "1.25"


def test_the_grid_networks_graphs_need_ag_to_beat_cg_at_every_padding_and_batch_size(tmp_path):
    decided = write_results(tmp_path, speeds({"b128_ag1.25": 899}))
    assert decided["encoder_cuda_graphs"] and not decided["grid_cuda_graphs"]
    assert decided["ag_faster_than_cg"]["1.25"] == [True, False]
    assert decided["kind_chosen"] == "cg" and decided["max_pass_padding"] == "inf" and decided["overlap_batches"] is None


def test_no_padding_fastest_at_both_sizes_keeps_1_25_and_overlap_is_compared_at_both(tmp_path):
    decided = write_results(tmp_path, speeds({"b128_ag1.25": 1150, "b128_oag1.25": 1250}))
    assert decided["grid_cuda_graphs"] and not decided["max_pass_padding_decided"] and decided["max_pass_padding"] == "1.25"
    assert set(decided["oag_faster_than_ag"]) == {"1.25", "inf"} and decided["overlap_batches"]


def test_overlap_slower_at_one_batch_size_or_with_other_entities_stays_off(tmp_path):
    assert write_results(tmp_path, speeds({"b128_oaginf": 1000}))["overlap_batches"] is False
    decided = write_results(tmp_path, speeds(), **{"oaginf": {"entities_equal_first_setting": False}})
    assert decided["grid_cuda_graphs"] and decided["overlap_batches"] is False


def test_a_missing_batch_size_or_gpu_tests_step_decides_nothing(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(record(32, "1.25", 800)) + "\n")
    assert "error" in rules.decide(rules.infer_records(results), True)
    assert rules.gpu_tests_passed(tmp_path / "no-log.txt") is None
    no_step = tmp_path / "other-log.txt"
    no_step.write_text("== train-b12-fp32: exit 0 after 60 s\n")
    assert rules.gpu_tests_passed(no_step) is None
    results.write_text("".join(json.dumps(record(size, setting, 1000 + i)) + "\n" for size in (32, 128) for i, setting in enumerate(SETTINGS[size])))
    assert rules.decide(rules.infer_records(results), None)["encoder_cuda_graphs"] is False  # the tests must have run
    assert rules.decide(rules.infer_records(results), True)["encoder_cuda_graphs"] is True


def test_a_cg_setting_whose_graphs_all_failed_stands_in_for_eager_passes_of_its_padding(tmp_path):
    """The loan of 2026-11-27c: MPNet's capture failed, so every cg and ag setting's encoder ran
    eagerly; cginf then times the eager passes without a limit, which were not timed apart."""
    failed = {"cuda_graphs": 0, "cuda_graphs_failed": "MPNetModel: Cannot copy between CPU and CUDA tensors"}
    checks = {name: dict(failed) for name in ("cg1.25", "cginf", "ag1.25", "aginf", "oag1.25", "oaginf", "tag1.25")}
    decided = write_results(tmp_path, speeds({"b32_cginf": 850, "b128_cginf": 870}), **checks)
    assert not decided["encoder_cuda_graphs"] and decided["kind_chosen"] == "eager"
    assert decided["eager_stand_ins"] == {32: {"inf": "cginf"}, 128: {"inf": "cginf"}}  # eager 1.25 was timed itself
    assert decided["fastest_padding_of_kind"] == {32: "inf", 128: "inf"} and decided["max_pass_padding"] == "inf"
    slower = write_results(tmp_path, speeds({"b32_cginf": 850, "b128_cginf": 700}), **checks)
    assert slower["max_pass_padding"] == "1.25" and not slower["max_pass_padding_decided"]
    recorded = write_results(tmp_path, speeds({"b32_cginf": 850, "b128_cginf": 870}), **{"cginf": {"cuda_graphs": 3}})
    assert recorded["eager_stand_ins"] == {32: {}, 128: {}}  # graphs were replayed: not an eager run
