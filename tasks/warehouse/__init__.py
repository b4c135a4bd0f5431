"""Warehouses that receive score tables. One interface, one set of semantics, chosen by URL.

Publishing a partition is one transaction: the partition's rows for the run's metrics, its
quarantine rows and its trace excerpts are replaced, and a row is added to ``runs``. Re-running a
date replaces, never duplicates; a failed publish leaves the previous rows as they were. Drift
results replace a partition's drift rows the same way; alert deliveries are appended to a ledger.
Every table reads back through ``Warehouse.read``, filtered by date and metric in the backend.

Backends, one module each: ``duckdb`` (embedded default), ``postgres`` (SQLAlchemy 2 + psycopg 3,
COPY and advisory locks) and ``iceberg`` (Apache Iceberg tables on S3 or local disk, committed
through a SQL catalog). Table layout, constraints and migrations shared by all
of them live in ``_schema``; see docs/warehouses.md.
"""

from __future__ import annotations

import datetime as dt
import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Protocol

import pyarrow as pa

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.secrets import secret_text
from ragpulse.tasks.core.types import TRACE_ROWS_SCHEMA
from ragpulse.tasks.warehouse.rows import RowSource

__all__ = [
    "ALERTS_SCHEMA",
    "CALIBRATIONS_SCHEMA",
    "DRIFT_SCHEMA",
    "ESTIMATES_SCHEMA",
    "QUARANTINE_SCHEMA",
    "RUNS_SCHEMA",
    "SCORES_SCHEMA",
    "TRACES_SCHEMA",
    "VALIDATIONS_SCHEMA",
    "Publication",
    "RowSource",
    "TableNames",
    "Warehouse",
    "open_published",
    "open_warehouse",
    "resolve_warehouse_url",
]

SCORES_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("trace_id", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("metric_version", pa.string()),
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
        ("judge_model", pa.string()),
        ("prompt_version", pa.string()),
    ]
)

QUARANTINE_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("run_id", pa.string()),
        ("source_file", pa.string()),
        ("line", pa.int64()),
        ("trace_id", pa.string()),
        ("field", pa.string()),
        ("reason", pa.string()),
        ("raw", pa.string()),
        ("quarantined_at", pa.timestamp("us", tz="UTC")),
    ]
)

RUNS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("partition_date", pa.date32()),
        ("source", pa.string()),
        ("config_hash", pa.string()),
        ("config", pa.string()),
        ("metrics", pa.string()),
        ("n_files", pa.int64()),
        ("n_records", pa.int64()),
        ("n_traces", pa.int64()),
        ("n_quarantined", pa.int64()),
        ("n_batches", pa.int64()),
        ("n_batches_cached", pa.int64()),
        ("n_scores", pa.int64()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("finished_at", pa.timestamp("us", tz="UTC")),
        ("judge_model", pa.string()),
        ("judge_usage", pa.string()),
        ("estimated_cost_usd", pa.float64()),
        # v6: where the records went (tasks.core.types.StagingCounts); n_records is the lines and rows read.
        ("n_records_quarantined", pa.int64()),
        ("n_traces_read", pa.int64()),
        ("n_traces_quarantined", pa.int64()),
        ("n_staged", pa.int64()),
        ("n_other_days", pa.int64()),
        ("n_spans_quarantined", pa.int64()),
        ("n_duplicate_spans", pa.int64()),
        # v7: a digest of everything the run published but its own identity (tasks.warehouse.publication), so that
        # a re-run of an unchanged day can see that its rows stand and publish nothing.
        ("content_key", pa.string()),
    ]
)

VALIDATIONS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("partition_date", pa.date32()),
        ("suite", pa.string()),
        ("expectation", pa.string()),
        ("column_name", pa.string()),
        ("success", pa.bool_()),
        ("element_count", pa.int64()),
        ("unexpected_count", pa.int64()),
        ("details", pa.string()),
        ("validated_at", pa.timestamp("us", tz="UTC")),
    ]
)

