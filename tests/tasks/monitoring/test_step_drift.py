"""Drift of the retrieval steps (issue 31): ``step.<metric>`` is each turn's mean over its steps, scored against
their own queries, compared like any metric, so that a degraded hop shows while the turn's score holds."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import numpy as np
import pyarrow as pa
from prefect.logging import disable_run_logger

from ragpulse.tasks.config import DriftConfig
from ragpulse.tasks.monitoring.tasks import _turns_by_their_steps, detect_drift
from ragpulse.tasks.warehouse import SCORES_SCHEMA, STEP_SCORES_SCHEMA, open_warehouse
from tests.doubles.publications import scores_publication

NOW = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
DAYS = [dt.date(2026, 11, 14) + dt.timedelta(days=i) for i in range(7)]
JUDGE = ("judge-m", "context_relevance/3")


def _steps(day: dt.date, rows: list[tuple[str, int, str, float | None, str]]) -> pa.Table:
    """Step score rows (trace, step index, against, value, status) of ``context_relevance`` on ``day``."""
    n = len(rows)
    trace_ids, indexes, against, values, status = (list(column) for column in zip(*rows, strict=True))
    return pa.table(
        {
            "partition_date": pa.array([day] * n, pa.date32()),
            "trace_id": trace_ids,
            "step_index": pa.array(indexes, pa.int64()),
            "step_id": [f"span-{t}-{i}" for t, i in zip(trace_ids, indexes, strict=True)],
            "metric": ["context_relevance"] * n,
            "against": against,
            "value": pa.array(values, pa.float64()),
            "status": status,
            "reason": [None if s == "ok" else "judge_timeout" if s == "failed" else "no_query" for s in status],
            "metric_version": ["2.0.0"] * n,
            "run_id": [f"run-{day}"] * n,
            "computed_at": pa.array([NOW] * n, pa.timestamp("us", tz="UTC")),
            "judge_model": [JUDGE[0]] * n,
            "prompt_version": [JUDGE[1]] * n,
        },
        schema=STEP_SCORES_SCHEMA,
    )


def test_a_turn_is_the_mean_of_its_ok_steps_against_their_own_queries() -> None:
    day = DAYS[0]
    steps = _steps(day, [
        ("t-two-hops", 0, "step_query", 1.0, "ok"), ("t-two-hops", 1, "step_query", 0.0, "ok"),
        ("t-two-hops", 0, "question", 0.0, "ok"),  # against the user's question: not this metric
        ("t-one-failed", 0, "step_query", None, "failed"), ("t-one-failed", 1, "step_query", None, "not_applicable"),
        ("t-ok-and-failed", 0, "step_query", None, "failed"), ("t-ok-and-failed", 1, "step_query", 1.0, "ok"),
        ("t-no-query", 0, "step_query", None, "not_applicable"),
    ])  # fmt: skip

    turns = {row["trace_id"]: row for row in _turns_by_their_steps(steps).to_pylist()}

    assert {t: (r["metric"], r["value"], r["status"]) for t, r in turns.items()} == {
        "t-two-hops": ("step.context_relevance", 0.5, "ok"),
        "t-one-failed": ("step.context_relevance", None, "failed"),
        "t-ok-and-failed": ("step.context_relevance", 1.0, "ok"),
        "t-no-query": ("step.context_relevance", None, "not_applicable"),
    }
    assert {(r["judge_model"], r["prompt_version"], r["metric_version"]) for r in turns.values()} == {(*JUDGE, "2.0.0")}


def test_a_degraded_hop_is_drift_of_the_step_metric(tmp_path: Path) -> None:
    """Six days where each turn's second hop finds something relevant, then a day where it finds nothing: the
    step metric degrades, measured on 40 turns (not 80 steps) a day."""
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    rng = np.random.default_rng(11)
    for day in DAYS:
        second_hop = 0.0 if day == DAYS[-1] else 1.0
        rows: list[tuple[str, int, str, float | None, str]] = []
        for t in range(40):
            rows += [(f"t{t}", 0, "step_query", float(rng.random() < 0.5), "ok")]
            rows += [(f"t{t}", 1, "step_query", second_hop, "ok")]
        publication = scores_publication(day, f"run-{day}", 40, now=NOW)  # its runs row; its scores left out
        open_warehouse(url).publish(
            dataclasses.replace(
                publication,
                metrics=["context_relevance"],
                scores=SCORES_SCHEMA.empty_table(),
                step_scores=_steps(day, rows),
            )
        )

    with disable_run_logger():
        report = detect_drift.fn(url, DAYS[-1], DriftConfig(), run_id="d")

    (row,) = [r for r in report.rows.to_pylist() if r["metric"] == "step.context_relevance"]
    assert (row["verdict"], row["current_n"], row["baseline_partitions"]) == ("degraded", 40, len(DAYS) - 1)
    assert row["current_mean"] < row["baseline_mean"]
    assert (row["judge_model"], row["prompt_version"]) == JUDGE
    assert [r["metric"] for r in report.rows.to_pylist()] == ["step.context_relevance"]
