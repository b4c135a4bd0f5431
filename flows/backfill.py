"""Backfills: evaluate every partition of a date range, a few at once, skipping what is already published."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture, as_completed
from prefect.states import Completed, Failed, State
from prefect.task_runners import ThreadPoolTaskRunner

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.flows.runners import build_task_runner
from ragpulse.tasks.core.config import RunSettings
from ragpulse.tasks.core.errors import ConfigError
from ragpulse.tasks.monitoring.alerts import AlertSettings, send_alerts
from ragpulse.tasks.monitoring.drift import DriftSettings, detect_drift
from ragpulse.tasks.planning.backfill import plan_backfill
from ragpulse.tasks.reporting.summary import RunSummary

__all__ = ["MAX_CONCURRENCY", "BackfillProgress", "BackfillResult", "backfill", "progress_listener"]

MAX_CONCURRENCY = 16


class BackfillProgress(Protocol):
    """Told how a backfill in this process goes; the CLI's progress bar is one."""

    def planned(self, to_run: int, skipped: int) -> None: ...

    def partition(self, day: dt.date, event: Literal["started", "completed", "failed"]) -> None: ...


_listeners: list[BackfillProgress] = []


@contextmanager
def progress_listener(listener: BackfillProgress) -> Iterator[None]:
    """Report the progress of backfills run in this process (and thread pool) to ``listener``."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def _notify(day: dt.date, event: Literal["started", "completed", "failed"]) -> None:
    for listener in list(_listeners):
        listener.partition(day, event)


@dataclass(frozen=True)
class BackfillResult:
    config_hash: str
    completed: list[dt.date]
    skipped: list[dt.date]
    failed: dict[dt.date, str]
    missing: list[dt.date]
    summaries: list[RunSummary] = field(default_factory=list)
    drift_verdicts: dict[str, int] = field(default_factory=dict)
    alerts_sent: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "config_hash": self.config_hash,
            "completed": [d.isoformat() for d in self.completed],
            "skipped": [d.isoformat() for d in self.skipped],
            "failed": {d.isoformat(): message for d, message in self.failed.items()},
            "missing": [d.isoformat() for d in self.missing],
            "drift_verdicts": self.drift_verdicts,
            "alerts_sent": self.alerts_sent,
        }


@task(name="evaluate-date", task_run_name="evaluate dt={date}", cache_policy=NO_CACHE, persist_result=False)
def evaluate_date(date: dt.date, parameters: dict[str, Any], runner: dict[str, Any]) -> RunSummary:
    """One partition of the backfill as a subflow run of its own, so each has its state in Prefect."""
    task_runner = build_task_runner(runner["kind"], max_workers=runner["max_workers"], dask_address=runner["address"])
    return evaluate_partition.with_options(task_runner=task_runner)(date=date, **parameters)


@flow(name="backfill", task_runner=ThreadPoolTaskRunner(max_workers=MAX_CONCURRENCY), log_prints=False)
def backfill(
    source: str,
    start: dt.date,
    end: dt.date,
    metrics: list[str] | None = None,
    warehouse: str = "duckdb:///ragpulse.duckdb",
    work_dir: str = ".ragpulse",
    batch_size: int = 5000,
    storage_options: dict[str, Any] | None = None,
    max_failure_rate: float = 0.05,
    judge_model: str | None = None,
    judge_base_url: str | None = None,
    judge_config: str | None = None,
    sample_rate: float = 1.0,
    trace_format: str = "ragpulse",
    format_options: dict[str, Any] | None = None,
    partitioning: str = "dt",
    late_arrival_hours: float = 6.0,
    task_runner: str = "thread",
    max_workers: int = 4,
    dask_address: str | None = None,
    concurrency: int = 2,
    force: bool = False,
    drift: DriftSettings | None = None,
    alerts: AlertSettings | None = None,
    send_drift_alerts: bool = False,
) -> State:
    """Evaluate the partitions in [start, end] not yet published with this configuration (all with ``force``),
    ``concurrency`` at a time; then recompute drift from the first re-run partition on, in date order.

    Each partition's scoring tasks run on ``task_runner`` ("thread", or "dask" on the cluster at ``dask_address``:
    give one, or every partition in flight starts a local cluster of its own). Alerts for historical partitions
    are off unless ``send_drift_alerts``. A failed partition does not stop
    the others; the backfill then ends Failed, naming it, and a re-run picks up exactly what is missing.
    """
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ConfigError(f"concurrency must lie in 1..{MAX_CONCURRENCY}, got {concurrency}")
    settings = RunSettings(
        source=source, warehouse=warehouse, work_dir=work_dir, batch_size=batch_size,
        metrics=tuple(metrics) if metrics else RunSettings.model_fields["metrics"].default,
        storage_options=storage_options or {}, max_failure_rate=max_failure_rate, judge_config=judge_config,
        sample_rate=sample_rate, trace_format=trace_format, format_options=format_options or {},
        partitioning=partitioning, late_arrival_hours=late_arrival_hours,
    )  # fmt: skip
    plan = plan_backfill(settings, start, end, force=force, judge_model=judge_model, judge_base_url=judge_base_url)
    for listener in list(_listeners):
        listener.planned(len(plan.to_run), len(plan.skipped))
    parameters = {
        "source": source, "metrics": list(settings.metrics), "warehouse": warehouse, "work_dir": work_dir,
        "batch_size": batch_size, "storage_options": storage_options, "max_failure_rate": max_failure_rate,
        "judge_model": judge_model, "judge_base_url": judge_base_url, "judge_config": judge_config,
        "sample_rate": sample_rate, "trace_format": trace_format, "format_options": format_options,
        "partitioning": partitioning, "late_arrival_hours": late_arrival_hours,
    }  # fmt: skip
    runner = {"kind": task_runner, "max_workers": max_workers, "address": dask_address}
    summaries: dict[dt.date, RunSummary] = {}
    failed: dict[dt.date, str] = {}
    waiting = list(plan.to_run)
    running: dict[PrefectFuture[RunSummary], dt.date] = {}
    while waiting or running:
        while waiting and len(running) < concurrency:
            day = waiting.pop(0)
            _notify(day, "started")
            running[evaluate_date.submit(day, parameters, runner)] = day
        finished = next(as_completed(list(running)))
        day = running.pop(finished)
        finished.wait()  # sets the future's final state; before that .state may still read Running
        state = finished.state
        if state.is_completed():
            summaries[day] = finished.result()
            _notify(day, "completed")
        else:
            failed[day] = state.message or state.name or "failed"
            _notify(day, "failed")
    verdicts: dict[str, int] = {}
    alerts_sent = 0
    if summaries:
        first = min(summaries)
        for day in sorted(d for d in (*plan.skipped, *summaries) if d >= first):
            run_id = summaries[day].run_id if day in summaries else ""
            report = detect_drift(warehouse, day, drift, run_id=run_id)
            for verdict, count in report.verdict_counts().items():
                verdicts[verdict] = verdicts.get(verdict, 0) + count
            if send_drift_alerts:
                alerts_sent += len(send_alerts(warehouse, report, alerts, run_id=run_id).sent)
    result = BackfillResult(
        plan.config_hash, sorted(summaries), plan.skipped, dict(sorted(failed.items())), plan.missing,
        [summaries[d] for d in sorted(summaries)], verdicts, alerts_sent,
    )  # fmt: skip
    if failed:
        names = ", ".join(f"dt={d}: {message}" for d, message in result.failed.items())
        return Failed(message=f"{len(failed)} of {len(plan.to_run)} partition(s) failed: {names}", data=result)
    return Completed(
        message=f"{len(summaries)} partition(s) evaluated, {len(plan.skipped)} already published", data=result
    )
