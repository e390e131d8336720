"""The inference rules of the next GPU loan, applied to its results as they were written before it.

    python bench/gpu/rules.py RESULTS_DIR/results.jsonl --log RESULTS_DIR/log.txt

bench/README.md ("What the next session with a GPU runs") writes the rules that decide the GPU's
defaults for prediction from call 1's ``infer`` records (``bench.py infer``, one process per
batch size, each setting's best round) and its ``gpu-tests`` step. This applies them, so that
what is chosen follows from the figures and nothing else:

1. **the encoder's CUDA graphs** (``cg``/``ag``): on if a ``cg`` or ``ag`` setting is the fastest
   at both batch sizes, no capture failed, every such setting's entities equal the first
   setting's (eager), its encoder vectors within 1e-3 and its grids within 1e-4, and the GPU
   tests pass;
2. **the grid network's CUDA graphs** (``ag``): besides, each ``agN`` faster than ``cgN`` at both
   batch sizes (every N timed in both);
3. **the pass padding**: of the chosen kind's settings, the padding fastest at both batch sizes;
   else 1.25. A ``cgN`` whose encoder graphs all failed (none recorded) ran eagerly: it stands
   for eager ``N`` where ``N`` was not timed (bench/README said so before the loans: eager
   passes without a limit were left out for time, "should the graphs fail, ``cginf`` times that
   case");
4. **overlapped batches** (``oag``): with the grid network's graphs chosen, ``oagN`` faster than
   ``agN`` at both batch sizes for the padding chosen in 3 (or every N, where 3 chose none),
   with equal entities and the GPU tests passing;
5. **TF32** decides nothing: ``tag1.25`` against ``ag1.25`` at batch 32 is reported.

Rules 1 to 3 compare settings without an ``o`` or ``t`` prefix (overlap and TF32 have their own
rules). Prints the decisions and their figures as JSON.
"""
import argparse
import json
import re
from pathlib import Path
from typing import Dict, List, Optional

ENCODER_TOLERANCE = 1e-3
GRID_TOLERANCE = 1e-4
DEFAULT_PADDING = "1.25"  # rule 3's fallback: the encoder's max_pass_padding before the rules decided (grid.segments.MAX_PADDING)


def parse_setting(setting: str) -> Dict:
    """``bench.py infer``'s setting ``[t][o][cg|ag]N`` as its parts: TF32, overlapped batches,
    the kind of CUDA graphs ("", "cg": the encoder's, "ag": both networks'), the pass padding
    (a number or inf; ``default`` is 1.25; ``device``, the pipeline's own default: 1.25 on a CPU,
    none on a GPU). ``bench.py`` reads its settings with it too."""
    tf32 = setting.startswith("t")
    rest = setting[1:] if tf32 else setting
    overlap = rest.startswith("o")
    rest = rest[1:] if overlap else rest
    kind = rest[:2] if rest[:2] in ("cg", "ag") else ""
    padding = rest[len(kind) :]
    return {"tf32": tf32, "overlap": overlap, "kind": kind, "padding": DEFAULT_PADDING if padding == "default" else padding}


def infer_records(path: Path) -> Dict[int, Dict[str, Dict]]:
    """The ``infer`` records by batch size and setting (the last record of each, should a step
    have run twice, or a file hold several steps of one setting)."""
    by_batch: Dict[int, Dict[str, Dict]] = {}
    for line in path.read_text(encoding="utf8").splitlines():
        record = json.loads(line) if line.strip() else {}
        if record.get("bench") == "infer":
            setting = record.get("max_pass_padding", "default")  # records before the setting was kept: the default
            by_batch.setdefault(record["batch_size"], {})[setting] = record
    return by_batch


def gpu_tests_passed(log: Optional[Path]) -> Optional[bool]:
    """Whether the log's ``gpu-tests`` step exited 0 (None: the log has no such step)."""
    if log is None or not log.exists():
        return None
    exits = re.findall(r"^== gpu-tests: exit (\d+)", log.read_text(encoding="utf8", errors="replace"), flags=re.M)
    return None if not exits else exits[-1] == "0"


def _plain(settings: Dict[str, Dict]) -> Dict[str, Dict]:
    """The settings without an overlap or TF32 prefix."""
    return {name: record for name, record in settings.items() if not any(parse_setting(name)[flag] for flag in ("overlap", "tf32"))}


def _with_eager_stand_ins(settings: Dict[str, Dict]) -> Dict[str, Dict]:
    """``settings`` and, for each ``cgN`` whose encoder graphs all failed, an eager ``N`` (its
    record) where ``N`` was not timed (rule 3)."""
    eager = {parse_setting(name)["padding"] for name in settings if not parse_setting(name)["kind"]}
    stand_ins = {}
    for name, record in settings.items():
        parts = parse_setting(name)
        ran_eagerly = parts["kind"] == "cg" and record.get("cuda_graphs_failed") and not record.get("cuda_graphs")
        if ran_eagerly and parts["padding"] not in eager:
            stand_ins[parts["padding"]] = {**record, "stands_in_for_eager": name}
    return {**settings, **stand_ins}


def _fastest(settings: Dict[str, Dict]) -> str:
    return max(settings, key=lambda name: settings[name]["sentences_per_s"])


