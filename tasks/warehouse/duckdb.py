"""The embedded default warehouse: one DuckDB file, one writing process at a time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from tasks.errors import ConfigError, WarehouseError, WarehouseLockedError
from tasks.warehouse import Publication

__all__ = ["SCHEMA_VERSION", "DuckDBWarehouse", "duckdb_path"]

SCHEMA_VERSION = 1

# No primary keys: delete-then-insert of a partition is ~20x faster without one here; uniqueness
# is guaranteed by publishing and checked by tests.
_DDL = """
CREATE TABLE IF NOT EXISTS ragpulse_schema (version INTEGER NOT NULL, applied_at TIMESTAMPTZ NOT NULL);
CREATE TABLE IF NOT EXISTS scores (
    partition_date DATE NOT NULL,
    trace_id VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,
    value DOUBLE,
    status VARCHAR NOT NULL CHECK (status IN ('ok', 'not_applicable', 'failed')),
    reason VARCHAR,
    metric_version VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    computed_at TIMESTAMPTZ NOT NULL,
    CHECK ((status = 'ok') = (value IS NOT NULL))
);
CREATE TABLE IF NOT EXISTS quarantine (
    partition_date DATE NOT NULL,
    run_id VARCHAR NOT NULL,
    source_file VARCHAR NOT NULL,
    line BIGINT NOT NULL,
    trace_id VARCHAR,
    field VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    raw VARCHAR,
    quarantined_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS validations (
    run_id VARCHAR NOT NULL,
    partition_date DATE NOT NULL,
    suite VARCHAR NOT NULL,
    expectation VARCHAR NOT NULL,
    column_name VARCHAR,
    success BOOLEAN NOT NULL,
    element_count BIGINT,
    unexpected_count BIGINT,
    details VARCHAR,
    validated_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR NOT NULL,
    partition_date DATE NOT NULL,
    source VARCHAR NOT NULL,
    config_hash VARCHAR NOT NULL,
    config VARCHAR NOT NULL,
    metrics VARCHAR NOT NULL,
    n_files BIGINT NOT NULL,
    n_records BIGINT NOT NULL,
    n_traces BIGINT NOT NULL,
    n_quarantined BIGINT NOT NULL,
    n_batches BIGINT NOT NULL,
    n_batches_cached BIGINT NOT NULL,
    n_scores BIGINT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ NOT NULL
);
"""

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

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = duckdb_path(url)

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
                con.execute("INSERT INTO validations BY NAME SELECT * FROM incoming_validations")
            finally:
                con.close()

    @staticmethod
    def _ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
        con.execute(_DDL)
        if con.execute("SELECT count(*) FROM ragpulse_schema").fetchall() == [(0,)]:
            con.execute("INSERT INTO ragpulse_schema VALUES (?, now())", [SCHEMA_VERSION])

    def _publish(self, con: duckdb.DuckDBPyConnection, publication: Publication) -> None:
        con.register("incoming_scores", publication.scores)
        con.register("incoming_quarantine", publication.quarantine)
        con.register("incoming_run", publication.run)
        con.register("incoming_validations", publication.validations)
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                "DELETE FROM scores WHERE partition_date = ? AND list_contains(?, metric)",
                [publication.partition_date, publication.metrics],
            )
            con.execute("INSERT INTO scores BY NAME SELECT * FROM incoming_scores")
            con.execute("DELETE FROM quarantine WHERE partition_date = ?", [publication.partition_date])
            con.execute("INSERT INTO quarantine BY NAME SELECT * FROM incoming_quarantine")
            con.execute("INSERT INTO runs BY NAME SELECT * FROM incoming_run")
            con.execute("INSERT INTO validations BY NAME SELECT * FROM incoming_validations")
        except duckdb.Error as exc:
            # Roll back explicitly: COMMIT after an error would silently roll back in DuckDB 2.
            con.execute("ROLLBACK")
            raise WarehouseError(
                f"publishing dt={publication.partition_date} to {self.path} failed, previous rows kept: {exc}"
            ) from exc
        con.execute("COMMIT")
