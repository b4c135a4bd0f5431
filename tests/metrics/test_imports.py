"""The modules of ``ragpulse.metrics`` import each other without a cycle.

A cycle works only as long as every module in it happens to be imported in a lucky order (or only under
``TYPE_CHECKING``, or only inside a function); a new import or an import-order change then breaks it, and a type
checker or a refactoring tool trips over it earlier. So every import counts here: at top level, under
``if TYPE_CHECKING:`` and inside functions. ``from ragpulse.metrics import x`` counts as importing the package's
``__init__`` too, as it reads the package's namespace; the parent packages that Python initialises on the way to
any sub-module are not edges (every module would depend on ``__init__``).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Set
from pathlib import Path

from ragpulse import metrics

PACKAGE = metrics.__name__
FOLDER = Path(metrics.__file__ or "").parent


def module_files() -> dict[str, Path]:
    """Every module of the package by its dotted name; the package itself is its ``__init__.py``."""
    return {
        PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}": path for path in sorted(FOLDER.glob("*.py"))
    }


def imported_modules(module: str, source: str, *, is_package: bool, known: Set[str]) -> set[str]:
    """The modules among ``known`` that ``module`` imports anywhere in ``source``."""
    named: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package holding ``module`` (or ``module`` itself for a package)
                parts = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join([*parts[: len(parts) - node.level + 1], *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            named.add(base)
            named.update(f"{base}.{alias.name}" for alias in node.names)  # ``from package import submodule``
    return (named & known) - {module}


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    return {
        module: imported_modules(
            module, path.read_text(encoding="utf-8"), is_package=path.name == "__init__.py", known=files.keys()
        )
        for module, path in files.items()
    }


def find_cycle(graph: Mapping[str, Set[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or None; searched in sorted order so that a failure reads the same each run."""
    on_path: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> list[str] | None:
        on_path.append(node)
        for target in sorted(graph.get(node, ())):
            if target in on_path:
                return [*on_path[on_path.index(target) :], target]
            if target not in done and (cycle := visit(target)):
                return cycle
        on_path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        if node not in done and (cycle := visit(node)):
            return cycle
    return None


def test_metrics_import_graph_is_acyclic() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle in ragpulse.metrics: " + " -> ".join(cycle or [])


def test_the_graph_sees_every_module_and_their_imports() -> None:
    """Guards the guard: the walk must find the modules and the edges that are known to exist."""
    graph = import_graph()
    assert len(graph) == len(list(FOLDER.glob("*.py"))) > 20
    assert f"{PACKAGE}.registry" in graph[PACKAGE]
    assert {f"{PACKAGE}.faithfulness", f"{PACKAGE}._request"} <= graph[f"{PACKAGE}.registry"]
    assert f"{PACKAGE}._request" in graph[f"{PACKAGE}.llm_judge"]


def test_imports_under_type_checking_in_functions_and_relative_ones_count() -> None:
    source = """
from typing import TYPE_CHECKING
import numpy
if TYPE_CHECKING:
    from ragpulse.metrics.registry import MetricRequest
def lazily():
    from ragpulse.metrics import f1
    from . import ndcg
    from .batch import TraceBatch
    import ragpulse.metrics.recall as recall
"""
    known = {PACKAGE, *(f"{PACKAGE}.{name}" for name in ("registry", "f1", "ndcg", "batch", "recall", "judge"))}
    found = imported_modules(f"{PACKAGE}.judge", source, is_package=False, known=known)
    assert found == known - {f"{PACKAGE}.judge"}


def test_find_cycle_names_the_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"b", "d"}, "d": set()}
    assert find_cycle(graph) == ["b", "c", "b"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
