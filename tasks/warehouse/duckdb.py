"""The embedded default warehouse: one DuckDB file, one writing process at a time."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import os
import re
import shutil
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ragpulse.tasks.core.duckdb_limits import connect_duckdb
from ragpulse.tasks.core.exceptions import ConfigError, WarehouseError, WarehouseLockedError
from ragpulse.tasks.warehouse._locks import LOCK_POLL_SECONDS, LOCK_PROGRESS_SECONDS, lock_timeout
from ragpulse.tasks.warehouse._schema import (
    META,
    PUBLISHED_AT,
    SCHEMA_VERSION,
    TABLES,
    AddColumn,
    DefineViews,
    Query,
    ReplaceCheck,
    TableSpec,
    completes_version,
    conform,
    conform_partition,
    conform_rows,
    pending_migrations,
)
from ragpulse.tasks.warehouse._views import DUCKDB, view_definitions
from ragpulse.tasks.warehouse.protocol import STREAMED, Publication, TableNames
from ragpulse.tasks.warehouse.rows import RowSource

__all__ = ["DEFAULT_LOCK_TIMEOUT", "DuckDBWarehouse", "duckdb_path"]

_log = logging.getLogger(__name__)

_TYPES = {
    pa.date32(): "DATE",
    pa.string(): "VARCHAR",
    pa.float64(): "DOUBLE",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.bool_(): "BOOLEAN",
    pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ",
}


def _quote(name: str) -> str:
    """A quoted identifier; every name reaching here is a spec constant or passed TableNames' strict check."""
    return f'"{name}"'


# Long text stored with zstd instead of DuckDB's choice among dictionary and FSST, which it makes by trying them at
# every checkpoint: 100k traces' excerpts took 6.45 CPU s to insert, commit and checkpoint that way, 2.26 with zstd,
# in a smaller file (bench/README.md, "Long text in DuckDB"). Short repeated strings keep DuckDB's choice.
_ZSTD_COLUMNS: dict[str, frozenset[str]] = {
    "traces": frozenset({"question", "answer", "contexts", "metadata"}),
    "steps": frozenset({"query", "contexts"}),
}
_ZSTD = "USING COMPRESSION ZSTD"


def _column(spec: TableSpec, field: pa.Field) -> str:
    compression = f" {_ZSTD}" if field.name in _ZSTD_COLUMNS.get(spec.key, ()) else ""
    return f"{_quote(field.name)} {_TYPES[field.type]}{compression}{' NOT NULL' if field.name in spec.required else ''}"


def _create_table(spec: TableSpec, name: str, *, exists_ok: bool = True) -> str:
    # No primary keys: delete-then-insert of a partition is ~20x faster without one here; uniqueness
    # is guaranteed by publishing and checked by tests.
    parts = [_column(spec, field) for field in spec.schema]
    parts += [f"CHECK ({check.sql})" for check in spec.checks]
    return f"CREATE TABLE {'IF NOT EXISTS ' * exists_ok}{_quote(name)} ({', '.join(parts)})"


# One writer per process; DuckDB's file lock keeps other processes out. Reads take it too: DuckDB refuses a
# read-only connection to a file this process has open for writing.
_WRITE_LOCK = threading.Lock()
# How long a publish waits for another process's file lock by default; ``?lock_timeout=<seconds>`` on the URL.
DEFAULT_LOCK_TIMEOUT = 30.0


_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.+?) \(PID (?P<pid>\d+)\)")


def _lock_holder(message: str) -> str:
    """The process DuckDB's lock error names, e.g. ``PID 4242 (/usr/bin/python3)``, or "another process"."""
    found = _HOLDER.search(message)
    return f"PID {found['pid']} ({found['program']})" if found else "another process"