# One row per published trace, cut to excerpts (the full trace stays at source_file:source_line): for drill-down
# from a score to its trace, and for segmenting scores by metadata. The run's trace rows (TRACE_ROWS_SCHEMA) with
# their partition date and run id.
TRACES_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        TRACE_ROWS_SCHEMA.field("trace_id"),
        ("run_id", pa.string()),
        *TRACE_ROWS_SCHEMA.remove(TRACE_ROWS_SCHEMA.get_field_index("trace_id")),
    ]
)

# One row per (partition, metric, segment): the partition's scores against a baseline window of earlier ones.
DRIFT_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("metric", pa.string()),
        ("segment", pa.string()),  # "all" or "<key>=<value>", e.g. "metadata.app=support-bot"
        ("judge_model", pa.string()),
        ("prompt_version", pa.string()),
        ("baseline_start", pa.date32()),
        ("baseline_end", pa.date32()),
        ("baseline_partitions", pa.int64()),
        ("baseline_n", pa.int64()),
        ("current_n", pa.int64()),
        ("baseline_mean", pa.float64()),
        ("current_mean", pa.float64()),
        ("delta", pa.float64()),
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("p_value", pa.float64()),
        ("baseline_failure_rate", pa.float64()),
        ("current_failure_rate", pa.float64()),
        ("baseline_coverage", pa.float64()),
        ("current_coverage", pa.float64()),
        ("verdict", pa.string()),
        ("detail", pa.string()),
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
    ]
)

# Append-only ledger, one row per delivery outcome: what was alerted where, so an alert is not sent twice.
ALERTS_SCHEMA = pa.schema(
    [
        ("alert_key", pa.string()),
        ("partition_date", pa.date32()),
        ("metric", pa.string()),
        ("segment", pa.string()),
        ("verdict", pa.string()),
        ("channel", pa.string()),
        ("status", pa.string()),
        ("attempts", pa.int64()),
        ("error", pa.string()),
        ("sent_at", pa.timestamp("us", tz="UTC")),
        ("run_id", pa.string()),
    ]
)


# One row per (partition, metric, judge model, prompt version): how the judge agreed with the human labels that
# the partition's estimates use (docs/calibration.md). Fields that do not apply to the labels' kind are NULL.
CALIBRATIONS_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("metric", pa.string()),
        ("judge_model", pa.string()),
        ("prompt_version", pa.string()),
        ("labels_key", pa.string()),  # a digest of the labels used: a change of labels is a new calibration
        ("labels_start", pa.date32()),
        ("labels_end", pa.date32()),
        ("n_labels", pa.int64()),
        ("kind", pa.string()),  # binary or graded
        ("accuracy", pa.float64()),
        ("cohen_kappa", pa.float64()),
        ("mae", pa.float64()),
        ("spearman", pa.float64()),
        ("mean_bias", pa.float64()),
        ("confusion", pa.string()),  # JSON: {"levels": [...], "counts": [[...], ...]}, rows human, columns judge
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
    ]
)

# One row per (partition, metric, judge model, prompt version): the judge's raw mean beside the prediction-powered
# estimate of the mean human score, with its interval; NULL estimate and a reason where it could not be made.
ESTIMATES_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("metric", pa.string()),
        ("judge_model", pa.string()),
        ("prompt_version", pa.string()),
        ("n_judged", pa.int64()),
        ("n_labels", pa.int64()),
        ("raw_mean", pa.float64()),
        ("raw_ci_low", pa.float64()),
        ("raw_ci_high", pa.float64()),
        ("ppi_mean", pa.float64()),
        ("ppi_ci_low", pa.float64()),
        ("ppi_ci_high", pa.float64()),
        ("std_error", pa.float64()),
        ("effective_n", pa.float64()),
        ("tuning", pa.float64()),
        ("confidence", pa.float64()),
        ("labels_key", pa.string()),
        ("reason", pa.string()),
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
    ]
)


