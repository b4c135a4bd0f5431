"""The run's work area: Prefect result storage (the task cache) and staged batches, local or on fsspec."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prefect.filesystems import RemoteFileSystem, WritableFileSystem

from ragpulse.tasks.core.fingerprint import digest
from ragpulse.tasks.core.storage import filesystem

__all__ = ["is_local", "local_docs_dir", "lock_directory", "result_storage", "run_dir", "staged_dir", "work_root"]


def is_local(work_dir: str) -> bool:
    return "://" not in work_dir or work_dir.startswith("file://")


def _local_path(work_dir: str) -> Path:
    return Path(work_dir.removeprefix("file://")).expanduser().resolve()


def work_root(work_dir: str) -> str:
    """The work dir as an absolute path (local) or its URL without a trailing slash (remote)."""
    return str(_local_path(work_dir)) if is_local(work_dir) else work_dir.rstrip("/")


def result_storage(work_dir: str, storage_options: Mapping[str, Any] | None = None) -> Path | WritableFileSystem:
    """Where Prefect persists task results; cached results are shared by every run that uses it.

    Prefect needs remote result storage as a saved block; one is saved per work dir (no secrets in
    it: credentials stay in the environment of whoever reads or writes).
    """
    if is_local(work_dir):
        return _local_path(work_dir) / "results"
    block = RemoteFileSystem(basepath=f"{work_dir.rstrip('/')}/results", settings=dict(storage_options or {}))
    block.save(f"ragpulse-results-{digest(work_dir, sorted((storage_options or {}).items()))[:12]}", overwrite=True)
    return block


def lock_directory(work_dir: str) -> Path | None:
    """Lock files that let concurrent identical tasks run once (local work dirs only)."""
    return _local_path(work_dir) / "locks" if is_local(work_dir) else None


def staged_dir(work_dir: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """URL of the content-addressed staged batches."""
    fs, root = filesystem(work_root(work_dir), storage_options)
    url = f"{root}/staged"
    return url if is_local(work_dir) else fs.unstrip_protocol(url)


def run_dir(work_dir: str, date: dt.date, run_id: str) -> str:
    """Where one run's files go (quarantine copy, data docs): ``<work_dir>/runs/dt=<date>/<run_id>``."""
    return f"{work_root(work_dir)}/runs/dt={date.isoformat()}/{run_id}"


def local_docs_dir(work_dir: str, date: dt.date, run_id: str) -> str | None:
    """GX writes HTML data docs to a local folder; remote work dirs get none (their results are in the table)."""
    return f"{run_dir(work_dir, date, run_id)}/data_docs" if is_local(work_dir) else None
