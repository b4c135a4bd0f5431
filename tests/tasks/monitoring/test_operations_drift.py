"""Drift of the operational metrics: compared like any metric, in their own direction (a latency that doubles is a
degradation, one that halves an improvement), on scores published to a real DuckDB warehouse."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from prefect.logging import disable_run_logger

from ragpulse.tasks.config import DriftConfig
from ragpulse.tasks.monitoring.tasks import detect_drift
from ragpulse.tasks.warehouse import SCORES_SCHEMA, open_warehouse
from ragpulse.tasks.warehouse._views import LOWER_IS_BETTER
from tests.doubles.publications import scores_publication

NOW = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
DAYS = [dt.date(2026, 11, 14) + dt.timedelta(days=i) for i in range(7)]
N = 60


def _scores(day: dt.date, metric: str, values: np.ndarray) -> pa.Table:
    n = len(values)
    return pa.table(
        {
            "partition_date": pa.array([day] * n, pa.date32()),
            "trace_id": [f"{day}-t{i}" for i in range(n)],
            "metric": [metric] * n,
            "value": pa.array(values, pa.float64()),
            "status": ["ok"] * n,
            "reason": pa.nulls(n, pa.string()),
            "metric_version": ["1.0.0"] * n,
            "run_id": [f"run-{day}"] * n,
            "computed_at": pa.array([NOW] * n, pa.timestamp("us", tz="UTC")),
            "judge_model": pa.nulls(n, pa.string()),
            "prompt_version": pa.nulls(n, pa.string()),
        },
        schema=SCORES_SCHEMA,
    )


def _publish_latencies(url: str, last_day_factor: float) -> None:
    """Six days of lognormal end-to-end latencies around 900 ms, then a day scaled by ``last_day_factor``."""
    rng = np.random.default_rng(5)
    for day in DAYS:
        latencies = rng.lognormal(np.log(900.0), 0.35, N) * (last_day_factor if day == DAYS[-1] else 1.0)
        errors = (rng.random(N) < 0.02).astype(np.float64)
        scores = pa.concat_tables([_scores(day, "latency_ms", latencies), _scores(day, "error", errors)])
        publication = scores_publication(day, f"run-{day}", N, now=NOW)
        open_warehouse(url).publish(dataclasses.replace(publication, metrics=["latency_ms", "error"], scores=scores))


@pytest.mark.parametrize(("factor", "verdict"), [(2.0, "degraded"), (0.5, "improved")])
def test_a_latency_that_doubles_is_degraded_and_one_that_halves_improved(
    tmp_path: Path, factor: float, verdict: str
) -> None:
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    _publish_latencies(url, factor)
    with disable_run_logger():
        report = detect_drift.fn(url, DAYS[-1], DriftConfig(), run_id="d")
    rows = {r["metric"]: r for r in report.rows.to_pylist()}
    latency = rows["latency_ms"]
    assert latency["verdict"] == verdict
    assert (latency["current_mean"] > latency["baseline_mean"]) == (factor > 1)
    assert latency["current_n"] == N and latency["baseline_partitions"] == len(DAYS) - 1
    assert rows["error"]["verdict"] not in ("degraded", "improved")  # the error rate did not move


def test_the_views_rank_the_slowest_turn_worst_and_give_latency_percentiles(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    _publish_latencies(url, 2.0)
    warehouse = open_warehouse(url)
    assert {"latency_ms", "error"} <= set(LOWER_IS_BETTER)
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        worst = con.execute(
            "SELECT value FROM worst_traces WHERE metric = 'latency_ms' AND partition_date = ? AND worst_rank = 1",
            [DAYS[-1]],
        ).fetchall()
        p50, p95, p99 = con.execute(
            "SELECT p50, p95, p99 FROM daily_scores "
            "WHERE metric = 'latency_ms' AND partition_date = ? AND segment_key = 'all'",
            [DAYS[-1]],
        ).fetchone() or (None, None, None)
    values = np.array(
        [
            r["value"]
            for r in warehouse.read("scores").to_pylist()
            if r["metric"] == "latency_ms" and r["partition_date"] == DAYS[-1]
        ]
    )
    assert worst == [(values.max(),)]
    assert np.allclose([p50, p95, p99], np.percentile(values, [50, 95, 99]), rtol=1e-9)
