"""bench/plots.py: each plot from small result files, its errors on incomplete ones, the hook the
benchmark scripts call, and the command line on the committed results (matplotlib only)."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]


def load_plots():
    spec = importlib.util.spec_from_file_location("bench_plots", ROOT / "bench" / "plots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


plots = load_plots()


def write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf8")
    return path


def png_size(path: Path):
    """(width, height) of a PNG file, read back with matplotlib."""
    from matplotlib.image import imread

    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width = imread(str(path)).shape[:2]
    return width, height


def assert_readable_png(path: Path) -> None:
    width, height = png_size(path)
    assert width > 300 and height > 300


# --- accuracy-by-seed.png ---------------------------------------------------------------------


def accuracy_results(folder: Path) -> Path:
    write(folder / "cadec-w2ner-seeds.json", {"w2ner_f": {"mean": 69.5, "std": 0.7, "per_seed": [68.8, 69.5, 70.2]},
                                              "w2ner_discontinuous_f": {"mean": 34.0, "std": 2.0, "per_seed": [32.0, 34.0, 36.0]}})  # fmt: skip
    write(folder / "conll03-w2ner.json", {"w2ner_f": 0.80})
    write(folder / "conll03-ner.json", {"ents_f": 0.81})
    return folder


def test_accuracy_plot_draws_seeds_baselines_and_cited_figures(tmp_path):
    results = accuracy_results(tmp_path)
    rows = plots.dataset_rows(results, "cadec")
    assert rows[0] == plots.Row("w2ner, MiniLM, 3 seeds", "w2ner", [68.8, 69.5, 70.2], (69.5, 0.7))
    assert [row.points for row in rows[1:]] == [[value] for _, value, _ in plots.CITED_F1["cadec"]]
    assert [(row.label, row.points) for row in plots.dataset_rows(results, "conll03")[:2]] == [
        ("w2ner, MiniLM", [80.0]),
        ("spaCy ner, MiniLM", [81.0]),
    ]
    assert plots.dataset_rows(results, "genia") == []  # no w2ner result: no panel
    write(results / "cadec-w2ner-mpnet-seeds.json", {"w2ner_f": {"mean": 72.5, "std": 0.4, "per_seed": [72.1, 72.5, 72.9]},
                                                     "w2ner_discontinuous_f": {"mean": 38.0, "std": 5.0, "per_seed": [33.0, 44.0, 37.0]}})  # fmt: skip
    rows = plots.dataset_rows(results, "cadec")
    assert rows[:2] == [
        plots.Row("w2ner, MPNet-base, 3 seeds", "w2ner", [72.1, 72.5, 72.9], (72.5, 0.4)),
        plots.Row("w2ner, MiniLM, 3 seeds", "w2ner", [68.8, 69.5, 70.2], (69.5, 0.7)),
    ]
    assert_readable_png(plots.plot_accuracy_by_seed(results))
    assert (results / "accuracy-by-seed.png").exists()


def test_accuracy_plot_has_a_panel_of_cadecs_discontinuous_entities(tmp_path):
    results = accuracy_results(tmp_path)
    write(results / "cadec-w2ner-mpnet-seeds.json", {"w2ner_f": {"mean": 72.5, "std": 0.4, "per_seed": [72.1, 72.5, 72.9]},
                                                     "w2ner_discontinuous_f": {"mean": 38.0, "std": 5.0, "per_seed": [33.0, 44.0, 37.0]}})  # fmt: skip
    write(results / "cadec-spancat.json", {"w2ner_f": 0.6})
    assert plots.dataset_rows(results, "cadec-discontinuous") == [
        plots.Row("w2ner, MPNet-base, 3 seeds", "w2ner", [33.0, 44.0, 37.0], (38.0, 5.0)),
        plots.Row("w2ner, MiniLM, 3 seeds", "w2ner", [32.0, 34.0, 36.0], (34.0, 2.0)),
        plots.Row("TriG-NER, its best overall setting", "published", [48.55]),
    ]  # no spaCy baseline: it cannot represent a discontinuous entity
    assert "spaCy spancat, MiniLM" in [row.label for row in plots.dataset_rows(results, "cadec")]
    assert_readable_png(plots.plot_accuracy_by_seed(results))
    write(results / "cadec-w2ner-seeds.json", {"w2ner_f": {"mean": 69.5, "std": 0.7, "per_seed": [68.8, 69.5, 70.2]}})
    with pytest.raises(plots.PlotDataError, match=r"cadec-w2ner-seeds\.json: no key 'w2ner_discontinuous_f'"):
        plots.dataset_rows(results, "cadec-discontinuous")


def test_accuracy_plot_names_the_file_and_key_it_misses(tmp_path):
    write(tmp_path / "cadec-w2ner-seeds.json", {"w2ner_f": {"mean": 69.5, "std": 0.7}})
    with pytest.raises(plots.PlotDataError, match=r"cadec-w2ner-seeds\.json: no key 'w2ner_f\.per_seed'"):
        plots.plot_accuracy_by_seed(tmp_path)
    (tmp_path / "cadec-w2ner-seeds.json").unlink()
    write(tmp_path / "cadec-w2ner.json", {"w2ner_p": 0.7})
    with pytest.raises(plots.PlotDataError, match=r"cadec-w2ner\.json: no key 'w2ner_f' or 'ents_f'"):
        plots.plot_accuracy_by_seed(tmp_path)


def test_accuracy_plot_without_any_result_says_where_it_looked(tmp_path):
    with pytest.raises(plots.PlotDataError, match=str(tmp_path)):
        plots.plot_accuracy_by_seed(tmp_path)
    assert not (tmp_path / "accuracy-by-seed.png").exists()


# --- speed.png --------------------------------------------------------------------------------


def throughput_json(path: Path, **drop) -> Path:
    data = {key: {"sentences_per_s": value} for key, value in
            {"train_w2ner": 20.0, "train_spancat": 25.0, "infer_transformer": 160.0, "infer_spancat": 95.0, "infer_w2ner": 96.0}.items()}  # fmt: skip
    return write(path, {key: value for key, value in data.items() if key not in drop})


def speed_sources(folder: Path) -> dict:
    optimize = {"speed": {"float32 annotate (0.2.0)": {"docs_per_s": 100.0}, "float32 annotate": {"docs_per_s": 140.0},
                          "int8 annotate": {"docs_per_s": 150.0}, "encoder alone": {"docs_per_s": 300.0}}}  # fmt: skip
    annotate = {"settings": {"docs": "1000", "model": "training/x/model-best"},
                "pipe": {"docs_per_s": 50.0}, "annotate": {"docs_per_s": 55.0}}  # fmt: skip
    gpu = folder / "gpu"
    gpu.mkdir()
    (gpu / "results.jsonl").write_text(
        '{"bench": "train-mixed", "failed": 124}\n'
        '{"bench": "train", "batch_size": 12, "sentences_per_s": 70.0}\n'
        '{"bench": "infer", "batch_size": 128, "sentences_per_s": 600.0, "encoder_only_sentences_per_s": 2000.0}\n'
    )
    (gpu / "accuracy-results.jsonl").write_text(
        '{"bench": "infer", "batch_size": 128, "sentences_per_s": 650.0, "encoder_only_sentences_per_s": 2600.0}\n'
    )
    return {"throughput": [throughput_json(folder / "cpu-throughput.json")], "optimize": write(folder / "cpu-optimize.json", optimize),
            "annotate": [write(folder / "cpu-annotate.json", annotate)], "gpu": gpu}  # fmt: skip


def test_speed_plot_from_every_source(tmp_path):
    sources = speed_sources(tmp_path)
    categories, runs = plots.gpu_runs(sources["gpu"])
    assert ("inference, batch 128", "w2ner") in categories
    bert = {"training, batch 12": 70.0, "inference, batch 128": 600.0, "encoder alone, batch 128": 2000.0}
    assert runs == [("BERT-base size, random weights", bert), ("MiniLM, CADEC recipe", {"inference, batch 128": 650.0,
                    "encoder alone, batch 128": 2600.0}), ("the paper", {"training, the paper, BERT-base, RTX 3090": 116.1,
                    "inference, the paper, BERT-base, RTX 3090": 365.7})]  # fmt: skip
    assert_readable_png(plots.plot_speed(**sources, output=tmp_path / "speed.png"))


def test_speed_plot_with_only_the_throughput_file(tmp_path):
    only = {"throughput": [throughput_json(tmp_path / "cpu-throughput.json")], "optimize": None, "annotate": [], "gpu": None}
    assert_readable_png(plots.plot_speed(**only, output=tmp_path / "speed.png"))


def test_speed_plot_names_the_file_and_key_it_misses(tmp_path):
    sources = speed_sources(tmp_path)
    sources["throughput"] = [throughput_json(tmp_path / "cpu-throughput-r9.json", infer_w2ner=None)]
    with pytest.raises(plots.PlotDataError, match=r"cpu-throughput-r9\.json: no key 'infer_w2ner'"):
        plots.plot_speed(**sources, output=tmp_path / "speed.png")
    assert not (tmp_path / "speed.png").exists()


def test_runs_beside_finds_the_other_runs_and_keeps_the_one_written(tmp_path):
    for name in ("cpu-throughput.json", "cpu-throughput-r4.json", "cpu-annotate.json"):
        write(tmp_path / name, {})
    written = tmp_path / "mine.json"
    assert plots.runs_beside(written, "cpu-throughput*.json") == sorted(
        [tmp_path / "cpu-throughput.json", tmp_path / "cpu-throughput-r4.json", written]
    )


# --- memory-by-length.png ---------------------------------------------------------------------


def long_doc_json(path: Path) -> Path:
    cases = [{"tokens": tokens, "sentences": sentences, "seconds": tokens / (3000 if sentences else 700),
              "rss_growth_mb": 100 + tokens / 100} for sentences in (False, True) for tokens in (1000, 5000, 20000)]  # fmt: skip
    return write(path, {"cases": cases})


def test_memory_plot_of_a_length_series_and_an_annotate_trend(tmp_path):
    trend = {key: {"trend": [{"docs": docs, "rss_mb": rss + docs // 10, "in_use_mb": 330} for docs in (500, 1000, 1500)]}
             for key, rss in (("trim", 600), ("no_trim", 900))}  # fmt: skip
    path = plots.plot_memory_by_length(long_doc_json(tmp_path / "long.json"), optimized=None, after_corpus=None,
                                       annotate_trend=write(tmp_path / "trend.json", trend), output=tmp_path / "memory.png")  # fmt: skip
    assert_readable_png(path)
    series = plots.long_doc_series(tmp_path / "long.json")
    assert [case["tokens"] for case in series[True]] == [1000, 5000, 20000]


def test_memory_plot_names_the_case_and_key_it_misses(tmp_path):
    write(tmp_path / "long.json", {"cases": [{"tokens": 1000, "sentences": True, "seconds": 0.3}]})
    with pytest.raises(plots.PlotDataError, match=r"long\.json: cases\[0\]: no key 'rss_growth_mb'"):
        plots.plot_memory_by_length(tmp_path / "long.json", None, None, None, output=tmp_path / "memory.png")
    with pytest.raises(plots.PlotDataError, match=r"absent\.json: no such file"):
        plots.plot_memory_by_length(tmp_path / "absent.json", None, None, None, output=tmp_path / "memory.png")


# --- serve-load.png ---------------------------------------------------------------------------


def serve_entry(*clients) -> dict:
    return {"annotate": {"documents_per_s": 90.0},
            "local": [{"clients": n, "latency_p50_ms": 20.0 * n, "latency_p99_ms": 40.0 * n, "documents_per_s": 80.0 - 1 / n} for n in clients]}  # fmt: skip


def test_serve_plot_with_and_without_the_pipeline_variants(tmp_path):
    serve = write(tmp_path / "serve.json", {**serve_entry(1, 8, 32), "soak": {"clients": 32, "requests": 100, "latency_p50_ms": 600.0,
                                                                              "latency_p99_ms": 900.0, "documents_per_s": 75.0}})  # fmt: skip
    variants = write(tmp_path / "variants.json", {"command": "...", "float32": serve_entry(32), "int8": serve_entry(32)})
    assert_readable_png(plots.plot_serve_load(serve, variants, output=tmp_path / "with.png"))
    assert_readable_png(plots.plot_serve_load(serve, None, output=tmp_path / "without.png"))
    assert png_size(tmp_path / "with.png")[1] > png_size(tmp_path / "without.png")[1]


def test_serve_plot_names_the_row_and_key_it_misses(tmp_path):
    entry = serve_entry(1, 8)
    del entry["local"][1]["latency_p99_ms"]
    with pytest.raises(plots.PlotDataError, match=r"serve\.json: local\[1\]: no key 'latency_p99_ms'"):
        plots.plot_serve_load(write(tmp_path / "serve.json", entry), None, output=tmp_path / "serve.png")


# --- the hook and the command line ------------------------------------------------------------


def test_after_a_run_without_matplotlib_one_line_says_the_plot_was_skipped(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert plots.plot_after_run("serve", serve=tmp_path / "serve.json", output=tmp_path / "serve.png") is None
    assert capsys.readouterr().out == f"plot serve-load.png skipped: {plots.MATPLOTLIB_MISSING}\n"
    with pytest.raises(SystemExit) as exit_info:
        plots.main(["serve", "--out-dir", str(tmp_path)])
    assert exit_info.value.code == 'matplotlib is missing: pip install "spacy-w2ner[docs]"'


def test_after_a_run_an_incomplete_file_skips_the_plot_and_names_the_file(tmp_path, capsys):
    serve = write(tmp_path / "serve.json", {"annotate": {}})
    assert plots.plot_after_run("serve", serve=serve, variants=None, output=tmp_path / "serve.png") is None
    assert capsys.readouterr().out == f"plot serve-load.png skipped: {serve}: no key 'local'\n"
    complete = write(serve, serve_entry(1, 2))
    assert plots.plot_after_run("serve", serve=complete, variants=None, output=tmp_path / "serve.png") == tmp_path / "serve.png"


def test_the_command_line_regenerates_every_plot_from_the_committed_results_without_torch_or_spacy(tmp_path):
    check = (
        "import runpy, sys; sys.argv = ['bench/plots.py', '--out-dir', sys.argv[1]]; runpy.run_path('bench/plots.py', run_name='__main__'); "
        "heavy = [name for name in ('torch', 'spacy', 'spacy_w2ner') if name in sys.modules]; assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", check, str(tmp_path)], cwd=ROOT, check=True, capture_output=True, text=True)
    for name in plots.PLOT_FILES.values():
        assert_readable_png(tmp_path / name)
    committed = [ROOT / "project" / "results" / "accuracy-by-seed.png"]
    committed += [ROOT / "bench" / "results" / name for name in ("speed.png", "memory-by-length.png", "serve-load.png")]
    committed += [ROOT / "bench" / "results" / "active-learning.png"]
    assert [path for path in committed if not path.exists()] == []


def test_the_command_line_refuses_an_unknown_plot(capsys):
    with pytest.raises(SystemExit) as exit_info:
        plots.main(["speeed"])
    assert exit_info.value.code == 2
    assert "unknown plot speeed" in capsys.readouterr().err


def test_active_learning_plot_names_the_file_and_key_it_misses(tmp_path):
    results = tmp_path / "cpu-active-learning.json"
    results.write_text(json.dumps({"settings": {"k": 100}}))
    with pytest.raises(plots.PlotDataError, match=r"cpu-active-learning.json: no key 'rounds'"):
        plots.plot_active_learning(results, tmp_path / "al.png")
