"""Package-level checks: explicit, complete and sorted ``__all__`` everywhere; a true packages list and package
data; valid metric specs; a pure ``ragpulse.metrics``."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from ragpulse import metrics
from ragpulse.metrics import REGISTRY, MetricSpec
from tests.packaging.layout import (
    PACKAGE_DIR,
    PACKAGES,
    data_globs,
    package_data_files,
    package_folders,
    packaged_files,
    walk_module_names,
)

ROOT = Path(__file__).resolve().parents[1]

# semver.org's recommended pattern
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


MODULE_NAMES = walk_module_names()
MODULES = [importlib.import_module(name) for name in MODULE_NAMES if name.split(".")[:2] == ["ragpulse", "metrics"]]


def _top_level_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, including those under a top-level ``if``/``try``/``with`` (not in functions)."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.With):
            yield from _top_level_statements([*node.body, *getattr(node, "orelse", [])])
        elif isinstance(node, ast.Try):
            handlers = [statement for handler in node.handlers for statement in handler.body]
            yield from _top_level_statements([*node.body, *handlers, *node.orelse, *node.finalbody])


def _public_definitions(module: ModuleType) -> set[str]:
    """Public names a module must export: those it defines at top level, and for a package the names it
    imports from its own sub-modules (a package's ``__init__`` imports those to re-export them)."""
    tree = ast.parse(Path(module.__file__ or "").read_text())
    is_package = hasattr(module, "__path__")
    names: set[str] = set()
    for node in _top_level_statements(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(n.id for target in node.targets for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif is_package and isinstance(node, ast.ImportFrom):
            own = node.level == 1 or (node.level == 0 and (node.module or "").startswith(f"{module.__name__}."))
            if own:
                names.update(alias.asname or alias.name for alias in node.names if alias.name != "*")
    return {name for name in names if not name.startswith("_")}


def _natural(name: str) -> tuple[str | int, ...]:
    """Natural order (``a2`` before ``a10``), as ruff's natord compares within a category."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _isort_key(name: str) -> tuple[int, tuple[str | int, ...]]:
    """The order ruff's RUF022 keeps: CONSTANTS (more than one character, all cased ones upper case), then
    Classes (an upper-case first letter), then functions and variables; naturally sorted within each."""
    if len(name) > 1 and name.isupper():
        return 0, _natural(name)
    if name[:1].isupper():
        return 1, _natural(name)
    return 2, _natural(name)


def _resolvable(module: ModuleType, name: str) -> bool:
    """An exported name exists, or (in a package) names a sub-module that ``from package import *`` loads."""
    if hasattr(module, name):
        return True
    return hasattr(module, "__path__") and importlib.util.find_spec(f"{module.__name__}.{name}") is not None


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_all_is_complete_sorted_and_resolvable(name: str) -> None:
    """Every module says what it exports: ``from x import *``, the docs and the re-export checks rely on it."""
    module = importlib.import_module(name)
    exported = vars(module).get("__all__")
    assert exported is not None, f"{name} has no __all__"
    assert isinstance(exported, list | tuple), f"{name}.__all__ is a {type(exported).__name__}, not a list"
    assert all(isinstance(item, str) for item in exported), f"{name}.__all__ holds non-strings"
    duplicated = sorted({item for item in exported if exported.count(item) > 1})
    assert not duplicated, f"{name}.__all__ repeats {duplicated}"
    expected = sorted(exported, key=_isort_key)
    assert list(exported) == expected, f"{name}.__all__ is not in RUF022 order; expected {expected}"
    missing = _public_definitions(module) - set(exported)
    assert not missing, f"{name} defines public names missing from __all__: {sorted(missing)}"
    unresolved = [item for item in exported if not _resolvable(module, item)]
    assert not unresolved, f"{name}.__all__ names {unresolved}, which do not exist"


def test_module_walk_finds_every_package() -> None:
    """The parametrisation above is only as good as the walk: it must reach every package that is shipped."""
    assert set(PACKAGES) <= set(MODULE_NAMES)
    assert len(MODULE_NAMES) > len(PACKAGES)


def test_packages_list_is_the_folders_with_an_init() -> None:
    """``packages`` is listed by hand (find would name them flows.*); a new sub-package left off the list would
    be missing from the wheel while every test against the editable install still passes."""
    folders = package_folders()
    assert len(PACKAGES) == len(set(PACKAGES)), "pyproject.toml lists a package twice"
    missing = sorted(set(folders) - set(PACKAGES))
    assert not missing, f"folders with an __init__.py missing from [tool.setuptools] packages: {missing}"
    stale = sorted(set(PACKAGES) - set(folders))
    assert not stale, f"[tool.setuptools] packages lists packages with no folder holding an __init__.py: {stale}"
    assert {name.split(".")[0] for name in PACKAGE_DIR} == {"ragpulse"}, "package-dir maps a second import root"


def test_package_data_covers_every_non_python_file() -> None:
    """Non-Python files (suites, corpus, templates) reach the wheel only through ``package-data``."""
    declared = package_data_files()
    data = {path for path in packaged_files() if path.suffix not in {".py", ".pyc"}}
    uncovered = sorted(str(path) for path in data - declared)
    assert not uncovered, f"files not covered by [tool.setuptools.package-data]: {uncovered}"


@pytest.mark.parametrize(("package", "pattern"), data_globs())
def test_every_package_data_glob_names_a_package(package: str, pattern: str) -> None:
    """A glob keyed by a package that is not in ``packages`` is silently ignored by setuptools."""
    assert package in {"", "*", *PACKAGES}, f"package-data key {package!r} is not a listed package ({pattern})"


def test_package_reexports_the_public_api() -> None:
    for name in metrics.__all__:
        assert getattr(metrics, name) is not None
    assert {"TraceBatch", "MetricResult", "REGISTRY", "compute", "parse_metrics"} <= set(metrics.__all__)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_registry_specs_are_valid(name: str) -> None:
    spec = REGISTRY[name].spec
    assert spec.name == name
    assert METRIC_NAME.match(spec.name), spec.name
    assert SEMVER.match(spec.version), f"{name}: version {spec.version!r} is not semver"
    assert spec.lower < spec.upper
    assert spec.summary.strip()
    assert not spec.requires_k or spec.takes_k


def test_every_spec_in_the_package_is_registered() -> None:
    registered = {definition.spec for definition in REGISTRY.values()}
    for module in MODULES:
        for value in vars(module).values():
            if isinstance(value, MetricSpec):
                assert value in registered, f"{module.__name__} declares {value.name!r}, which is not in REGISTRY"


def test_importing_metrics_loads_no_prefect_boto3_or_pandas() -> None:
    """ragpulse.metrics stays pure; run from the repository root, where the folders flows/, tasks/ and metrics/
    are importable under their own names, so an import left over from the old layout would show up too."""
    code = (
        "import importlib, json, pkgutil, sys\n"
        "from ragpulse import metrics\n"
        "for info in pkgutil.iter_modules(metrics.__path__, prefix='ragpulse.metrics.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(completed.stdout))
    assert "ragpulse" in loaded and "numpy" in loaded
    forbidden = {"prefect", "boto3", "botocore", "aiobotocore", "pandas", "httpx", "haystack", "pytrec_eval"}
    assert not loaded & forbidden, f"import ragpulse.metrics loaded {sorted(loaded & forbidden)}"
    old_names = {"flows", "tasks", "metrics"} & loaded
    assert not old_names, f"import ragpulse.metrics loaded top-level {sorted(old_names)} (the pre-ragpulse layout)"
