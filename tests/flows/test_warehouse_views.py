"""The warehouse views on what the real pipeline publishes: demo days (English, Japanese and Chinese traces of five
apps) backfilled with drift by app into DuckDB and PostgreSQL, each view checked against the same figures computed
here in Python from the tables, and the two databases against each other."""

from __future__ import annotations

import datetime as dt
import html
import json
import math
import re
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
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.flows.backfill import backfill
from ragpulse.metrics.drift import ALERTING
from ragpulse.tasks.config import DriftConfig, OutputConfig, ScoringConfig, SourceConfig, TopicsConfig
from ragpulse.tasks.demo.generate import generate_demo_traces
from ragpulse.tasks.reporting.grafana import dashboard_json
from ragpulse.tasks.warehouse import ALERTS_SCHEMA, open_warehouse
from ragpulse.tasks.warehouse._views import LOWER_IS_BETTER
from tests.grafana import PG_DSN, grafana_sql, panels, pg_rows

START = dt.date(2026, 3, 2)
DAYS = 4
METRICS = ("document_mrr", "hit_rate@5", "answer_f1", "latency_ms", "retrieval_latency_ms")
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
_SUMMARY_KEY = ("partition_date", "metric", "segment_key", "segment_value")


@pytest.fixture(scope="module")
def pg_schema() -> Iterator[str]:
    name = f"views_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(PG_DSN, autocommit=True) as con:
        con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def warehouses(tmp_path_factory: pytest.TempPathFactory, pg_schema: str) -> dict[str, str]:
    """The same demo days backfilled into a DuckDB file and a PostgreSQL schema, with alert deliveries recorded."""
    root = tmp_path_factory.mktemp("views")
    generate_demo_traces(root / "traces", start=START, days=DAYS, traces_per_day=90)
    urls = {"duckdb": f"duckdb:///{root / 'w.duckdb'}", "postgresql": f"{PG_URL}?schema={pg_schema}"}
    for name, url in urls.items():
        state = backfill(
            source=SourceConfig(url=str(root / "traces")),
            start=START,
            end=START + dt.timedelta(days=DAYS - 1),
            scoring=ScoringConfig(metrics=METRICS, batch_size=50),
            output=OutputConfig(warehouse=url, work_dir=str(root / f"work-{name}")),
            # The score views from score rows alone: the questions' drift and topics have their own view tests.
            drift=DriftConfig(
                segment_key="metadata.app",
                baseline_partitions=3,
                min_baseline_partitions=1,
                min_samples=10,
                question_drift=False,
            ),
            topics=TopicsConfig(enabled=False),
            return_state=True,
        )
        assert state.is_completed(), state
        open_warehouse(url).record_alerts(_deliveries())
    return urls


def _deliveries() -> pa.Table:
    """Two attempts of one alert on one channel (failed, then sent), and one on another channel."""
    day = START + dt.timedelta(days=DAYS - 1)

    def row(channel: str, status: str, minute: int) -> dict[str, Any]:
        return {
            "alert_key": f"{day}/document_mrr/metadata.app=support-bot/degraded",
            "partition_date": day,
            "metric": "document_mrr",
            "segment": "metadata.app=support-bot",
            "verdict": "degraded",
            "channel": channel,
            "status": status,
            "attempts": 1,
            "error": "HTTP 503" if status == "failed" else None,
            "sent_at": dt.datetime(2026, 3, 6, 1, minute, tzinfo=dt.UTC),
            "run_id": f"run-{minute}",
        }

    return pa.Table.from_pylist(
        [row("webhook", "failed", 1), row("webhook", "sent", 2), row("slack", "failed", 3)], schema=ALERTS_SCHEMA
    )


def _view(url: str, pg_schema: str, query: str) -> list[dict[str, Any]]:
    """Rows of ``query`` (naming views and tables unqualified), read the way a dashboard would: plain SQL."""
    if url.startswith("duckdb"):
        with duckdb.connect(url.removeprefix("duckdb:///"), read_only=True) as con:
            cursor = con.execute(query)
            names = [d[0] for d in cursor.description or []]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    with psycopg.connect(PG_DSN, row_factory=dict_row, options=f"-csearch_path={pg_schema}") as con:
        return con.execute(query).fetchall()  # type: ignore[arg-type]


