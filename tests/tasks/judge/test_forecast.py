"""The judge's expected cost from the warehouse's history, worked out by hand; the stated assumptions without it."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from ragpulse.tasks.judge.config import JudgeConfig, ModelPrice
from ragpulse.tasks.judge.forecast import ASSUMED_CALL, forecast_cost
from ragpulse.tasks.scoring.config import ScoringConfig
from ragpulse.tasks.warehouse import RUNS_SCHEMA, open_warehouse
from tests.doubles.publications import scores_publication

JUDGE = JudgeConfig(model="house", prices={"house": ModelPrice(prompt_per_million=1.0, completion_per_million=4.0)})


def test_history_gives_the_calls_tokens_and_traces(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    warehouse = open_warehouse(url)
    now = dt.datetime.now(dt.UTC)
    # Two days of 10 traces, 8 judged each; 16 calls per run (half from the cache), 500 + 100 tokens per HTTP call.
    usage = {"m": {"judged": 8, "http_calls": 8, "cache_hits": 8, "prompt_tokens": 4_000, "completion_tokens": 800}}
    for offset in (1, 2):
        publication = scores_publication(dt.date(2026, 9, offset), f"run-{offset}", 10, now=now)
        run = publication.run.to_pylist()[0] | {"judge_model": "house", "judge_usage": json.dumps(usage)}
        warehouse.publish(replace(publication, run=pa.Table.from_pylist([run], schema=RUNS_SCHEMA)))
    forecast = forecast_cost(url, JUDGE, ScoringConfig(sample_rate=0.5), ["m"], days=3)
    assert forecast is not None and forecast.basis == "history" and forecast.traces_per_day == 10
    # 10 traces x 3 days x 0.5 judged = 15 judged traces; 16 calls per 8 judged traces = 2 calls each.
    (metric,) = forecast.metrics
    assert (metric.calls, metric.prompt_tokens, metric.completion_tokens) == (30, 15_000, 3_000)
    assert forecast.usd == pytest.approx(15_000 * 1e-6 + 3_000 * 4e-6)
    # auto: the share the history judged, 8 of 10.
    auto = forecast_cost(url, JUDGE, ScoringConfig(sample_rate="auto"), ["m"], days=1)
    assert auto is not None and auto.judged_share == pytest.approx(0.8)


def test_without_history_the_assumptions_are_stated(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    forecast = forecast_cost(url, JudgeConfig(model="unpriced-judge"), ScoringConfig(), ["m", "n"], days=2)
    assert forecast is not None and forecast.basis == "assumed" and forecast.traces_per_day is None
    assert forecast.calls == 2 * 2 * 1_000 * ASSUMED_CALL["calls_per_trace"] and forecast.usd is None
    assert "unpriced" in forecast.describe() and "no published day" in forecast.describe()
    assert forecast_cost(url, JudgeConfig(), ScoringConfig(), ["m"], days=1) is None
