"""The interface every warehouse implements (``Warehouse``), what a run hands it to publish (``Publication``) and
the names it gives its tables (``TableNames``)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Protocol

import pyarrow as pa

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.warehouse.rows import RowSource
from ragpulse.tasks.warehouse.tables import (
    CONVERSATION_SCORES_SCHEMA,
    STEP_SCORES_SCHEMA,
    STEPS_SCHEMA,
    TRACES_SCHEMA,
    VALIDATIONS_SCHEMA,
)

__all__ = ["IDENTIFIER", "STREAMED", "Publication", "TableNames", "Warehouse"]

STREAMED = ("scores", "traces", "steps", "step_scores")
"""The tables of a publication given as row sources: those that grow with the day."""


@dataclass(frozen=True)
class Publication:
    """Everything one run publishes for one partition; tables follow the schemas of ``tables``.

    The tables that grow with the day, ``scores``, ``traces``, ``steps`` and ``step_scores``, are row sources that
    a warehouse reads a batch at a time within its transaction; an in-memory table given for one is wrapped as one.
    ``metrics`` are the metrics whose rows the publish replaces in ``scores``, ``step_scores`` and
    ``conversation_scores``; the other tables' rows are replaced for the whole partition.
    """

    partition_date: dt.date
    metrics: list[str]
    scores: RowSource
    quarantine: pa.Table
    run: pa.Table
    validations: pa.Table = field(default_factory=VALIDATIONS_SCHEMA.empty_table)
    traces: RowSource = field(default_factory=lambda: RowSource.empty(TRACES_SCHEMA))
    steps: RowSource = field(default_factory=lambda: RowSource.empty(STEPS_SCHEMA))
    step_scores: RowSource = field(default_factory=lambda: RowSource.empty(STEP_SCORES_SCHEMA))
    conversation_scores: pa.Table = field(default_factory=CONVERSATION_SCORES_SCHEMA.empty_table)

    def __post_init__(self) -> None:
        for name in STREAMED:
            if isinstance(rows := getattr(self, name), pa.Table):
                object.__setattr__(self, name, RowSource.of(rows))


class Warehouse(Protocol):
    """A score-table destination.

    ``publish`` is atomic and idempotent per (partition, metric): it replaces the partition's
    scores, step scores and conversation scores for the publication's metrics, its quarantine rows,
    traces and steps, and appends the run and its validation results. ``record_validations``
    appends validation results of a run that published nothing (its output failed validation),
    leaving every other table untouched.
    ``publish_drift`` replaces a partition's drift rows as a whole, atomically; ``record_alerts``
    appends to the alert ledger; ``publish_calibration`` replaces a partition's calibrations and estimates
    together, atomically (the lake: table by table, restored on failure); ``publish_topics`` replaces a
    partition's ``trace_topics`` rows, and with ``topics`` (a fit made for that partition) its ``topics`` rows
    too, in the same way. ``read`` returns a table's rows with
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

    def publish_topics(
        self, partition_date: dt.date, trace_topics: pa.Table, topics: pa.Table | None = None
    ) -> None: ...

    def read(
        self,
        table: str,
        *,
        start: dt.date | None = None,
        end: dt.date | None = None,
        columns: Sequence[str] | None = None,
        metrics: Sequence[str] | None = None,
    ) -> pa.Table: ...


# A table, view, schema or namespace name: lower-case only (PostgreSQL folds unquoted names) and short enough for
# index names derived from it.
IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")


@dataclass(frozen=True)
class TableNames:
    """Physical table and view names (SQL tables, or the lake's Iceberg tables), checked so SQL is never built
    from an unchecked string. ``meta`` holds the schema version (in the lake, it names the publish locks).
    The last seven are the views of SQL warehouses (``_views``); the lake has none.
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
    steps: str = "steps"
    step_scores: str = "step_scores"
    conversation_scores: str = "conversation_scores"
    topics: str = "topics"
    trace_topics: str = "trace_topics"
    meta: str = "ragpulse_schema"
    daily_scores: str = "daily_scores"
    drift_segments: str = "drift_segments"
    latest_alerts: str = "latest_alerts"
    worst_traces: str = "worst_traces"
    turn_steps: str = "turn_steps"
    conversations: str = "conversations"
    conversation_turns: str = "conversation_turns"

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not isinstance(value, str) or not IDENTIFIER.match(value):
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
