"""The stored layout every backend shares: columns, NOT NULLs, checks, keys, the schema version and its migrations.

SQL backends turn these specs into their own DDL; the Parquet lake enforces them itself, so one row is accepted
or rejected the same way everywhere.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from ragpulse.tasks.core.exceptions import ConfigError, WarehouseError
from ragpulse.tasks.warehouse.rows import RowSource
from ragpulse.tasks.warehouse.tables import (
    ALERTS_SCHEMA,
    CALIBRATIONS_SCHEMA,
    CONVERSATION_SCORES_SCHEMA,
    DRIFT_SCHEMA,
    ESTIMATES_SCHEMA,
    QUARANTINE_SCHEMA,
    RUNS_SCHEMA,
    SCORES_SCHEMA,
    STEP_SCORES_SCHEMA,
    STEPS_SCHEMA,
    THRESHOLD_COLUMNS,
    TOPICS_SCHEMA,
    TRACE_TOPICS_SCHEMA,
    TRACES_SCHEMA,
    VALIDATIONS_SCHEMA,
)

__all__ = [
    "AGAINST",
    "ALERT_STATUSES",
    "CONTENT_KEY",
    "JSON_COLUMNS",
    "JUDGE_RUN_COLUMNS",
    "LABEL_KINDS",
    "META",
    "MIGRATIONS",
    "PUBLISHED_AT",
    "SCHEMA_VERSION",
    "STAGING_RUN_COLUMNS",
    "STATUSES",
    "TABLES",
    "VERDICTS",
    "AddColumn",
    "AddTable",
    "Check",
    "DefineViews",
    "Migration",
    "Query",
    "ReplaceCheck",
    "StoreAsJson",
    "TableSpec",
    "check_partition",
    "completes_version",
    "conform",
    "conform_partition",
    "conform_rows",
    "pending_migrations",
    "violation",
]

# Stored labels of metrics.Status; a new status needs a migration of the check below.
STATUSES = ("ok", "not_applicable", "failed")
# What a step-level score was computed against (metrics.batch.TraceBatch.step_batch): the step's own query, or the
# user's question of its turn.
AGAINST = ("step_query", "question")
# Filled by the warehouse as the run's rows become visible: orders re-runs of a partition by commit, not by finish.
PUBLISHED_AT = "published_at"
# Drift verdicts and alert delivery outcomes; a new one needs a migration of its check.
VERDICTS = (
    "stable",
    "degraded",
    "improved",
    "failure_rate_up",
    "coverage_down",
    "shifted",
    "insufficient_data",
    "no_baseline",
    # v12: a threshold rule's verdicts (metrics.thresholds).
    "critical",
    "warning",
    "within",
)
ALERT_STATUSES = ("sent", "failed")
# The kinds of human labels a calibration compares with (metrics.calibration.Agreement.kind).
LABEL_KINDS = ("binary", "graded")
# Judge columns of runs: NULL for runs without judge metrics and for rows written before schema v3.
JUDGE_RUN_COLUMNS = frozenset({"judge_model", "judge_usage", "estimated_cost_usd"})
# Staging counts of runs (v6): NULL for rows written before, and the span counts for formats without spans.
STAGING_RUN_COLUMNS = (
    "n_records_quarantined",
    "n_traces_read",
    "n_traces_quarantined",
    "n_staged",
    "n_other_days",
    "n_spans_quarantined",
    "n_duplicate_spans",
)
# The digest of a run's published content (v7): NULL for rows written before.
CONTENT_KEY = "content_key"


@dataclass(frozen=True)
class Check:
    """A row constraint, as SQL (the same text in DuckDB and PostgreSQL) and as its pyarrow twin for the lake."""

    sql: str
    holds: Callable[[pa.Table], pa.ChunkedArray]
    # The column a check of allowed values is over, so that a migration can name the check it replaces.
    column: str | None = None


@dataclass(frozen=True)
class TableSpec:
    """One stored table. ``stamped`` columns are filled by the warehouse, the rest come from the publication.

    No keys: one row per (partition, metric, trace) follows from replace-by-partition and is checked by tests;
    a primary key made PostgreSQL publishes 2-5x slower and DuckDB's ~20x. ``partition_index`` is the kind of
    index a SQL backend puts on ``partition_date`` for the partition DELETE and per-day queries.
    """

    key: str
    schema: pa.Schema
    required: frozenset[str]
    checks: tuple[Check, ...] = ()
    stamped: tuple[str, ...] = ()
    partition_index: str = "btree"

    @property
    def incoming(self) -> pa.Schema:
        """The columns a publication supplies."""
        return pa.schema([f for f in self.schema if f.name not in self.stamped])


@dataclass(frozen=True)
class AddColumn:
    """Schema version ``version`` added nullable ``table.column``; existing rows read it as NULL."""

    version: int
    table: str
    column: str

    @property
    def field(self) -> pa.Field:
        return TABLES[self.table].schema.field(self.column)


@dataclass(frozen=True)
class AddTable:
    """Schema version ``version`` added table ``table``; an existing warehouse starts it empty."""

    version: int
    table: str


@dataclass(frozen=True)
class StoreAsJson:
    """Schema version ``version`` stores text column ``table.column`` in the database's JSON type where it has one
    (PostgreSQL's ``jsonb``), so that SQL reads its keys with JSON operators; DuckDB and the lake keep the text."""

    version: int
    table: str
    column: str


@dataclass(frozen=True)
class DefineViews:
    """Schema version ``version`` defines the views anew (``_views``): a SQL warehouse drops and creates them."""

    version: int


@dataclass(frozen=True)
class ReplaceCheck:
    """Schema version ``version`` allows other values in ``table.column``: its check is replaced by the current one
    (``TABLES``). A SQL backend swaps the constraint, keeping every row; the lake checks in Python already."""

    version: int
    table: str
    column: str

    @property
    def index(self) -> int:
        """The check's position among its table's checks: SQL backends name constraints by it."""
        return next(i for i, check in enumerate(TABLES[self.table].checks) if check.column == self.column)

    @property
    def check(self) -> Check:
        return TABLES[self.table].checks[self.index]


Migration = AddColumn | AddTable | StoreAsJson | DefineViews | ReplaceCheck


def _in(column: str, values: tuple[str, ...]) -> Check:
    """``column IN (values)``, in SQL and in pyarrow."""
    listed = ", ".join(f"'{value}'" for value in values)
    return Check(f"{column} IN ({listed})", lambda t: pc.is_in(t[column], value_set=pa.array(values)), column)


# The checks of every table of scores: a known status, and a value exactly when it is ok.
_SCORE_CHECKS = (
    _in("status", STATUSES),
    Check(
        "(status = 'ok') = (value IS NOT NULL)",
        lambda t: pc.equal(pc.equal(t["status"], "ok"), pc.is_valid(t["value"])),
    ),
)
_SCORED = frozenset({"metric", "status", "metric_version", "run_id", "computed_at"})

TABLES: dict[str, TableSpec] = {
    "scores": TableSpec(
        "scores",
        SCORES_SCHEMA,
        frozenset({"partition_date", "trace_id"}) | _SCORED,
        checks=_SCORE_CHECKS,
        # Rows arrive partition by partition, so a block-range index finds a day almost for free.
        partition_index="brin",
    ),
    "quarantine": TableSpec(
        "quarantine",
        QUARANTINE_SCHEMA,
        frozenset({"partition_date", "run_id", "source_file", "line", "field", "reason", "quarantined_at"}),
    ),
    "runs": TableSpec(
        "runs",
        RUNS_SCHEMA.append(pa.field(PUBLISHED_AT, pa.timestamp("us", tz="UTC"))),
        frozenset(RUNS_SCHEMA.names) - JUDGE_RUN_COLUMNS - set(STAGING_RUN_COLUMNS) - {CONTENT_KEY},
        stamped=(PUBLISHED_AT,),
    ),
    "validations": TableSpec(
        "validations",
        VALIDATIONS_SCHEMA,
        frozenset({"run_id", "partition_date", "suite", "expectation", "success", "validated_at"}),
    ),
    "traces": TableSpec(
        "traces",
        TRACES_SCHEMA,
        frozenset({"partition_date", "trace_id", "run_id", "source_file", "source_line"}),
        partition_index="brin",
    ),
    "drift": TableSpec(
        "drift",
        DRIFT_SCHEMA,
        frozenset(
            {
                "partition_date",
                "metric",
                "segment",
                "baseline_partitions",
                "baseline_n",
                "current_n",
                "verdict",
                "run_id",
                "computed_at",
            }
        ),
        checks=(_in("verdict", VERDICTS),),
    ),
    "alerts": TableSpec(
        "alerts",
        ALERTS_SCHEMA,
        frozenset(ALERTS_SCHEMA.names) - {"error", "rule", "state"},
        checks=(_in("status", ALERT_STATUSES),),
    ),
    "calibrations": TableSpec(
        "calibrations",
        CALIBRATIONS_SCHEMA,
        frozenset({"partition_date", "metric", "labels_key", "n_labels", "kind", "mean_bias", "run_id", "computed_at"}),
        checks=(_in("kind", LABEL_KINDS),),
    ),
    "estimates": TableSpec(
        "estimates",
        ESTIMATES_SCHEMA,
        frozenset({"partition_date", "metric", "n_judged", "n_labels", "confidence", "run_id", "computed_at"}),
        checks=(
            Check(
                "(ppi_mean IS NULL) = (reason IS NOT NULL)",
                lambda t: pc.equal(pc.is_null(t["ppi_mean"]), pc.is_valid(t["reason"])),
            ),
        ),
    ),
    "steps": TableSpec(
        "steps",
        STEPS_SCHEMA,
        frozenset({"partition_date", "trace_id", "step_index", "n_contexts", "run_id"}),
        partition_index="brin",
    ),
    "step_scores": TableSpec(
        "step_scores",
        STEP_SCORES_SCHEMA,
        frozenset({"partition_date", "trace_id", "step_index", "against"}) | _SCORED,
        checks=(*_SCORE_CHECKS, _in("against", AGAINST)),
        partition_index="brin",
    ),
    "conversation_scores": TableSpec(
        "conversation_scores",
        CONVERSATION_SCORES_SCHEMA,
        frozenset({"partition_date", "conversation_id", "n_turns"}) | _SCORED,
        checks=_SCORE_CHECKS,
    ),
    "topics": TableSpec(
        "topics",
        TOPICS_SCHEMA,
        frozenset(
            {"partition_date", "topic_id", "name", "terms", "size", "threshold", "centroid", "created_date"}
            | {"model_version", "embedding_model", "language_means", "run_id", "computed_at"}
        ),
    ),
    "trace_topics": TableSpec(
        "trace_topics",
        TRACE_TOPICS_SCHEMA,
        frozenset({"partition_date", "trace_id", "distance", "model_date", "run_id", "computed_at"}),
        checks=(Check("distance >= 0", lambda t: pc.greater_equal(t["distance"], 0.0)),),
        partition_index="brin",
    ),
}

# The schema version table of SQL backends: one row per version applied.
META = TableSpec(
    "meta",
    pa.schema([("version", pa.int32()), ("applied_at", pa.timestamp("us", tz="UTC"))]),
    frozenset({"version", "applied_at"}),
    partition_index="",
)

# Additive only: a column is added as NULL for existing rows, a table starts empty, a text column may become JSON
# holding the same values, views are defined anew, a check allows more values; no row is changed or dropped in SQL.
MIGRATIONS: tuple[Migration, ...] = (
    AddColumn(2, "runs", PUBLISHED_AT),
    # v3: which judge and prompt produced a score, and what the run's judge calls cost.
    AddColumn(3, "scores", "judge_model"),
    AddColumn(3, "scores", "prompt_version"),
    *(AddColumn(3, "runs", column) for column in sorted(JUDGE_RUN_COLUMNS)),
    # v4: drift monitoring: trace excerpts to segment and drill into, drift results, the alert ledger.
    AddTable(4, "traces"),
    AddTable(4, "drift"),
    AddTable(4, "alerts"),
    # v5: each trace's language (given, the run's default or detected), to read scores and segment drift by.
    AddColumn(5, "traces", "language"),
    # v6: where each record of the run went, so that records read = staged + quarantined + other days is checkable.
    *(AddColumn(6, "runs", column) for column in STAGING_RUN_COLUMNS),
    # v7: the digest of what a run published, so that an unchanged day is not published again.
    AddColumn(7, "runs", CONTENT_KEY),
    # v8: trace metadata as JSON for SQL readers, and the views dashboards read.
    StoreAsJson(8, "traces", "metadata"),
    DefineViews(8),
    # v9: how far to trust the judge: its agreement with human labels, and prediction-powered estimates.
    AddTable(9, "calibrations"),
    AddTable(9, "estimates"),
    # v10: agents (issue 31): each turn's conversation, its retrieval steps and their scores, conversations' scores,
    # and the views that roll steps up to turns and turns up to conversations.
    AddColumn(10, "traces", "conversation_id"),
    AddTable(10, "steps"),
    AddTable(10, "step_scores"),
    AddTable(10, "conversation_scores"),
    DefineViews(10),
    # v11: topics of the questions (issue 32): the fitted topics, each day's traces' topics, and `topic` as a segment
    # of the daily_scores view.
    AddTable(11, "topics"),
    AddTable(11, "trace_topics"),
    DefineViews(11),
    # v11: the `shifted` drift verdict (a change in what users ask, not in quality) for input drift and topic shares.
    ReplaceCheck(11, "drift", "verdict"),
    # v12: threshold rules beside drift (issue 34): a rule's verdicts are drift rows that name the rule, with the
    # statistic observed and the rule's levels; the alert ledger names the rule of a threshold alert, and what each
    # notice said of its alert (opened, reminder, resolved).
    *(AddColumn(12, "drift", column) for column in THRESHOLD_COLUMNS),
    AddColumn(12, "alerts", "rule"),
    AddColumn(12, "alerts", "state"),
    ReplaceCheck(12, "drift", "verdict"),
    DefineViews(12),
)
SCHEMA_VERSION = MIGRATIONS[-1].version
# Columns stored as JSON where the database has the type, whatever version created the table.
JSON_COLUMNS = frozenset((m.table, m.column) for m in MIGRATIONS if isinstance(m, StoreAsJson))


def pending_migrations(version: int) -> tuple[Migration, ...]:
    """Migrations a warehouse at ``version`` still needs; refuses a warehouse newer than this code."""
    if version > SCHEMA_VERSION:
        raise WarehouseError(
            f"the warehouse is at schema version {version}, newer than this ragpulse's {SCHEMA_VERSION}; upgrade it"
        )
    return tuple(m for m in MIGRATIONS if m.version > version)


def completes_version(migration: Migration) -> bool:
    """Whether ``migration`` is the last step of its version: the version is recorded once, after it."""
    later = [m for m in MIGRATIONS if m.version == migration.version]
    return later[-1] == migration


_Rows = TypeVar("_Rows", pa.Table, pa.RecordBatch)


def _check_columns(spec: TableSpec, names: Sequence[str]) -> None:
    target = spec.incoming
    missing = sorted(set(target.names) - set(names))
    unexpected = sorted(set(names) - set(target.names))
    if missing or unexpected:
        raise WarehouseError(f"{spec.key} rows do not match its schema: missing {missing}, unexpected {unexpected}")


def conform(spec: TableSpec, table: _Rows) -> _Rows:
    """``table`` with exactly the publication's columns of ``spec``, in order and cast to their types."""
    _check_columns(spec, table.column_names)
    return table.select(spec.incoming.names).cast(spec.incoming)


def conform_rows(spec: TableSpec, rows: RowSource, day: dt.date) -> RowSource:
    """``rows`` as :func:`conform` makes them, checked by :func:`check_partition` against ``day``, batch by batch
    as a warehouse reads them, so that a publish streams. The columns are checked at once, before any batch;
    a bad batch, or fewer or more rows than ``rows.num_rows`` (which the runs row counts), raise WarehouseError
    from within the warehouse's read of the rows, which rolls the publish back."""
    _check_columns(spec, rows.schema.names)

    def produce() -> Iterator[pa.RecordBatch]:
        produced = 0
        for batch in rows.batches():
            conformed = conform(spec, batch)
            check_partition(spec, conformed, day)
            produced += conformed.num_rows
            yield conformed
        if produced != rows.num_rows:
            raise WarehouseError(f"{spec.key}: the rows were announced as {rows.num_rows} but {produced} came")

    return RowSource(spec.incoming, lambda: rows.num_rows, produce)


def conform_partition(tables: dict[str, pa.Table], day: dt.date) -> dict[str, pa.Table]:
    """Each table's rows as :func:`conform` makes them, refused (WarehouseError) unless every row is of ``day``:
    what a replace of one partition's rows in several tables (drift, calibrations and estimates) takes."""
    rows = {key: conform(TABLES[key], table) for key, table in tables.items()}
    for key, table in rows.items():
        check_partition(TABLES[key], table, day)
    return rows


def check_partition(spec: TableSpec, rows: pa.Table | pa.RecordBatch, day: dt.date) -> None:
    """Refuse rows of another partition than ``day``: a replace of one partition must not touch another."""
    if rows.num_rows and not pc.all(pc.equal(rows["partition_date"], pa.scalar(day, pa.date32()))).as_py():
        raise WarehouseError(f"{spec.key} rows of another partition than dt={day}; nothing was written")


@dataclass(frozen=True)
class Query:
    """A checked ``Warehouse.read`` request: which table, dates (inclusive, either open), columns and metrics."""

    spec: TableSpec
    start: dt.date | None
    end: dt.date | None
    columns: tuple[str, ...]
    metrics: tuple[str, ...] | None

    @classmethod
    def of(
        cls,
        table: str,
        *,
        start: dt.date | None,
        end: dt.date | None,
        columns: Sequence[str] | None,
        metrics: Sequence[str] | None,
    ) -> Query:
        spec = TABLES.get(table)
        if spec is None:
            raise ConfigError(f"unknown warehouse table {table!r}; use one of {sorted(TABLES)}")
        # A bare string would be taken as a sequence of one-letter metrics.
        if isinstance(metrics, str) or isinstance(columns, str):
            raise ConfigError("columns and metrics are sequences of names, not one string")
        names = tuple(columns) if columns is not None else tuple(spec.schema.names)
        unknown = sorted(set(names) - set(spec.schema.names))
        if unknown:
            raise ConfigError(f"table {table!r} has no column(s) {unknown}; its columns are {spec.schema.names}")
        if metrics is not None and "metric" not in spec.schema.names:
            raise ConfigError(f"table {table!r} has no metric column to filter by")
        return cls(spec, start, end, names, tuple(metrics) if metrics is not None else None)

    @property
    def schema(self) -> pa.Schema:
        """The result's schema: the table's columns, in the order asked for."""
        return pa.schema([self.spec.schema.field(name) for name in self.columns])

    def empty(self) -> pa.Table:
        return self.schema.empty_table()

    def filter(self) -> pc.Expression | None:
        """The row filter as a pyarrow expression, for Parquet readers to push down; None for all rows."""
        conditions = []
        if self.start is not None:
            conditions.append(pc.field("partition_date") >= pa.scalar(self.start, pa.date32()))
        if self.end is not None:
            conditions.append(pc.field("partition_date") <= pa.scalar(self.end, pa.date32()))
        if self.metrics is not None:
            conditions.append(pc.field("metric").isin(pa.array(self.metrics, pa.string())))
        if not conditions:
            return None
        expression = conditions[0]
        for condition in conditions[1:]:
            expression = expression & condition
        return expression

    def covers(self, day: dt.date) -> bool:
        """Whether partition ``day`` is in the date range."""
        return (self.start is None or day >= self.start) and (self.end is None or day <= self.end)


def violation(spec: TableSpec, table: pa.Table | pa.RecordBatch) -> str | None:
    """The first constraint ``table`` breaks, as SQL would report it, or None. For backends without constraints."""
    for name in sorted(spec.required):
        nulls = table[name].null_count
        if nulls:
            return f"{spec.key}.{name} is NULL in {nulls} row(s), violating NOT NULL"
    for check in spec.checks:
        # NULL passes a CHECK in SQL too; NOT NULL above catches what must not be NULL.
        failing = pc.sum(pc.invert(pc.fill_null(check.holds(table), True)).cast(pa.int64())).as_py() or 0
        if failing:
            return f"{spec.key}: {failing} row(s) violate CHECK ({check.sql})"
    return None
