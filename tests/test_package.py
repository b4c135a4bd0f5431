"""Package-level checks: explicit, complete and sorted ``__all__``; valid metric specs; a pure ``metrics``."""

from __future__ import annotations

import ast
import importlib
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ragpulse import metrics
from ragpulse.metrics import REGISTRY, MetricSpec

ROOT = Path(__file__).resolve().parents[1]

# semver.org's recommended pattern
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _metrics_modules() -> list[ModuleType]:
    names = [info.name for info in pkgutil.iter_modules(metrics.__path__, prefix="ragpulse.metrics.")]
    return [metrics, *(importlib.import_module(name) for name in sorted(names))]


MODULES = _metrics_modules()


def _public_definitions(module: ModuleType) -> set[str]:
    """Public names a module defines itself at top level (imports excluded)."""
    tree = ast.parse(Path(module.__file__ or "").read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def _isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions and variables."""
    if name.isupper():
        return 0, name
    if name[0].isupper():
        return 1, name
    return 2, name


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_all_is_complete_sorted_and_resolvable(module: ModuleType) -> None:
    exported = module.__all__
    assert exported == sorted(exported, key=_isort_key), f"{module.__name__}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    missing = _public_definitions(module) - set(exported)
    assert not missing, f"{module.__name__} defines public names missing from __all__: {sorted(missing)}"
    for name in exported:
        assert hasattr(module, name), f"{module.__name__}.__all__ names {name!r}, which does not exist"


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
    assert "metrics" in loaded and "numpy" in loaded
    forbidden = {"prefect", "boto3", "botocore", "aiobotocore", "pandas", "httpx", "haystack", "pytrec_eval"}
    assert not loaded & forbidden, f"import metrics loaded {sorted(loaded & forbidden)}"
