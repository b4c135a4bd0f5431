"""Planning a backfill: which partitions of a date range still need a run with this configuration.

A partition counts as done when its newest published run has the same configuration hash (metric names and
versions, judge model and prompt versions, sample rate: what can change a score) and the judge budget did not stop
it. Anything else is run again;
the task cache and the judge-call cache make a re-run of a half-done partition pay nothing twice.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ragpulse.tasks.config import RunConfig
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.retry import IO_RETRIES
from ragpulse.tasks.core.storage import partition_dates
from ragpulse.tasks.judge.forecast import CostForecast, forecast_cost, llm_metrics
from ragpulse.tasks.planning.run import planned
from ragpulse.tasks.warehouse import open_warehouse

__all__ = ["BackfillPlan", "backfill_days", "config_hash", "plan_backfill", "published_config_hashes", "run_forecast"]


@dataclass(frozen=True)
class BackfillPlan:
    config_hash: str
    to_run: list[dt.date]
    skipped: list[dt.date] = field(default_factory=list)
    missing: list[dt.date] = field(default_factory=list)


def config_hash(config: RunConfig) -> str:
    """The hash a run of ``config`` stamps on its ``runs`` row (the checked run's plan when there is one)."""
    return planned(config).config_hash


def published_config_hashes(warehouse_url: str, start: dt.date, end: dt.date) -> dict[dt.date, str]:
    """The configuration hash of each partition's newest published run (by publish time), for the partitions whose
    newest run made every judge call it meant to: one the judge budget stopped is not done."""
    runs = open_warehouse(warehouse_url).read(
        "runs", start=start, end=end, columns=["partition_date", "config_hash", "published_at", "judge_usage"]
    )
    newest: dict[dt.date, tuple[Any, str, bool]] = {}
    for row in runs.to_pylist():
        day, stamp = row["partition_date"], row["published_at"]
        if day not in newest or (stamp is not None and (newest[day][0] is None or stamp > newest[day][0])):
            newest[day] = (stamp, row["config_hash"], _stopped_by_budget(row["judge_usage"]))
    return {day: config for day, (_, config, stopped) in newest.items() if not stopped}


def _stopped_by_budget(judge_usage: str | None) -> bool:
    usage = json.loads(judge_usage) if judge_usage else {}
    return any(int(metric.get("budget_refused", 0)) for metric in usage.values())


@task(name="plan-backfill", cache_policy=NO_CACHE, persist_result=False, **IO_RETRIES)
def plan_backfill(config: RunConfig, start: dt.date, end: dt.date, *, force: bool = False) -> BackfillPlan:
    """``backfill_days``, logged with the judge's expected cost of the days to run."""
    plan = backfill_days(config, start, end, force=force)
    logger = get_run_logger()
    logger.info(
        "backfill %s..%s: %d partition(s) to run, %d already published with config %s, %d day(s) without traces",
        start, end, len(plan.to_run), len(plan.skipped), plan.config_hash, len(plan.missing),
    )  # fmt: skip
    if plan.to_run and (forecast := run_forecast(config, len(plan.to_run))) is not None:
        logger.info("backfill %s..%s: %s", start, end, forecast.describe())
    return plan


def run_forecast(config: RunConfig, days: int) -> CostForecast | None:
    """The judge's expected cost of ``days`` partitions of ``config`` (None without an LLM judge metric)."""
    known = planned(config)
    judged = llm_metrics(known.judging, known.options)
    return forecast_cost(config.output.warehouse, known.judge, config.scoring, judged, days)


def backfill_days(config: RunConfig, start: dt.date, end: dt.date, *, force: bool = False) -> BackfillPlan:
    """The partitions in [start, end] that the source has (every day for event-time partitioning), minus those
    already published with this configuration."""
    if end < start:
        raise ConfigError(f"backfill end {end} is before its start {start}")
    expected = config_hash(config)
    days = [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]
    source = config.source
    if source.partitioning == "dt":
        available = [d for d in partition_dates(source.url, source.storage_options) if start <= d <= end]
    else:
        # Event-time sources have no day folders to list: every day of the range is tried.
        available = days
    published = {} if force else published_config_hashes(config.output.warehouse, start, end)
    to_run = [d for d in available if published.get(d) != expected]
    skipped = [d for d in available if published.get(d) == expected]
    have = set(available)
    return BackfillPlan(expected, to_run, skipped, [d for d in days if d not in have])
