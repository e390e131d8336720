"""The package's layout: folders are layers, checked by import-linter's contracts in setup.cfg
(``lint-imports``: every module in a layer, none importing a higher one) and listed in the same
order by the package's docstring; the root holds at most MAX_ROOT_MODULES modules; no import
cycle, no long function, and the base package imports none of the optional integrations
(scripts/import_graph.py reads the source)."""
import configparser
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = ROOT / "setup.cfg"


def contract_layers(config: Path = CONTRACTS) -> list:
    """The layers contract's layers, highest first, each a list of its names."""
    parser = configparser.ConfigParser()
    parser.read(config, encoding="utf8")
    lines = parser["importlinter:contract:layers"]["layers"].strip().splitlines()
    return [[name.strip() for name in line.split("|")] for line in lines]


def docstring_layers() -> list:
    """The layers the package's docstring lists, highest first: its bullets' names before the colon."""
    import spacy_w2ner

    bullets = re.findall(r"^\* (.+?):", spacy_w2ner.__doc__, flags=re.M)
    return [re.findall(r"``([^`]+)``", bullet) for bullet in bullets]


def lint_imports(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("importlinter", reason="the import contracts need import-linter: pip install -e .[test]")
    script = Path(sys.executable).with_name("lint-imports")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "importlinter.cli"]
    environment = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True)


def _graph_module():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycle_and_no_function_over_60_lines():
    graph_module = _graph_module()
    graph = graph_module.import_graph(ROOT)
    assert graph_module.cycles(graph) == []
    assert list(graph_module.long_functions(ROOT)) == []


def test_the_root_holds_few_modules():
    """A new module goes in its layer's folder (the layers contract is exhaustive: a new folder or
    root module is given a layer in setup.cfg)."""
    graph_module = _graph_module()
    root = graph_module.root_modules(ROOT)
    assert len(root) <= graph_module.MAX_ROOT_MODULES, f"the package root has {len(root)} modules: {root}"


def test_lint_imports_keeps_every_contract():
    result = lint_imports(ROOT, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"Contracts: \d+ kept, 0 broken", result.stdout)


def test_the_contracts_catch_an_upward_import_and_torch_in_the_corpus_formats(tmp_path):
    """The contracts are not vacuous: a copy of the package where grid/ imports model/ and formats/
    imports torch breaks them, each broken import named."""
    shutil.copytree(ROOT / "spacy_w2ner", tmp_path / "spacy_w2ner", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(CONTRACTS, tmp_path / "setup.cfg")
    with (tmp_path / "spacy_w2ner" / "grid" / "codec.py").open("a") as codec:
        codec.write("\nfrom ..model import types  # noqa\n")
    with (tmp_path / "spacy_w2ner" / "formats" / "base.py").open("a") as base:
        base.write("\nimport torch  # noqa\n")
    result = lint_imports(tmp_path, tmp_path)
    assert result.returncode == 1
    assert "spacy_w2ner.grid.codec -> spacy_w2ner.model.types" in result.stdout
    assert "spacy_w2ner.formats is not allowed to import torch" in result.stdout


def test_the_package_docstring_lists_the_contracts_layers():
    assert docstring_layers() == contract_layers()


def test_the_architecture_page_lists_the_contracts_layers_lowest_first():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf8")
    rows = re.findall(r"^\| [^|]+ \| (`[^|]+) \|$", page, flags=re.M)
    names = [re.findall(r"`([^`]+)`", re.sub(r"\([^)]*\)", "", row)) for row in rows]  # not the modules in brackets
    listed = [[name.rstrip("/").removesuffix(".py") for name in row] for row in names]
    assert listed == contract_layers()[::-1]


def test_the_root_count_is_what_the_script_checks(tmp_path):
    graph_module = _graph_module()
    package = tmp_path / "spacy_w2ner"
    (package / "sub").mkdir(parents=True)
    for name in ["__init__", "a", "b"]:
        (package / f"{name}.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    assert graph_module.root_modules(tmp_path) == ["a", "b"]
    assert graph_module.folders(tmp_path) == ["spacy_w2ner.sub"]


def test_the_cycle_finder_finds_a_cycle_hidden_behind_a_lazy_import(tmp_path):
    graph_module = _graph_module()
    package = tmp_path / "spacy_w2ner"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from .sub.b import f\n")
    (package / "sub" / "b.py").write_text("def f():\n    from ..a import g\n")
    assert graph_module.cycles(graph_module.import_graph(tmp_path)) == [["spacy_w2ner.a", "spacy_w2ner.sub.b"]]


def test_the_package_imports_no_optional_integration():
    code = (
        "import sys, spacy_w2ner, spacy_w2ner.cli, spacy_w2ner.annotate, spacy_w2ner.common\n"
        "loaded = sorted(m for m in ('ray', 'fastapi', 'uvicorn', 'starlette', 'onnxruntime', 'mkdocs') if m in sys.modules)\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


@pytest.mark.parametrize(
    "name",
    ["get_entities", "set_entities", "Entity", "W2NER", "annotate_dataset", "load_pipeline", "AnnotateOptions",
     "score_entities", "bundled_encoder_path", "encoder_path"],
)  # fmt: skip
def test_the_public_names_import_from_the_package(name):
    import spacy_w2ner

    assert getattr(spacy_w2ner, name) is not None
    assert name in spacy_w2ner.__all__


def test_every_public_name_is_what_it_names_after_the_lazy_imports():
    """A lazy name whose module's import binds a subpackage of the same name over it (``annotate``
    once gave the function, then the module: 'module' object is not callable) fails this."""
    code = (
        "import inspect, spacy_w2ner\n"
        "first = {name: getattr(spacy_w2ner, name) for name in spacy_w2ner.__all__}\n"
        "changed = [n for n in spacy_w2ner.__all__ if getattr(spacy_w2ner, n) is not first[n] or inspect.ismodule(first[n])]\n"
        "import spacy_w2ner.annotate\n"
        "print(changed, callable(spacy_w2ner.annotate.annotate))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]", "True"]


def test_an_unknown_name_is_an_attribute_error():
    import spacy_w2ner

    with pytest.raises(AttributeError, match="has no attribute 'annotate_everything'"):
        spacy_w2ner.annotate_everything
