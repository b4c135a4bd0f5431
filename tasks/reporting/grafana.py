"""The Grafana dashboard of a PostgreSQL warehouse, built with Grafana's own typed builders (grafana-foundation-sdk).

Every panel reads the warehouse's views (tasks/warehouse/_views.py, docs/warehouses.md "Views") through Grafana's
PostgreSQL data source: trends per metric and segment, the drift band of each metric, coverage and failure rates,
the latest alerts and the worst traces; the topics panel reads the ``trace_topics`` and ``topics`` tables. Three
variables pick what is shown: ``metric`` (several), ``segment_key`` (one) and ``segment_value`` (several).
Variables reach SQL only through ``${name:sqlstring}``, which Grafana quotes and escapes, because segment values
are the traces' own metadata. docs/dashboards.md shows it running.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from grafana_foundation_sdk.builders import dashboard, stat, table, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

from ragpulse.metrics.operations import GENERATION_LATENCY_MS, LATENCY_MS, RETRIEVAL_LATENCY_MS
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.warehouse._views import qualified
from ragpulse.tasks.warehouse.protocol import IDENTIFIER, TableNames

__all__ = ["DASHBOARD_UID", "DATASOURCE_TYPE", "DATASOURCE_UID", "LATENCY_METRICS", "SqlQuery", "dashboard_json"]

LATENCY_METRICS = tuple(spec.name for spec in (LATENCY_MS, RETRIEVAL_LATENCY_MS, GENERATION_LATENCY_MS))
"""The metrics of the latency panel."""

DATASOURCE_TYPE = "grafana-postgresql-datasource"
DATASOURCE_UID = "ragpulse-warehouse"
"""The data source the dashboard's panels name; infra/grafana provisions one with this uid."""
DASHBOARD_UID = "ragpulse-quality"

_Format = Literal["time_series", "table"]


class SqlQuery(cogvariants.Dataquery):
    """A raw-SQL query of Grafana's PostgreSQL data source; the SDK ships builders for Athena and BigQuery only."""

    def __init__(self, ref_id: str, raw_sql: str, query_format: _Format, datasource: model.DataSourceRef) -> None:
        self.ref_id = ref_id
        self.raw_sql = raw_sql
        self.query_format = query_format
        self.datasource = datasource

    def to_json(self) -> dict[str, object]:
        return {
            "refId": self.ref_id,
            "datasource": self.datasource,
            "editorMode": "code",
            "format": self.query_format,
            "rawQuery": True,
            "rawSql": self.raw_sql,
        }


class _Sql(cogbuilder.Builder[SqlQuery]):
    def __init__(self, raw_sql: str, query_format: _Format, datasource: model.DataSourceRef) -> None:
        self._query = SqlQuery("A", _one_line(raw_sql), query_format, datasource)

    def build(self) -> SqlQuery:
        return self._query


def _one_line(sql: str) -> str:
    return " ".join(sql.split())


