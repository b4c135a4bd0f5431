"""Drift rows depend on the scores, never on the order a warehouse returns them in: shuffled rows, and the same
partitions published to DuckDB and to PostgreSQL (which store and scan rows in their own order), give
bit-identical rows, intervals included."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from prefect.logging import disable_run_logger
from psycopg import sql

from ragpulse.tasks.config import DriftConfig
from ragpulse.tasks.monitoring.comparison import drift_rows
from ragpulse.tasks.monitoring.tasks import detect_drift
from ragpulse.tasks.warehouse import (
    QUARANTINE_SCHEMA,
    RUNS_SCHEMA,
    SCORES_SCHEMA,
    TRACES_SCHEMA,
    Publication,
    open_warehouse,
)

PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
DAYS = [dt.date(2026, 6, 1) + dt.timedelta(days=i) for i in range(6)]
METRICS = ("answer_f1", "document_mrr")
APPS = ("docs-search", "support", "sales")
NOW = dt.datetime(2026, 6, 7, tzinfo=dt.UTC)
SETTINGS = DriftConfig(segment_key="metadata.app")


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A schema of its own in the real PostgreSQL, dropped afterwards whatever happened."""
    name = f"ragpulse_test_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(PG_DSN, autocommit=True) as con:
        con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _partition(di: int, day: dt.date, rng: np.random.Generator) -> tuple[pa.Table, pa.Table]:
    """A day's scores and traces: three apps of 70, 70 and 40 traces (a tie in size), some failed scores, and
    support's answer_f1 dropping on the last day."""
    scores: list[dict[str, Any]] = []
    traces: list[dict[str, Any]] = []
    for app, n in zip(APPS, (70, 70, 40), strict=True):
        for t in range(n):
            trace_id = f"{day}-{app}-{t}"
            traces.append(
                {
                    "partition_date": day, "trace_id": trace_id, "run_id": f"run-{day}", "timestamp": NOW,
                    "question": "q", "answer": "a", "contexts": "[]", "metadata": json.dumps({"app": app}),
                    "source_file": "f.jsonl", "source_line": t + 1,
                }
            )  # fmt: skip
            for metric in METRICS:
                failed = rng.random() < 0.05
                drop = 0.3 if (app, metric, di) == ("support", "answer_f1", len(DAYS) - 1) else 0.0
                scores.append(
                    {
                        "partition_date": day, "trace_id": trace_id, "metric": metric,
                        "value": None if failed else float(np.clip(rng.normal(0.7 - drop, 0.15), 0, 1)),
                        "status": "failed" if failed else "ok", "reason": "judge_timeout" if failed else None,
                        "metric_version": "1.0.0", "run_id": f"run-{day}", "computed_at": NOW,
                        "judge_model": None, "prompt_version": None,
                    }
                )  # fmt: skip
    return pa.Table.from_pylist(scores, SCORES_SCHEMA), pa.Table.from_pylist(traces, TRACES_SCHEMA)


def _history() -> list[tuple[dt.date, pa.Table, pa.Table]]:
    rng = np.random.default_rng(11)
    return [(day, *_partition(di, day, rng)) for di, day in enumerate(DAYS)]


def _shuffled(table: pa.Table, rng: np.random.Generator) -> pa.Table:
    return table.take(pa.array(rng.permutation(table.num_rows)))


def _publish(url: str, history: list[tuple[dt.date, pa.Table, pa.Table]], rng: np.random.Generator | None) -> None:
    """Publish each partition through the warehouse API, its rows shuffled when ``rng`` is given."""
    warehouse = open_warehouse(url)
    for day, scores, traces in history:
        run = {name: 0 if name.startswith("n_") else None for name in RUNS_SCHEMA.names} | {
            "run_id": f"run-{day}", "partition_date": day, "source": "file:///traces", "config_hash": "c0ffee",
            "config": "{}", "metrics": ",".join(METRICS), "started_at": NOW, "finished_at": NOW,
        }  # fmt: skip
        warehouse.publish(
            Publication(
                partition_date=day,
                metrics=list(METRICS),
                scores=_shuffled(scores, rng) if rng else scores,
                quarantine=QUARANTINE_SCHEMA.empty_table(),
                run=pa.Table.from_pylist([run], RUNS_SCHEMA),
                traces=_shuffled(traces, rng) if rng else traces,
            )
        )


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    """Drift rows without their timestamp, in a fixed order."""
    return sorted(table.drop_columns(["computed_at"]).to_pylist(), key=lambda r: (r["metric"], r["segment"]))


