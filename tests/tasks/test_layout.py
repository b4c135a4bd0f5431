"""The layout of tasks/, read from the source with ``ast``: thin task modules over libraries, no import cycles,
nothing reaching up into the flows, and core at the bottom.

Every import counts, wherever it is (module level, inside a function, under ``TYPE_CHECKING``): a lazy import is
still a dependency, it only runs later.
"""

from __future__ import annotations

import ast
import graphlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import ragpulse.tasks

PACKAGE = "ragpulse.tasks"
CORE = f"{PACKAGE}.core"
FLOWS = "ragpulse.flows"


@dataclass(frozen=True)
class Module:
    name: str
    tree: ast.Module
    is_package: bool

    @property
    def defines_tasks(self) -> bool:
        """Whether a function of this module is decorated with Prefect's ``task`` (bare, called or qualified)."""
        return any(
            _is_task_decorator(decorator)
            for node in ast.walk(self.tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            for decorator in node.decorator_list
        )

    def imported(self) -> set[str]:
        """Every dotted name this module imports: modules, and ``module.name`` for each name imported from one."""
        names: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(node)
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names)
        return names

    def _absolute(self, node: ast.ImportFrom) -> str:
        """The module an ``ImportFrom`` names, relative imports resolved against this module's package."""
        if not node.level:
            return node.module or ""
        package = self.name.split(".") if self.is_package else self.name.split(".")[:-1]
        anchor = package[: len(package) - node.level + 1]
        return ".".join([*anchor, *([node.module] if node.module else [])])


def _is_task_decorator(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Name):
        return target.id == "task"
    return isinstance(target, ast.Attribute) and target.attr == "task" and ast.unparse(target.value) == "prefect"


@cache
def _modules() -> dict[str, Module]:
    """Every module under tasks/ by dotted name; a package by its ``__init__.py``."""
    root = Path(ragpulse.tasks.__file__).parent
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join([PACKAGE, *(parts[:-1] if is_package else parts)])
        modules[name] = Module(name, ast.parse(path.read_text(), filename=str(path)), is_package)
    return modules


def _resolve(name: str) -> str | None:
    """The tasks module an imported dotted name lives in (its longest module prefix), or None outside tasks/."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in _modules():
            return candidate
    return None


def _ancestors(name: str) -> list[str]:
    """The packages whose ``__init__`` runs before ``name`` (below ``ragpulse.tasks`` itself)."""
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(3, len(parts))]


def _graph() -> dict[str, set[str]]:
    """module -> the tasks modules its imports run, including the ``__init__`` of each package on the way to them
    (but not its own packages': a module importing its package's ``__init__`` is no cycle)."""
    graph: dict[str, set[str]] = {}
    for name, module in _modules().items():
        own = {*_ancestors(name), name}
        targets = {target for imported in module.imported() if (target := _resolve(imported))}
        graph[name] = {t for target in targets for t in (*_ancestors(target), target) if t not in own} - {PACKAGE}
    return graph


def _direct_imports(name: str) -> set[str]:
    return {target for imported in _modules()[name].imported() if (target := _resolve(imported)) and target != name}


def _report(edges: set[tuple[str, str]]) -> str:
    return "\n".join(f"  {source} -> {target}" for source, target in sorted(edges))


def test_the_layout_sees_the_task_modules() -> None:
    task_modules = {name for name, module in _modules().items() if module.defines_tasks}
    assert {f"{PACKAGE}.ingest.stage", f"{PACKAGE}.scoring.score", f"{PACKAGE}.warehouse.publish"} <= task_modules
    assert f"{PACKAGE}.ingest.staging" not in task_modules


def test_no_task_module_imports_another_task_module() -> None:
    task_modules = {name for name, module in _modules().items() if module.defines_tasks}
    edges = {(name, target) for name in task_modules for target in _direct_imports(name) if target in task_modules}
    assert not edges, (
        "task modules import other task modules; import the library module beside that task instead:\n" + _report(edges)
    )


def test_the_import_graph_of_tasks_has_no_cycles() -> None:
    try:
        graphlib.TopologicalSorter(_graph()).prepare()
    except graphlib.CycleError as error:
        cycle = error.args[1]
        raise AssertionError("import cycle in tasks/: " + " -> ".join(reversed(cycle))) from None


def test_no_task_module_imports_the_flows() -> None:
    offenders = set()
    for name, module in _modules().items():
        # Dotted names in strings too: importlib.import_module("ragpulse.flows...") is an import as well.
        strings = {node.value for node in ast.walk(module.tree) if isinstance(node, ast.Constant)}
        mentioned = module.imported() | {value for value in strings if isinstance(value, str)}
        offenders |= {(name, target) for target in mentioned if target == FLOWS or target.startswith(FLOWS + ".")}
    assert not offenders, "tasks/ must not depend on ragpulse.flows:\n" + _report(offenders)


def test_core_imports_no_other_room() -> None:
    core = [name for name in _modules() if name == CORE or name.startswith(CORE + ".")]
    edges = {
        (name, target)
        for name in core
        for target in _direct_imports(name)
        if target != PACKAGE and not (target == CORE or target.startswith(CORE + "."))
    }
    assert not edges, "tasks/core imports other rooms:\n" + _report(edges)
