"""The views over the agent tables (schema v10) in DuckDB and the real PostgreSQL: ``turn_steps`` rolls a turn's
step scores up, ``conversations`` and ``conversation_turns`` order a conversation's turns; each checked in SQL
against figures worked out by hand."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import psycopg
import pyarrow as pa
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from ragpulse.metrics import MetricResult, Status
from ragpulse.tasks.core.types import PartitionScores, RunInfo, StepScores
from ragpulse.tasks.warehouse import TRACES_SCHEMA, open_warehouse
from ragpulse.tasks.warehouse.publication import build_publication

pytestmark = pytest.mark.slow  # PostgreSQL

PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
DAY = dt.date(2026, 11, 1)
NEXT = DAY + dt.timedelta(days=1)
RELEVANCE, HARM = "context_relevance", "aspect_critique:harmfulness"  # higher is better; lower is better
NA, FAILED = None, "failed"


def _at(day: dt.date, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=dt.UTC)


# (day, trace id, conversation, timestamp, question): ids out of time order, one tie, a conversation over midnight.
TRACES = [
    (DAY, "ja-a", "会話-1", _at(DAY, 10, 5), "どこにありますか?"),
    (DAY, "ja-b", "会話-1", _at(DAY, 10), "富士山の高さは?"),
    (DAY, "zh-2", "对话-2", _at(DAY, 9), "它在哪里?"),
    (DAY, "zh-1", "对话-2", _at(DAY, 9), "长城有多长?"),
    (DAY, "solo", None, _at(DAY, 8), "a turn of no conversation"),
    (NEXT, "ja-c", "会話-1", _at(NEXT, 0, 30), "登山の季節は?"),
]

# (trace, step, metric, against, value or NA / FAILED)
STEP_SCORES = [
    ("ja-b", 0, RELEVANCE, "step_query", 0.2),
    ("ja-b", 1, RELEVANCE, "step_query", 0.8),
    ("ja-b", 2, RELEVANCE, "step_query", FAILED),
    ("ja-b", 0, RELEVANCE, "question", 0.6),
    ("ja-b", 1, RELEVANCE, "question", 0.4),
    ("ja-b", 0, HARM, "step_query", 0.1),
    ("ja-b", 1, HARM, "step_query", 0.9),
    ("zh-1", 0, RELEVANCE, "step_query", NA),
]


def _step_scores() -> tuple[StepScores, ...]:
    units = []
    for against in ("step_query", "question"):
        for metric in (RELEVANCE, HARM):
            rows = [row for row in STEP_SCORES if row[2] == metric and row[3] == against]
            if not rows:
                continue
            status = np.array(
                [Status.FAILED if v is FAILED else Status.NOT_APPLICABLE if v is NA else Status.OK for *_, v in rows],
                dtype=np.int8,
            )
            values = np.array([v if isinstance(v, float) else np.nan for *_, v in rows])
            reasons = np.array([None if isinstance(v, float) else v or "no_contexts" for *_, v in rows], dtype=object)
            units.append(
                StepScores(
                    trace_ids=np.array([r[0] for r in rows], dtype=object),
                    step_index=np.array([r[1] for r in rows], dtype=np.int64),
                    step_ids=np.array([f"span-{r[0]}-{r[1]}" for r in rows], dtype=object),
                    against=against,
                    results={metric: MetricResult(values, status, reasons)},
                    versions={metric: "1"},
                    prompt_versions={metric: f"{metric}/2"},
                )
            )
    return tuple(units)


def _publish(url: str) -> None:
    for day in (DAY, NEXT):
        traces = [t for t in TRACES if t[0] == day]
        ids = np.array([t[1] for t in traces], dtype=object)
        n = len(ids)
        scores = PartitionScores(
            date=day,
            trace_ids=ids,
            values={RELEVANCE: np.full(n, 0.5)},
            status={RELEVANCE: np.zeros(n, np.int8)},
            reasons={RELEVANCE: np.full(n, None, dtype=object)},
            versions={RELEVANCE: "1"},
            quarantined=[],
            n_records=n,
            n_files=1,
            n_batches=1,
            prompt_versions={RELEVANCE: f"{RELEVANCE}/2"},
            judge_model="judge-1",
            steps=_step_scores() if day == DAY else (),
        )
        run = RunInfo(f"run-{day}", "file:///traces", "cfg", {}, _at(day, 23))
        rows = pa.Table.from_pylist(
            [
                {"partition_date": d, "trace_id": t, "run_id": run.run_id, "timestamp": ts, "question": q,
                 "contexts": "[]", "metadata": "{}", "source_file": "file:///traces/a.jsonl", "source_line": i + 1,
                 "language": "ja" if t.startswith("ja") else "zh", "conversation_id": c}
                for i, (d, t, c, ts, q) in enumerate(traces)
            ],
            schema=TRACES_SCHEMA,
        )  # fmt: skip
        publication = build_publication(scores, run, [RELEVANCE], n_batches_cached=0)
        open_warehouse(url).publish(dataclasses.replace(publication, traces=rows))


@pytest.fixture(params=["duckdb", "postgresql"])
def query(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Plain SQL over the views of a warehouse the two days were published to, as a dashboard reads them."""
    if request.param == "duckdb":
        path = tmp_path / "w.duckdb"
        _publish(f"duckdb:///{path}")

        def in_duckdb(text: str) -> list[dict[str, Any]]:
            with duckdb.connect(str(path), read_only=True) as con:
                cursor = con.execute(text)
                names = [d[0] for d in cursor.description or []]
                return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

        yield in_duckdb
        return
    schema = f"agent_views_{uuid.uuid4().hex[:8]}"
    try:
        _publish(f"{PG_URL}?schema={schema}")

        def in_postgres(text: str) -> list[dict[str, Any]]:
            with psycopg.connect(PG_DSN, row_factory=dict_row, options=f"-csearch_path={schema}") as con:
                return con.execute(text).fetchall()  # type: ignore[arg-type]

        yield in_postgres
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as con:
            con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_turn_steps_rolls_a_turns_steps_up_per_metric_and_against(query: Any) -> None:
    rows = query(
        "SELECT partition_date, trace_id, metric, against, n_steps, worst_value, mean_value, n_ok, n_failed, "
        "n_not_applicable, any_failed, judge_model FROM turn_steps ORDER BY trace_id, metric, against"
    )
    got = [{**r, "mean_value": None if r["mean_value"] is None else round(r["mean_value"], 12)} for r in rows]
    common = {"partition_date": DAY, "judge_model": "judge-1"}
    assert got == [
        # Lower is better: the worst step is the highest.
        {**common, "trace_id": "ja-b", "metric": HARM, "against": "step_query", "n_steps": 2, "worst_value": 0.9,
         "mean_value": 0.5, "n_ok": 2, "n_failed": 0, "n_not_applicable": 0, "any_failed": False},
        {**common, "trace_id": "ja-b", "metric": RELEVANCE, "against": "question", "n_steps": 2, "worst_value": 0.4,
         "mean_value": 0.5, "n_ok": 2, "n_failed": 0, "n_not_applicable": 0, "any_failed": False},
        # The failed step counts as a step and fails the turn, but has no value to be the worst or the mean.
        {**common, "trace_id": "ja-b", "metric": RELEVANCE, "against": "step_query", "n_steps": 3, "worst_value": 0.2,
         "mean_value": 0.5, "n_ok": 2, "n_failed": 1, "n_not_applicable": 0, "any_failed": True},
        {**common, "trace_id": "zh-1", "metric": RELEVANCE, "against": "step_query", "n_steps": 1, "worst_value": None,
         "mean_value": None, "n_ok": 0, "n_failed": 0, "n_not_applicable": 1, "any_failed": False},
    ]  # fmt: skip


