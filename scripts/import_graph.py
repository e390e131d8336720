"""The package's import graph: cycles, long functions, the package root's modules and line
counts per folder.

    python scripts/import_graph.py            # a report; exit 1 if there is a cycle or too many root modules
    python scripts/import_graph.py --json     # the same as JSON

Reads the source with ``ast`` (nothing is imported), so an import inside a function counts
as much as one at the top of a module: a cycle hidden behind a lazy import is still a cycle.
An import of a package counts as an import of its ``__init__`` and, for ``from pkg import
name``, of the module ``pkg.name`` when there is one.
"""
import argparse
import ast
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "spacy_w2ner"
LONG_FUNCTION = 60  # lines, decorators and docstring included
# The package root holds the layers' folders and the few modules every layer shares; a module
# that belongs to one capability goes in its folder (``__init__.py`` not counted).
MAX_ROOT_MODULES = 10


def module_files(root: Path = ROOT) -> Dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    files = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(parts)] = path
    return files


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, modules: Set[str]) -> Set[str]:
    """The package's modules that ``module`` imports, anywhere in its source."""
    tree = ast.parse(path.read_text(encoding="utf8"))
    found: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, path.name == "__init__.py", node)
            names = [target] + [f"{target}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in modules)
    found.discard(module)
    return found


def import_graph(root: Path = ROOT) -> Dict[str, Set[str]]:
    files = module_files(root)
    return {module: imports_of(module, path, set(files)) for module, path in files.items()}


def _is_ancestor_package(a: str, b: str) -> bool:
    """A package's ``__init__`` and its own submodules import each other by nature of Python's
    packages (importing ``pkg.mod`` runs ``pkg/__init__``): not counted as a cycle."""
    return b.startswith(a + ".") or a.startswith(b + ".")


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    edges = {m: {n for n in targets if not _is_ancestor_package(m, n)} for m, targets in graph.items()}
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def long_functions(root: Path = ROOT, limit: int = LONG_FUNCTION) -> Iterator[Tuple[str, str, int]]:
    """(file:line, function, lines) of every function longer than ``limit`` lines."""
    for module, path in module_files(root).items():
        tree = ast.parse(path.read_text(encoding="utf8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                length = node.end_lineno - first + 1
                if length > limit:
                    yield f"{path.relative_to(root)}:{node.lineno}", node.name, length


def root_modules(root: Path = ROOT) -> List[str]:
    """The modules directly in the package root, ``__init__`` left out (the package itself)."""
    return sorted(path.stem for path in (root / PACKAGE).glob("*.py") if path.stem != "__init__")


def folders(root: Path = ROOT) -> List[str]:
    """The package's subpackages (folders with an ``__init__.py``), as dotted names."""
    return sorted(".".join(path.parent.relative_to(root).parts) for path in (root / PACKAGE).rglob("*/__init__.py"))


def lines_per_folder(root: Path = ROOT) -> Dict[str, int]:
    """Lines of Python per folder of the package (the root's own modules under the package name)."""
    counts: Dict[str, int] = defaultdict(int)
    for path in (root / PACKAGE).rglob("*.py"):
        folder = str(path.parent.relative_to(root))
        counts[folder] += len(path.read_text(encoding="utf8").splitlines())
    return dict(sorted(counts.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    graph = import_graph()
    report = {
        "modules": len(graph),
        "cycles": cycles(graph),
        "long_functions": [list(f) for f in long_functions()],
        "root_modules": root_modules(),
        "lines_per_folder": lines_per_folder(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['modules']} modules")
        print(f"import cycles: {len(report['cycles'])}")
        for cycle in report["cycles"]:
            print("  " + " <-> ".join(cycle))
        print(f"functions over {LONG_FUNCTION} lines: {len(report['long_functions'])}")
        for where, name, length in report["long_functions"]:
            print(f"  {where} {name} ({length} lines)")
        print(f"modules in the package root: {len(report['root_modules'])} (at most {MAX_ROOT_MODULES}): "
              + ", ".join(report["root_modules"]))
        print("lines per folder:")
        for folder, count in report["lines_per_folder"].items():
            print(f"  {folder:32} {count:6}")
    return 1 if report["cycles"] or len(report["root_modules"]) > MAX_ROOT_MODULES else 0


if __name__ == "__main__":
    sys.exit(main())
