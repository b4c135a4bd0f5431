"""Publishing through SQLAlchemy Core: DDL, migrations and the one-transaction replace, for any dialect.

A SQL backend subclasses ``SqlWarehouse`` and supplies what its database does best: bulk-loading a stream of
arrow record batches into a staging table, and serialising publishers of one partition. Everything else (tables from the
shared specs, schema versions, delete + insert inside one transaction, error translation) lives here, so a
new SQL warehouse is one small module.
"""

from __future__ import annotations

import abc
import datetime as dt
import itertools
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.exceptions import WarehouseError
from ragpulse.tasks.core.storage import redact_url
from ragpulse.tasks.warehouse._schema import (
    JSON_COLUMNS,
    META,
    PUBLISHED_AT,
    SCHEMA_VERSION,
    TABLES,
    AddColumn,
    DefineViews,
    Query,
    ReplaceCheck,
    StoreAsJson,
    TableSpec,
    completes_version,
    conform,
    conform_partition,
    conform_rows,
    pending_migrations,
)
from ragpulse.tasks.warehouse._views import ViewDialect, view_definitions
from ragpulse.tasks.warehouse.protocol import STREAMED, Publication, TableNames
from ragpulse.tasks.warehouse.rows import RowSource

__all__ = ["SqlWarehouse"]

_log = logging.getLogger(__name__)
# After a lost COMMIT, the pause before checking again whether it committed: doubling from the first to the most.
_CHECK_FIRST_PAUSE = 0.5
_CHECK_MAX_PAUSE = 5.0

_TYPES: dict[pa.DataType, sa.types.TypeEngine[Any]] = {
    pa.date32(): sa.Date(),
    pa.string(): sa.Text(),
    pa.float64(): sa.Double(),
    pa.int32(): sa.Integer(),
    pa.int64(): sa.BigInteger(),
    pa.bool_(): sa.Boolean(),
    pa.timestamp("us", tz="UTC"): sa.DateTime(timezone=True),
}


def _table(spec: TableSpec, name: str, metadata: sa.MetaData, json_type: sa.types.TypeEngine[Any] | None) -> sa.Table:
    items: list[sa.schema.SchemaItem] = [
        sa.Column(f.name, _stored_type(spec, f, json_type), nullable=f.name not in spec.required) for f in spec.schema
    ]
    items += [sa.CheckConstraint(check.sql, name=f"{name}_check{i}") for i, check in enumerate(spec.checks)]
    if spec.partition_index:
        items.append(sa.Index(f"{name}_partition_date_idx", "partition_date", postgresql_using=spec.partition_index))
    return sa.Table(name, metadata, *items)


def _stored_type(spec: TableSpec, field: pa.Field, json_type: sa.types.TypeEngine[Any] | None) -> Any:
    """The column's type in the database: the database's JSON type for ``JSON_COLUMNS`` if it has one."""
    if json_type is not None and (spec.key, field.name) in JSON_COLUMNS:
        return json_type
    return _TYPES[field.type]


def _single_value(column: pa.Array | pa.ChunkedArray) -> Any:
    """The value every row of ``column`` holds, or None; doubles never count (0.0 and -0.0 compare equal)."""
    if len(column) < 2 or column.null_count or pa.types.is_floating(column.type):
        return None
    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return low if low == high else None


def _constants(fields: list[pa.Field], batch: pa.RecordBatch) -> dict[str, Any]:
    """The columns of ``batch`` that hold one value throughout (see ``_single_value``), with that value."""
    return {f.name: value for f in fields if (value := _single_value(batch.column(f.name))) is not None}


def _holds_only(column: pa.Array, value: Any) -> bool:
    """Whether every row of ``column`` is ``value`` (never NULL)."""
    if column.null_count:
        return False
    bounds = pc.min_max(column)
    return bool(bounds["min"].as_py() == value == bounds["max"].as_py())


