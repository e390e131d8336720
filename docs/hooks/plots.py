"""mkdocs hook: the benchmark plots, which live beside their results outside docs/, in the site.

Each plot is added to the site's files under ``plots/`` (``PLOTS`` maps the site path to the file in
the repository), so a page shows ``![...](plots/speed.png)`` without a copy in docs/. A plot that
is missing is a warning naming the file and the command that makes it, so ``mkdocs build
--strict`` fails on it; a plain ``mkdocs build`` still builds (the page then shows a broken image).
"""
import logging
from pathlib import Path

from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.plots")

ROOT = Path(__file__).resolve().parents[2]

# Site path (as pages link it) -> the file in the repository.
PLOTS = {
    "plots/accuracy-by-seed.png": "project/results/accuracy-by-seed.png",
    "plots/speed.png": "bench/results/speed.png",
    "plots/memory-by-length.png": "bench/results/memory-by-length.png",
    "plots/serve-load.png": "bench/results/serve-load.png",
    "plots/scaling.png": "bench/results/scaling.png",
    "plots/active-learning.png": "bench/results/active-learning.png",
}


def on_files(files, config):
    for site_path, repo_path in PLOTS.items():
        source = ROOT / repo_path
        if not source.is_file():
            log.warning(f"plot {repo_path} is missing: pages show it as {site_path}; the benchmarks page says which command makes it")
            continue
        files.append(File.generated(config, site_path, abs_src_path=str(source)))
    return files
