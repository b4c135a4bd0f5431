"""What the distribution is made of, read from pyproject.toml and the source tree.

Shared by tests/test_package.py, tests/test_doctests.py and tests/packaging/test_wheel.py, so that the module
list, the package list and the package data they check are computed one way.
"""

from __future__ import annotations

import glob
import importlib
import os
import pkgutil
import shutil
import subprocess
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS: dict[str, Any] = PYPROJECT["tool"]["setuptools"]
# import name -> folder (relative to the repository root), e.g. "ragpulse.flows" -> "flows"
PACKAGE_DIR: dict[str, str] = SETUPTOOLS["package-dir"]
PACKAGES: list[str] = SETUPTOOLS["packages"]
PACKAGE_DATA: dict[str, list[str]] = SETUPTOOLS.get("package-data", {})
CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})


def source_files(root: Path = ROOT) -> list[Path]:
    """The files a clean checkout plus the not-yet-added new files would hold (relative paths).

    Tracked and untracked-but-not-ignored files, as git sees them, so caches, virtualenvs and build leftovers
    never count; files deleted from the work tree but still in the index are left out. Outside a git checkout
    (an unpacked sdist), every file but caches.
    """
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        found = (path.relative_to(root) for path in root.rglob("*") if path.is_file())
        return sorted(path for path in found if not CACHE_DIRS & set(path.parts) and path.suffix != ".pyc")
    return sorted({Path(name) for name in listed.split("\0") if name and (root / name).is_file()})


def _package_of(path: Path) -> tuple[str, Path] | None:
    """The mapped root a source path belongs to, and the path relative to that root's folder."""
    for name, folder in PACKAGE_DIR.items():
        if path.is_relative_to(folder):
            return name, path.relative_to(folder)
    return None


def package_folders(root: Path = ROOT) -> dict[str, Path]:
    """Import name -> folder (relative) of every folder under a ``package-dir`` root that holds an ``__init__.py``."""
    found: dict[str, Path] = {}
    for path in source_files(root):
        owner = _package_of(path)
        if owner is not None and path.name == "__init__.py":
            name, inner = owner
            found[".".join((name, *inner.parent.parts))] = path.parent
    return found


def packaged_files(root: Path = ROOT) -> dict[Path, str]:
    """Source path (relative) -> path inside the wheel of every file under a ``package-dir`` root."""
    mapped: dict[Path, str] = {}
    for path in source_files(root):
        owner = _package_of(path)
        if owner is not None:
            name, inner = owner
            mapped[path] = "/".join((*name.split("."), *inner.parts))
    return mapped


def data_matches(package: str, pattern: str, root: Path = ROOT) -> set[Path]:
    """Files (relative) one ``package-data`` glob selects, expanded in the package's folder the way setuptools'
    build_py does (``glob(..., recursive=True)``, files only); "" and "*" apply to every package."""
    folders = package_folders(root)
    found: set[Path] = set()
    for name in folders if package in {"", "*"} else [package]:
        if name in folders:
            for match in glob.glob(os.path.join(root, folders[name], pattern), recursive=True):
                if os.path.isfile(match):
                    found.add(Path(match).relative_to(root))
    return found


def data_globs() -> list[tuple[str, str]]:
    """(package, pattern) for every declared ``package-data`` glob."""
    return [(package, pattern) for package, patterns in PACKAGE_DATA.items() for pattern in patterns]


def package_data_files(root: Path = ROOT) -> set[Path]:
    """Files (relative) that ``package-data`` declares, over all its globs."""
    return {path for package, pattern in data_globs() for path in data_matches(package, pattern, root)}


def walk_module_names() -> list[str]:
    """Every ``ragpulse.*`` module and package but ``__main__`` ones (importing them runs the CLI).

    ``pkgutil.walk_packages(ragpulse.__path__, "ragpulse.")`` sees everything in an installed wheel, but not
    in the editable install: there ``ragpulse.__path__`` is only ragpulse/, and ragpulse.flows (flows/) is
    found by setuptools' import hook. So each root mapped in ``package-dir`` is walked too. A package that
    fails to import is still listed (its sub-modules are not), so the test that imports it fails naming it.
    """
    names: set[str] = set()
    for root in PACKAGE_DIR:
        names.add(root)
        try:
            package = importlib.import_module(root)
        except Exception:  # a broken root must fail its own test, not the collection
            continue
        names.update(info.name for info in pkgutil.walk_packages(package.__path__, f"{root}.", onerror=_ignore))
    return sorted(name for name in names if name.rsplit(".", 1)[-1] != "__main__")


def _ignore(name: str) -> None:
    """walk_packages' onerror: by default only ImportError is swallowed, and any other error ends the walk."""


def copy_sources(dest: Path, root: Path = ROOT, files: Iterable[Path] | None = None) -> Path:
    """Copy the work tree's tracked and new files (not ``git archive HEAD``: uncommitted work counts) to ``dest``."""
    for path in source_files(root) if files is None else files:
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / path, target)
    return dest
