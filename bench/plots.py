"""The figures of the committed benchmark and accuracy results, as PNG plots for the documentation.

    python bench/plots.py [accuracy] [speed] [memory] [serve] [scaling] [active-learning] [--out-dir DIR]

regenerates all (or the named) plots from the committed JSON, each beside the JSON it reads:

| name | PNG | reads |
|---|---|---|
| accuracy | project/results/accuracy-by-seed.png | project/results/<dataset>-<system>.json, <dataset>-w2ner-seeds.json, <dataset>-w2ner-mpnet-seeds.json |
| speed | bench/results/speed.png | cpu-throughput*.json, cpu-optimize.json, cpu-annotate.json, cpu-annotate-r3.json, gpu-h100-2026-11-23/*.jsonl |
| memory | bench/results/memory-by-length.png | cpu-long-doc.json, cpu-long-doc-optimize.json, cpu-long-doc-after-corpus.json, cpu-annotate-memory-trend.json |
| serve | bench/results/serve-load.png | cpu-serve.json, cpu-serve-optimize.json |
| scaling | bench/results/scaling.png | cpu-scaling.json (bench/scaling.py) |
| active-learning | bench/results/active-learning.png | cpu-active-learning.json (bench/active_learning.py) |

The benchmark scripts call ``plot_after_run`` once their JSON is written. Every number drawn comes
from those files, except the figures in ``CITED_F1`` and ``CITED_SPEED``: published figures and
the reference code's runs, each quoted in README.md or bench/README.md. Only matplotlib is
imported (lazily, inside the functions), never torch or spaCy: a plot takes a second and needs
no model. A file that lacks a figure a plot needs raises ``PlotDataError`` naming the file and
the key.
"""
import argparse
import json
import math
import sys
from pathlib import Path
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
BENCH_RESULTS = ROOT / "bench" / "results"
PROJECT_RESULTS = ROOT / "project" / "results"
GPU_RESULTS = BENCH_RESULTS / "gpu-h100-2026-11-23"
MATPLOTLIB_MISSING = 'matplotlib is missing: pip install "spacy-w2ner[docs]"'

# One colour per kind of system, the same in every plot.
COLOURS = {
    "w2ner": "#1f5fa8",
    "w2ner-variant": "#8db6e3",
    "encoder": "#8c8c8c",
    "spacy": "#e07b00",
    "reference": "#7b3fa0",
    "published": "#2e8b57",
}
KIND_NAMES = {
    "w2ner": "w2ner",
    "encoder": "the encoder alone",
    "spacy": "spaCy baseline (same encoder and steps)",
    "reference": "reference code ljynlp/W2NER (same encoder)",
    "published": "published (larger encoders)",
}

DATASETS = {
    "cadec": "CADEC",
    "cadec-discontinuous": "CADEC, its 94 discontinuous test entities (F1 on them alone)",
    "cadec-contiguous": "CADEC, contiguous entities only",
    "genia": "GENIA (trained on 9/10 of its dev split)",
    "conll03": "CoNLL-2003",
    "resume": "Resume (Chinese)",
}
BASELINES = {"spancat": "spaCy spancat, MiniLM", "ner": "spaCy ner, MiniLM"}
# Panels of one figure other than the overall F1: panel -> (dataset, the w2ner key it plots). spaCy's
# baselines cannot represent a discontinuous entity, so these panels have none.
METRIC_PANELS = {"cadec-discontinuous": ("cadec", "w2ner_discontinuous_f")}
# Test F1 not in a JSON here, as README.md ("Accuracy on public benchmarks") cites them.
CITED_F1 = {
    "cadec": [
        ("reference code, MiniLM (one run)", 68.7, "reference"),
        ("the paper, BioBERT-base", 73.21, "published"),
        ("TriG-NER, best published", 73.43, "published"),
    ],
    # adlnlp/trig_ner output/CADEC_Overall_Inference_test_results.json, ent_disc (issue 49)
    "cadec-discontinuous": [("TriG-NER, its best overall setting", 48.55, "published")],
    "genia": [("the paper, BERT-base, full train split", 81.39, "published")],
    "conll03": [("the paper, BERT-large", 93.07, "published")],
}
# Sentences/s not in a JSON here: the reference code on this machine kind with MiniLM (bench/README.md:
# 5.7 training, 1160 test sentences in 78-85 s) and the paper on an RTX 3090 (README.md).
CITED_SPEED = {
    "cpu_training": ("reference code ljynlp/W2NER", 5.7, "reference"),
    "cpu_inference": ("reference code ljynlp/W2NER", round(1160 / 81.5, 1), "reference"),
    "gpu_training": ("the paper, BERT-base, RTX 3090", 116.1, "published"),
    "gpu_inference": ("the paper, BERT-base, RTX 3090", 365.7, "published"),
}


class PlotDataError(ValueError):
    """A results file is missing, or lacks a figure a plot needs."""


class MatplotlibMissing(ImportError):
    """matplotlib is not installed (the [docs] extra)."""


class Row(NamedTuple):
    """One line of the accuracy plot: a system's test F1 (one point per run or seed)."""

    label: str
    kind: str
    points: List[float]
    mean_std: Optional[Tuple[float, float]] = None


# ---------------------------------------------------------------------------------------------
# Reading


def pyplot():
    """matplotlib.pyplot with the Agg backend, or MatplotlibMissing."""
    try:
        import matplotlib
    except ImportError:
        raise MatplotlibMissing(MATPLOTLIB_MISSING) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 11, "axes.titlesize": 12, "axes.spines.top": False, "axes.spines.right": False})
    return plt