def dashboard_json(
    tables: TableNames | None = None, *, schema: str | None = "ragpulse", datasource_uid: str | None = None
) -> dict[str, Any]:
    """The dashboard as Grafana's JSON model, for the warehouse tables ``tables`` in ``schema``, read through the
    data source ``datasource_uid`` (default DATASOURCE_UID)."""
    if schema is not None and not IDENTIFIER.match(schema):
        raise ConfigError(f"invalid PostgreSQL schema {schema!r}; use 1-40 lower-case letters, digits or underscores")
    names = tables or TableNames()
    source = model.DataSourceRef(type_val=DATASOURCE_TYPE, uid=datasource_uid or DATASOURCE_UID)

    def view(key: str) -> str:
        return qualified(getattr(names, key), schema)

    def sql(raw: str, query_format: _Format = "time_series") -> _Sql:
        return _Sql(raw, query_format, source)

    daily, drift, alerts, worst = (
        view("daily_scores"),
        view("drift_segments"),
        view("latest_alerts"),
        view("worst_traces"),
    )
    picked = (
        "$__timeFilter(partition_date) AND metric IN (${metric:sqlstring}) "
        "AND segment_key = ${segment_key:sqlstring} AND segment_value IN (${segment_value:sqlstring})"
    )
    series = "metric || CASE WHEN segment_key = 'all' THEN '' ELSE ' · ' || segment_value END AS metric"

    def trend(title: str, column: str, description: str, unit: str, *, hi: float | None = None) -> Any:
        panel = (
            timeseries.Panel()
            .title(title)
            .description(description)
            .datasource(source)
            .unit(unit)
            .min(0)
            .show_points(common.VisibilityMode.ALWAYS)
            .span(8)
            .height(8)
            .with_target(
                sql(
                    f"SELECT partition_date::timestamptz AS time, {series}, {column} AS value FROM {daily} "
                    f"WHERE {picked} ORDER BY 1"
                )
            )
        )
        return panel.max(hi) if hi is not None else panel

    # The latencies' tail beside their middle, whatever metrics are picked: latency is watched by its p95.
    in_picked_segment = (
        "$__timeFilter(partition_date) AND metric IN ({latencies}) AND segment_key = ${{segment_key:sqlstring}} "
        "AND segment_value IN (${{segment_value:sqlstring}})"
    ).format(latencies=", ".join(f"'{name}'" for name in LATENCY_METRICS))
    percentiles = " UNION ALL ".join(
        f"SELECT partition_date::timestamptz AS time, {series.removesuffix(' AS metric')} || ' {p}' AS metric, "
        f"{p} AS value FROM {daily} WHERE {in_picked_segment}"
        for p in ("p50", "p95")
    )
    latency = (
        timeseries.Panel()
        .title("Latency p50 and p95")
        .description(
            "Median and 95th percentile per day of the end-to-end, retrieval and generation latencies of the selected "
            "segment (docs/metrics.md, Operational metrics)."
        )
        .datasource(source)
        .unit("ms")
        .min(0)
        .show_points(common.VisibilityMode.ALWAYS)
        .span(24)
        .height(8)
        .with_target(sql(f"SELECT time, metric, value FROM ({percentiles}) AS latencies ORDER BY 1, 2"))
    )
    band = (
        timeseries.Panel()
        .title("$metric: daily mean and drift band")
        .description(
            "The day's mean of ok scores for the selected segment, the baseline mean, and the band of daily means "
            "that would not differ significantly from the baseline (docs/warehouses.md, drift_segments)."
        )
        .datasource(source)
        .repeat("metric")
        .repeat_direction("h")
        .max_per_row(3)
        .span(8)
        .height(8)
        .show_points(common.VisibilityMode.ALWAYS)
        .with_target(
            sql(
                f"""
                SELECT s.partition_date::timestamptz AS time, s.mean AS "daily mean",
                    d.baseline_mean AS "baseline mean", d.band_low AS "band low", d.band_high AS "band high"
                FROM {daily} AS s
                LEFT JOIN {drift} AS d ON d.partition_date = s.partition_date AND d.metric = s.metric
                    AND d.segment_key = s.segment_key AND d.segment_value = s.segment_value
                    AND d.rule IS NULL
                WHERE $__timeFilter(s.partition_date) AND s.metric = ${{metric:sqlstring}}
                    AND s.segment_key = ${{segment_key:sqlstring}} AND s.segment_value = ${{segment_value:sqlstring}}
                ORDER BY 1
                """
            )
        )
        .override_by_name("band high", [model.DynamicConfigValue("custom.fillBelowTo", "band low")])
        .override_by_name("band low", [model.DynamicConfigValue("custom.lineStyle", {"fill": "dash", "dash": [4, 4]})])
        .override_by_name(
            "baseline mean", [model.DynamicConfigValue("custom.lineStyle", {"fill": "dash", "dash": [8, 4]})]
        )
    )
    alerting = (
        stat.Panel()
        .title("Alerting verdicts")
        .description(
            "Drift verdicts of the selected metrics that alert (degraded, failure_rate_up, coverage_down, shifted)."
        )
        .datasource(source)
        .span(4)
        .height(4)
        .with_target(
            sql(
                f"SELECT count(*) AS verdicts FROM {drift} WHERE $__timeFilter(partition_date) AND alerting "
                "AND metric IN (${metric:sqlstring})",
                "table",
            )
        )
    )
    latest_alerts = (
        table.Panel()
        .title("Latest alerts")
        .description(
            "The newest delivery of each alert per channel, with its drift comparison or its threshold rule "
            "(the rule as written and the statistic it observed)."
        )
        .datasource(source)
        .span(20)
        .height(8)
        .with_target(
            sql(
                f"""
                SELECT sent_at AS "sent at", partition_date AS date, metric, segment_key AS "segment key",
                    segment_value AS segment, verdict, channel, status, attempts, baseline_mean AS baseline,
                    current_mean AS current, delta, observed, detail, rule, error
                FROM {alerts} WHERE $__timeFilter(partition_date) AND metric IN (${{metric:sqlstring}})
                ORDER BY sent_at DESC LIMIT 200
                """,
                "table",
            )
        )
    )
    # Ranked again within the segment: the view's worst_rank is over the whole day.
    in_segment = (
        "${segment_key:sqlstring} = 'all' OR (CASE WHEN ${segment_key:sqlstring} = 'language' THEN language "
        "ELSE metadata ->> substr(${segment_key:sqlstring}, 10) END) IN (${segment_value:sqlstring})"
    )
    worst_traces = (
        table.Panel()
        .title("Worst traces")
        .description("Each day's ten worst scored traces per metric in the selected segments, worst first.")
        .datasource(source)
        .span(24)
        .height(10)
        .with_target(
            sql(
                f"""
                SELECT date, metric, rank, value, trace_id, language, question, answer, reason, source
                FROM (
                    SELECT partition_date AS date, metric, value, trace_id, language, left(question, 300) AS question,
                        left(answer, 300) AS answer, reason, source_file || ':' || source_line AS source,
                        rank() OVER (PARTITION BY partition_date, metric
                                     ORDER BY CASE WHEN higher_is_better THEN value ELSE -value END) AS rank
                    FROM {worst}
                    WHERE $__timeFilter(partition_date) AND metric IN (${{metric:sqlstring}}) AND ({in_segment})
                ) AS ranked
                WHERE rank <= 10 ORDER BY date DESC, metric, rank LIMIT 500
                """,
                "table",
            )
        )
    )

    # Each topic's share of the day's assigned questions (tasks/topics), named by its newest fit; a topic rising is
    # what topic.share drift alerts on.
    topic_names = (
        f"SELECT DISTINCT ON (topic_id) topic_id, name FROM {view('topics')} ORDER BY topic_id, partition_date DESC"
    )
    topic_shares = (
        timeseries.Panel()
        .title("Topics: share of the questions")
        .description(
            "Each topic's share of the day's questions (no topic: far from every topic, where new topics start); "
            "a rising share is alerted as topic.share (docs/topics.md)."
        )
        .datasource(source)
        .unit("percentunit")
        .min(0)
        .max(1)
        .show_points(common.VisibilityMode.ALWAYS)
        .span(24)
        .height(8)
        .with_target(
            sql(
                f"""
                SELECT tt.partition_date::timestamptz AS time,
                    CASE WHEN tt.topic_id IS NULL THEN 'no topic'
                         ELSE '#' || tt.topic_id || ' ' || coalesce(n.name, '') END AS metric,
                    count(*)::double precision
                        / (sum(count(*)) OVER (PARTITION BY tt.partition_date))::double precision AS value
                FROM {view("trace_topics")} AS tt LEFT JOIN ({topic_names}) AS n ON n.topic_id = tt.topic_id
                WHERE $__timeFilter(tt.partition_date)
                GROUP BY tt.partition_date, 2 ORDER BY 1, 2
                """
            )
        )
    )

    def variable(name: str, label: str, query: str, *, multi: bool, current: str | None = None) -> Any:
        built = (
            dashboard.QueryVariable(name)
            .label(label)
            .datasource(source)
            .query(_one_line(query))
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(model.VariableSort.ALPHABETICAL_ASC)
            .multi(multi)
            .include_all(multi)
        )
        # Everything at first where several may be picked, else ``current``.
        if multi:
            built = built.current(model.VariableOption(selected=True, text=["All"], value=["$__all"]))
        elif current is not None:
            built = built.current(model.VariableOption(selected=True, text=current, value=current))
        return built

    in_range = "WHERE $__timeFilter(partition_date)"
    built = (
        dashboard.Dashboard("ragpulse: RAG quality")
        .uid(DASHBOARD_UID)
        .description("Scores, drift and alerts from the ragpulse warehouse (docs/dashboards.md).")
        .tags(["ragpulse", "rag", "quality"])
        .time("now-30d", "now")
        .timezone("utc")
        .refresh("5m")
        .readonly()
        .with_variable(variable("metric", "Metric", f"SELECT DISTINCT metric FROM {daily} {in_range}", multi=True))
        .with_variable(
            variable(
                "segment_key",
                "Segment by",
                f"SELECT DISTINCT segment_key FROM {daily} {in_range}",
                multi=False,
                current="all",
            )
        )
        .with_variable(
            variable(
                "segment_value",
                "Segment",
                f"SELECT DISTINCT segment_value FROM {daily} {in_range} AND segment_key = ${{segment_key:sqlstring}}",
                multi=True,
            )
        )
        .with_row(dashboard.Row("Trends"))
        .with_panel(trend("Daily mean", "mean", "Mean of the ok scores per day.", "none"))
        .with_panel(trend("Coverage", "coverage", "Share of traces with an ok score.", "percentunit", hi=1))
        .with_panel(trend("Failure rate", "failure_rate", "Share of traces whose score failed.", "percentunit", hi=1))
        .with_row(dashboard.Row("Latency"))
        .with_panel(latency)
        .with_row(dashboard.Row("Topics"))
        .with_panel(topic_shares)
        .with_row(dashboard.Row("Drift: $segment_value").repeat("segment_value"))
        .with_panel(band)
        .with_row(dashboard.Row("Alerts and traces"))
        .with_panel(alerting)
        .with_panel(latest_alerts)
        .with_panel(worst_traces)
        .build()
    )
    document: dict[str, Any] = json.loads(json.dumps(built, cls=JSONEncoder))
    return document
