"""Whether a warehouse URL names a warehouse this run can write, checked before any work: a run that staged and
scored a day for an hour must not learn only at publish that its schema name is wrong, its server unreachable or its
folder read-only.

The probe writes no row: for DuckDB a temporary file beside the database (opening the file itself would take the
lock another process may be publishing under), for PostgreSQL the schema created if absent and the right to create
tables in it, for an Iceberg lake a probe object written and deleted under its root and its catalog reached (nothing
created in it).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from fsspec.implementations.local import LocalFileSystem

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.storage import filesystem, redact_url, secret_values
from ragpulse.tasks.warehouse.duckdb import DuckDBWarehouse
from ragpulse.tasks.warehouse.factory import open_warehouse, resolve_warehouse_url

if TYPE_CHECKING:
    from ragpulse.tasks.warehouse.iceberg import IcebergLake
    from ragpulse.tasks.warehouse.postgres import PostgresWarehouse

__all__ = ["CONNECT_TIMEOUT_SECONDS", "probe_warehouse"]

#: A server that does not answer is reported after this long, not after the kernel's TCP timeout.
CONNECT_TIMEOUT_SECONDS = 10


def probe_warehouse(url: str) -> None:
    """Raise ConfigError (one line, no password) unless ``url`` resolves (``secret://`` block present), has a known
    scheme and a valid schema name, and its warehouse is reachable and writable."""
    resolved = resolve_warehouse_url(url)
    store = open_warehouse(resolved)
    try:
        if isinstance(store, DuckDBWarehouse):
            _probe_directory(store.path)
        else:
            # Imported only for the other kinds: pyiceberg and SQLAlchemy took 0.6 s of every DuckDB run's start
            # (bench/README.md, "Floor and profile"). open_warehouse has imported the module of the store it made.
            from ragpulse.tasks.warehouse.iceberg import IcebergLake
            from ragpulse.tasks.warehouse.postgres import PostgresWarehouse

            if isinstance(store, PostgresWarehouse):
                _probe_schema(store)
            elif isinstance(store, IcebergLake):
                _probe_lake(store)
    except ConfigError:
        raise
    except Exception as exc:
        cause = getattr(exc, "orig", None) or exc  # the driver's own error, not SQLAlchemy's wrapping of it
        detail = " ".join(str(cause).split()) or type(cause).__name__
        # A driver may quote the password decoded, outside any URL: every form the URL holds it in is masked.
        raise ConfigError(
            f"warehouse {redact_url(url)} cannot be written: {redact_url(detail, secret_values(resolved))}"
        ) from None


def _probe_directory(path: Path) -> None:
    """The DuckDB file's folder takes new files (DuckDB writes a WAL beside the file), and the file, if present,
    is writable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"warehouse file {path} is not writable")
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".ragpulse-probe-"):
        pass


def _probe_schema(store: PostgresWarehouse) -> None:
    """Connect, create the schema if absent (as the first publish would) and check that tables can be created in
    it. ``CREATE SCHEMA IF NOT EXISTS`` needs the right to create schemas even when it exists, hence the lookup."""
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    # Its own engine on the same URL with a shorter connect timeout than the publisher's 30 s: a check before any
    # work should fail fast.
    engine = sa.create_engine(
        store._engine.url, poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS}
    )
    try:
        with engine.begin() as conn:
            schema = store.schema or conn.execute(sa.text("SELECT current_schema()")).scalar()
            if schema is None:
                raise ConfigError(f"warehouse {store.url}: no schema; add ?schema=name to the URL")
            exists = conn.execute(sa.text("SELECT 1 FROM pg_namespace WHERE nspname = :s"), {"s": schema}).scalar()
            if not exists:  # the name is checked against IDENTIFIER by the backend
                conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
            elif not conn.execute(sa.text("SELECT has_schema_privilege(:s, 'CREATE')"), {"s": schema}).scalar():
                raise ConfigError(f"warehouse {store.url}: no right to create tables in schema {schema!r}")
    finally:
        engine.dispose()


def _probe_lake(lake: IcebergLake) -> None:
    """Write and delete an object under the lake's root (a local root is created, as the first publish would), and
    reach its catalog: a lake in the manifest layout, an unreachable catalog or one that is not SQL fails here."""
    lake.check_writable()
    fs, root = filesystem(lake.location.root)
    if isinstance(fs, LocalFileSystem):
        fs.makedirs(root, exist_ok=True)
    probe = f"{root}/_ragpulse-probe-{uuid.uuid4().hex}"
    fs.pipe_file(probe, b"")
    fs.rm_file(probe)