def read_json(path: Path) -> dict:
    if not Path(path).exists():
        raise PlotDataError(f"{path}: no such file")
    return json.loads(Path(path).read_text(encoding="utf8"))


def read_jsonl(path: Path) -> List[dict]:
    if not Path(path).exists():
        raise PlotDataError(f"{path}: no such file")
    return [json.loads(line) for line in Path(path).read_text(encoding="utf8").splitlines() if line.strip()]


def runs_beside(written: Path, *patterns: str) -> List[Path]:
    """The result files matching any of patterns in the folder of the file just written, it among them."""
    folder = Path(written).parent
    return sorted({path for pattern in patterns for path in folder.glob(pattern)} | {Path(written)})


def need(data: dict, path: Path, *keys: str):
    """data[keys[0]][keys[1]]..., or a PlotDataError naming the file and the key."""
    value = data
    for depth, key in enumerate(keys):
        if not isinstance(value, dict) or key not in value:
            raise PlotDataError(f"{path}: no key {'.'.join(keys[: depth + 1])!r}")
        value = value[key]
    return value


# ---------------------------------------------------------------------------------------------
# Drawing helpers


def save(fig, output: Path) -> Path:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=100, bbox_inches="tight", metadata={"Software": None})
    pyplot().close(fig)
    return output