@dataclass(frozen=True)
class Publication:
    """Everything one run publishes for one partition; tables follow the schemas above.

    The two tables that grow with the day, ``scores`` and ``traces``, are row sources that a warehouse reads a
    batch at a time within its transaction; an in-memory table given for either is wrapped as one.
    """

    partition_date: dt.date
    metrics: list[str]
    scores: RowSource
    quarantine: pa.Table
    run: pa.Table
    validations: pa.Table = field(default_factory=VALIDATIONS_SCHEMA.empty_table)
    traces: RowSource = field(default_factory=lambda: RowSource.empty(TRACES_SCHEMA))

    def __post_init__(self) -> None:
        for name in ("scores", "traces"):
            if isinstance(rows := getattr(self, name), pa.Table):
                object.__setattr__(self, name, RowSource.of(rows))


class Warehouse(Protocol):
    """A score-table destination.

    ``publish`` is atomic and idempotent per (partition, metric): it replaces the partition's
    scores for the publication's metrics, its quarantine rows and its traces, and appends the run
    and its validation results. ``record_validations`` appends validation results of a run that
    published nothing (its output failed validation), leaving every other table untouched.
    ``publish_drift`` replaces a partition's drift rows as a whole, atomically; ``record_alerts``
    appends to the alert ledger; ``publish_calibration`` replaces a partition's calibrations and estimates
    together, atomically (the lake: table by table, restored on failure). ``read`` returns a table's rows with
    ``start <= partition_date <= end`` (either bound optional), only ``metrics`` when given,
    projected to ``columns``, typed by the table's schema; a warehouse or table that does not exist
    yet reads as empty, and reading never creates anything. ``url`` never carries a password.
    """

    url: str

    def publish(self, publication: Publication) -> None: ...

    def record_validations(self, validations: pa.Table) -> None: ...

    def publish_drift(self, partition_date: dt.date, drift: pa.Table) -> None: ...

    def record_alerts(self, alerts: pa.Table) -> None: ...

    def publish_calibration(self, partition_date: dt.date, calibrations: pa.Table, estimates: pa.Table) -> None: ...

    def read(
        self,
        table: str,
        *,
        start: dt.date | None = None,
        end: dt.date | None = None,
        columns: Sequence[str] | None = None,
        metrics: Sequence[str] | None = None,
    ) -> pa.Table: ...


# Lower-case only (PostgreSQL folds unquoted names) and short enough for index names derived from it.
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")


@dataclass(frozen=True)
class TableNames:
    """Physical table and view names (SQL tables, or the lake's Iceberg tables), checked so SQL is never built
    from an unchecked string. ``meta`` holds the schema version (in the lake, it names the publish locks).
    The last four are the views of SQL warehouses (``_views``); the lake has none.
    """

    scores: str = "scores"
    quarantine: str = "quarantine"
    runs: str = "runs"
    validations: str = "validations"
    traces: str = "traces"
    drift: str = "drift"
    alerts: str = "alerts"
    calibrations: str = "calibrations"
    estimates: str = "estimates"
    meta: str = "ragpulse_schema"
    daily_scores: str = "daily_scores"
    drift_segments: str = "drift_segments"
    latest_alerts: str = "latest_alerts"
    worst_traces: str = "worst_traces"

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not isinstance(value, str) or not _IDENTIFIER.match(value):
                raise ConfigError(
                    f"table name {item.name}={value!r} is invalid; use 1-40 lower-case letters, digits or "
                    "underscores, not starting with a digit"
                )
        names = [getattr(self, item.name) for item in fields(self)]
        if len(set(names)) != len(names):
            raise ConfigError(f"table names must be distinct, got {names}")

    @classmethod
    def with_prefix(cls, prefix: str) -> TableNames:
        """The default names behind ``prefix``, e.g. ``rp_scores``: several warehouses in one schema or bucket."""
        return cls(**{item.name: f"{prefix}{item.default}" for item in fields(cls)})


