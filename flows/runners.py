"""Task runners a run can use: Prefect's thread pool by default, Dask to go beyond one machine."""

from typing import Any

from prefect.task_runners import ThreadPoolTaskRunner

from ragpulse.tasks.config import RunnerConfig
from ragpulse.tasks.core.exceptions import ConfigError

__all__ = ["build_task_runner"]


def build_task_runner(runner: RunnerConfig) -> Any:
    """``thread``: a bounded thread pool. ``dask``: a LocalCluster of processes, or an existing cluster."""
    if runner.kind == "thread":
        return ThreadPoolTaskRunner(max_workers=runner.max_workers)
    try:
        from prefect_dask.task_runners import DaskTaskRunner
    except ImportError as exc:  # pragma: no cover - prefect-dask is a declared dependency
        raise ConfigError("task_runner dask needs the prefect-dask package") from exc
    if runner.dask_address:
        return DaskTaskRunner(address=runner.dask_address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": runner.max_workers, "threads_per_worker": 1, "processes": True})