def figure_number(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def kind_legend(fig, kinds: Iterable[str], extra: Sequence = (), **options) -> None:
    """A figure legend of the colours used (w2ner, encoder, baselines, ...) and any extra handles."""
    from matplotlib.patches import Patch

    handles = [Patch(color=COLOURS[kind], label=KIND_NAMES[kind]) for kind in KIND_NAMES if kind in set(kinds)]
    fig.legend(handles=handles + list(extra), frameon=False, **options)


def grouped_barh(ax, categories: Sequence[Tuple[str, str]], runs: Sequence[Tuple[str, Dict[str, float]]]) -> None:
    """Horizontal bars: one row per (label, kind) category, one bar per run that has it.

    Colour says the kind of system; where a row has several runs, each bar carries its run's
    name (inside the bar, or after its value when the bar is short); rows of the reference code
    or a publication say who in their label. The first category is the top row.
    """
    top = max((value for _, values in runs for value in values.values()), default=1)
    for row, (label, kind) in enumerate(categories):
        present = [(name, values[label]) for name, values in runs if label in values]
        named = len(runs) > 1 and kind not in ("reference", "published")
        height = 0.84 / max(1, len(present))
        for slot, (name, value) in enumerate(present):
            y = -row + 0.42 - height * (slot + 0.5)
            ax.barh(y, value, height=height * 0.9, color=COLOURS[kind])
            value_text = figure_number(value)
            if named and value >= 0.45 * top:
                colour = "black" if kind == "w2ner-variant" else "white"
                ax.annotate(name, (0, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8.5, color=colour)
            elif named:
                value_text += f"  {name}"
            ax.annotate(value_text, (value, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=9)
    ax.set_yticks([-row for row in range(len(categories))], [label for label, _ in categories])
    ax.set_ylim(-len(categories) + 0.5, 0.5)
    ax.set_xlim(0, top * 1.13)
    ax.grid(axis="x", alpha=0.3)


# ---------------------------------------------------------------------------------------------
# accuracy-by-seed.png


def test_f1(path: Path) -> float:
    """The test F1 (in %) that spacy evaluate wrote: w2ner's key, else spaCy ner's."""
    data = read_json(path)
    for key in ("w2ner_f", "ents_f"):
        if isinstance(data.get(key), (int, float)):
            return 100 * data[key]
    raise PlotDataError(f"{path}: no key 'w2ner_f' or 'ents_f' (the test F1 that spacy evaluate writes)")


# w2ner's results per encoder: the file stem's suffix after <dataset>-w2ner, and the row's name.
W2NER_ENCODERS = {"": "MiniLM", "-mpnet": "MPNet-base"}


def w2ner_row(results: Path, dataset: str, suffix: str = "", key: str = "w2ner_f") -> Optional[Row]:
    """w2ner with one encoder, its figure ``key``: its seeds (per seed, mean and std) where
    <dataset>-w2ner<suffix>-seeds.json exists, else its one run <dataset>-w2ner<suffix>.json."""
    encoder = W2NER_ENCODERS[suffix]
    seeds = results / f"{dataset}-w2ner{suffix}-seeds.json"
    if seeds.exists():
        data = read_json(seeds)
        per_seed = need(data, seeds, key, "per_seed")
        spread = (need(data, seeds, key, "mean"), need(data, seeds, key, "std"))
        return Row(f"w2ner, {encoder}, {len(per_seed)} seeds", "w2ner", list(per_seed), spread)
    single = results / f"{dataset}-w2ner{suffix}.json"
    if not single.exists():
        return None
    return Row(f"w2ner, {encoder}", "w2ner", [test_f1(single) if key == "w2ner_f" else 100 * need(read_json(single), single, key)])


def dataset_rows(results: Path, panel: str) -> List[Row]:
    """w2ner (the larger encoder first), the spaCy baselines and the cited figures of one panel (a
    dataset, or one of ``METRIC_PANELS``); none without a MiniLM w2ner result."""
    dataset, key = METRIC_PANELS.get(panel, (panel, "w2ner_f"))
    if w2ner_row(results, dataset, key=key) is None:
        return []
    ours = [row for suffix in reversed(W2NER_ENCODERS) if (row := w2ner_row(results, dataset, suffix, key))]
    baselines = [
        Row(label, "spacy", [test_f1(results / f"{dataset}-{system}.json")])
        for system, label in BASELINES.items()
        if panel not in METRIC_PANELS and (results / f"{dataset}-{system}.json").exists()
    ]
    cited = [Row(label, kind, [value]) for label, value, kind in CITED_F1.get(panel, [])]
    return ours + baselines + cited


def draw_accuracy_rows(ax, rows: List[Row]) -> None:
    """One row per system: its runs as points; with seeds, the points above and mean ± std below."""
    markers = {"w2ner": "o", "spacy": "o", "reference": "s", "published": "D"}
    for position, row in enumerate(rows):
        y = len(rows) - 1 - position
        colour = COLOURS[row.kind]
        points_y = y + 0.17 if row.mean_std else y
        ax.plot(row.points, [points_y] * len(row.points), markers[row.kind], color=colour, markersize=7, alpha=0.8)
        text, right = f"{row.points[0]:.2f}", max(row.points)
        if row.mean_std:
            mean, std = row.mean_std
            ax.errorbar([mean], [y - 0.17], xerr=[std], fmt="D", color=colour, markersize=6, capsize=4, elinewidth=2)
            text, right = f"mean {mean:.2f} ± {std:.2f}", max(right, mean + std)
        ax.annotate(text, (right, y), xytext=(8, 0), textcoords="offset points", va="center", fontsize=9)
    ax.set_yticks(range(len(rows)), [row.label for row in reversed(rows)])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    values = [value for row in rows for value in row.points]
    ax.set_xlim(math.floor(min(values)) - 1, max(math.ceil(max(values)) + 3, math.floor(min(values)) + 8))
    ax.grid(axis="x", alpha=0.3)


def plot_accuracy_by_seed(results: Path = PROJECT_RESULTS, output: Optional[Path] = None) -> Path:
    """Test F1 per benchmark: w2ner (each seed a point, the mean with its standard deviation),
    spaCy's spancat/ner with the same encoder and steps, the reference code and published figures.

    Reads ``<dataset>-w2ner-seeds.json`` (scripts/seeds.py; else ``<dataset>-w2ner.json``), the
    same with MPNet-base (``<dataset>-w2ner-mpnet-seeds.json``) where there is one, and
    ``<dataset>-spancat.json`` / ``<dataset>-ner.json`` in ``results`` for the datasets of
    ``DATASETS`` that have a w2ner result; the cited figures are ``CITED_F1``. Only CADEC has
    several seeds; the other datasets have one run per system. CADEC has a second panel, the F1
    of its discontinuous entities alone (``METRIC_PANELS``). Each panel has its own F1 scale.
    """
    from matplotlib.lines import Line2D

    plt = pyplot()
    results = Path(results)
    panels = {name: rows for name in DATASETS if (rows := dataset_rows(results, name))}
    if not panels:
        raise PlotDataError(f"{results}: no <dataset>-w2ner.json or <dataset>-w2ner-seeds.json for any of {list(DATASETS)}")
    heights = [len(rows) for rows in panels.values()]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 1.6 + 0.42 * sum(heights) + 0.6 * len(panels)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)  # fmt: skip
    for ax, (name, rows) in zip(axes[:, 0], panels.items()):
        draw_accuracy_rows(ax, rows)
        ax.set_title(DATASETS[name], loc="left", fontweight="bold")
    axes[-1, 0].set_xlabel("test F1 (%), each panel on its own scale")
    fig.suptitle("Test F1 on public benchmarks (w2ner and spaCy's baselines on 2 CPU threads, MiniLM unless named)", fontsize=12)
    mean = Line2D([], [], color=COLOURS["w2ner"], marker="D", markersize=6, linewidth=2, label="w2ner, mean ± std over seeds")
    kind_legend(fig, {row.kind for rows in panels.values() for row in rows}, [mean], loc="lower center", ncol=2)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return save(fig, output or results / "accuracy-by-seed.png")


# ---------------------------------------------------------------------------------------------
# speed.png

INFERENCE_CASES = [("infer_transformer", "MiniLM alone", "encoder"), ("infer_spancat", "MiniLM + spaCy spancat", "spacy"),
                   ("infer_w2ner", "MiniLM + w2ner", "w2ner")]  # fmt: skip
TRAINING_CASES = [("train_spancat", "MiniLM + spaCy spancat", "spacy"), ("train_w2ner", "MiniLM + w2ner", "w2ner")]
OPTIMIZE_CASES = [("float32 annotate", "annotate, float32", "w2ner"), ("int8 annotate", "annotate, int8 (optimize)", "w2ner-variant"),
                  ("encoder alone", "encoder alone (w2ner off)", "encoder")]  # fmt: skip
ANNOTATE_CASES = [("pipe", "nlp.pipe, nothing written"), ("annotate", "annotate"), ("apply_export", "spacy apply + export"),
                  ("annotate_n_process_2", "annotate --n-process 2"), ("annotate_ray_2_workers", "annotate, Ray, 2 workers")]  # fmt: skip
THROUGHPUT_RUNS = ("cpu-throughput*.json",)
ANNOTATE_RUNS = ("cpu-annotate.json", "cpu-annotate-r*.json")  # not -memory*: another job ran beside them
# Which model each GPU file's records ran (bench/README.md, "H100 figures").
GPU_FILES = {"results.jsonl": "BERT-base size, random weights", "accuracy-results.jsonl": "MiniLM, CADEC recipe"}
GPU_CASES = [("train", "sentences_per_s", "training", "w2ner"), ("infer", "sentences_per_s", "inference", "w2ner"),
             ("infer", "encoder_only_sentences_per_s", "encoder alone", "encoder")]  # fmt: skip


def throughput_runs(paths: Sequence[Path], cases, cited: str) -> Tuple[list, list]:
    """(categories, runs) of sentences/s from bench/throughput.py's JSON files, plus the reference code."""
    label, value, kind = CITED_SPEED[cited]
    runs = []
    for path in paths:
        data = read_json(path)
        runs.append((Path(path).name, {name: need(data, path, key, "sentences_per_s") for key, name, _ in cases}))
    return [(name, case_kind) for _, name, case_kind in cases] + [(label, kind)], runs + [("reference code", {label: value})]


def optimize_runs(path: Path) -> Tuple[list, list]:
    """(categories, runs) of documents/s from bench/optimize.py's JSON: the 0.2.0 code against this one."""
    data = read_json(path)
    speed = need(data, path, "speed")
    runs = []
    batch = data.get("annotate_batch_size")
    suffixes = ((" (0.2.0)", "0.2.0, batches of 64"), (", batches of 64", "0.3, batches of 64"),
                ("", f"0.3, batches of {batch}" if batch else "0.3"))
    for suffix, name in suffixes:
        values = {label: speed[key + suffix]["docs_per_s"] for key, label, _ in OPTIMIZE_CASES if key + suffix in speed}
        runs.append((name, values))
    if not runs[-1][1]:
        raise PlotDataError(f"{path}: no key 'speed.float32 annotate' (nor any other case of OPTIMIZE_CASES)")
    return [(label, kind) for _, label, kind in OPTIMIZE_CASES], [run for run in runs if run[1]]


def model_name(model: str) -> str:
    """A saved pipeline's short name: its folder, or the training run's for model-best/model-last."""
    parts = Path(model).parts or ("?",)
    return parts[-2] if parts[-1] in ("model-best", "model-last") and len(parts) > 1 else parts[-1]


def annotate_runs(paths: Sequence[Path]) -> Tuple[list, list]:
    """(categories, runs) of documents/s from bench/annotate.py's JSON files (the cases each holds)."""
    runs = []
    for path in paths:
        data = read_json(path)
        values = {label: need(data, path, key, "docs_per_s") for key, label in ANNOTATE_CASES if key in data}
        if not values:
            raise PlotDataError(f"{path}: no key 'annotate' (nor any other case of ANNOTATE_CASES)")
        settings = data.get("settings", {})
        docs = settings.get("docs", "?")
        docs = f"{int(docs):,}" if str(docs).isdigit() else docs
        runs.append((f"{docs} docs, {model_name(str(settings.get('model', '?')))}", values))
    present = {label for _, values in runs for label in values}
    return [(label, "w2ner") for _, label in ANNOTATE_CASES if label in present], runs


def gpu_runs(folder: Path) -> Tuple[list, list]:
    """(categories, runs) of sentences/s of the GPU's training and inference records, and the paper's."""
    runs, categories = [], {}
    for file_name, model in GPU_FILES.items():
        values = {}
        for record in read_jsonl(Path(folder) / file_name):
            for bench, key, name, kind in GPU_CASES:
                if record.get("bench") == bench and key in record:
                    label = f"{name}, batch {record['batch_size']}"
                    values[label], categories[label] = record[key], kind
        runs.append((model, values))
    if not categories:
        raise PlotDataError(f"{folder}: no record with bench 'train' or 'infer' and 'sentences_per_s' in {list(GPU_FILES)}")
    paper = {}
    for key in ("gpu_training", "gpu_inference"):
        label, value, kind = CITED_SPEED[key]
        paper[f"{key[4:]}, {label}"], categories[f"{key[4:]}, {label}"] = value, kind
    order = sorted(categories, key=lambda label: ["training", "inference", "encoder"].index(label.split(",")[0].split()[0]))
    return [(label, categories[label]) for label in order], runs + [("the paper", paper)]


def speed_panels(throughput, optimize, annotate, gpu) -> List[Tuple[str, str, list, list]]:
    """(title, x label, categories, runs) of each panel whose source is given."""
    panels = []
    if throughput:
        inference, training = (throughput_runs(throughput, INFERENCE_CASES, "cpu_inference"),
                               throughput_runs(throughput, TRAINING_CASES, "cpu_training"))  # fmt: skip
        panels.append(("CPU inference, CADEC test (2 threads)", "sentences/s", *inference))
        panels.append(("CPU training, CADEC (2 threads, batches of 16)", "sentences/s", *training))
    documents = "documents/s (one sentence each)"
    if optimize:
        panels.append(("Fast CPU inference, trained CADEC model (2 threads)", documents, *optimize_runs(optimize)))
    if annotate:
        panels.append(("annotate against the alternatives, CPU (with loading)", documents, *annotate_runs(annotate)))
    if gpu:
        panels.append(("GPU (NVIDIA H100), CADEC test and train", "sentences/s", *gpu_runs(gpu)))
    return panels


def plot_speed(throughput: Optional[Sequence[Path]] = None, optimize: Optional[Path] = BENCH_RESULTS / "cpu-optimize.json",
               annotate: Optional[Sequence[Path]] = None, gpu: Optional[Path] = GPU_RESULTS,
               output: Path = BENCH_RESULTS / "speed.png") -> Path:  # fmt: skip
    """Speed of w2ner against its encoder alone, spaCy's spancat and the reference code.

    Panels: CPU inference and training sentences/s on CADEC (``throughput``: bench/throughput.py's
    files, default every ``cpu-throughput*.json``, one bar per file); fast CPU inference, float32
    0.2.0 / float32 0.3.0 / int8 and the encoder alone (``optimize``: cpu-optimize.json); the
    ways to run annotate (``annotate``: default cpu-annotate.json and cpu-annotate-r*.json, each
    with its own model and document count; not cpu-annotate-memory.json, whose docs/s were taken
    beside another job); the H100's training and inference (``gpu``: the
    folder of bench/gpu/run.sh's results.jsonl and accuracy-results.jsonl) against the paper's
    RTX 3090. The reference code's and the paper's figures are ``CITED_SPEED``. No GLiNER or other
    peer: no results file holds one. A source of None leaves its panel out.
    """
    plt = pyplot()
    if throughput is None:
        throughput = sorted(path for pattern in THROUGHPUT_RUNS for path in BENCH_RESULTS.glob(pattern))
    if annotate is None:
        annotate = sorted(path for pattern in ANNOTATE_RUNS for path in BENCH_RESULTS.glob(pattern))
    panels = speed_panels(throughput, optimize, annotate, gpu)
    if not panels:
        raise PlotDataError("plot_speed: no source given (throughput, optimize, annotate, gpu)")
    heights = [sum(sum(label in values for _, values in runs) for label, _ in categories) for *_, categories, runs in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 1.2 + 0.3 * sum(heights) + 1.0 * len(panels)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)  # fmt: skip
    for ax, (title, xlabel, categories, runs) in zip(axes[:, 0], panels):
        grouped_barh(ax, categories, runs)
        ax.set_title(title, loc="left", fontweight="bold")
        ax.set_xlabel(xlabel)
    fig.suptitle("Speed of w2ner against its encoder, spaCy's spancat and the reference code (higher is faster)", fontsize=12)
    kind_legend(fig, {kind for *_, categories, _ in panels for _, kind in categories}, loc="lower center", ncol=3)
    fig.tight_layout(rect=(0, 0.035, 1, 0.99))
    return save(fig, output)


# ---------------------------------------------------------------------------------------------
# memory-by-length.png


def long_doc_series(path: Path) -> Dict[bool, List[dict]]:
    """bench/long_doc.py's cases by whether the document had sentence boundaries, by length."""
    cases = need(read_json(path), path, "cases")
    series: Dict[bool, List[dict]] = {}
    for index, case in enumerate(cases):
        for key in ("tokens", "sentences", "seconds", "rss_growth_mb"):
            need(case, f"{path}: cases[{index}]", key)
        series.setdefault(case["sentences"], []).append(case)
    return {sentences: sorted(rows, key=lambda row: row["tokens"]) for sentences, rows in series.items()}


def draw_length_series(time_ax, memory_ax, path: Path) -> None:
    names = {True: "with sentence boundaries (a grid per sentence)", False: "no sentence boundaries (windows)"}
    lengths = set()
    for sentences, rows in sorted(long_doc_series(path).items(), reverse=True):
        style = dict(color=COLOURS["w2ner"], marker="o", linestyle="-" if sentences else "--", label=names[sentences])
        tokens = [row["tokens"] for row in rows]
        time_ax.plot(tokens, [row["seconds"] for row in rows], **style)
        memory_ax.plot(tokens, [row["rss_growth_mb"] for row in rows], **style)
        lengths.update(tokens)
    for ax in (time_ax, memory_ax):
        ax.set_xscale("log")
        ax.set_xticks(sorted(lengths), [f"{length:,}" for length in sorted(lengths)])
        ax.minorticks_off()


def draw_single_cases(time_ax, memory_ax, optimized: Optional[Path], after_corpus: Optional[Path]) -> None:
    """The 50,000-token cases of other runs: float32 / int8 (time and memory), after a corpus (memory only)."""
    if optimized:
        data = read_json(optimized)
        for name, marker in (("float32", "^"), ("int8", "v")):
            key = next((key for key in data if key.startswith(name)), None)
            if key is None:
                raise PlotDataError(f"{optimized}: no key starting with {name!r}")
            case = need(data, optimized, key, "cases")[0]
            label = f"{key.split(' (')[0]}, trained CADEC model, no sentences"
            style = dict(color=COLOURS["w2ner-variant" if name == "int8" else "w2ner"], marker=marker, markersize=10,
                         linestyle="none", markeredgecolor="black", label=label)  # fmt: skip
            time_ax.plot([case["tokens"]], [case["seconds"]], **style)
            memory_ax.plot([case["tokens"]], [case["rss_growth_mb"]], **style)
    if after_corpus:
        case = need(read_json(after_corpus), after_corpus, "cases")[0]
        memory_ax.plot([case["tokens"]], [case["rss_growth_mb"]], "*", color=COLOURS["w2ner"], markersize=14,
                       label="after 3 passes of CADEC test (memory only)")  # fmt: skip


def draw_annotate_trend(ax, path: Path) -> None:
    data = read_json(path)
    names = {"trim": ("trim after each batch (default)", COLOURS["w2ner"]), "no_trim": ("--no-trim", COLOURS["encoder"])}
    highest = 0
    for key, (name, colour) in names.items():
        trend = need(data, path, key, "trend")
        docs = [sample["docs"] for sample in trend]
        ax.plot(docs, [sample["rss_mb"] for sample in trend], "-o", color=colour, label=f"resident, {name}")
        ax.plot(docs, [sample["in_use_mb"] for sample in trend], ":", color=colour, linewidth=2, label=f"in use (glibc), {name}")
        highest = max([highest] + [sample["rss_mb"] for sample in trend])
    ax.set_xlabel("documents annotated (CADEC test sentences)")
    ax.set_ylabel("memory (MB)")
    ax.set_ylim(0, highest * 1.45)
    ax.grid(alpha=0.3)
    ax.set_title("One annotate run, memory sampled every 10 s", loc="left", fontweight="bold")
    ax.legend(fontsize=9, loc="upper right", ncol=2)


def plot_memory_by_length(long_doc: Path = BENCH_RESULTS / "cpu-long-doc.json",
                          optimized: Optional[Path] = BENCH_RESULTS / "cpu-long-doc-optimize.json",
                          after_corpus: Optional[Path] = BENCH_RESULTS / "cpu-long-doc-after-corpus.json",
                          annotate_trend: Optional[Path] = BENCH_RESULTS / "cpu-annotate-memory-trend.json",
                          output: Path = BENCH_RESULTS / "memory-by-length.png") -> Path:  # fmt: skip
    """Time and peak memory growth (peak RSS minus RSS after loading) of one document against its
    length, with and without sentence boundaries (``long_doc``: bench/long_doc.py's cases, each a
    fresh process); the 50,000-token cases of the trained CADEC model in float32 and int8
    (``optimized``: cpu-long-doc-optimize.json) and after a corpus ran first (``after_corpus``: its
    time was measured beside a training job, so only its memory is drawn); and a third panel,
    resident memory against documents annotated with and without the trim (``annotate_trend``:
    bench/annotate_memory.py's cpu-annotate-memory-trend.json). cpu-annotate-memory.json is not
    drawn: it holds two input sizes (10,000 and 100,000 documents), not a series. None leaves a
    source out.
    """
    plt = pyplot()
    fig, axes = plt.subplots(3 if annotate_trend else 2, 1, figsize=(9, 14 if annotate_trend else 9.5), squeeze=False)
    time_ax, memory_ax = axes[0, 0], axes[1, 0]
    draw_length_series(time_ax, memory_ax, long_doc)
    draw_single_cases(time_ax, memory_ax, optimized, after_corpus)
    for ax, ylabel, title in ((time_ax, "time (s)", "Time to annotate one document"),
                              (memory_ax, "peak growth over loaded RSS (MB)", "Peak resident memory growth for one document")):  # fmt: skip
        ax.set_xlabel("document length (tokens), log scale")
        ax.set_ylabel(ylabel)
        ax.set_title(title, loc="left", fontweight="bold")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9, loc="upper left")
    time_ax.set_yscale("log")
    time_ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda value, _: f"{value:g}"))
    memory_ax.set_ylim(0, None)
    if annotate_trend:
        draw_annotate_trend(axes[2, 0], annotate_trend)
    fig.suptitle("w2ner on CPU (2 threads): time and memory against input length", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    return save(fig, output)


# ---------------------------------------------------------------------------------------------
# serve-load.png


def load_rows(data: dict, where) -> List[dict]:
    """bench/serve.py's local-engine rows (one per number of clients), fewest clients first."""
    rows = need(data, where, "local")
    for index, row in enumerate(rows):
        for key in ("clients", "latency_p50_ms", "latency_p99_ms", "documents_per_s"):
            need(row, f"{where}: local[{index}]", key)
    return sorted(rows, key=lambda row: row["clients"])


def draw_load_lines(latency_ax, throughput_ax, path: Path) -> None:
    data = read_json(path)
    rows = load_rows(data, path)
    clients = [row["clients"] for row in rows]
    blue = COLOURS["w2ner"]
    latency_ax.plot(clients, [row["latency_p50_ms"] for row in rows], "-o", color=blue, label="p50, local engine")
    latency_ax.plot(clients, [row["latency_p99_ms"] for row in rows], "--o", color=blue, label="p99, local engine")
    throughput_ax.plot(clients, [row["documents_per_s"] for row in rows], "-o", color=blue, label="local engine")
    soak_requests = data.get("soak", {}).get("requests", "?")
    extras = [("soak", f"soak ({soak_requests} requests)", "X"), ("ray_serve_2_replicas", "Ray Serve, 2 replicas", "s")]
    for key, name, marker in extras:
        if key in data:
            row = data[key]
            style = dict(color=COLOURS["w2ner-variant"], marker=marker, markersize=9, markeredgecolor="black", linestyle="none")
            latency_ax.plot([row["clients"]] * 2, [row["latency_p50_ms"], row["latency_p99_ms"]], label=f"p50 and p99, {name}", **style)
            throughput_ax.plot([row["clients"]], [row["documents_per_s"]], label=name, **style)
    if "annotate" in data:
        ceiling = data["annotate"]["documents_per_s"]
        throughput_ax.axhline(ceiling, color=COLOURS["encoder"], linestyle=":", label="annotate in one process, no HTTP")
    for ax in (latency_ax, throughput_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(clients, [str(c) for c in clients])
        ax.set_xlabel("concurrent clients")
        ax.grid(alpha=0.3, which="both")


def short_variant_name(name: str) -> str:
    """A variant's row label: cpu-serve-optimize.json's key, its request size and batch abbreviated."""
    for long, short in ((" sentences a request", "/request"), (" sentence a request", "/request"),
                        ("no model (the request path only)", "no model (request path)"), ("batches of", "batch")):
        name = name.replace(long, short)
    return name


def draw_variants(ax, path: Path) -> None:
    """Documents/s at the most clients of each service variant in cpu-serve-optimize.json, with
    latencies after each value; a bar far beyond the models' (the request path alone) is cut at
    the axis' end, its value written."""
    data = read_json(path)
    names = [name for name in data if isinstance(data[name], dict)]
    if not names:
        raise PlotDataError(f"{path}: no pipeline entry (an object with key 'local')")
    rows = {name: load_rows(data[name], f"{path}: {name!r}")[-1] for name in names}
    kinds = {name: "encoder" if "no model" in name else "w2ner-variant" if "int8" in name else "w2ner" for name in names}
    models = [rows[name]["documents_per_s"] for name in names if kinds[name] != "encoder"] or [1.0]
    end = max(models) * 2.3
    for row, name in enumerate(names):
        value = rows[name]["documents_per_s"]
        ax.barh(-row, min(value, end), height=0.75, color=COLOURS[kinds[name]])
        cut = " (bar cut)" if value > end else ""
        note = f"{figure_number(value)}{cut}   p50 {rows[name]['latency_p50_ms']:.0f} ms, p99 {rows[name]['latency_p99_ms']:.0f} ms"
        x, align, colour = (end * 0.99, "right", "white") if cut else (value, "left", "black")
        ax.annotate(note, (x, -row), xytext=(3 if align == "left" else -3, 0), textcoords="offset points",
                    va="center", ha=align, fontsize=8.5, color=colour)  # fmt: skip
    ax.set_yticks([-row for row in range(len(names))], [short_variant_name(name) for name in names], fontsize=8.5)
    ax.set_ylim(-len(names) + 0.5, 0.5)
    ax.set_xlim(0, end)
    ax.grid(axis="x", alpha=0.3)
    clients = rows[names[0]]["clients"]
    ax.set_title(f"{clients} clients: each service variant in turn", loc="left", fontweight="bold")
    ax.set_xlabel("documents/s (a document is one sentence)")


def plot_serve_load(serve: Path = BENCH_RESULTS / "cpu-serve.json", variants: Optional[Path] = BENCH_RESULTS / "cpu-serve-optimize.json",
                    output: Path = BENCH_RESULTS / "serve-load.png") -> Path:  # fmt: skip
    """The HTTP service under load: p50/p99 latency and documents/s against concurrent clients
    (``serve``: bench/serve.py's cpu-serve.json, its local engine at each number of clients, the
    soak and Ray Serve where present, annotate in one process as the ceiling), and documents/s of
    each service variant at 32 clients (``variants``: cpu-serve-optimize.json, one entry a variant:
    the request path without a model, float32 0.2.0, float32 now, int8, with one or more sentences
    a request; None leaves that panel out). Clients and server share 2 CPU cores.
    """
    plt = pyplot()
    fig = plt.figure(figsize=(10, 10.5 if variants else 5.5))
    grid = fig.add_gridspec(2 if variants else 1, 2, height_ratios=[1.6, 1] if variants else [1])
    latency_ax, throughput_ax = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    draw_load_lines(latency_ax, throughput_ax, serve)
    latency_ax.set_yscale("log")
    latency_ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda value, _: f"{value:g}"))
    latency_ax.set_ylabel("latency per request (ms), log scale")
    latency_ax.set_title("Latency", loc="left", fontweight="bold")
    throughput_ax.set_ylabel("documents/s (one sentence each)")
    throughput_ax.set_ylim(0, throughput_ax.get_ylim()[1] * 1.08)
    throughput_ax.set_title("Throughput", loc="left", fontweight="bold")
    latency_ax.legend(fontsize=8.5, loc="upper left")
    throughput_ax.legend(fontsize=8.5, loc="lower right")
    if variants:
        draw_variants(fig.add_subplot(grid[1, :]), variants)
    fig.suptitle("The HTTP service (python -m spacy_w2ner serve) under load, CPU (2 cores)", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    return save(fig, output)


# ---------------------------------------------------------------------------------------------
# scaling.png

SCALING_GOAL = 1.15  # issue 69: every path's fitted exponent at most this
AGAIN_LABEL = "the same run again in its process"


def plot_scaling(scaling: Path = BENCH_RESULTS / "cpu-scaling.json", output: Path = BENCH_RESULTS / "scaling.png") -> Path:
    """Every path that takes one document against its length (bench/scaling.py's cpu-scaling.json):
    the exponent of CPU time against tokens fitted over the sizes, per path and shape, beside the
    goal (1.15; 1 is linear, 2 quadratic), a mark where the same run was timed again in its
    process (``again_exponents``), and the CPU seconds and peak RSS growth at the largest size."""
    data = read_json(scaling)
    exponents = need(data, scaling, "exponents")
    cases = need(data, scaling, "cases")
    largest = max(case["tokens"] for case in cases)
    paths = list(dict.fromkeys(key.split(" | ")[0] for key in exponents))
    shapes = list(dict.fromkeys(key.split(" | ")[1] for key in exponents))
    at_largest = {(c["path"], c["shape"]): c for c in cases if c["tokens"] == largest}
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 0.32 * len(paths) + 2), sharey=True)
    shade = {shape: colour for shape, colour in zip(shapes, (COLOURS["w2ner"], COLOURS["w2ner-variant"]))}
    height = 0.8 / len(shapes)
    for k, shape in enumerate(shapes):
        ys = [-row + 0.4 - height * (k + 0.5) for row in range(len(paths))]
        values = [
            [exponents.get(f"{path} | {shape}", math.nan) for path in paths],
            [at_largest.get((path, shape), {}).get("cpu_seconds", math.nan) for path in paths],
            [at_largest.get((path, shape), {}).get("rss_growth_mb", math.nan) for path in paths],
        ]
        for ax, row_values in zip(axes, values):
            ax.barh(ys, row_values, height=height * 0.9, color=shade[shape], label=shape)
            for y, value in zip(ys, row_values):
                if not math.isnan(value):
                    ax.annotate(f"{value:.2f}" if ax is axes[0] else figure_number(value), (value, y), xytext=(3, 0),
                                textcoords="offset points", va="center", fontsize=7.5)  # fmt: skip
        again = data.get("again_exponents", {})  # the same run again in its process: the path's own work
        marks = [(again[f"{path} | {shape}"], y) for path, y in zip(paths, ys) if f"{path} | {shape}" in again]
        if marks:
            labelled = any(text == AGAIN_LABEL for text in axes[0].get_legend_handles_labels()[1])
            axes[0].scatter(*zip(*marks), marker="|", s=90, color="#111", zorder=3, label=None if labelled else AGAIN_LABEL)
    axes[0].axvline(1.0, color="#444", linewidth=0.8, linestyle=":")
    axes[0].axvline(SCALING_GOAL, color="#c0392b", linewidth=1.2, linestyle="--", label=f"goal: at most {SCALING_GOAL}")
    axes[0].set_yticks([-row for row in range(len(paths))], paths)
    axes[0].set_xlabel("exponent of CPU time against tokens (1: linear)")
    axes[1].set_xlabel(f"CPU seconds at {largest:,} tokens")
    axes[2].set_xlabel(f"peak RSS growth (MB) at {largest:,} tokens")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=9, loc="upper right", ncol=len(labels), frameon=False)
    for ax in axes:
        ax.grid(axis="x", alpha=0.3)
        low, high = ax.get_xlim()
        ax.set_xlim(min(0, low), high * 1.12)
    sizes = sorted({case["tokens"] for case in cases})
    fig.suptitle(f"One document of {', '.join(f'{n:,}' for n in sizes)} tokens, each path in a fresh process\n"
                 f"({data.get('machine', {}).get('cpu', 'CPU')}, {data.get('threads', '?')} torch thread(s); {data.get('model', '')})", fontsize=11, x=0.02, ha="left")  # fmt: skip
    fig.tight_layout(rect=(0, 0, 1, 0.955))
    return save(fig, output)


