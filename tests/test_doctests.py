"""The examples in docstrings run, under their ``ragpulse.*`` names.

pytest's ``--doctest-modules`` imported metrics/*.py as ``metrics.*`` (the folder name), not as the installed
``ragpulse.metrics.*``, so the doctests are collected here from the imported modules instead.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from tests.packaging.layout import walk_module_names

MODULE_NAMES = walk_module_names()
# pytest's default doctest_optionflags, which the examples were written against
OPTIONFLAGS = doctest.ELLIPSIS
PROMPT = re.compile(r"^\s*>>>", re.MULTILINE)


def _doctests(name: str) -> list[doctest.DocTest]:
    """The module's doctests that hold examples; objects re-exported from other modules are left to those."""
    module = importlib.import_module(name)
    return [test for test in doctest.DocTestFinder().find(module, name) if test.examples]


def _collect() -> tuple[list[str], dict[str, str]]:
    """Modules with examples, and modules that failed to import (name -> error) so that they fail a test."""
    found: list[str] = []
    broken: dict[str, str] = {}
    for name in MODULE_NAMES:
        try:
            if _doctests(name):
                found.append(name)
        except Exception as exc:  # reported by test_modules_with_prompts_import, not at collection
            broken[name] = f"{type(exc).__name__}: {exc}"
    return found, broken


DOCTESTED, BROKEN = _collect()


def _has_prompt(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    origin = spec.origin if spec is not None else None
    return origin is not None and origin.endswith(".py") and bool(PROMPT.search(Path(origin).read_text()))


@pytest.mark.parametrize("name", DOCTESTED)
def test_doctests(name: str) -> None:
    """Each module's examples pass; the failure is the doctest runner's own report."""
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    for test in _doctests(name):
        runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{name}: {results.failed} of {results.attempted} examples failed\n" + "".join(report)


def test_doctests_are_found() -> None:
    """The finder reached the examples at all (a walk or import regression would silently run none), and every
    module whose source shows a ``>>>`` prompt had its examples collected."""
    broken = {name: error for name, error in BROKEN.items() if _has_prompt(name)}
    assert not broken, f"modules with examples fail to import: {broken}"
    examples = sum(len(test.examples) for name in DOCTESTED for test in _doctests(name))
    assert examples > 0
    with_prompts = {name for name in MODULE_NAMES if name not in BROKEN and _has_prompt(name)}
    missed = sorted(with_prompts - set(DOCTESTED))
    assert not missed, f"modules with >>> in their source but no doctest found: {missed}"
