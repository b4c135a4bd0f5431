"""Topics through the warehouse: fit on the published baseline, a day assigned and published to ``trace_topics``
(replaced, never duplicated, on a re-run) in DuckDB, PostgreSQL and the Iceberg lake; the ``daily_scores`` view's
``topic`` segment; drift per topic and the share of a topic that grew, on DuckDB; too few baseline questions."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pytest
from prefect.logging import disable_run_logger
from psycopg import sql

from ragpulse.tasks.config import DriftConfig
from ragpulse.tasks.monitoring.tasks import detect_drift
from ragpulse.tasks.reporting.grafana import dashboard_json
from ragpulse.tasks.topics.config import TopicsConfig
from ragpulse.tasks.topics.tasks import assign_topics
from ragpulse.tasks.warehouse import (
    QUARANTINE_SCHEMA,
    RUNS_SCHEMA,
    SCORES_SCHEMA,
    TRACES_SCHEMA,
    Publication,
    open_warehouse,
)
from ragpulse.tasks.warehouse._schema import SCHEMA_VERSION
from tests.grafana import PG_DSN, grafana_sql, panels, pg_rows
from tests.tasks.topics.questions import questions
from tests.tasks.topics.test_model import language

pytestmark = pytest.mark.slow  # the encoder, and PostgreSQL

NOW = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(8)]
BASELINE, DAY = DAYS[:-1], DAYS[-1]
SETTINGS = TopicsConfig(min_fit_questions=40)


def publication(day: dt.date, asked: dict[str, int], *, weather_score: float = 0.8) -> Publication:
    """``day``'s traces asking ``asked`` questions per planted topic, each with a score of ``document_mrr`` (0.8 for
    every trace, ``weather_score`` for the weather questions), and its runs row."""
    made: list[tuple[str, str]] = []
    for offset, (topic, n) in enumerate(asked.items()):
        made += [(topic, q) for q in questions(topic, n, seed=day.toordinal() * 10 + offset)]
    n = len(made)
    ids = [f"{day}-{topic}-{i}" for i, (topic, _) in enumerate(made)]
    traces = pa.Table.from_pylist(
        [
            {
                "partition_date": day,
                "trace_id": trace_id,
                "run_id": f"run-{day}",
                "question": q,
                "answer": "a",
                "contexts": "[]",
                "metadata": "{}",
                "source_file": "s3://logs/x.jsonl",
                "source_line": i,
                "language": language(q),
            }
            for i, (trace_id, (_, q)) in enumerate(zip(ids, made, strict=True))
        ],
        schema=TRACES_SCHEMA,
    )
    values = [weather_score if topic == "weather" else 0.8 for topic, _ in made]
    scores = pa.table(
        {
            "partition_date": pa.array([day] * n, pa.date32()),
            "trace_id": ids,
            "metric": ["document_mrr"] * n,
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
    run: dict[str, Any] = dict.fromkeys((name for name in RUNS_SCHEMA.names if name.startswith("n_")), n)
    run.update(
        run_id=f"run-{day}",
        partition_date=day,
        source="s3://logs",
        config_hash="h",
        config="{}",
        metrics="document_mrr",
    )
    run.update(started_at=NOW, finished_at=NOW)
    runs = pa.Table.from_pylist([run], schema=RUNS_SCHEMA)
    return Publication(day, ["document_mrr"], scores, QUARANTINE_SCHEMA.empty_table(), runs, traces=traces)


EVEN = {"password": 8, "delivery": 8, "weather": 8}


@pytest.fixture
def pg_schema() -> Iterator[str]:
    name = f"ragpulse_test_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(PG_DSN, autocommit=True) as con:
        con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(params=["duckdb", "postgresql", "lake"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "duckdb":
        return f"duckdb:///{tmp_path / 'w.duckdb'}"
    if request.param == "postgresql":
        return f"postgresql://postgres@127.0.0.1:5432/test?schema={request.getfixturevalue('pg_schema')}"
    return str(tmp_path / "lake")


def test_a_day_is_assigned_to_topics_fit_on_its_baseline_and_replaced_on_a_rerun(url: str) -> None:
    warehouse = open_warehouse(url)
    for day in BASELINE:
        warehouse.publish(publication(day, EVEN))
    warehouse.publish(publication(DAY, {"password": 8, "delivery": 8, "weather": 8, "baking": 12}))

    with disable_run_logger():
        first = assign_topics.fn(url, DAY, SETTINGS, run_id="r1")
        again = assign_topics.fn(url, DAY, SETTINGS, run_id="r2")

    # No topics stored before the day: the first run fits them; the re-run assigns to that fit, refits nothing.
    assert (first.refit, again.refit) == (True, False)
    topics = warehouse.read("topics")
    assert sorted(topics["topic_id"].to_pylist()) == [0, 1, 2]
    assert set(topics["partition_date"].to_pylist()) == {DAY}
    assert set(topics["run_id"].to_pylist()) == {"r1"}
    assert (min(topics["baseline_start"].to_pylist()), max(topics["baseline_end"].to_pylist())) == (DAYS[0], DAYS[-2])
    rows = warehouse.read("trace_topics", start=DAY, end=DAY).to_pylist()
    assert len(rows) == 36 and {row["run_id"] for row in rows} == {"r2"}
    baking = [row for row in rows if "-baking-" in row["trace_id"]]
    assert all(row["topic_id"] is None for row in baking)
    assert Counter(row["candidate"] for row in baking).most_common(1) == [(0, 12)]
    planted = [row for row in rows if "-baking-" not in row["trace_id"]]
    assert sum(row["topic_id"] is not None for row in planted) >= 20
    by_topic = {row["topic_id"]: {r["trace_id"].split("-")[3] for r in planted if r["topic_id"] == row["topic_id"]}
                for row in planted if row["topic_id"] is not None}  # fmt: skip
    assert all(len(kinds) == 1 for kinds in by_topic.values()), by_topic
    assert {row["model_date"] for row in rows} == {DAY}


def test_the_daily_scores_view_has_a_topic_segment(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    warehouse = open_warehouse(url)
    for day in DAYS:
        warehouse.publish(publication(day, EVEN, weather_score=0.2 if day == DAY else 0.8))
    with disable_run_logger():
        assign_topics.fn(url, DAY, SETTINGS, run_id="r1")
    weather = _weather_topic(warehouse)
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT segment_value, n, mean FROM daily_scores WHERE segment_key = 'topic' AND partition_date = ?",
            [DAY],
        ).fetchall()
    means = {value: (n, mean) for value, n, mean in rows}
    assert means[str(weather)][1] == pytest.approx(0.2)
    assert all(mean == pytest.approx(0.8) for value, (_, mean) in means.items() if value != str(weather))
    assert sum(n for n, _ in means.values()) <= 24


def test_postgresql_views_segment_by_topic(pg_schema: str) -> None:
    url = f"postgresql://postgres@127.0.0.1:5432/test?schema={pg_schema}"
    warehouse = open_warehouse(url)
    for day in DAYS:
        warehouse.publish(publication(day, EVEN))
    with disable_run_logger():
        assign_topics.fn(url, DAY, SETTINGS, run_id="r1")
    with psycopg.connect(PG_DSN, options=f"-csearch_path={pg_schema}") as con:
        found = con.execute(
            "SELECT count(*), sum(n) FROM daily_scores WHERE segment_key = 'topic' AND partition_date = %s", (DAY,)
        ).fetchone()
        version = con.execute("SELECT max(version) FROM ragpulse_schema").fetchone()
    assert found is not None and found[0] == 3 and 20 <= found[1] <= 24
    assert version == (SCHEMA_VERSION,)
    # The dashboard's Topics panel, as Grafana sends it: each day's shares, summing to 1, named by the topics table.
    (panel,) = [p for p in panels(dashboard_json(schema=pg_schema)) if p["title"].startswith("Topics")]
    names, types, rows = pg_rows(grafana_sql(panel["targets"][0]["rawSql"], {}, (DAYS[0], DAY)))
    assert names == ["time", "metric", "value"] and types == ["timestamptz", "text", "float8"]
    assert {row[0].date() for row in rows} == {DAY}  # only the assigned day has trace_topics rows
    assert math.isclose(sum(row[2] for row in rows), 1.0) and all(row[1].startswith(("#", "no topic")) for row in rows)
    assert sum(1 for row in rows if row[1].startswith("#")) == 3


def _weather_topic(warehouse: Any) -> int:
    rows = warehouse.read("trace_topics", start=DAY, end=DAY).to_pylist()
    (weather,) = {r["topic_id"] for r in rows if "-weather-" in r["trace_id"] and r["topic_id"] is not None}
    return int(weather)


def test_a_topic_whose_share_grew_alerts_and_its_scores_drift_on_their_own(tmp_path: Path) -> None:
    """Seven days asking three topics evenly, then a day where weather questions are three times as many and score
    0.2 instead of 0.8: ``topic.share`` of weather is shifted (its share rose), the other topics' shares fell
    (shifted too where significant: a change in what is asked, not in quality); with ``segment_key = "topic"``
    ``document_mrr`` is degraded for weather only."""
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    warehouse = open_warehouse(url)
    for day in BASELINE:
        warehouse.publish(publication(day, {"password": 10, "delivery": 10, "weather": 10}))
    warehouse.publish(publication(DAY, {"password": 10, "delivery": 10, "weather": 40}, weather_score=0.2))
    with disable_run_logger():
        # Each baseline day assigned to the topics fit on the days before it: the share's baseline.
        for day in BASELINE[2:]:
            assign_topics.fn(url, day, SETTINGS.model_copy(update={"refit_after_days": 0}), run_id=f"t-{day}")
        assign_topics.fn(url, DAY, SETTINGS, run_id="t")
        report = detect_drift.fn(url, DAY, DriftConfig(segment_key="topic"), run_id="d", topics=SETTINGS)

    weather = _weather_topic(warehouse)
    rows = {(r["metric"], r["segment"]): r for r in report.rows.to_pylist()}
    share = rows[("topic.share", f"topic={weather}")]
    assert share["verdict"] == "shifted" and share["delta"] > 0.3, share
    assert ": share rose " in share["detail"], share
    assert share["baseline_mean"] == pytest.approx(1 / 3, abs=0.1)
    others = [r for (metric, segment), r in rows.items() if metric == "topic.share" and segment != f"topic={weather}"]
    # The others' shares fell: never degraded or improved, shifted where significant, and then said to have fallen.
    assert {r["verdict"] for r in others} <= {"shifted", "stable"} and any(r["delta"] < 0 for r in others)
    assert all(": share fell " in r["detail"] for r in others if r["verdict"] == "shifted")
    assert rows[("document_mrr", f"topic={weather}")]["verdict"] == "degraded"
    per_topic = [
        r for (metric, segment), r in rows.items() if metric == "document_mrr" and segment.startswith("topic=")
    ]
    assert len(per_topic) == 3  # weather and the two others (10 traces each today: too few to judge)
    assert {r["verdict"] for r in per_topic if r["segment"] != f"topic={weather}"} == {"insufficient_data"}
    assert ("topic.share", f"topic={weather}", "shifted") in {(a.metric, a.segment, a.verdict) for a in report.alerts}
    assert warehouse.read("drift", start=DAY, end=DAY).num_rows == report.rows.num_rows


def test_too_few_baseline_questions_fit_no_topics_and_say_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    warehouse = open_warehouse(url)
    for day in DAYS[-3:]:
        warehouse.publish(publication(day, {"password": 5, "weather": 5}))
    with disable_run_logger():
        report = assign_topics.fn(url, DAY, SETTINGS, run_id="r")
    assert report.model is None
    assert "20 baseline question(s) in 2 partition(s)" in report.reason and "no topics fit" in report.reason
    assert warehouse.read("topics").num_rows == 0 and warehouse.read("trace_topics").num_rows == 0


def test_the_report_shows_the_topics_their_shares_and_the_candidates(tmp_path: Path) -> None:
    from ragpulse.tasks.reporting.html.data import read_report_data
    from ragpulse.tasks.reporting.html.render import render_report

    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    warehouse = open_warehouse(url)
    for day in BASELINE:
        warehouse.publish(publication(day, EVEN))
    warehouse.publish(publication(DAY, {"password": 8, "delivery": 8, "weather": 8, "baking": 12}, weather_score=0.2))
    with disable_run_logger():
        assign_topics.fn(url, DAY, SETTINGS, run_id="r1")

    data = read_report_data(url)
    assert data.topics is not None
    weather = _weather_topic(warehouse)
    rows = {row.topic_id: row for row in data.topics.topics}
    assert set(rows) == {0, 1, 2} and data.topics.n_questions == 36
    assert rows[weather].means["document_mrr"] == pytest.approx(0.2)
    assert sum(row.n for row in rows.values()) + data.topics.n_unassigned == 36
    (candidate,) = [c for c in data.topics.candidates if c.n >= SETTINGS.min_topic_size]
    assert len(candidate.examples) == 3 and all("蛋糕" in q or "ケーキ" in q or "cake" in q for q in candidate.examples)
    page = render_report(data)
    section = page[page.index('<section id="topics">') : page.index("</section>", page.index('id="topics"'))]
    for row in rows.values():
        assert f'data-topic-id="{row.topic_id}"' in section and row.name.split(" · ")[0] in section
    assert candidate.examples[0] in section


def test_a_day_beyond_max_day_questions_is_assigned_on_the_same_sample_every_run(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    warehouse = open_warehouse(url)
    for day in BASELINE[-3:]:
        warehouse.publish(publication(day, EVEN))
    warehouse.publish(publication(DAY, {"password": 40, "delivery": 40, "weather": 40}))
    settings = SETTINGS.model_copy(update={"max_day_questions": 100})
    with disable_run_logger():
        first = assign_topics.fn(url, DAY, settings, run_id="r1")
        sampled = set(warehouse.read("trace_topics", start=DAY, end=DAY)["trace_id"].to_pylist())
        assign_topics.fn(url, DAY, settings, run_id="r2")
    again = warehouse.read("trace_topics", start=DAY, end=DAY)
    assert first.n_assigned + first.n_unassigned == len(sampled) == 100
    assert set(again["trace_id"].to_pylist()) == sampled and set(again["run_id"].to_pylist()) == {"r2"}
    assert {t.split("-")[3] for t in sampled} == {"password", "delivery", "weather"}