def plot_active_learning(results: Path = BENCH_RESULTS / "cpu-active-learning.json",
                         output: Path = BENCH_RESULTS / "active-learning.png") -> Path:
    """bench/active_learning.py's curves: dev F and dev discontinuous F against sentences annotated,
    and dev F against the gold entities in them (what an annotator marks: uncertain sentences hold
    more); a curve per strategy, round 1 shared."""
    data = read_json(results)
    rounds, settings = need(data, results, "rounds"), need(data, results, "settings")
    names = {"random": "random K next", "entity": "most uncertain K next (lowest entity score: the task score)",
             "cell": "most uncertain K next (least confident grid cell)"}  # fmt: skip
    panels = (("annotated", "f", "sentences annotated (CADEC train, its gold as the annotator)", "dev F1 (%)"),
              ("annotated", "discontinuous_f", "sentences annotated", "dev discontinuous F1 (%)"),
              ("entities_annotated", "f", "gold entities in the annotated sentences", "dev F1 (%)"))  # fmt: skip
    plt = pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 10.5))
    for ax, (x, y, xlabel, ylabel) in zip(axes, panels):
        for strategy, style in zip(names, ("o-", "s-", "^--")):
            points = [rounds["1-all"]] if "1-all" in rounds else []
            points += sorted((r for r in rounds.values() if r["strategy"] == strategy), key=lambda r: r["round"])
            if len(points) > 1:
                ax.plot([p[x] for p in points], [p[y] for p in points], style, label=names[strategy])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Active learning, MiniLM, one seed: K={need(settings, results, 'k')} sentences a round,\n"
                 f"{settings['first_steps']} then {settings['steps']} steps a round, scored on {settings['dev']} CADEC dev sentences",
                 fontsize=11)  # fmt: skip
    fig.tight_layout()
    return save(fig, output)