def _expected_summary(url: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """daily_scores as defined in docs/warehouses.md, computed from the scores and traces tables in Python."""
    warehouse = open_warehouse(url)
    scores = warehouse.read("scores").to_pylist()
    traces = {(t["partition_date"], t["trace_id"]): t for t in warehouse.read("traces").to_pylist()}
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for score in scores:
        trace = traces[(score["partition_date"], score["trace_id"])]
        segments = [("all", "all")]
        if trace["language"] is not None:
            segments.append(("language", trace["language"]))
        metadata = json.loads(trace["metadata"])
        segments += [
            (f"metadata.{k}", v if isinstance(v, str) else json.dumps(v))
            for k, v in metadata.items()
            if isinstance(v, str | bool)
        ]
        for key, value in segments:
            groups.setdefault((score["partition_date"], score["metric"], key, value), []).append(score)
    expected = {}
    for group, rows in groups.items():
        values = np.array([r["value"] for r in rows if r["status"] == "ok"], dtype=np.float64)
        n = len(rows)
        expected[group] = {
            "n": n,
            "n_ok": len(values),
            "n_failed": sum(r["status"] == "failed" for r in rows),
            "mean": float(values.mean()) if len(values) else None,
            "p10": float(np.percentile(values, 10)) if len(values) else None,
            "p50": float(np.percentile(values, 50)) if len(values) else None,
            "p90": float(np.percentile(values, 90)) if len(values) else None,
            "p95": float(np.percentile(values, 95)) if len(values) else None,
            "p99": float(np.percentile(values, 99)) if len(values) else None,
            "coverage": len(values) / n,
            "failure_rate": sum(r["status"] == "failed" for r in rows) / n,
        }
    return expected


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_daily_scores_are_the_summary_of_every_segment_computed_from_the_tables(
    warehouses: dict[str, str], pg_schema: str, backend: str
) -> None:
    url = warehouses[backend]
    expected = _expected_summary(url)
    rows = _view(url, pg_schema, "SELECT * FROM daily_scores")
    got = {tuple(row[k] for k in _SUMMARY_KEY): row for row in rows}
    assert len(got) == len(rows) and set(got) == set(expected)
    for group, figures in expected.items():
        assert all(_close(got[group][name], value) for name, value in figures.items()), (group, got[group], figures)
    keys = {key for (_, _, key, _) in got}
    assert keys == {"all", "language", "metadata.app", "metadata.model", "metadata.tenant"}
    assert {value for (_, _, key, value) in got if key == "language"} >= {"en", "ja", "zh"}


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_the_planted_latency_regression_is_degraded_in_its_app_and_the_view_has_its_tail(
    warehouses: dict[str, str], pg_schema: str, backend: str
) -> None:
    """The demo's last day has docs-search's index three times slower: its retrieval latency rises, which drift calls
    degraded (a lower-is-better metric), while the other apps' holds; its end-to-end latency rises too, by a few
    hundred ms in a second or more, too little in a day of ~20 turns to be significant."""
    last = START + dt.timedelta(days=DAYS - 1)
    rows = _view(
        warehouses[backend],
        pg_schema,
        "SELECT metric, segment_value, verdict, baseline_mean, current_mean FROM drift_segments "
        f"WHERE partition_date = DATE '{last}' AND metric IN ('latency_ms', 'retrieval_latency_ms') "
        "AND segment_key = 'metadata.app'",
    )
    verdicts = {(row["metric"], row["segment_value"]): row for row in rows}
    slower = verdicts[("retrieval_latency_ms", "docs-search")]
    assert slower["verdict"] == "degraded" and slower["current_mean"] > 2 * slower["baseline_mean"], slower
    end_to_end = verdicts[("latency_ms", "docs-search")]
    assert end_to_end["current_mean"] > end_to_end["baseline_mean"] and end_to_end["verdict"] != "improved"
    assert verdicts[("retrieval_latency_ms", "support-bot")]["verdict"] not in ("degraded", "improved")
    # research-assistant logs no latency: all its rows are not_applicable, so there is no mean to compare.
    assert verdicts[("latency_ms", "research-assistant")]["current_mean"] is None
    tail = _view(
        warehouses[backend],
        pg_schema,
        "SELECT p50, p95, p99 FROM daily_scores WHERE metric = 'latency_ms' AND segment_key = 'all' "
        f"AND partition_date = DATE '{last}'",
    )
    assert len(tail) == 1 and tail[0]["p50"] < tail[0]["p95"] <= tail[0]["p99"]


def test_duckdb_and_postgresql_views_agree(warehouses: dict[str, str], pg_schema: str) -> None:
    for view, key in (
        ("daily_scores", _SUMMARY_KEY),
        ("drift_segments", ("partition_date", "metric", "segment")),
        ("worst_traces", ("partition_date", "metric", "trace_id")),
    ):
        duck, postgres = (
            {tuple(row[k] for k in key): row for row in _view(url, pg_schema, f"SELECT * FROM {view}")}
            for url in (warehouses["duckdb"], warehouses["postgresql"])
        )
        assert duck and set(duck) == set(postgres), view
        for group, row in duck.items():
            other = postgres[group]
            assert set(row) == set(other), view
            different = {
                name
                for name, value in row.items()
                # jsonb keeps the value, not the text; timestamps and run ids are each run's own.
                if name not in ("metadata", "computed_at", "run_id")
                and not (value is None and other[name] is None)
                and not _close(value, other[name])
            }
            assert not different, (view, group, {name: (row[name], other[name]) for name in different})


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_drift_segments_split_the_segment_and_flag_alerting_verdicts(
    warehouses: dict[str, str], pg_schema: str, backend: str
) -> None:
    rows = _view(warehouses[backend], pg_schema, "SELECT * FROM drift_segments")
    assert {row["segment_key"] for row in rows} == {"all", "metadata.app"}
    alerting = {verdict.value for verdict in ALERTING}
    for row in rows:
        key, _, value = row["segment"].partition("=")
        assert (row["segment_key"], row["segment_value"]) == (
            ("all", "all") if row["segment"] == "all" else (key, value)
        )
        assert row["alerting"] == (row["verdict"] in alerting)
        if row["ci_low"] is not None:
            # Outside the band exactly when the interval of the difference excludes 0.
            outside = not row["band_low"] <= row["current_mean"] <= row["band_high"]
            assert outside == (row["ci_low"] > 0 or row["ci_high"] < 0)
            assert _close(row["band_high"] - row["band_low"], row["ci_high"] - row["ci_low"])


MIN_SAMPLES = 10  # the fixture's drift setting
_NOT_COMPARED = "SELECT * FROM drift_segments WHERE detail LIKE 'mean not compared%'"


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_a_mean_not_compared_is_insufficient_data_in_the_table_and_the_views(
    warehouses: dict[str, str], pg_schema: str, backend: str
) -> None:
    """Issue 29: an app with fewer than min_samples ok scores of a metric but more scored traces had its failure
    rate and coverage compared, not its mean: unless those alert, it is insufficient_data, and stable is only
    ever a compared mean."""
    url = warehouses[backend]
    key = ("partition_date", "metric", "segment")
    uncompared = _view(url, pg_schema, _NOT_COMPARED.replace("*", ", ".join((*key, "verdict, alerting"))))
    quiet = [row for row in uncompared if not row["alerting"]]
    assert quiet, "the fixture lost its small segments"
    assert {row["verdict"] for row in quiet} == {"insufficient_data"}
    table = _view(url, pg_schema, "SELECT partition_date, metric, segment, verdict FROM drift")
    verdicts = {tuple(row[k] for k in key): row["verdict"] for row in table}
    assert all(verdicts[tuple(row[k] for k in key)] == row["verdict"] for row in uncompared)
    stable = _view(url, pg_schema, "SELECT * FROM drift_segments WHERE verdict = 'stable'")
    assert stable
    assert all(row["ci_low"] is not None and min(row["baseline_n"], row["current_n"]) >= MIN_SAMPLES for row in stable)


def test_a_mean_not_compared_is_insufficient_data_in_the_report_and_draws_no_band_on_the_dashboard(
    warehouses: dict[str, str], pg_schema: str, tmp_path: Path
) -> None:
    """The latest partition's small segments as `ragpulse report` shows them, and the dashboard's drift band
    panel on PostgreSQL for one of them: no band, the claim a compared mean would make."""
    rows = _view(warehouses["postgresql"], pg_schema, _NOT_COMPARED)
    latest = max(row["partition_date"] for row in rows)
    quiet = {(row["metric"], row["segment"]): row for row in rows if row["partition_date"] == latest}
    assert quiet and {row["verdict"] for row in quiet.values()} <= {"insufficient_data", *ALERTING}
    page = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", "--warehouse", warehouses["duckdb"], "--out", str(page)])
    assert result.exit_code == 0, result.output
    shown = {
        (html.unescape(metric), html.unescape(segment)): verdict
        for metric, segment, verdict in _REPORT_ROW.findall(page.read_text())
    }
    assert {pair: shown[pair] for pair in quiet} == {pair: row["verdict"] for pair, row in quiet.items()}
    (metric, segment), row = next((pair, row) for pair, row in quiet.items() if row["verdict"] == "insufficient_data")
    band = next(p for p in panels(dashboard_json(schema=pg_schema)) if p["title"].endswith("drift band"))
    picked = {"metric": [metric], "segment_key": [row["segment_key"]], "segment_value": [row["segment_value"]]}
    names, _, points = pg_rows(grafana_sql(band["targets"][0]["rawSql"], picked, (START, latest)))
    (point,) = [dict(zip(names, p, strict=True)) for p in points if p[0].date() == latest]
    assert point["daily mean"] is not None and (point["band low"], point["band high"]) == (None, None), segment


_REPORT_ROW = re.compile(
    r'<tr data-metric="([^"]*)" data-segment="([^"]*)">.*?<span class="verdict[^"]*">([^<]*)</span>', re.DOTALL
)


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_latest_alerts_keep_the_newest_delivery_per_channel_with_its_drift_row(
    warehouses: dict[str, str], pg_schema: str, backend: str
) -> None:
    rows = _view(warehouses[backend], pg_schema, "SELECT * FROM latest_alerts ORDER BY channel")
    assert [(row["channel"], row["status"], row["run_id"]) for row in rows] == [
        ("slack", "failed", "run-3"),
        ("webhook", "sent", "run-2"),
    ]
    drift = _view(
        warehouses[backend],
        pg_schema,
        "SELECT current_mean FROM drift WHERE metric = 'document_mrr' AND segment = 'metadata.app=support-bot' "
        f"AND partition_date = DATE '{START + dt.timedelta(days=DAYS - 1)}'",
    )
    assert all(_close(row["current_mean"], drift[0]["current_mean"]) for row in rows)
    assert {(row["segment_key"], row["segment_value"]) for row in rows} == {("metadata.app", "support-bot")}


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_worst_traces_rank_each_days_scores_from_the_lowest(
    warehouses: dict[str, str], pg_schema: str, backend: str
) -> None:
    url = warehouses[backend]
    rows = _view(url, pg_schema, "SELECT * FROM worst_traces")
    scores = [s for s in open_warehouse(url).read("scores").to_pylist() if s["status"] == "ok"]
    assert len(rows) == len(scores)
    for row in rows:
        same = [
            s["value"] for s in scores if (s["partition_date"], s["metric"]) == (row["partition_date"], row["metric"])
        ]
        higher = row["metric"] not in LOWER_IS_BETTER  # latencies: the slowest trace is the worst
        assert row["worst_rank"] == 1 + sum(
            (value < row["value"]) if higher else (value > row["value"]) for value in same
        )
        assert row["higher_is_better"] is higher and row["question"]


def test_postgresql_stores_trace_metadata_as_jsonb(warehouses: dict[str, str], pg_schema: str) -> None:
    (column,) = _view(
        warehouses["postgresql"],
        pg_schema,
        f"SELECT data_type FROM information_schema.columns WHERE table_schema = '{pg_schema}' "
        "AND table_name = 'traces' AND column_name = 'metadata'",
    )
    assert column["data_type"] == "jsonb"
    apps = _view(warehouses["postgresql"], pg_schema, "SELECT DISTINCT metadata->>'app' AS app FROM traces")
    traces = open_warehouse(warehouses["postgresql"]).read("traces", columns=["metadata"])["metadata"].to_pylist()
    assert {row["app"] for row in apps} == {json.loads(metadata)["app"] for metadata in traces}


@pytest.mark.parametrize("segment_key", ["all", "metadata.app", "language"])
def test_every_dashboard_panel_returns_rows_of_its_panel_types_shape(
    warehouses: dict[str, str], pg_schema: str, segment_key: str
) -> None:
    """Each panel's SQL and each variable's, with the variables Grafana would substitute (every value, as its
    "All" does), run on the PostgreSQL warehouse the backfill filled; a repeated panel once per value."""
    document = dashboard_json(schema=pg_schema)
    days = (START, START + dt.timedelta(days=DAYS - 1))
    picked: dict[str, list[str]] = {"segment_key": [segment_key]}
    for variable in document["templating"]["list"]:
        names, _, rows = pg_rows(grafana_sql(variable["query"], picked, days))
        assert len(names) == 1 and rows, variable["name"]
        if variable["multi"]:
            picked[variable["name"]] = [value for (value,) in rows]
    assert set(picked["metric"]) == set(METRICS) and segment_key in {"all", *picked["segment_key"]}
    for panel in panels(document):
        if panel["title"].startswith("Topics"):
            continue  # the backfill above ran without topics; tests/tasks/topics/test_topics_warehouse.py runs its SQL
        (target,) = panel["targets"]
        assert target["datasource"] == {"type": "grafana-postgresql-datasource", "uid": "ragpulse-warehouse"}
        repeated = panel.get("repeat")
        choices = [{**picked, repeated: [value]} for value in picked[repeated]] if repeated else [picked]
        # The drift rows exist for the segment drift was configured with, and for the whole day.
        if repeated:
            choices = [{**c, "segment_value": [v]} for c in choices for v in picked["segment_value"]]
        results = [pg_rows(grafana_sql(target["rawSql"], choice, days)) for choice in choices]
        assert any(rows for _, _, rows in results), panel["title"]
        for names, types, rows in results:
            if target["format"] == "time_series":
                assert names[0] == "time" and types[0] == "timestamptz", panel["title"]
                numeric = [n for n, t in zip(names, types, strict=True) if t in ("float8", "numeric", "int8")]
                assert numeric and set(names) - set(numeric) <= {"time", "metric"}, (panel["title"], names)
                assert [row[0] for row in rows] == sorted(row[0] for row in rows)
            elif panel["type"] == "stat":
                assert len(rows) == 1 and types == ["int8"] and rows[0][0] >= 0
            else:
                assert target["format"] == "table" and len(set(names)) == len(names)
        if panel["title"] == "Latency p50 and p95":
            for _, _, rows in results:
                assert {str(row[1]).rsplit(" ", 1)[-1] for row in rows} <= {"p50", "p95"}
                assert {str(row[1]).split(" ", 1)[0] for row in rows} <= {"latency_ms", "retrieval_latency_ms"}
        if panel["title"] == "Worst traces":
            for _, _, rows in results:
                assert all(1 <= row[2] <= 10 for row in rows)
        if repeated and segment_key in ("all", "metadata.app"):
            # The band is drawn where a drift comparison had a baseline.
            assert any(row[3] is not None for _, _, rows in results for row in rows), panel["title"]
    if segment_key == "metadata.app":
        trend = next(p for p in panels(document) if p["title"] == "Daily mean")
        _, _, rows = pg_rows(grafana_sql(trend["targets"][0]["rawSql"], picked, days))
        assert {row[1] for row in rows} == {f"{m} · {app}" for m in METRICS for app in picked["segment_value"]}


PROVISIONED = Path(__file__).resolve().parents[2] / "infra" / "grafana" / "dashboards" / "ragpulse.json"


def test_the_provisioned_dashboard_is_the_one_the_command_writes(tmp_path: Path) -> None:
    written = tmp_path / "dashboard.json"
    result = CliRunner().invoke(app, ["dashboard", "--out", str(written)])
    assert result.exit_code == 0, result.output
    assert written.read_text() == PROVISIONED.read_text(), f"regenerate it: ragpulse dashboard --out {PROVISIONED}"
    assert json.loads(written.read_text()) == dashboard_json()


def test_the_dashboard_command_names_other_tables_and_refuses_a_bad_schema() -> None:
    result = CliRunner().invoke(app, ["dashboard", "--schema", "s1", "--table-prefix", "rp_", "--datasource-uid", "x"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    queries = [p["targets"][0]["rawSql"] for p in panels(document)]
    assert all('"s1"."rp_' in query for query in queries)
    assert {p["targets"][0]["datasource"]["uid"] for p in panels(document)} == {"x"}
    refused = CliRunner().invoke(app, ["dashboard", "--schema", "a; DROP TABLE scores"])
    assert refused.exit_code == 2 and "invalid PostgreSQL schema" in refused.output
