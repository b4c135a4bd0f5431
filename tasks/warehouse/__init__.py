"""Warehouses that receive score tables. One interface, one set of semantics, chosen by URL.

Publishing a partition is one transaction: the partition's rows for the run's metrics and its
quarantine rows are replaced, and a row is added to ``runs``. Re-running a date replaces, never
duplicates; a failed publish leaves the previous rows as they were.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa

from tasks.errors import ConfigError

__all__ = [
    "QUARANTINE_SCHEMA",
    "RUNS_SCHEMA",
    "SCORES_SCHEMA",
    "VALIDATIONS_SCHEMA",
    "Publication",
    "Warehouse",
    "open_warehouse",
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


@dataclass(frozen=True)
class Publication:
    """Everything one run publishes for one partition; tables follow the schemas above."""

    partition_date: dt.date
    metrics: list[str]
    scores: pa.Table
    quarantine: pa.Table
    run: pa.Table
    validations: pa.Table = field(default_factory=VALIDATIONS_SCHEMA.empty_table)


class Warehouse(Protocol):
    """A score-table destination.

    ``publish`` is atomic and idempotent per (partition, metric): it replaces the partition's
    scores for the publication's metrics and its quarantine rows, and appends the run and its
    validation results. ``record_validations`` appends validation results of a run that
    published nothing (its output failed validation), leaving every other table untouched.
    """

    url: str

    def publish(self, publication: Publication) -> None: ...

    def record_validations(self, validations: pa.Table) -> None: ...


def open_warehouse(url: str) -> Warehouse:
    """The warehouse for ``url``: ``duckdb:///path.duckdb`` (or a plain ``*.duckdb`` path)."""
    if url.startswith("duckdb://") or (url.endswith((".duckdb", ".db")) and "://" not in url):
        from tasks.warehouse.duckdb import DuckDBWarehouse

        return DuckDBWarehouse(url)
    raise ConfigError(f"unsupported warehouse URL {url!r}; use duckdb:///path/to/file.duckdb")
