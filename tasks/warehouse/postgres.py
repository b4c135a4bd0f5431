"""PostgreSQL: COPY into temporary staging tables, then delete + insert in one transaction under advisory locks.

COPY runs at 190-400k rows/s where ``to_sql(method="multi")`` managed 1.2k; reads come back through COPY too.
Two publishers of one partition deadlocked on overlapping keys; ``pg_advisory_xact_lock`` per (table, partition)
makes them queue instead, while publishers of different partitions never wait for each other.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import re
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import sqlalchemy as sa
from psycopg import sql

from ragpulse.tasks.core.errors import ConfigError
from ragpulse.tasks.core.storage import redact_url
from ragpulse.tasks.warehouse import _IDENTIFIER, TableNames
from ragpulse.tasks.warehouse._sql import SqlWarehouse

__all__ = ["PostgresWarehouse"]

_DRIVERS = ("postgres", "postgresql", "postgresql+psycopg")
_COPY_BATCH_ROWS = 100_000
# pyarrow's CSV is what COPY's csv format reads: NULL unquoted and empty, every string quoted.
_CSV = pacsv.WriteOptions(include_header=False)
# And back: only an unquoted empty field is NULL ("" is an empty string, NaN a double), booleans are t/f.
_CSV_PARSE = pacsv.ParseOptions(newlines_in_values=True)


class PostgresWarehouse(SqlWarehouse):
    """``postgresql://user@host:5432/db?schema=name``; other query parameters (``sslmode``...) go to libpq.

    Passwords come from ``PGPASSWORD``, ``~/.pgpass`` or a ``secret://`` URL; ``url`` shows none.
    """

    driver_errors = (psycopg.Error,)

    def __init__(self, url: str, *, tables: TableNames | None = None) -> None:
        shown = _redact(url)
        try:
            parsed = sa.make_url(url)
        except (sa.exc.ArgumentError, ValueError):
            raise ConfigError(f"invalid PostgreSQL URL {shown!r}") from None
        if parsed.drivername not in _DRIVERS:
            raise ConfigError(f"unsupported PostgreSQL driver in {shown!r}; use postgresql:// or postgresql+psycopg://")
        schema = parsed.query.get("schema")
        if schema is not None and (not isinstance(schema, str) or not _IDENTIFIER.match(schema)):
            raise ConfigError(f"invalid schema {schema!r} in warehouse URL {shown!r}")
        super().__init__(
            parsed.set(drivername="postgresql+psycopg").difference_update_query(["schema"]),
            display_url=shown,
            tables=tables or TableNames(),
            schema=schema,
        )
        sa.event.listen(self._engine, "connect", _configure_session)

    def _bulk_load(self, conn: sa.Connection, staging: sa.Table, rows: pa.Table) -> None:
        copy = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(
            sql.Identifier(staging.name), sql.SQL(", ").join(map(sql.Identifier, rows.column_names))
        )
        # Timestamps go as UTC wall-clock text: pyarrow formats zoned timestamps ~30x slower.
        conn.execute(sa.text("SET LOCAL TIME ZONE 'UTC'"))
        driver: psycopg.Connection[object] = conn.connection.driver_connection  # type: ignore[assignment]
        with driver.cursor() as cursor, cursor.copy(copy) as stream:
            for batch in _as_copy_text(rows).to_batches(max_chunksize=_COPY_BATCH_ROWS):
                buffer = io.BytesIO()
                pacsv.write_csv(batch, buffer, _CSV)
                stream.write(buffer.getbuffer())

    def _fetch(self, conn: sa.Connection, statement: sa.Select[Any], schema: pa.Schema) -> pa.Table:
        """``COPY (SELECT ...) TO STDOUT`` parsed by Arrow's CSV reader: about 10x faster than fetching rows."""
        compiled = statement.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
        # Zoned timestamps come back as UTC with a +00 offset, which Arrow parses.
        conn.execute(sa.text("SET LOCAL TIME ZONE 'UTC'"))
        driver: psycopg.Connection[object] = conn.connection.driver_connection  # type: ignore[assignment]
        copy = sql.SQL("COPY ({}) TO STDOUT (FORMAT csv)").format(sql.SQL(str(compiled)))
        buffer = io.BytesIO()
        with driver.cursor() as cursor, cursor.copy(copy, compiled.params) as stream:
            for block in stream:
                buffer.write(block)
        if not buffer.tell():
            return schema.empty_table()
        buffer.seek(0)
        convert = pacsv.ConvertOptions(
            column_types=schema,
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            true_values=["t"],
            false_values=["f"],
        )
        read = pacsv.ReadOptions(column_names=schema.names)
        return pacsv.read_csv(buffer, read_options=read, parse_options=_CSV_PARSE, convert_options=convert).cast(schema)

    def advisory_lock_ids(self, day: dt.date) -> list[int]:
        """The ``pg_advisory_xact_lock`` keys a publish of ``day`` takes; holding them pauses its publishers."""
        return sorted(_lock_id(key) for key in self._partition_keys(day))

    def _lock(self, conn: sa.Connection, keys: list[str]) -> None:
        # Always in the same order, so two publishers never hold one lock each and wait for the other's.
        for key in sorted(_lock_id(k) for k in keys):
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})

    def _now(self) -> sa.ColumnElement[Any]:
        # now() is the transaction's start, before the lock wait; the clock orders publishers by commit.
        return sa.func.clock_timestamp()


def _configure_session(connection: psycopg.Connection[object], _record: object) -> None:
    """Staging tables of a 1M-row publication (~100 MB) stay in memory instead of spilling from 8 MB of buffers.

    temp_buffers must be set before the session first touches a temporary table, hence at connect.
    """
    connection.autocommit = True
    connection.execute("SET temp_buffers = '256MB'")
    connection.autocommit = False


def _redact(url: str) -> str:
    """``redact_url``, and libpq's ``password``/``sslpassword`` query parameters masked too."""
    return re.sub(r"(?i)([?&](?:ssl)?password=)[^&]*", r"\1***", redact_url(url))


def _lock_id(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)


def _as_copy_text(rows: pa.Table) -> pa.Table:
    """Zoned timestamps as naive UTC; NUL, which PostgreSQL text cannot hold (a corrupt file's raw line can), as
    U+FFFD instead of failing the publish."""
    for i, field in enumerate(rows.schema):
        column = rows.column(i)
        if pa.types.is_timestamp(field.type) and field.type.tz is not None:
            rows = rows.set_column(i, field.name, column.cast(pa.timestamp(field.type.unit)))
        elif pa.types.is_string(field.type) and pc.any(pc.match_substring(column, "\x00")).as_py():
            rows = rows.set_column(i, field.name, pc.replace_substring(column, "\x00", "\ufffd"))
    return rows