@dataclass(frozen=True)
class _Url:
    """A DuckDB warehouse URL: the file, and what its query sets (``lock_timeout``, ``snapshot``)."""

    path: Path
    lock_timeout: float
    snapshot: Path | None

    @classmethod
    def parse(cls, url: str) -> _Url:
        base, _, query = url.partition("?")
        params = urllib.parse.parse_qs(query, keep_blank_values=True)
        unknown = sorted(set(params) - {"lock_timeout", "snapshot"})
        if unknown:
            raise ConfigError(
                f"unknown parameter {unknown[0]!r} in warehouse URL {url!r}; a DuckDB URL takes only "
                "lock_timeout=<seconds> and snapshot=<path>"
            )
        path = _file(base, url)
        snapshot = params.get("snapshot", [None])[-1]
        snapshot_path = _file(snapshot, url) if snapshot is not None else None
        if snapshot_path is not None and snapshot_path.resolve() == path.resolve():
            raise ConfigError(f"snapshot={snapshot!r} in warehouse URL {url!r} is the warehouse file itself")
        return cls(path, lock_timeout(params.get("lock_timeout", [None])[-1], url, DEFAULT_LOCK_TIMEOUT), snapshot_path)


def _file(path: str, url: str) -> Path:
    path = path.removeprefix("duckdb:///") if path.startswith("duckdb:///") else path
    if "://" in path or not path or path.endswith("/"):
        raise ConfigError(f"warehouse URL {url!r} names no file; use duckdb:///path/to/file.duckdb")
    return Path(path).expanduser()


def duckdb_path(url: str) -> Path:
    """``duckdb:///rel/x.duckdb`` is relative to the working directory, ``duckdb:////abs/x.duckdb`` absolute; the
    query (``?lock_timeout=``, ``?snapshot=``) is not part of the path."""
    return _Url.parse(url).path