def test_conversations_group_a_days_turns_in_time_order(query: Any) -> None:
    rows = query(
        "SELECT partition_date, conversation_id, n_turns, first_timestamp, last_timestamp, trace_ids FROM conversations"
    )
    # Sorted here: the databases collate the ids differently.
    got = sorted(rows, key=lambda r: (r["partition_date"], r["first_timestamp"]))
    assert [{**r, "trace_ids": list(r["trace_ids"])} for r in got] == [
        {"partition_date": DAY, "conversation_id": "对话-2", "n_turns": 2, "first_timestamp": _at(DAY, 9),
         "last_timestamp": _at(DAY, 9), "trace_ids": ["zh-1", "zh-2"]},  # a tie: by trace id
        {"partition_date": DAY, "conversation_id": "会話-1", "n_turns": 2, "first_timestamp": _at(DAY, 10),
         "last_timestamp": _at(DAY, 10, 5), "trace_ids": ["ja-b", "ja-a"]},
        {"partition_date": NEXT, "conversation_id": "会話-1", "n_turns": 1, "first_timestamp": _at(NEXT, 0, 30),
         "last_timestamp": _at(NEXT, 0, 30), "trace_ids": ["ja-c"]},
    ]  # fmt: skip


def test_conversation_turns_number_each_turn_across_days(query: Any) -> None:
    rows = query("SELECT conversation_id, trace_id, turn_number, question, timestamp FROM conversation_turns")
    got = sorted(rows, key=lambda r: (r["conversation_id"] != "对话-2", r["turn_number"]))
    assert [(r["conversation_id"], r["trace_id"], r["turn_number"], r["question"]) for r in got] == [
        ("对话-2", "zh-1", 1, "长城有多长?"),
        ("对话-2", "zh-2", 2, "它在哪里?"),
        ("会話-1", "ja-b", 1, "富士山の高さは?"),
        ("会話-1", "ja-a", 2, "どこにありますか?"),
        ("会話-1", "ja-c", 3, "登山の季節は?"),
    ]
    # A turn of no conversation is in neither view.
    assert query("SELECT count(*) AS n FROM conversation_turns WHERE trace_id = 'solo'") == [{"n": 0}]
