"""The judge budget as an alert: a ``drift`` row per judge metric of a day whose run had a judge budget, ``warning``
when the budget left some of its scores ``budget_exhausted``, ``within`` when it did not, so that the alert opens,
reminds and resolves like a threshold rule's (``rule`` is :data:`BUDGET_RULE`, ``observed`` the share of the metric's
scores the budget left unjudged). No Prefect, no warehouse: ``tasks/monitoring/tasks.py`` reads and publishes.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ragpulse.metrics.drift import Verdict
from ragpulse.metrics.judge import BUDGET_EXHAUSTED
from ragpulse.tasks.monitoring.comparison import ALL_SEGMENTS
from ragpulse.tasks.warehouse import DRIFT_SCHEMA

__all__ = ["BUDGET_RULE", "budget_rows", "run_had_budget"]

BUDGET_RULE = "judge budget"
"""The ``rule`` of the budget's rows: one dedup key per judge metric, whatever the budget's amount."""

_BUDGET_SETTINGS = ("run_budget_usd", "day_budget_usd", "run_budget_tokens", "day_budget_tokens")


def run_had_budget(configs: list[str | None]) -> bool:
    """Whether any of a day's runs (their stamped ``config`` JSON) ran with a judge budget."""
    for text in configs:
        judge = json.loads(text).get("judge", {}) if text else {}
        if any(judge.get(name) is not None for name in _BUDGET_SETTINGS):
            return True
    return False


def budget_rows(scores: pa.Table, day: dt.date, run_id: str, *, budgeted: bool) -> pa.Table:
    """One row per judge metric (scores with a ``judge_model``) of ``day``'s ``scores`` (``metric``, ``reason``,
    ``judge_model``, ``prompt_version``): ``warning`` where some were left ``budget_exhausted``, else ``within``
    when the day ran with a budget (``budgeted``); none for a day without a budget that exhausted nothing."""
    judged = scores.filter(pc.is_valid(scores["judge_model"]))
    now = dt.datetime.now(dt.UTC)
    records: list[dict[str, Any]] = []
    for metric in sorted(set(judged["metric"].to_pylist())):
        rows = judged.filter(pc.equal(judged["metric"], metric))
        exhausted = int(pc.sum(pc.equal(rows["reason"], BUDGET_EXHAUSTED)).as_py() or 0)
        if not exhausted and not budgeted:
            continue
        share = exhausted / rows.num_rows
        verdict = Verdict.WARNING if exhausted else Verdict.WITHIN
        records.append(
            {
                "partition_date": day,
                "metric": metric,
                "segment": ALL_SEGMENTS,
                "judge_model": rows["judge_model"][0].as_py(),
                "prompt_version": rows["prompt_version"][0].as_py(),
                "baseline_partitions": 0,
                "baseline_n": 0,
                "current_n": rows.num_rows,
                "verdict": verdict.value,
                "detail": f"{exhausted} of {rows.num_rows} score(s) {BUDGET_EXHAUSTED}: the judge budget did not "
                "allow their calls; a run with more budget judges them"
                if exhausted
                else f"the judge budget allowed every call ({rows.num_rows} score(s))",
                "run_id": run_id,
                "computed_at": now,
                "rule": BUDGET_RULE,
                "observed": share,
                "warning_level": 0.0,
            }
        )
    return pa.Table.from_pylist(records, schema=DRIFT_SCHEMA)
