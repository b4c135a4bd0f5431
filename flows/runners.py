"""Task runners a run can use: Prefect's thread pool by default, Dask to go beyond one machine."""

from __future__ import annotations

from typing import Any

from prefect.task_runners import ThreadPoolTaskRunner

from ragpulse.tasks.core.errors import ConfigError

__all__ = ["build_task_runner"]


def build_task_runner(kind: str, *, max_workers: int, dask_address: str | None = None) -> Any:
    """``thread``: a bounded thread pool. ``dask``: a LocalCluster of processes, or an existing cluster."""
    if kind == "thread":
        return ThreadPoolTaskRunner(max_workers=max_workers)
    if kind == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError as exc:  # pragma: no cover - prefect-dask is a declared dependency
            raise ConfigError("--task-runner dask needs the prefect-dask package") from exc
        if dask_address:
            return DaskTaskRunner(address=dask_address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": max_workers, "threads_per_worker": 1, "processes": True})
    raise ConfigError(f"unknown task runner {kind!r}; use 'thread' or 'dask'")
