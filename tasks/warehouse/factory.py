"""Opening a warehouse by URL: the scheme picks the backend (``duckdb``, ``postgres`` or ``iceberg``, imported only
when used), and ``secret://`` URLs are read from a Prefect Secret block first."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.secrets import secret_text
from ragpulse.tasks.warehouse.protocol import TableNames, Warehouse

__all__ = ["open_published", "open_warehouse", "resolve_warehouse_url"]

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
