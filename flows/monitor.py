"""Scheduled monitoring: evaluate the newest complete partition, detect drift against its baseline, alert."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from prefect import flow
from prefect.runtime import flow_run

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.flows.runners import build_task_runner
from ragpulse.tasks.monitoring.alerts import AlertSettings, send_alerts
from ragpulse.tasks.monitoring.drift import DriftSettings, detect_drift
from ragpulse.tasks.reporting.summary import RunSummary

__all__ = ["MonitorResult", "monitor", "partition_to_monitor"]


@dataclass(frozen=True)
class MonitorResult:
    summary: RunSummary
    verdicts: dict[str, int]
    alerts: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.summary.to_dict(), "drift_verdicts": self.verdicts, "alerts": self.alerts}


def partition_to_monitor(timezone: str = "UTC", lag_days: int = 1) -> dt.date:
    """The day ``lag_days`` before the run's scheduled start in ``timezone``: a late or retried run of Monday's
    schedule still evaluates Sunday, not the day it happens to start."""
    scheduled = flow_run.get_scheduled_start_time()
    local = dt.datetime.fromtimestamp(scheduled.timestamp(), ZoneInfo(timezone))
    return local.date() - dt.timedelta(days=lag_days)


@flow(name="monitor", log_prints=False)
def monitor(
    source: str,
    date: dt.date | None = None,
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
    drift: DriftSettings | None = None,
    alerts: AlertSettings | None = None,
    timezone: str = "UTC",
    lag_days: int = 1,
) -> MonitorResult:
    """Evaluate ``date`` (default: yesterday in ``timezone`` relative to the scheduled start), publish its scores,
    compare them with the previous partitions and send each new drift alert once. ``task_runner`` ("thread" or
    "dask", with ``dask_address`` for an existing cluster) runs the partition's scoring tasks."""
    day = date or partition_to_monitor(timezone, lag_days)
    runner = build_task_runner(task_runner, max_workers=max_workers, dask_address=dask_address)
    summary = evaluate_partition.with_options(task_runner=runner)(
        source=source, date=day, metrics=metrics, warehouse=warehouse, work_dir=work_dir, batch_size=batch_size,
        storage_options=storage_options, max_failure_rate=max_failure_rate, judge_model=judge_model,
        judge_base_url=judge_base_url, judge_config=judge_config, sample_rate=sample_rate, trace_format=trace_format,
        format_options=format_options, partitioning=partitioning, late_arrival_hours=late_arrival_hours,
    )  # fmt: skip
    report = detect_drift(warehouse, day, drift, run_id=summary.run_id)
    outcome = send_alerts(warehouse, report, alerts, run_id=summary.run_id)
    return MonitorResult(summary, report.verdict_counts(), outcome.to_dict())