def _find(settings: Dict[str, Dict], setting: str) -> Optional[Dict]:
    """The record of ``setting`` by its parts (``1.25`` is also ``default``), or None."""
    parts = parse_setting(setting)
    return next((record for name, record in settings.items() if parse_setting(name) == parts), None)


def _speed(settings: Dict[str, Dict], setting: str) -> float:
    record = _find(settings, setting)
    return record["sentences_per_s"] if record else 0.0


def _faster(settings: Dict[str, Dict], a: str, b: str) -> Optional[bool]:
    """Whether setting ``a`` is faster than ``b`` (None: one of them was not timed)."""
    first, second = _find(settings, a), _find(settings, b)
    if first is None or second is None:
        return None
    return first["sentences_per_s"] > second["sentences_per_s"]


def _checks_hold(record: Dict) -> bool:
    """The setting's entities equal the first setting's, its vectors and grids within the
    tolerances, and none of its captures failed."""
    return (
        record.get("entities_equal_first_setting") is True
        and record.get("encoder_max_abs_diff_from_first_setting", 0.0) <= ENCODER_TOLERANCE
        and record.get("grid_max_abs_diff_from_first_setting", 0.0) <= GRID_TOLERANCE
        and record.get("cuda_graphs_failed") is None
        and record.get("grid_cuda_graphs_failed") is None
    )


def _all(values: List[Optional[bool]]) -> bool:
    return bool(values) and all(value is True for value in values)


def decide(by_batch: Dict[int, Dict[str, Dict]], tests_passed: Optional[bool], batch_sizes=(32, 128)) -> Dict:
    """Each rule's decision and the figures it rests on."""
    missing = [size for size in batch_sizes if size not in by_batch]
    if missing:
        return {"error": f"no infer records at batch size {missing}: the rules need both {list(batch_sizes)}"}
    plain = {size: _plain(by_batch[size]) for size in batch_sizes}
    fastest = {size: _fastest(plain[size]) for size in batch_sizes}
    graphed = [record for size in batch_sizes for name, record in plain[size].items() if parse_setting(name)["kind"]]
    checks = all(_checks_hold(record) for record in graphed)
    encoder_graphs = all(parse_setting(fastest[size])["kind"] in ("cg", "ag") for size in batch_sizes) and checks and tests_passed is True
    paddings = sorted({parse_setting(name)["padding"] for size in batch_sizes for name in plain[size] if parse_setting(name)["kind"] == "ag"})
    ag_over_cg = {n: [_faster(plain[size], f"ag{n}", f"cg{n}") for size in batch_sizes] for n in paddings}
    grid_graphs = encoder_graphs and bool(ag_over_cg) and all(_all(wins) for wins in ag_over_cg.values())
    kind = "ag" if grid_graphs else "cg" if encoder_graphs else ""
    timed = {size: _with_eager_stand_ins(plain[size]) for size in batch_sizes}
    candidates = sorted({parse_setting(name)["padding"] for size in batch_sizes for name in timed[size] if parse_setting(name)["kind"] == kind})
    fastest_padding = {size: max(candidates, key=lambda n: _speed(timed[size], f"{kind}{n}")) for size in batch_sizes}
    padding_chosen = fastest_padding[batch_sizes[0]] if len(set(fastest_padding.values())) == 1 else None
    result = {
        "gpu_tests_passed": tests_passed,
        "fastest_plain_setting": fastest,
        "graph_settings_checks_hold": checks,
        "encoder_cuda_graphs": encoder_graphs,
        "ag_faster_than_cg": ag_over_cg,
        "grid_cuda_graphs": grid_graphs,
        "kind_chosen": kind or "eager",
        "fastest_padding_of_kind": fastest_padding,
        "eager_stand_ins": {size: {n: r["stands_in_for_eager"] for n, r in timed[size].items() if "stands_in_for_eager" in r} for size in batch_sizes},
        "max_pass_padding": padding_chosen or DEFAULT_PADDING,
        "max_pass_padding_decided": padding_chosen is not None,
    }
    if grid_graphs:
        compared = [padding_chosen] if padding_chosen else candidates
        wins = {n: [_faster(by_batch[size], f"oag{n}", f"ag{n}") for size in batch_sizes] for n in compared}
        overlapped = [_find(by_batch[size], f"oag{n}") for size in batch_sizes for n in compared]
        overlap_checks = all(_checks_hold(record) for record in overlapped if record is not None)
        result["oag_faster_than_ag"] = wins
        result["overlap_batches"] = all(_all(w) for w in wins.values()) and overlap_checks and tests_passed is True
    else:
        result["overlap_batches"] = None  # undecided: timed with both networks' graphs only
    tf32 = _faster(by_batch[batch_sizes[0]], "tag1.25", "ag1.25")
    result["tf32_faster_at_batch_32"] = tf32  # reported, decides nothing this round
    result["sentences_per_s"] = {size: {name: record["sentences_per_s"] for name, record in by_batch[size].items()} for size in batch_sizes}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="run.sh's results.jsonl")
    parser.add_argument("--log", type=Path, help="run.sh's log.txt (the gpu-tests step's exit)")
    args = parser.parse_args()
    print(json.dumps(decide(infer_records(args.results), gpu_tests_passed(args.log)), indent=1))


if __name__ == "__main__":
    main()