class SqlWarehouse(abc.ABC):
    """A warehouse behind a SQLAlchemy engine, implementing ``Warehouse``."""

    # Errors the driver raises outside SQLAlchemy (bulk loads use the raw driver connection).
    driver_errors: tuple[type[Exception], ...] = ()
    # The database's JSON type, for JSON_COLUMNS; None keeps them text.
    json_type: sa.types.TypeEngine[Any] | None = None
    # How the views read a JSON object's members in this database's SQL.
    view_dialect: ViewDialect
    # Seconds a publish waits for a lock, and keeps checking whether a COMMIT whose connection was lost committed.
    lock_timeout: float

    def __init__(
        self,
        url: sa.URL,
        *,
        display_url: str,
        tables: TableNames,
        schema: str | None,
        connect_args: dict[str, Any] | None = None,
    ) -> None:
        self.url = display_url
        self.tables = tables
        self.schema = schema
        # One short transaction per publish: no pool to keep connections (and their temp tables) around.
        self._engine = sa.create_engine(url, poolclass=NullPool, hide_parameters=True, connect_args=connect_args or {})
        metadata = sa.MetaData(schema=schema)
        self._tables = {
            key: _table(spec, getattr(tables, key), metadata, self.json_type)
            for key, spec in {"meta": META, **TABLES}.items()
        }
        self._metadata = metadata

    @abc.abstractmethod
    def _bulk_load(self, conn: sa.Connection, staging: sa.Table, batches: Iterable[pa.RecordBatch]) -> None:
        """Append the rows of ``batches`` (the columns of ``staging``, in its order) to the staging table, reading
        one batch at a time; an error raised by ``batches`` propagates and fails the transaction."""

    @abc.abstractmethod
    def _lock(self, conn: sa.Connection, keys: list[str], what: str) -> None:
        """Block until this transaction holds a lock per key (released at commit or rollback), or raise
        WarehouseLockedError naming ``what`` waited for the locks (e.g. ``publishing dt=2026-11-01``)."""

    def _now(self) -> sa.ColumnElement[Any]:
        """The publish time stamped on runs rows: when the rows become visible, so commit order orders re-runs."""
        return sa.func.current_timestamp()

    def publish(self, publication: Publication) -> None:
        """COPY into staging, then under the partition's locks delete and insert, all in one transaction.

        Scores, traces, steps and step scores are read from their row sources batch by batch while they are
        copied, so only a batch is in memory; a publish that is tried again reads its sources again."""
        day = publication.partition_date
        run = conform(TABLES["runs"], publication.run)
        conversations = conform_partition({"conversation_scores": publication.conversation_scores}, day)
        rows = {
            **{key: conform_rows(TABLES[key], getattr(publication, key), day) for key in STREAMED},
            "quarantine": RowSource.of(conform(TABLES["quarantine"], publication.quarantine)),
            "conversation_scores": RowSource.of(conversations["conversation_scores"]),
            "runs": RowSource.of(run),
            "validations": RowSource.of(conform(TABLES["validations"], publication.validations)),
        }
        run_ids = sorted(set(run["run_id"].to_pylist()))
        action = f"publishing dt={day}"
        with self._errors(action):
            self._ensure_schema()
            runs_before: int | None = None
            try:
                with self._engine.begin() as conn:
                    session = self._session(conn)
                    # The slow part, the bulk load, runs before the lock: publishers overlap there.
                    staged = {key: self._stage(conn, key, source) for key, source in rows.items()}
                    # Traces and steps are replaced with quarantine, the step and conversation scores with the
                    # scores, under their locks.
                    self._lock(conn, self._partition_keys(day), action)
                    for key in ("scores", "step_scores", "conversation_scores"):
                        table = self._tables[key]
                        conn.execute(
                            table.delete().where(table.c.partition_date == day, table.c.metric.in_(publication.metrics))
                        )
                    for key in ("quarantine", "traces", "steps"):
                        table = self._tables[key]
                        conn.execute(table.delete().where(table.c.partition_date == day))
                    for key, stage in staged.items():
                        self._insert(conn, key, stage)
                    # Set last: an error from here on is the COMMIT's, and the commit may have happened.
                    runs_before = self._count_runs(conn, day, run_ids) - publication.run.num_rows
            except self._translated as exc:
                if runs_before is None or not run_ids:
                    raise
                self._resolve_commit(day, run_ids, runs_before, exc, session)

    def record_validations(self, validations: pa.Table) -> None:
        self._append("validations", validations, "recording validations")

    def record_alerts(self, alerts: pa.Table) -> None:
        self._append("alerts", alerts, "recording alerts")

    def publish_drift(self, partition_date: dt.date, drift: pa.Table) -> None:
        """Stage the rows, then under the partition's drift lock delete and insert, in one transaction."""
        self._replace(partition_date, {"drift": drift}, f"publishing drift of dt={partition_date}")

    def publish_topics(self, partition_date: dt.date, trace_topics: pa.Table, topics: pa.Table | None = None) -> None:
        """Replace the partition's trace topics, and with ``topics`` its fitted topics, in one transaction."""
        rows = {"trace_topics": trace_topics} if topics is None else {"topics": topics, "trace_topics": trace_topics}
        self._replace(partition_date, rows, f"publishing topics of dt={partition_date}")

    def publish_calibration(self, partition_date: dt.date, calibrations: pa.Table, estimates: pa.Table) -> None:
        """Replace the partition's calibrations and estimates together, in one transaction."""
        rows = {"calibrations": calibrations, "estimates": estimates}
        self._replace(partition_date, rows, f"publishing calibration of dt={partition_date}")

    def _replace(self, partition_date: dt.date, tables: dict[str, pa.Table], action: str) -> None:
        """Stage each table's rows, then under the partition's lock of each delete and insert, in one transaction."""
        rows = conform_partition(tables, partition_date)
        with self._errors(action):
            self._ensure_schema()
            with self._engine.begin() as conn:
                staged = {key: self._stage(conn, key, RowSource.of(table)) for key, table in rows.items()}
                self._lock(conn, [f"{self._qualified(key)}/{partition_date}" for key in rows], action)
                for key, stage in staged.items():
                    table = self._tables[key]
                    conn.execute(table.delete().where(table.c.partition_date == partition_date))
                    self._insert(conn, key, stage)

    def read(
        self,
        table: str,
        *,
        start: dt.date | None = None,
        end: dt.date | None = None,
        columns: Sequence[str] | None = None,
        metrics: Sequence[str] | None = None,
    ) -> pa.Table:
        """The table's rows, filtered in SQL; a missing schema, table or column (not migrated yet) reads as empty
        or NULL, and nothing is created."""
        query = Query.of(table, start=start, end=end, columns=columns, metrics=metrics)
        stored = self._tables[table]
        with self._errors(f"reading {table}", writes=False), self._engine.connect() as conn:
            inspector = sa.inspect(conn)
            if not inspector.has_table(stored.name, schema=self.schema):
                return query.empty()
            present = {c["name"] for c in inspector.get_columns(stored.name, schema=self.schema)}
            selected = [
                stored.c[f.name] if f.name in present else sa.null().cast(_TYPES[f.type]).label(f.name)
                for f in query.schema
            ]
            # FROM named: a projection of columns not migrated yet reads none of the table's.
            statement = sa.select(*selected).select_from(stored)
            if query.start is not None:
                statement = statement.where(stored.c.partition_date >= query.start)
            if query.end is not None:
                statement = statement.where(stored.c.partition_date <= query.end)
            if query.metrics is not None:
                statement = statement.where(stored.c.metric.in_(query.metrics))
            return self._fetch(conn, statement, query.schema)

    def _fetch(self, conn: sa.Connection, statement: sa.Select[Any], schema: pa.Schema) -> pa.Table:
        """Run ``statement`` and return its rows as an arrow table of ``schema``; a backend may bulk-unload."""
        rows = conn.execute(statement).all()
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
        return pa.table([pa.array(column, f.type) for column, f in zip(columns, schema, strict=True)], schema=schema)

    def _append(self, key: str, rows: pa.Table, action: str) -> None:
        checked = conform(TABLES[key], rows)
        with self._errors(action):
            self._ensure_schema()
            with self._engine.begin() as conn:
                self._insert(conn, key, self._stage(conn, key, RowSource.of(checked)))

    def _qualified(self, key: str) -> str:
        return f"{self.schema or ''}.{getattr(self.tables, key)}"

    def _partition_keys(self, day: dt.date) -> list[str]:
        """What a publish of ``day`` locks: the partition of each table it replaces rows in."""
        return [f"{self._qualified('scores')}/{day}", f"{self._qualified('quarantine')}/{day}"]

    def _stage(self, conn: sa.Connection, key: str, rows: RowSource) -> list[sa.ColumnElement[Any]]:
        """Load ``rows`` into a temporary table (gone at commit or rollback; constraints apply on the way out) and
        return the columns that read them back. A column holding one value throughout travels once, as a bound
        parameter: a publication's date, run id, versions and time are a third of a 1M-row COPY otherwise. Which
        columns those are is seen in the first batch; one that changes in a later batch joins the table then.
        """
        fields = list(TABLES[key].incoming)
        batches = rows.batches()
        first = next(batches, None)
        constants = {} if first is None else _constants(fields, first)
        varying = [f for f in fields if f.name not in constants] or fields[:1]
        stage = sa.Table(
            f"stage_{getattr(self.tables, key)}",
            sa.MetaData(),
            *(sa.Column(f.name, _TYPES[f.type]) for f in varying),
            prefixes=["TEMPORARY"],
            postgresql_on_commit="DROP",
        )
        stage.create(conn)
        if first is not None:
            self._load(conn, key, stage, {k: v for k, v in constants.items() if k not in stage.c}, first, batches)
        columns = [
            stage.c[f.name] if f.name in stage.c else sa.literal(constants[f.name], _TYPES[f.type]).label(f.name)
            for f in fields
        ]
        # Staged as text; a JSON column's text becomes JSON on the way in.
        stored = self._tables[key].c
        return [
            sa.cast(column, stored[column.name].type).label(column.name)
            if (key, column.name) in JSON_COLUMNS and self.json_type is not None
            else column
            for column in columns
        ]

    def _load(
        self,
        conn: sa.Connection,
        key: str,
        stage: sa.Table,
        constants: dict[str, Any],
        first: pa.RecordBatch,
        rest: Iterator[pa.RecordBatch],
    ) -> None:
        """Bulk-load ``first`` and ``rest`` into ``stage``. A batch in which a column of ``constants`` (absent from
        ``stage``) holds another value ends the load: the column is added to ``stage`` with the constant in the
        rows already there (``constants`` loses it), and a new load begins with that batch."""
        pending: list[pa.RecordBatch] = [first]

        def fitting() -> Iterator[pa.RecordBatch]:
            names = [column.name for column in stage.columns]
            for batch in itertools.chain([pending.pop()], rest):
                if not all(_holds_only(batch.column(name), value) for name, value in constants.items()):
                    pending.append(batch)
                    return
                yield batch.select(names)

        while pending:
            self._bulk_load(conn, stage, fitting())
            for name in [n for n, v in constants.items() if pending and not _holds_only(pending[0].column(n), v)]:
                column = sa.Column(name, _TYPES[TABLES[key].schema.field(name).type])
                self._add_stage_column(conn, stage, column, constants.pop(name))

    def _add_stage_column(self, conn: sa.Connection, stage: sa.Table, column: sa.Column[Any], value: Any) -> None:
        """Add ``column`` to ``stage``, set to ``value`` in every row loaded so far (rare: a column that held one
        value in the first batch and another later, e.g. scores sent metric by metric)."""
        preparer = conn.dialect.identifier_preparer
        conn.execute(
            sa.text(
                f"ALTER TABLE {preparer.format_table(stage)} "
                f"ADD COLUMN {preparer.quote(column.name)} {column.type.compile(dialect=conn.dialect)}"
            )
        )
        stage.append_column(column)
        conn.execute(stage.update().values({column.name: value}))

    def _insert(self, conn: sa.Connection, key: str, staged: list[sa.ColumnElement[Any]]) -> None:
        names = [column.name for column in staged]
        columns = list(staged)
        if key == "runs":
            names.append(PUBLISHED_AT)
            columns.append(self._now())
        conn.execute(self._tables[key].insert().from_select(names, sa.select(*columns)))

    def _ensure_schema(self) -> None:
        """Create missing tables at the current shape and apply pending migrations, one publisher at a time."""
        meta = self._tables["meta"]
        with self._engine.begin() as conn:
            self._lock(conn, [self._qualified("meta")], "checking the warehouse schema")
            if self.schema:
                conn.execute(sa.schema.CreateSchema(self.schema, if_not_exists=True))
            self._metadata.create_all(conn)
            version = conn.execute(sa.select(sa.func.max(meta.c.version))).scalar()
            if version is None:
                conn.execute(meta.insert().values(version=SCHEMA_VERSION, applied_at=sa.func.current_timestamp()))
                self._define_views(conn, anew=True)
                return
            pending = pending_migrations(version)
            # A view pins the type of every column it reads: dropped before a type changes, created after.
            anew = any(isinstance(m, DefineViews | StoreAsJson) for m in pending)
            if anew:
                self._drop_views(conn)
            # Tables a migration adds were created above, at their current shape.
            for migration in pending:
                if isinstance(migration, AddColumn | StoreAsJson):
                    self._migrate_column(conn, migration)
                elif isinstance(migration, ReplaceCheck):
                    self._replace_check(conn, migration)
                if completes_version(migration):
                    conn.execute(
                        meta.insert().values(version=migration.version, applied_at=sa.func.current_timestamp())
                    )
                    _log.info("migrated warehouse %s to schema version %d", self.url, migration.version)
            self._define_views(conn, anew=anew)

    def _migrate_column(self, conn: sa.Connection, migration: AddColumn | StoreAsJson) -> None:
        """Add a column that is not there yet, or give a text column the database's JSON type if it has not got it."""
        table = self._tables[migration.table]
        present = {c["name"]: c["type"] for c in sa.inspect(conn).get_columns(table.name, schema=self.schema)}
        preparer = conn.dialect.identifier_preparer
        target, column = preparer.format_table(table), preparer.quote(migration.column)
        if isinstance(migration, AddColumn) and migration.column not in present:
            column_type = _TYPES[migration.field.type].compile(dialect=conn.dialect)
            conn.execute(sa.text(f"ALTER TABLE {target} ADD COLUMN {column} {column_type}"))
        elif isinstance(migration, StoreAsJson) and self.json_type is not None:
            json_type = self.json_type.compile(dialect=conn.dialect)
            if present[migration.column].compile(dialect=conn.dialect) != json_type:
                # Every value is JSON text already (staging writes it); the table is rewritten once.
                conn.execute(
                    sa.text(f"ALTER TABLE {target} ALTER COLUMN {column} TYPE {json_type} USING {column}::{json_type}")
                )
                _log.info("stored %s.%s of warehouse %s as %s", table.name, migration.column, self.url, json_type)

    def _replace_check(self, conn: sa.Connection, migration: ReplaceCheck) -> None:
        """Swap the check on ``table.column`` for the current one, under the name ``_table`` gives it; the rows stay
        and are checked once against it (they all hold: the new check allows more)."""
        table = self._tables[migration.table]
        preparer = conn.dialect.identifier_preparer
        target, name = preparer.format_table(table), preparer.quote(f"{table.name}_check{migration.index}")
        conn.execute(
            sa.text(
                f"ALTER TABLE {target} DROP CONSTRAINT IF EXISTS {name}, "
                f"ADD CONSTRAINT {name} CHECK ({migration.check.sql})"
            )
        )
        _log.info("replaced the check on %s.%s of warehouse %s", table.name, migration.column, self.url)

    def _views(self) -> dict[str, str]:
        """``{view name: SELECT}`` in creation order."""
        definitions = view_definitions(self.tables, self.view_dialect, self.schema)
        return {getattr(self.tables, key): select for key, select in definitions.items()}

    def _drop_views(self, conn: sa.Connection) -> None:
        preparer = conn.dialect.identifier_preparer
        for name in reversed(list(self._views())):
            conn.execute(sa.text(f"DROP VIEW IF EXISTS {preparer.format_table(sa.table(name, schema=self.schema))}"))

    def _define_views(self, conn: sa.Connection, *, anew: bool) -> None:
        """Create the views that are missing (a user may have dropped one), or all of them ``anew``."""
        present = set(sa.inspect(conn).get_view_names(schema=self.schema))
        preparer = conn.dialect.identifier_preparer
        for name, select in self._views().items():
            if anew or name not in present:
                conn.execute(
                    sa.text(f"CREATE VIEW {preparer.format_table(sa.table(name, schema=self.schema))} AS {select}")
                )

    def _count_runs(self, conn: sa.Connection, day: dt.date, run_ids: list[str]) -> int:
        runs = self._tables["runs"]
        query = sa.select(sa.func.count()).where(runs.c.partition_date == day, runs.c.run_id.in_(run_ids))
        return int(conn.execute(query).scalar_one())

    @abc.abstractmethod
    def _session(self, conn: sa.Connection) -> Any:
        """The server's identity of ``conn``'s session, for ``_settle``."""

    @abc.abstractmethod
    def _settle(self, conn: sa.Connection, session: Any) -> None:
        """Wait, on another connection ``conn``, until the transaction of ``session`` has ended one way or the
        other, so that what it wrote is either visible or gone for good."""

    def _resolve_commit(
        self, day: dt.date, run_ids: list[str], runs_before: int, exc: Exception, session: Any = None
    ) -> None:
        """The COMMIT of ``day``'s publish failed, typically the connection dropped while it was in flight: it may
        have committed. The run's runs rows, written in that transaction, tell which, read on a new connection
        once the old session's transaction has ended (``_settle``: the server may still be committing it):
        committed is a success with a warning; otherwise the previous rows are in place and this is a failure. A
        server out of reach is checked again, with growing pauses, until ``lock_timeout`` is spent."""
        detail = _one_line(exc)
        runs = ", ".join(run_ids)
        started = time.monotonic()
        pause = _CHECK_FIRST_PAUSE
        while True:
            try:
                with self._engine.connect() as conn:
                    self._settle(conn, session)
                    committed = self._count_runs(conn, day, run_ids) > runs_before
                break
            except self._translated as failed:
                # The lost connection often means the server is away for a while (a restart, a failover).
                checked = time.monotonic() - started
                if checked >= self.lock_timeout:
                    raise WarehouseError(
                        f"publishing dt={day} on {self.url}: the connection was lost during COMMIT ({detail}) and "
                        f"checking whether it committed failed too, for {self.lock_timeout:g} s (lock_timeout; last: "
                        f"{_one_line(failed)}); look for run_id {runs} in table {self.tables.runs} before re-running "
                        "the date (a re-run replaces its rows either way)"
                    ) from exc
                pause = min(pause, self.lock_timeout - checked)
                _log.warning(
                    "dt=%s: connection to %s lost during COMMIT; checking whether run %s committed failed (%s), "
                    "checking again in %.1f s (%.0f of %g s spent)", day, self.url, runs, _one_line(failed), pause,
                    checked, self.lock_timeout,
                )  # fmt: skip
                time.sleep(pause)
                pause = min(2 * pause, _CHECK_MAX_PAUSE)
        if committed:
            _log.warning(
                "dt=%s: connection to %s lost after COMMIT (%s); the rows of run %s are published", day, self.url,
                detail, runs,
            )  # fmt: skip
            return
        raise WarehouseError(
            f"publishing dt={day} on {self.url} failed, previous rows kept: the connection was lost during COMMIT "
            f"({detail}) and run {runs} is not in table {self.tables.runs}, so it was not committed"
        ) from exc

    @property
    def _translated(self) -> tuple[type[Exception], ...]:
        """The exceptions of the database client (not ours) that a warehouse operation can raise."""
        return (sa.exc.SQLAlchemyError, OSError, *self.driver_errors)

    @contextmanager
    def _errors(self, action: str, *, writes: bool = True) -> Iterator[None]:
        """Driver errors become WarehouseError; messages carry the redacted URL and the driver's own words."""
        try:
            yield
        except RagpulseError:
            raise
        except self._translated as exc:
            kept = ", previous rows kept" if writes else ""
            raise WarehouseError(f"{action} on {self.url} failed{kept}: {_one_line(exc)}") from exc


def _one_line(exc: BaseException) -> str:
    """The driver's own words, redacted, on one line (libpq's messages span several)."""
    return " ".join(redact_url(str(getattr(exc, "orig", None) or exc)).split())