def _long(history: list[tuple[dt.date, pa.Table, pa.Table]]) -> pa.Table:
    """The score rows with each trace's app, as the drift task hands them to ``drift_rows``."""
    scores = pa.concat_tables([s for _, s, _ in history])
    traces = pa.concat_tables([t for _, _, t in history])
    apps = pa.array([json.loads(m)["app"] for m in traces["metadata"].to_pylist()])
    segments = pa.table({"partition_date": traces["partition_date"], "trace_id": traces["trace_id"], "segment": apps})
    return scores.join(segments, ["partition_date", "trace_id"]).select(
        ["partition_date", "trace_id", "metric", "value", "status", "metric_version", "judge_model",
         "prompt_version", "segment"]
    )  # fmt: skip


def test_shuffled_score_rows_give_bit_identical_drift_rows() -> None:
    scores = _long(_history())
    expected = _rows(drift_rows(scores, DAYS[-1], DAYS[:-1], SETTINGS, "r"))
    assert {r["segment"] for r in expected} == {"all", *(f"metadata.app={app}" for app in APPS)}
    assert all(r["ci_low"] is not None for r in expected)
    rng = np.random.default_rng(3)
    for _ in range(3):
        assert _rows(drift_rows(_shuffled(scores, rng), DAYS[-1], DAYS[:-1], SETTINGS, "r")) == expected


def test_equal_segment_sizes_are_cut_by_value_not_by_row_order() -> None:
    """docs-search and support have 70 traces each: with room for one segment, the first by value is compared."""
    scores = _long(_history())
    one = DriftConfig(segment_key="metadata.app", max_segments=1)
    rng = np.random.default_rng(5)
    for table in (scores, _shuffled(scores, rng), _shuffled(scores, rng)):
        segments = {r["segment"] for r in drift_rows(table, DAYS[-1], DAYS[:-1], one, "r").to_pylist()}
        assert segments == {"all", "metadata.app=docs-search"}


def test_a_tie_between_two_judges_goes_to_the_same_one_in_any_order() -> None:
    """Half of the day scored by each judge: the row's judge (and so its baseline) must not follow row order."""
    scores = _long(_history()).filter(pc.equal(pc.field("metric"), "answer_f1"))
    today = scores.filter(pc.equal(scores["partition_date"], pa.scalar(DAYS[-1], pa.date32())))
    judges = pa.array(["judge-b", "judge-a"] * (today.num_rows // 2))
    today = today.set_column(today.schema.get_field_index("judge_model"), "judge_model", judges)
    rng = np.random.default_rng(9)
    for table in (today, _shuffled(today, rng), _shuffled(today, rng)):
        (row,) = drift_rows(table, DAYS[-1], [], DriftConfig(), "r").to_pylist()
        assert row["judge_model"] == "judge-a"


@pytest.mark.slow
def test_duckdb_and_postgresql_give_the_same_drift_rows(tmp_path: Path, pg_schema: str) -> None:
    history = _history()
    duck, postgres = f"duckdb:///{tmp_path / 'w.duckdb'}", f"{PG_URL}?schema={pg_schema}"
    _publish(duck, history, None)
    _publish(postgres, history, np.random.default_rng(7))  # stored, and so scanned, in another order
    day = DAYS[-1]
    with disable_run_logger():
        reports = [detect_drift.fn(url, day, SETTINGS, run_id="r") for url in (duck, postgres)]
    from_duckdb, from_postgres = (_rows(open_warehouse(u).read("drift", start=day, end=day)) for u in (duck, postgres))
    assert from_duckdb == from_postgres == _rows(reports[0].rows) == _rows(reports[1].rows)
    # Every metric and the questions' input drift (QUESTION_METRIC), overall and per app.
    assert len(from_duckdb) == (len(METRICS) + 1) * (1 + len(APPS))
    assert all(r["ci_low"] is not None and r["ci_high"] is not None for r in from_duckdb if r["metric"] in METRICS)
    degraded = pc.equal(reports[1].rows["verdict"], "degraded")
    assert sorted(reports[1].rows.filter(degraded)["segment"].to_pylist()) == ["all", "metadata.app=support"]
