"""Scheduled monitoring: evaluate the newest complete partition, detect drift against its baseline, alert."""

import datetime as dt
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from prefect import flow
from prefect.runtime import flow_run

from ragpulse.flows.calibrate import calibrate
from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import (
    AlertConfig,
    CalibrationConfig,
    DriftConfig,
    JudgeConfig,
    OutputConfig,
    QualityConfig,
    RunConfig,
    RunnerConfig,
    ScoringConfig,
    SourceConfig,
    TopicsConfig,
)
from ragpulse.tasks.monitoring.tasks import detect_drift, send_alerts
from ragpulse.tasks.planning.run import checked_run
from ragpulse.tasks.reporting.run_summary import RunSummary
from ragpulse.tasks.topics.tasks import assign_topics

__all__ = ["MonitorResult", "monitor", "monitor_run_name", "partition_to_monitor"]


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


def monitor_run_name() -> str:
    """``monitor dt=<the partition it evaluates>``, so the runs list reads as a calendar."""
    parameters = flow_run.parameters
    day = parameters.get("date") or partition_to_monitor(
        parameters.get("timezone", "UTC"), parameters.get("lag_days", 1)
    )
    return f"monitor dt={day}"


@flow(name="monitor", flow_run_name=monitor_run_name, log_prints=False)
def monitor(
    source: SourceConfig,
    date: dt.date | None = None,
    scoring: ScoringConfig = ScoringConfig(),
    judge: JudgeConfig = JudgeConfig(),
    quality: QualityConfig = QualityConfig(),
    output: OutputConfig = OutputConfig(),
    runner: RunnerConfig = RunnerConfig(),
    drift: DriftConfig = DriftConfig(),
    calibration: CalibrationConfig = CalibrationConfig(),
    alerts: AlertConfig = AlertConfig(),
    topics: TopicsConfig = TopicsConfig(),
    timezone: str = "UTC",
    lag_days: int = 1,
) -> MonitorResult:
    """Evaluate ``date`` (default: ``lag_days`` before the scheduled start in ``timezone``), publish its scores,
    calibrate them on the human labels (with ``calibration.labels``), assign its questions to topics (unless
    ``topics.enabled`` is off; fit first when ``topics.refit`` or due), compare its scores and topic shares with
    the previous partitions and send each new drift alert once. A day that scored nothing fails the run once
    published (``NothingScoredError`` from ``evaluate_partition``), before the drift checks: it has no ok score to
    compare."""
    config = RunConfig(
        source=source, scoring=scoring, judge=judge, quality=quality, output=output, runner=runner, drift=drift,
        calibration=calibration, alerts=alerts, topics=topics,
    )  # fmt: skip
    with checked_run(config, alerts=True):  # before any task: a deployment run's parameters come from the API
        day = date or partition_to_monitor(timezone, lag_days)
        summary = evaluate_partition(date=day, **config.partition_groups())
        if calibration.labels or calibration.labels_from:
            calibrate(start=day, end=day, calibration=calibration, output=output)
        if topics.enabled:
            assign_topics(output.warehouse, day, topics, run_id=summary.run_id)
        report = detect_drift(output.warehouse, day, drift, run_id=summary.run_id, topics=topics)
        outcome = send_alerts(output.warehouse, report, alerts, run_id=summary.run_id)
        return MonitorResult(summary, report.verdict_counts(), outcome.to_dict())
