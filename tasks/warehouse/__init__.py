"""Warehouses that receive score tables. One interface, one set of semantics, chosen by URL.

Publishing a partition is one transaction: the partition's rows for the run's metrics (of turns,
retrieval steps and conversations), its quarantine rows, its trace excerpts and their retrieval
steps are replaced, and a row is added to ``runs``. Re-running a
date replaces, never duplicates; a failed publish leaves the previous rows as they were. Drift
results replace a partition's drift rows the same way; alert deliveries are appended to a ledger.
Every table reads back through ``Warehouse.read``, filtered by date and metric in the backend.

Here: the tables' Arrow schemas (``tables``), the interface and what it publishes (``protocol``), and opening a
warehouse by URL (``factory``). Backends, one module each: ``duckdb`` (embedded default), ``postgres``
(SQLAlchemy 2 + psycopg 3, COPY and advisory locks) and ``iceberg`` (Apache Iceberg tables on S3 or local disk,
committed through a SQL catalog; its URL in ``lake_url``). Table layout, constraints and migrations shared by all
of them live in ``_schema``, publish locks in ``_locks``; see docs/warehouses.md.
"""

from __future__ import annotations

from ragpulse.tasks.warehouse.factory import open_published, open_warehouse, resolve_warehouse_url
from ragpulse.tasks.warehouse.protocol import Publication, TableNames, Warehouse
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
    TOPICS_SCHEMA,
    TRACE_TOPICS_SCHEMA,
    TRACES_SCHEMA,
    VALIDATIONS_SCHEMA,
)

__all__ = [
    "ALERTS_SCHEMA",
    "CALIBRATIONS_SCHEMA",
    "CONVERSATION_SCORES_SCHEMA",
    "DRIFT_SCHEMA",
    "ESTIMATES_SCHEMA",
    "QUARANTINE_SCHEMA",
    "RUNS_SCHEMA",
    "SCORES_SCHEMA",
    "STEPS_SCHEMA",
    "STEP_SCORES_SCHEMA",
    "TOPICS_SCHEMA",
    "TRACES_SCHEMA",
    "TRACE_TOPICS_SCHEMA",
    "VALIDATIONS_SCHEMA",
    "Publication",
    "RowSource",
    "TableNames",
    "Warehouse",
    "open_published",
    "open_warehouse",
    "resolve_warehouse_url",
]