# ---------------------------------------------------------------------------------------------
# Command line and the benchmark scripts' hook

PLOTS = {"accuracy": plot_accuracy_by_seed, "speed": plot_speed, "memory": plot_memory_by_length, "serve": plot_serve_load, "scaling": plot_scaling,
         "active-learning": plot_active_learning}  # fmt: skip
PLOT_FILES = {"accuracy": "accuracy-by-seed.png", "speed": "speed.png", "memory": "memory-by-length.png", "serve": "serve-load.png", "scaling": "scaling.png",
              "active-learning": "active-learning.png"}  # fmt: skip


def plot_after_run(name: str, **sources) -> Optional[Path]:
    """Draw plot NAME after a benchmark wrote its JSON; one line saying why when it cannot."""
    try:
        path = PLOTS[name](**sources)
    except (MatplotlibMissing, PlotDataError) as error:
        print(f"plot {PLOT_FILES[name]} skipped: {error}")
        return None
    print(f"plot written: {path}")
    return path


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"plots to draw (default: all): {', '.join(PLOTS)}")
    parser.add_argument("--out-dir", type=Path, help="write the PNGs here instead of beside their JSON")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in PLOTS]
    if unknown:
        parser.error(f"unknown plot {', '.join(unknown)}: choose from {', '.join(PLOTS)}")
    for name in args.names or PLOTS:
        options = {"output": args.out_dir / PLOT_FILES[name]} if args.out_dir else {}
        try:
            print(PLOTS[name](**options))
        except (MatplotlibMissing, PlotDataError) as error:
            sys.exit(str(error))


if __name__ == "__main__":
    main()