# scheme -> "module:class"; each backend takes (url, *, tables) and implements Warehouse.
_BACKENDS = {
    "duckdb": "ragpulse.tasks.warehouse.duckdb:DuckDBWarehouse",
    "postgresql": "ragpulse.tasks.warehouse.postgres:PostgresWarehouse",
    "postgres": "ragpulse.tasks.warehouse.postgres:PostgresWarehouse",
    "s3": "ragpulse.tasks.warehouse.iceberg:IcebergLake",
    "s3a": "ragpulse.tasks.warehouse.iceberg:IcebergLake",
    "file": "ragpulse.tasks.warehouse.iceberg:IcebergLake",
}
_SECRET_SCHEME = "secret://"


def open_warehouse(url: str, *, tables: TableNames | None = None) -> Warehouse:
    """The warehouse for ``url``, chosen by its scheme.

    - ``duckdb:///path.duckdb`` or a plain ``*.duckdb``/``*.db`` path: one DuckDB file (the default);
    - ``postgresql://user@host:5432/db?schema=name`` (or ``postgresql+psycopg://``): PostgreSQL;
      the password comes from ``PGPASSWORD``/``~/.pgpass`` rather than the URL;
    - ``s3://bucket/prefix?catalog=postgresql://user@host/db``, ``file:///dir`` or any other plain path: an Iceberg
      lake (a folder keeps its SQLite catalog inside);
    - ``secret://block-name``: the URL stored in that Prefect Secret block, so it may carry a password.
    """
    url = resolve_warehouse_url(url)
    if not url.strip():
        raise ConfigError("empty warehouse URL; use duckdb:///path/to/file.duckdb, postgresql://... or s3://...")
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else None
    if scheme is None:
        scheme = "duckdb" if url.endswith((".duckdb", ".db")) else "file"
    target = _BACKENDS.get(scheme)
    if target is None:
        # Only the scheme: an unknown URL's credentials could sit anywhere in it.
        raise ConfigError(
            f"unsupported warehouse URL scheme {scheme!r}; use duckdb:///path/to/file.duckdb, "
            "postgresql://user@host/db, s3://bucket/prefix, file:///directory or secret://block-name"
        )
    module, _, name = target.partition(":")
    backend: Callable[..., Warehouse] = getattr(importlib.import_module(module), name)
    return backend(url, tables=tables or TableNames())


def open_published(url: str, *, tables: TableNames | None = None) -> Warehouse:
    """``open_warehouse(url)`` for reading what was published, or a ConfigError naming what is not there: a local
    DuckDB file or lake folder, a PostgreSQL schema. Reading those gives empty tables (and creates nothing), which
    a report or a label sample would otherwise pass off as a real, empty result of a mistyped URL."""
    from fsspec.implementations.local import LocalFileSystem

    from ragpulse.tasks.core.storage import filesystem, redact_url
    from ragpulse.tasks.warehouse.duckdb import DuckDBWarehouse
    from ragpulse.tasks.warehouse.iceberg import IcebergLake
    from ragpulse.tasks.warehouse.postgres import PostgresWarehouse

    store = open_warehouse(url, tables=tables)
    missing = None
    if isinstance(store, DuckDBWarehouse) and not store.path.is_file():
        missing = f"{store.path.absolute()} does not exist"
    elif isinstance(store, IcebergLake):
        fs, root = filesystem(store.location.root)
        if isinstance(fs, LocalFileSystem) and not fs.isdir(root):
            missing = f"folder {root} does not exist"
    elif isinstance(store, PostgresWarehouse) and not store.has_schema():
        missing = f"schema {store.schema!r} does not exist in database {store.database}"
    if missing:
        raise ConfigError(f"no warehouse at {redact_url(url)}: {missing}")
    return store


def resolve_warehouse_url(url: str) -> str:
    """``url`` itself, or for ``secret://name`` the URL in that Prefect Secret block (ConfigError naming the block
    when there is none), so the credentials live in Prefect, not in configuration or flow parameters."""
    if not url.startswith(_SECRET_SCHEME):
        return url
    block_name = url.removeprefix(_SECRET_SCHEME)
    return secret_text(
        block_name,
        used_for=f"warehouse URL secret://{block_name}",
        holds="a warehouse URL string",
        valid=lambda value: not value.startswith(_SECRET_SCHEME),
    )
