"""The layout of the package, read from the source with ``ast``: rooms whose imports point one way (cli -> flows ->
tasks -> metrics, and between the rooms of tasks/ without a cycle, module by module and folder by folder), the
Prefect tasks of each room in its ``tasks.py`` over plain library modules, core at the bottom, and no two modules
with one name but the names every room uses alike.

Every import counts, wherever it is (module level, inside a function, under ``TYPE_CHECKING``): a lazy import is
still a dependency, it only runs later.
"""

from __future__ import annotations

import ast
import graphlib
import importlib
import itertools
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import ragpulse.tasks

PACKAGE = "ragpulse.tasks"
CORE = f"{PACKAGE}.core"
FLOWS = "ragpulse.flows"
TASKS_MODULE = "tasks"
#: Module names every room may use alike: the floor plan of a room.
FLOOR_PLAN = frozenset({"__init__", "__main__", TASKS_MODULE, "config"})


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


def test_the_prefect_tasks_of_a_room_are_its_tasks_module() -> None:
    """A newcomer finds a room's Prefect tasks in ``<room>/tasks.py`` and nowhere else; every other module of the
    room is plain library (importable and testable without Prefect's engine)."""
    task_modules = {name for name, module in _modules().items() if module.defines_tasks}
    assert {f"{PACKAGE}.ingest.tasks", f"{PACKAGE}.scoring.tasks", f"{PACKAGE}.warehouse.tasks"} <= task_modules
    misplaced = sorted(name for name in task_modules if name.rsplit(".", 1)[-1] != TASKS_MODULE)
    assert not misplaced, f"Prefect tasks outside a room's {TASKS_MODULE}.py: {misplaced}"
    idle = sorted(
        name
        for name, module in _modules().items()
        if name != PACKAGE and name.endswith("." + TASKS_MODULE) and name not in task_modules
    )
    assert not idle, f"{TASKS_MODULE}.py modules without a Prefect task: {idle}"


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


def _room(name: str) -> str:
    """The room of a tasks module: the folder (or top-level module) right below ``ragpulse.tasks``."""
    return ".".join(name.split(".")[:3])


def test_the_rooms_of_tasks_import_each_other_without_a_cycle() -> None:
    """Folder by folder: two rooms that import each other, even through different modules, are one concern split
    in two (or two concerns tangled), whatever the module graph says."""
    rooms: dict[str, set[str]] = {}
    for name in _modules():
        if name == PACKAGE:
            continue
        rooms.setdefault(_room(name), set()).update(
            _room(target) for target in _direct_imports(name) if target != PACKAGE and _room(target) != _room(name)
        )
    try:
        graphlib.TopologicalSorter(rooms).prepare()
    except graphlib.CycleError as error:
        cycle = error.args[1]
        edges = {
            (name, target)
            for source, room in itertools.pairwise(cycle)
            for name in _modules()
            if _room(name) == room
            for target in _direct_imports(name)
            if _room(target) == source
        }
        raise AssertionError(
            "import cycle between rooms of tasks/: " + " -> ".join(reversed(cycle)) + "\n" + _report(edges)
        ) from None


def _package_modules() -> dict[str, Path]:
    """Every module of the installed package, flows, cli and metrics included, by dotted name."""
    found = {}
    for top in ("cli", "flows", "metrics", "tasks"):
        package = importlib.import_module(f"ragpulse.{top}")
        root = Path(package.__file__ or "").parent
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(["ragpulse", top, *parts])] = path
    return found


def test_no_two_modules_share_a_name_outside_the_floor_plan() -> None:
    """``drift.py`` in two rooms, or ``stage.py`` beside ``staging.py``, leaves a reader guessing which is which."""
    by_name: dict[str, list[str]] = {}
    for dotted in _package_modules():
        by_name.setdefault(dotted.rsplit(".", 1)[-1], []).append(dotted)
    shared = {name: homes for name, homes in by_name.items() if len(homes) > 1 and name not in FLOOR_PLAN}
    assert not shared, f"module names used twice: {shared}"


#: The top-level rooms in import order: each may import those after it, never one before it.
LAYERS = ("ragpulse.cli", "ragpulse.flows", "ragpulse.tasks", "ragpulse.metrics")


def test_the_top_level_rooms_import_one_way() -> None:
    offenders = set()
    for dotted, path in _package_modules().items():
        layer = next(index for index, top in enumerate(LAYERS) if dotted.startswith(top + "."))
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for name in names:
                above = [top for top in LAYERS[:layer] if name == top or name.startswith(top + ".")]
                offenders.update((dotted, name) for _ in above)
    assert not offenders, "imports against the direction cli -> flows -> tasks -> metrics:\n" + _report(offenders)


def test_each_group_of_the_run_configuration_lives_in_a_config_module() -> None:
    """A room's settings are in its ``config.py`` (the groups no room reads in ``tasks/config.py``): a newcomer finds
    a setting's declaration by the room it configures."""
    from ragpulse.tasks.config import GROUPS

    homes = {name: group.__module__ for name, group in GROUPS.items()}
    misplaced = {name: home for name, home in homes.items() if home.rsplit(".", 1)[-1] != "config"}
    assert not misplaced, f"configuration groups outside a config module: {misplaced}"


def test_only_planning_reads_the_whole_run_configuration() -> None:
    """Rooms read their own group from their own ``config.py``; the assembled configuration (``tasks/config.py``,
    which imports every room's group) is read by planning alone, which checks and plans a whole run."""
    whole = f"{PACKAGE}.config"
    readers = {
        name
        for name in _modules()
        if name != whole and whole in {_resolve(imported) for imported in _modules()[name].imported()}
    }
    assert {_room(name) for name in readers} <= {f"{PACKAGE}.planning"}, sorted(readers)
