"""The package's layout: folders are layers, the root holds at most MAX_ROOT_MODULES modules,
no import cycle, no long function, and the base package imports none of the optional
integrations (scripts/import_graph.py reads the source)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Each layer may import its own modules and those of lower layers, never a higher one.
LAYERS = {
    "spacy_w2ner.entities": 0, "spacy_w2ner.messages": 0, "spacy_w2ner.memory": 0, "spacy_w2ner.extras": 0,
    "spacy_w2ner.files": 0,
    "spacy_w2ner.grid": 1, "spacy_w2ner.nn": 1, "spacy_w2ner.formats": 1,
    "spacy_w2ner.model": 2,
    "spacy_w2ner.encoders": 3,
    "spacy_w2ner.component": 4, "spacy_w2ner.scorer": 4, "spacy_w2ner.diagnostics": 4,
    "spacy_w2ner.common": 5, "spacy_w2ner.training": 5, "spacy_w2ner.training.adapt": 5, "spacy_w2ner.visualize": 5,
    "spacy_w2ner.annotate": 6,
    "spacy_w2ner.serve": 7, "spacy_w2ner.release": 7, "spacy_w2ner.label_studio_backend": 7,
    "spacy_w2ner.cli": 8, "spacy_w2ner.__main__": 8,
}  # fmt: skip


def _graph_module():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _layer(module: str) -> str:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")


def test_no_import_cycle_and_no_function_over_60_lines():
    graph_module = _graph_module()
    graph = graph_module.import_graph(ROOT)
    assert graph_module.cycles(graph) == []
    assert list(graph_module.long_functions(ROOT)) == []


def test_the_root_holds_few_modules_and_every_folder_and_root_module_has_a_layer():
    """A new module goes in its layer's folder; a new folder or root module is given a layer here."""
    graph_module = _graph_module()
    root = graph_module.root_modules(ROOT)
    assert len(root) <= graph_module.MAX_ROOT_MODULES, f"the package root has {len(root)} modules: {root}"
    named = [f"spacy_w2ner.{name}" for name in root] + graph_module.folders(ROOT)
    assert [name for name in named if name not in LAYERS] == []
    assert [name for name in LAYERS if name not in named] == []  # no layer left for a module that moved


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


def test_no_layer_imports_a_higher_one():
    graph = _graph_module().import_graph(ROOT)
    upward = []
    for module, targets in graph.items():
        if module == "spacy_w2ner":
            continue  # the package's front: its public names
        for target in targets - {"spacy_w2ner"}:  # the version, read by the service
            if LAYERS[_layer(target)] > LAYERS[_layer(module)]:
                upward.append(f"{module} -> {target}")
    assert upward == []


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
    ["get_entities", "set_entities", "Entity", "W2NER", "annotate", "annotate_dataset", "load_pipeline", "AnnotateOptions",
     "score_entities", "bundled_encoder_path", "encoder_path"],
)  # fmt: skip
def test_the_public_names_import_from_the_package(name):
    import spacy_w2ner

    assert getattr(spacy_w2ner, name) is not None
    assert name in spacy_w2ner.__all__


def test_an_unknown_name_is_an_attribute_error():
    import spacy_w2ner

    with pytest.raises(AttributeError, match="has no attribute 'annotate_everything'"):
        spacy_w2ner.annotate_everything
