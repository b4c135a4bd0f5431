"""Backfills: evaluate every partition of a date range, a few at once, skipping what is already published."""

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State
from prefect.futures import PrefectFuture, as_completed
from prefect.states import Completed, Failed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

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
from ragpulse.tasks.core.exceptions import ConfigError, PartitionNotFoundError
from ragpulse.tasks.judge.budget import current_budget
from ragpulse.tasks.monitoring.tasks import detect_drift, send_alerts
from ragpulse.tasks.planning.run import checked_run
from ragpulse.tasks.planning.tasks import plan_backfill
from ragpulse.tasks.reporting.run_summary import NothingScoredError, RunSummary
from ragpulse.tasks.topics.tasks import assign_topics

__all__ = [
    "MAX_CONCURRENCY",
    "BackfillProgress",
    "BackfillResult",
    "PartitionEvent",
    "backfill",
    "evaluate_date",
    "progress_listener",
]

MAX_CONCURRENCY = 16
#: "missing": the day turned out to have no traces (event-time sources have no folders to list beforehand);
#: "nothing_scored": the day was published but scored nothing usable: no ok score, or no contexts at all (its
#: evaluation run failed, see RunSummary.outcome).
PartitionEvent = Literal["started", "completed", "failed", "missing", "nothing_scored"]


class BackfillProgress(Protocol):
    """Told how a backfill in this process goes; the CLI's progress bar is one."""

    def planned(self, to_run: int, skipped: int) -> None: ...

    def partition(self, day: dt.date, event: PartitionEvent) -> None: ...


_listeners: list[BackfillProgress] = []