class DuckDBWarehouse:
    """Publishes into one DuckDB file."""

    def __init__(self, url: str, *, tables: TableNames | None = None) -> None:
        parsed = _Url.parse(url)
        self.url = url
        self.path = parsed.path
        self.lock_timeout = parsed.lock_timeout
        # A copy of the file that readers open instead, refreshed after every write (docs/warehouses.md).
        self.snapshot = parsed.snapshot
        self.tables = tables or TableNames()

    def connect(self, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """Open the file, waiting up to ``lock_timeout`` for another process to close it: a publish, or a reader
        (a notebook, a dashboard), which DuckDB's file lock keeps out just the same. The wait is logged when it
        starts and every LOCK_PROGRESS_SECONDS, naming the process that holds the file."""
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        reported = -math.inf
        while True:
            try:
                connection = connect_duckdb(self.path, read_only=read_only)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise WarehouseError(f"cannot open warehouse {self.path}: {exc}") from exc
                waited = time.monotonic() - started
                holder = _lock_holder(str(exc))
                if waited >= self.lock_timeout:
                    raise WarehouseLockedError(
                        f"warehouse {self.path} is held open by {holder} (waited {self.lock_timeout:g} s). DuckDB "
                        "lets no other process in while one writes, nor a writer in while any process reads: close "
                        "the other connection (readers: see 'Reading while publishing' in docs/warehouses.md), wait "
                        "longer with ?lock_timeout=<seconds> on the warehouse URL, or use PostgreSQL for concurrent "
                        "readers and writers."
                    ) from exc
                if waited - reported >= LOCK_PROGRESS_SECONDS:
                    reported = waited
                    _log.warning(
                        "warehouse %s is held open by %s; waited %.0f of %g s for it to close",
                        self.path, holder, waited, self.lock_timeout,
                    )  # fmt: skip
                time.sleep(LOCK_POLL_SECONDS)
                continue
            if reported > -math.inf:
                _log.info("warehouse %s opened after waiting %.1f s", self.path, time.monotonic() - started)
            return connection

    def publish(self, publication: Publication) -> None:
        """Replace the partition's rows for the run's metrics, its quarantine rows, traces and steps, in one
        transaction."""
        with _WRITE_LOCK:
            con = self.connect()
            try:
                self._ensure_schema(con)
                self._publish(con, publication)
                self._refresh_snapshot(con)
            finally:
                con.close()

    def record_validations(self, validations: pa.Table) -> None:
        with _WRITE_LOCK:
            con = self.connect()
            try:
                self._ensure_schema(con)
                con.register("incoming_validations", validations)
                con.execute(f"INSERT INTO {self._table('validations')} BY NAME SELECT * FROM incoming_validations")
                self._refresh_snapshot(con)
            finally:
                con.close()

    def publish_drift(self, partition_date: dt.date, drift: pa.Table) -> None:
        """Replace the partition's drift rows as a whole, in one transaction."""
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
        """Replace the partition's rows of each table in ``tables`` by its rows, in one transaction."""
        rows = conform_partition(tables, partition_date)
        with self._writing(action) as con:
            for key, table in rows.items():
                con.register(f"incoming_{key}", table)
                con.execute(f"DELETE FROM {self._table(key)} WHERE partition_date = ?", [partition_date])
                con.execute(f"INSERT INTO {self._table(key)} BY NAME SELECT * FROM incoming_{key}")

    def record_alerts(self, alerts: pa.Table) -> None:
        """Append delivery outcomes to the alert ledger."""
        rows = conform(TABLES["alerts"], alerts)
        with self._writing("recording alerts") as con:
            con.register("incoming_alerts", rows)
            con.execute(f"INSERT INTO {self._table('alerts')} BY NAME SELECT * FROM incoming_alerts")

    def read(
        self,
        table: str,
        *,
        start: dt.date | None = None,
        end: dt.date | None = None,
        columns: Sequence[str] | None = None,
        metrics: Sequence[str] | None = None,
    ) -> pa.Table:
        """The table's rows in the date range (and of ``metrics``), filtered by DuckDB; never creates the file."""
        query = Query.of(table, start=start, end=end, columns=columns, metrics=metrics)
        with _WRITE_LOCK:
            if not self.path.exists():
                return query.empty()
            con = self.connect(read_only=True)
            try:
                return self._read(con, query)
            except duckdb.Error as exc:
                raise WarehouseError(f"reading {table} from {self.path} failed: {exc}") from exc
            finally:
                con.close()

    def _read(self, con: duckdb.DuckDBPyConnection, query: Query) -> pa.Table:
        name = getattr(self.tables, query.spec.key)
        present = {
            row[0]
            for row in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? AND table_schema = 'main'",
                [name],
            ).fetchall()
        }
        if not present:
            return query.empty()
        # Columns a later migration adds read as NULL from a file that has not been migrated yet.
        selected = [
            _quote(f.name) if f.name in present else f"NULL::{_TYPES[f.type]} AS {_quote(f.name)}" for f in query.schema
        ]
        conditions: list[str] = ["true"]
        params: list[Any] = []
        if query.start is not None:
            conditions.append("partition_date >= ?")
            params.append(query.start)
        if query.end is not None:
            conditions.append("partition_date <= ?")
            params.append(query.end)
        if query.metrics is not None:
            conditions.append("list_contains(?, metric)")
            params.append(list(query.metrics))
        result = con.sql(
            f"SELECT {', '.join(selected)} FROM {_quote(name)} WHERE {' AND '.join(conditions)}", params=params
        ).to_arrow_table()
        return result.cast(query.schema)

    def _table(self, key: str) -> str:
        return _quote(getattr(self.tables, key))

    @contextmanager
    def _writing(self, action: str) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection inside one transaction, committed if the block succeeds; DuckDB errors become
        WarehouseError after a rollback."""
        with _WRITE_LOCK:
            con = self.connect()
            try:
                self._ensure_schema(con)
                con.execute("BEGIN TRANSACTION")
                try:
                    yield con
                except duckdb.Error as exc:
                    # Roll back explicitly: COMMIT after an error would silently roll back in DuckDB 2.
                    con.execute("ROLLBACK")
                    raise WarehouseError(f"{action} on {self.path} failed, previous rows kept: {exc}") from exc
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                con.execute("COMMIT")
                self._refresh_snapshot(con)
            finally:
                con.close()

    def _refresh_snapshot(self, con: duckdb.DuckDBPyConnection) -> None:
        """Replace the reader snapshot with a copy of the file as just committed. ``con`` keeps every other process
        out, so after a CHECKPOINT (everything in the file, none of it in the WAL) the file does not change while it
        is copied; the copy replaces the snapshot by a rename, so a reader that has the old one open goes on
        reading it whole. A failure does not undo the publish, which is committed: it is logged, and the snapshot
        stays at the previous write until the next one."""
        if self.snapshot is None:
            return
        started = time.monotonic()
        partial = self.snapshot.with_name(f".{self.snapshot.name}.{os.getpid()}.partial")
        try:
            con.execute("CHECKPOINT")
            self.snapshot.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.path, partial)
            os.replace(partial, self.snapshot)
        except (OSError, duckdb.Error) as exc:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
            _log.warning(
                "published to %s, but its reader snapshot %s was not refreshed (%s): readers of the snapshot see the "
                "previous write until the next one succeeds", self.path, self.snapshot, exc,
            )  # fmt: skip
            return
        _log.info(
            "refreshed the reader snapshot %s of %s (%.1f MiB in %.2f s)",
            self.snapshot, self.path, self.snapshot.stat().st_size / 2**20, time.monotonic() - started,
        )  # fmt: skip

    def _ensure_schema(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create missing tables at the current shape, then apply the migrations the file has not seen yet."""
        meta = self._table("meta")
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(_create_table(META, self.tables.meta))
            for key, spec in TABLES.items():
                con.execute(_create_table(spec, getattr(self.tables, key)))
            row = con.execute(f"SELECT max(version) FROM {meta}").fetchone()
            version = row[0] if row else None
            pending = pending_migrations(version) if version is not None else ()
            if version is None:
                con.execute(f"INSERT INTO {meta} VALUES (?, now())", [SCHEMA_VERSION])
            else:
                # Tables a migration adds were created above, at their current shape; JSON stays text in DuckDB.
                for migration in pending:
                    if isinstance(migration, AddColumn):
                        con.execute(
                            f"ALTER TABLE {self._table(migration.table)} ADD COLUMN IF NOT EXISTS "
                            f"{_quote(migration.column)} {_TYPES[migration.field.type]}"
                        )
                    elif isinstance(migration, ReplaceCheck):
                        # DuckDB cannot alter a CHECK: the table is rebuilt with the current one, in this transaction.
                        self._rebuild(con, migration.table)
                        _log.info(
                            "rebuilt table %s of warehouse %s with the check on %s of schema version %d",
                            getattr(self.tables, migration.table), self.path, migration.column, migration.version,
                        )  # fmt: skip
                    if completes_version(migration):
                        con.execute(f"INSERT INTO {meta} VALUES (?, now())", [migration.version])
                        _log.info("migrated warehouse %s to schema version %d", self.path, migration.version)
            self._store_long_text_with_zstd(con)
            self._define_views(con, anew=version is None or any(isinstance(m, DefineViews) for m in pending))
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def _publish(self, con: duckdb.DuckDBPyConnection, publication: Publication) -> None:
        """Scores and traces stream in: each INSERT reads a RecordBatchReader over its row source, one batch at a
        time, and under ``connect_duckdb``'s memory limit DuckDB writes out or spills what it inserted instead of
        caching it, so neither side holds the day. A source that fails mid-way fails its INSERT, and all of it rolls
        back."""
        day = publication.partition_date
        streamed = {key: conform_rows(TABLES[key], getattr(publication, key), day) for key in STREAMED}
        conversations = conform_partition({"conversation_scores": publication.conversation_scores}, day)
        con.register("incoming_quarantine", publication.quarantine)
        con.register("incoming_run", publication.run)
        con.register("incoming_validations", publication.validations)
        con.register("incoming_conversation_scores", conversations["conversation_scores"])
        con.execute("BEGIN TRANSACTION")
        try:
            for key in ("scores", "step_scores", "conversation_scores"):
                con.execute(
                    f"DELETE FROM {self._table(key)} WHERE partition_date = ? AND list_contains(?, metric)",
                    [day, publication.metrics],
                )
            for key in ("quarantine", "traces", "steps"):
                con.execute(f"DELETE FROM {self._table(key)} WHERE partition_date = ?", [day])
            for key in STREAMED:
                self._insert_streamed(con, key, streamed[key])
            for key in ("quarantine", "conversation_scores"):
                con.execute(f"INSERT INTO {self._table(key)} BY NAME SELECT * FROM incoming_{key}")
            con.execute(
                f"INSERT INTO {self._table('runs')} BY NAME SELECT *, now() AS {PUBLISHED_AT} FROM incoming_run"
            )
            con.execute(f"INSERT INTO {self._table('validations')} BY NAME SELECT * FROM incoming_validations")
        except duckdb.Error as exc:
            # Roll back explicitly: COMMIT after an error would silently roll back in DuckDB 2.
            con.execute("ROLLBACK")
            raise WarehouseError(f"publishing dt={day} to {self.path} failed, previous rows kept: {exc}") from exc
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def _insert_streamed(self, con: duckdb.DuckDBPyConnection, key: str, rows: RowSource) -> None:
        """INSERT the rows from a fresh one-pass reader (a reader, once read, is empty). Not unregistered after a
        failure: the aborted transaction refuses that too, and its error would hide the INSERT's."""
        name = f"incoming_{key}"
        con.register(name, rows.reader())
        con.execute(f"INSERT INTO {self._table(key)} BY NAME SELECT * FROM {name}")
        con.unregister(name)

    def _define_views(self, con: duckdb.DuckDBPyConnection, *, anew: bool) -> None:
        """Create the views (``_views``) that are missing, or all of them ``anew`` after a version that defines them."""
        present = {
            row[0]
            for row in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = current_schema()"
            ).fetchall()
        }
        for key, select in view_definitions(self.tables, DUCKDB).items():
            name = getattr(self.tables, key)
            if anew or name not in present:
                con.execute(f"CREATE OR REPLACE VIEW {_quote(name)} AS {select}")

    def _rebuild(self, con: duckdb.DuckDBPyConnection, key: str) -> None:
        """Recreate table ``key`` at its current shape (columns, NOT NULLs, checks, compression) with its rows: what
        DuckDB takes to change a check or a compression, which it cannot alter in place."""
        name = getattr(self.tables, key)
        previous = f"{name}__before_rebuild"
        con.execute(f"ALTER TABLE {_quote(name)} RENAME TO {_quote(previous)}")
        con.execute(_create_table(TABLES[key], name, exists_ok=False))
        con.execute(f"INSERT INTO {_quote(name)} BY NAME SELECT * FROM {_quote(previous)}")
        con.execute(f"DROP TABLE {_quote(previous)}")

    def _store_long_text_with_zstd(self, con: duckdb.DuckDBPyConnection) -> None:
        """Rebuild, once, a table created before its long text was stored with zstd (``_ZSTD_COLUMNS``): DuckDB
        cannot change a column's compression in place, and otherwise every later publish would pay the slow one."""
        for key in _ZSTD_COLUMNS:
            name = getattr(self.tables, key)
            found = con.execute(
                "SELECT sql FROM duckdb_tables() WHERE table_name = ? AND schema_name = current_schema()", [name]
            ).fetchone()
            if found is None or _ZSTD in found[0].upper():
                continue
            self._rebuild(con, key)
            _log.info("rebuilt table %s of warehouse %s to store its long text with zstd", name, self.path)
