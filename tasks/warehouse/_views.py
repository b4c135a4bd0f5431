"""The views SQL warehouses define over the tables, for dashboards and SQL readers (docs/warehouses.md, "Views").

One definition per view in the SQL that DuckDB and PostgreSQL share; only reading a top-level metadata key differs
(``ViewDialect``). Segments are two columns, ``segment_key`` and ``segment_value``, spelt as drift spells them:
``all``/``all`` for the whole partition, ``language``/``ja``, ``metadata.app``/``docs-search``, ``topic``/``3``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragpulse.metrics.aspect_critique import BUILTIN_ASPECTS
from ragpulse.metrics.drift import ALERTING
from ragpulse.metrics.registry import REGISTRY
from ragpulse.tasks.warehouse.protocol import TableNames

__all__ = ["DUCKDB", "LOWER_IS_BETTER", "POSTGRESQL", "ViewDialect", "qualified", "view_definitions"]

LOWER_IS_BETTER = tuple(
    sorted(
        {
            *(f"aspect_critique:{name}" for name, aspect in BUILTIN_ASPECTS.items() if not aspect.higher_is_better),
            *(
                name
                for name, definition in REGISTRY.items()
                if not definition.spec.higher_is_better and not definition.spec.takes_variant
            ),
        }
    )
)
"""Built-in metrics where a higher value is worse (latencies, tokens, cost, errors, the agent's repeats): their worst
traces are their highest values."""


@dataclass(frozen=True)
class ViewDialect:
    """How one database lists the members of a JSON object that segment traces, as (key, value as text) rows:
    ``each`` is a table function over the column, ``scalar`` the condition on its row, ``text`` the value as text.
    Strings and booleans segment; numbers (latencies, token counts) are measurements, and nested values are not
    one segment."""

    each: str
    scalar: str
    text: str


DUCKDB = ViewDialect(
    each="json_each(t.metadata) AS member",
    scalar="member.type IN ('VARCHAR', 'BOOLEAN')",
    text="json_extract_string(member.value, '$')",
)
POSTGRESQL = ViewDialect(
    each="jsonb_each(t.metadata) AS member",
    scalar="jsonb_typeof(member.value) IN ('string', 'boolean')",
    text="member.value #>> '{}'",
)


def qualified(name: str, schema: str | None = None) -> str:
    """``"name"``, or ``"schema"."name"``; every name and schema reaching here was checked against ``IDENTIFIER``."""
    return f'"{schema}"."{name}"' if schema else f'"{name}"'


def _listed(values: tuple[str, ...] | frozenset[str]) -> str:
    return ", ".join(f"'{value}'" for value in sorted(values))


def _segment_columns(segment: str) -> str:
    """``segment_key, segment_value`` from drift's label (``all``, ``<key>=<value>``); a key holds no ``=``."""
    return (
        f"CASE WHEN {segment} = 'all' THEN 'all' ELSE split_part({segment}, '=', 1) END AS segment_key, "
        f"CASE WHEN {segment} = 'all' THEN 'all' ELSE substr({segment}, strpos({segment}, '=') + 1) END "
        "AS segment_value"
    )


def view_definitions(names: TableNames, dialect: ViewDialect, schema: str | None = None) -> dict[str, str]:
    """``{view key (a TableNames field): SELECT statement}``, none reading another, over the tables ``names``
    gives, in ``schema`` if any; the names were checked by ``TableNames`` (the schema by the backend), the rest
    are constants."""
    scores, traces = qualified(names.scores, schema), qualified(names.traces, schema)
    step_scores = qualified(names.step_scores, schema)
    trace_topics = qualified(names.trace_topics, schema)
    drift, alerts = qualified(names.drift, schema), qualified(names.alerts, schema)
    score = "s.partition_date, s.metric, s.value, s.status, s.judge_model, s.prompt_version"
    joined = f"{scores} AS s JOIN {traces} AS t ON t.partition_date = s.partition_date AND t.trace_id = s.trace_id"
    ratio = "CAST({} AS DOUBLE PRECISION) / count(*)"
    return {
        "daily_scores": f"""
            WITH segmented AS (
                SELECT {score}, 'all' AS segment_key, 'all' AS segment_value FROM {scores} AS s
                UNION ALL
                SELECT {score}, 'language', t.language FROM {joined} WHERE t.language IS NOT NULL
                UNION ALL
                SELECT {score}, 'metadata.' || member.key, {dialect.text}
                FROM {joined}, {dialect.each} WHERE {dialect.scalar}
                UNION ALL
                SELECT {score}, 'topic', CAST(tt.topic_id AS VARCHAR)
                FROM {scores} AS s JOIN {trace_topics} AS tt
                    ON tt.partition_date = s.partition_date AND tt.trace_id = s.trace_id
                WHERE tt.topic_id IS NOT NULL
            )
            SELECT partition_date, metric, segment_key, segment_value, judge_model, prompt_version,
                count(*) AS n,
                count(*) FILTER (WHERE status = 'ok') AS n_ok,
                count(*) FILTER (WHERE status = 'failed') AS n_failed,
                count(*) FILTER (WHERE status = 'not_applicable') AS n_not_applicable,
                avg(value) AS mean,
                stddev_samp(value) AS stddev,
                min(value) AS min,
                percentile_cont(0.1) WITHIN GROUP (ORDER BY value) AS p10,
                percentile_cont(0.5) WITHIN GROUP (ORDER BY value) AS p50,
                percentile_cont(0.9) WITHIN GROUP (ORDER BY value) AS p90,
                percentile_cont(0.95) WITHIN GROUP (ORDER BY value) AS p95,
                percentile_cont(0.99) WITHIN GROUP (ORDER BY value) AS p99,
                max(value) AS max,
                {ratio.format("count(*) FILTER (WHERE status = 'ok')")} AS coverage,
                {ratio.format("count(*) FILTER (WHERE status = 'failed')")} AS failure_rate
            FROM segmented
            GROUP BY partition_date, metric, segment_key, segment_value, judge_model, prompt_version
        """,
        "drift_segments": f"""
            SELECT partition_date, metric, {_segment_columns("segment")},
                judge_model, prompt_version, baseline_start, baseline_end, baseline_partitions, baseline_n, current_n,
                baseline_mean, current_mean, delta, ci_low, ci_high,
                current_mean - ci_high AS band_low, current_mean - ci_low AS band_high,
                p_value, baseline_failure_rate, current_failure_rate, baseline_coverage, current_coverage,
                verdict, verdict IN ({_listed(frozenset(v.value for v in ALERTING))}) AS alerting, detail, segment,
                run_id, computed_at, rule, observed, warning_level, critical_level
            FROM {drift}
        """,
        "latest_alerts": f"""
            WITH attempts AS (
                SELECT a.*, row_number() OVER (PARTITION BY alert_key, channel ORDER BY sent_at DESC, run_id DESC)
                    AS newest
                FROM {alerts} AS a
            )
            SELECT a.partition_date, a.metric, {_segment_columns("a.segment")}, a.verdict, a.channel, a.status,
                a.attempts, a.error, a.sent_at, d.baseline_mean, d.current_mean, d.delta, d.p_value, d.detail,
                a.alert_key, a.segment, a.run_id, a.rule, d.observed
            FROM attempts AS a
            LEFT JOIN {drift} AS d
                ON d.partition_date = a.partition_date AND d.metric = a.metric AND d.segment = a.segment
                AND d.rule IS NOT DISTINCT FROM a.rule
            WHERE a.newest = 1
        """,
        "worst_traces": f"""
            SELECT s.partition_date, s.metric, s.trace_id, s.value,
                s.metric NOT IN ({_listed(LOWER_IS_BETTER)}) AS higher_is_better,
                rank() OVER (
                    PARTITION BY s.partition_date, s.metric
                    ORDER BY CASE WHEN s.metric IN ({_listed(LOWER_IS_BETTER)}) THEN -s.value ELSE s.value END
                ) AS worst_rank,
                s.reason, s.judge_model, s.prompt_version, t.question, t.answer, t.language, t.metadata,
                t.source_file, t.source_line, s.run_id
            FROM {scores} AS s
            LEFT JOIN {traces} AS t ON t.partition_date = s.partition_date AND t.trace_id = s.trace_id
            WHERE s.status = 'ok'
        """,
        # A turn's steps rolled up, per metric and what the steps were scored against: the worst is the lowest
        # value (the highest for a lower-is-better metric), over the ok steps as the mean is.
        "turn_steps": f"""
            SELECT partition_date, trace_id, metric, against,
                count(*) AS n_steps,
                CASE WHEN metric IN ({_listed(LOWER_IS_BETTER)}) THEN max(value) ELSE min(value) END AS worst_value,
                avg(value) AS mean_value,
                count(*) FILTER (WHERE status = 'ok') AS n_ok,
                count(*) FILTER (WHERE status = 'not_applicable') AS n_not_applicable,
                count(*) FILTER (WHERE status = 'failed') AS n_failed,
                bool_or(status = 'failed') AS any_failed,
                judge_model, prompt_version
            FROM {step_scores}
            GROUP BY partition_date, trace_id, metric, against, judge_model, prompt_version
        """,
        # A partition's turns of each conversation, in the order they happened (ties by trace id).
        "conversations": f"""
            SELECT partition_date, conversation_id,
                count(*) AS n_turns,
                min(timestamp) AS first_timestamp,
                max(timestamp) AS last_timestamp,
                array_agg(trace_id ORDER BY timestamp NULLS LAST, trace_id) AS trace_ids
            FROM {traces}
            WHERE conversation_id IS NOT NULL
            GROUP BY partition_date, conversation_id
        """,
        # Each turn's place in its conversation, counted over every published partition: a conversation that goes
        # on past midnight continues its numbering on the next day.
        "conversation_turns": f"""
            SELECT partition_date, conversation_id, trace_id,
                row_number() OVER (
                    PARTITION BY conversation_id ORDER BY timestamp NULLS LAST, trace_id
                ) AS turn_number,
                timestamp, question, answer, language, source_file, source_line, run_id
            FROM {traces}
            WHERE conversation_id IS NOT NULL
        """,
    }