@contextmanager
def progress_listener(listener: BackfillProgress) -> Iterator[None]:
    """Report the progress of backfills run in this process (and thread pool) to ``listener``."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def _notify(day: dt.date, event: PartitionEvent) -> None:
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
    alerts_not_emitted: int = 0
    """Alerts whose Prefect event had no server to go to (ephemeral mode): the next run against one emits them."""

    @property
    def nothing_scored(self) -> dict[dt.date, str]:
        """The evaluated days that scored nothing, each with the warning saying why."""
        return {s.partition_date: s.warning or "" for s in self.summaries if s.scored_nothing_usable}

    def to_dict(self) -> dict[str, Any]:
        return {
            "config_hash": self.config_hash,
            "completed": [d.isoformat() for d in self.completed],
            "nothing_scored": {d.isoformat(): why for d, why in self.nothing_scored.items()},
            "outcomes": {s.partition_date.isoformat(): s.outcome for s in self.summaries},
            "skipped": [d.isoformat() for d in self.skipped],
            "failed": {d.isoformat(): message for d, message in self.failed.items()},
            "missing": [d.isoformat() for d in self.missing],
            "drift_verdicts": self.drift_verdicts,
            "alerts_sent": self.alerts_sent,
            "alerts_not_emitted": self.alerts_not_emitted,
        }


#: The pool the partitions run in. Typed as Prefect's flow decorator takes it: its TaskRunner parameter is invariant,
#: so a thread pool's more precise future type is not accepted as it stands.
_PARTITIONS_AT_ONCE = cast(TaskRunner[PrefectFuture[Any]], ThreadPoolTaskRunner(max_workers=MAX_CONCURRENCY))


@task(name="evaluate-date", task_run_name="evaluate dt={date}", cache_policy=NO_CACHE, persist_result=False)
def evaluate_date(date: dt.date, config: RunConfig) -> RunSummary:
    """One partition of the backfill as a subflow run of its own, so each has its state in Prefect."""
    return evaluate_partition(date=date, **config.partition_groups())


@flow(
    name="backfill",
    flow_run_name="backfill {start}..{end}",
    task_runner=_PARTITIONS_AT_ONCE,
    log_prints=False,
)
def backfill(
    source: SourceConfig,
    start: dt.date,
    end: dt.date,
    scoring: ScoringConfig = ScoringConfig(),
    judge: JudgeConfig = JudgeConfig(),
    quality: QualityConfig = QualityConfig(),
    output: OutputConfig = OutputConfig(),
    runner: RunnerConfig = RunnerConfig(),
    drift: DriftConfig = DriftConfig(),
    calibration: CalibrationConfig = CalibrationConfig(),
    alerts: AlertConfig = AlertConfig(),
    topics: TopicsConfig = TopicsConfig(),
    concurrency: int = 2,
    force: bool = False,
    send_drift_alerts: bool = False,
) -> State:
    """Evaluate the partitions in [start, end] not yet published with this configuration (all with ``force``),
    ``concurrency`` at a time; then recompute drift from the first re-run partition on, in date order.

    Each partition's scoring tasks run on ``runner`` (a thread pool, or Dask at ``runner.dask_address``: give one,
    or every partition in flight starts a local cluster of its own). Alerts for historical partitions are off
    unless ``send_drift_alerts``. A failed partition does not stop the others; the backfill then ends Failed,
    naming it, and a re-run picks up exactly what is missing. A partition published but scoring nothing
    (``nothing_scored``) ends the backfill Failed too (state name ``NothingScored``), naming the days.
    """
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ConfigError(f"concurrency must lie in 1..{MAX_CONCURRENCY}, got {concurrency}")
    config = RunConfig(
        source=source, scoring=scoring, judge=judge, quality=quality, output=output, runner=runner, drift=drift,
        calibration=calibration, alerts=alerts, topics=topics,
    )  # fmt: skip
    # Before any task: a deployment run's parameters come from the API.
    with checked_run(config, alerts=send_drift_alerts):
        return _backfill(config, start, end, concurrency=concurrency, force=force, send_drift_alerts=send_drift_alerts)


def _backfill(
    config: RunConfig, start: dt.date, end: dt.date, *, concurrency: int, force: bool, send_drift_alerts: bool
) -> State:
    """The body of ``backfill`` once its configuration is checked."""
    drift, calibration, alerts, output = config.drift, config.calibration, config.alerts, config.output
    plan = plan_backfill(config, start, end, force=force)
    if (budget := current_budget()) is not None:
        budget.partitions_at_once = concurrency  # a Dask runner's partitions each hold their share of what is left
    for listener in list(_listeners):
        listener.planned(len(plan.to_run), len(plan.skipped))
    summaries: dict[dt.date, RunSummary] = {}
    failed: dict[dt.date, str] = {}
    missing = list(plan.missing)
    waiting = list(plan.to_run)
    running: dict[PrefectFuture[RunSummary], dt.date] = {}
    while waiting or running:
        while waiting and len(running) < concurrency:
            day = waiting.pop(0)
            _notify(day, "started")
            running[evaluate_date.submit(day, config)] = day
        finished = next(as_completed(list(running)))
        day = running.pop(finished)
        finished.wait()  # sets the future's final state; before that .state may still read Running
        state = finished.state
        if state.is_completed():
            summaries[day] = finished.result()
            _notify(day, "completed")
        elif isinstance(error := finished.result(raise_on_failure=False), NothingScoredError):
            summaries[day] = error.summary  # published: drift is recomputed from it like any evaluated day
            _notify(day, "nothing_scored")
        elif isinstance(error, PartitionNotFoundError):
            missing.append(day)
            _notify(day, "missing")
        else:
            failed[day] = state.message or state.name or "failed"
            _notify(day, "failed")
    verdicts: dict[str, int] = {}
    alerts_sent = alerts_not_emitted = 0
    if summaries:
        first = min(summaries)
        if calibration.labels:
            # Before the drift checks, which may compare the estimates (drift.estimator = ppi).
            calibrate(start=first, end=max(summaries), calibration=calibration, output=output)
        for day in sorted(d for d in (*plan.skipped, *summaries) if d >= first):
            run_id = summaries[day].run_id if day in summaries else ""
            if config.topics.enabled:
                # A refit asked for is made once, for the first day; the later days are assigned to its topics.
                refit = config.topics.refit and day == first
                settings = config.topics.model_copy(update={"refit": refit})
                assign_topics(output.warehouse, day, settings, run_id=run_id)
            report = detect_drift(output.warehouse, day, drift, run_id=run_id, topics=config.topics)
            for verdict, count in report.verdict_counts().items():
                verdicts[verdict] = verdicts.get(verdict, 0) + count
            if send_drift_alerts:
                outcome = send_alerts(output.warehouse, report, alerts, run_id=run_id)
                alerts_sent += len(outcome.sent)
                alerts_not_emitted += len(outcome.skipped)
    result = BackfillResult(
        plan.config_hash, sorted(summaries), plan.skipped, dict(sorted(failed.items())), sorted(missing),
        [summaries[d] for d in sorted(summaries)], verdicts, alerts_sent, alerts_not_emitted,
    )  # fmt: skip
    if failed:
        names = ", ".join(f"dt={d}: {message}" for d, message in result.failed.items())
        return Failed(message=f"{len(failed)} of {len(plan.to_run)} partition(s) failed: {names}", data=result)
    if result.nothing_scored:
        days = ", ".join(f"dt={d}" for d in result.nothing_scored)
        return Failed(
            name="NothingScored",
            message=f"{len(result.nothing_scored)} of {len(summaries)} evaluated partition(s) scored nothing: {days}",
            data=result,
        )
    return Completed(
        message=f"{len(summaries)} partition(s) evaluated, {len(plan.skipped)} already published, "
        f"{len(result.missing)} without traces",
        data=result,
    )
