"""The embedded default warehouse: one DuckDB file, one writing process at a time."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from tasks.errors import ConfigError, WarehouseError, WarehouseLockedError
from tasks.warehouse import Publication, TableNames
from tasks.warehouse._schema import (
    META,
    PUBLISHED_AT,
    SCHEMA_VERSION,
    TABLES,
    TableSpec,
    completes_version,
    pending_migrations,
)

__all__ = ["DuckDBWarehouse", "duckdb_path"]

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


def _create_table(spec: TableSpec, name: str) -> str:
    # No primary keys: delete-then-insert of a partition is ~20x faster without one here; uniqueness
    # is guaranteed by publishing and checked by tests.
    parts = [f"{_quote(f.name)} {_TYPES[f.type]}{' NOT NULL' if f.name in spec.required else ''}" for f in spec.schema]
    parts += [f"CHECK ({check.sql})" for check in spec.checks]
    return f"CREATE TABLE IF NOT EXISTS {_quote(name)} ({', '.join(parts)})"


# One writer per process; DuckDB's file lock keeps other processes out.
_WRITE_LOCK = threading.Lock()
_LOCK_WAIT_SECONDS = 30.0


def duckdb_path(url: str) -> Path:
    """``duckdb:///rel/x.duckdb`` is relative to the working directory, ``duckdb:////abs/x.duckdb`` absolute."""
    path = url.removeprefix("duckdb:///") if url.startswith("duckdb:///") else url
    if "://" in path or not path or path.endswith("/"):
        raise ConfigError(f"warehouse URL {url!r} names no file; use duckdb:///path/to/file.duckdb")
    return Path(path).expanduser()


class DuckDBWarehouse:
    """Publishes into one DuckDB file."""

    def __init__(self, url: str, *, tables: TableNames | None = None) -> None:
        self.url = url
        self.path = duckdb_path(url)
        self.tables = tables or TableNames()

    def connect(self, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """Open the file, waiting a little for another process's publish to finish."""
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + _LOCK_WAIT_SECONDS
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise WarehouseError(f"cannot open warehouse {self.path}: {exc}") from exc
                if time.monotonic() >= deadline:
                    raise WarehouseLockedError(
                        f"warehouse {self.path} is locked by another process: {exc}. DuckDB allows one writing "
                        "process; wait for it to finish or publish to PostgreSQL for concurrent writers."
                    ) from exc
                time.sleep(0.5)

    def publish(self, publication: Publication) -> None:
        """Replace the partition's rows for the run's metrics and its quarantine rows, in one transaction."""
        with _WRITE_LOCK:
            con = self.connect()
            try:
                self._ensure_schema(con)
                self._publish(con, publication)
            finally:
                con.close()

    def record_validations(self, validations: pa.Table) -> None:
        with _WRITE_LOCK:
            con = self.connect()
            try:
                self._ensure_schema(con)
                con.register("incoming_validations", validations)
                con.execute(f"INSERT INTO {self._table('validations')} BY NAME SELECT * FROM incoming_validations")
            finally:
                con.close()

    def _table(self, key: str) -> str:
        return _quote(getattr(self.tables, key))

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
            if version is None:
                con.execute(f"INSERT INTO {meta} VALUES (?, now())", [SCHEMA_VERSION])
            else:
                for migration in pending_migrations(version):
                    con.execute(
                        f"ALTER TABLE {self._table(migration.table)} ADD COLUMN IF NOT EXISTS "
                        f"{_quote(migration.column)} {_TYPES[migration.field.type]}"
                    )
                    if completes_version(migration):
                        con.execute(f"INSERT INTO {meta} VALUES (?, now())", [migration.version])
                        _log.info("migrated warehouse %s to schema version %d", self.path, migration.version)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def _publish(self, con: duckdb.DuckDBPyConnection, publication: Publication) -> None:
        scores, quarantine = self._table("scores"), self._table("quarantine")
        con.register("incoming_scores", publication.scores)
        con.register("incoming_quarantine", publication.quarantine)
        con.register("incoming_run", publication.run)
        con.register("incoming_validations", publication.validations)
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                f"DELETE FROM {scores} WHERE partition_date = ? AND list_contains(?, metric)",
                [publication.partition_date, publication.metrics],
            )
            con.execute(f"INSERT INTO {scores} BY NAME SELECT * FROM incoming_scores")
            con.execute(f"DELETE FROM {quarantine} WHERE partition_date = ?", [publication.partition_date])
            con.execute(f"INSERT INTO {quarantine} BY NAME SELECT * FROM incoming_quarantine")
            con.execute(
                f"INSERT INTO {self._table('runs')} BY NAME SELECT *, now() AS {PUBLISHED_AT} FROM incoming_run"
            )
            con.execute(f"INSERT INTO {self._table('validations')} BY NAME SELECT * FROM incoming_validations")
        except duckdb.Error as exc:
            # Roll back explicitly: COMMIT after an error would silently roll back in DuckDB 2.
            con.execute("ROLLBACK")
            raise WarehouseError(
                f"publishing dt={publication.partition_date} to {self.path} failed, previous rows kept: {exc}"
            ) from exc
        con.execute("COMMIT")
