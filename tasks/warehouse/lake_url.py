"""An Iceberg lake's warehouse URL, taken apart and checked before anything is opened.

``s3://bucket/prefix?catalog=<catalog>&namespace=ragpulse&lock_timeout=300&retention_days=7`` (or a folder,
``file:///dir``). ``catalog`` is a SQLAlchemy URL of a SQL catalog (``sqlite:////path/catalog.db``,
``postgresql://user@host/db``), the layout that Iceberg's JDBC catalog, Spark, Trino and Flink share, or the name of
a catalog configured for pyiceberg (``.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__*``) whose type is ``sql``.
A folder without one keeps its catalog in ``<folder>/catalog.db``.
"""

from __future__ import annotations

import datetime as dt
import os
import urllib.parse
from dataclasses import dataclass

import sqlalchemy as sa

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.storage import redact_url
from ragpulse.tasks.warehouse._locks import lock_timeout, positive_parameter
from ragpulse.tasks.warehouse.protocol import IDENTIFIER

__all__ = ["DEFAULT_LOCK_TIMEOUT", "DEFAULT_RETENTION_DAYS", "LakeUrl"]

DEFAULT_LOCK_TIMEOUT = 300.0
# Snapshots older than this are expired after a publish, and the files only they named are deleted: how far back
# time travel reaches.
DEFAULT_RETENTION_DAYS = 7.0
_LOCAL_CATALOG = "catalog.db"


@dataclass(frozen=True)
class LakeUrl:
    """A lake's warehouse URL taken apart: where the tables live, which catalog commits them, under which
    namespace, and how long a publish waits for another publisher of its date."""

    root: str
    catalog: str
    namespace: str
    lock_timeout: float
    retention: dt.timedelta
    shown: str

    @classmethod
    def parse(cls, url: str) -> LakeUrl:
        shown = redact_url(url)
        base, _, query = url.partition("?")
        # A "+" is meant literally (postgresql+psycopg://), not as a form-encoded space.
        literal = query.replace("+", "%2B")
        params = {key: values[-1] for key, values in urllib.parse.parse_qs(literal, keep_blank_values=True).items()}
        unknown = sorted(set(params) - {"catalog", "namespace", "lock_timeout", "retention_days"})
        if unknown:
            raise ConfigError(
                f"unknown parameter(s) {unknown} in lake URL {shown!r}; it takes catalog=, namespace=, lock_timeout= "
                "and retention_days="
            )
        scheme = base.split("://", 1)[0].lower() if "://" in base else "file"
        if scheme in ("s3", "s3a"):
            root = "s3://" + base.split("://", 1)[1].rstrip("/")
        elif scheme == "file":
            root = "file://" + os.path.abspath(base.removeprefix("file://"))
        else:
            raise ConfigError(f"warehouse URL {shown!r}: an Iceberg lake lives on s3:// or in a local folder")
        catalog = params.get("catalog")
        if not catalog:
            if scheme != "file":
                raise ConfigError(
                    f"lake URL {shown!r} names no catalog: add ?catalog=postgresql://user@host/db (or sqlite:////path, "
                    "or the name of a pyiceberg catalog); only a local folder keeps its own"
                )
            catalog = f"sqlite:///{root.removeprefix('file://')}/{_LOCAL_CATALOG}"
        namespace = params.get("namespace", "ragpulse")
        if not IDENTIFIER.match(namespace):
            raise ConfigError(f"invalid namespace {namespace!r} in lake URL {shown!r}")
        timeout = lock_timeout(params.get("lock_timeout"), shown, DEFAULT_LOCK_TIMEOUT)
        days = positive_parameter(params.get("retention_days"), "retention_days", shown, DEFAULT_RETENTION_DAYS)
        location = cls(root, catalog, namespace, timeout, dt.timedelta(days=days), shown)
        _ = location.sql_catalog  # a bad catalog URL is a configuration error now, not at the first publish
        return location

    @property
    def local(self) -> bool:
        return self.root.startswith("file://")

    @property
    def sql_catalog(self) -> sa.URL | None:
        """The catalog's SQLAlchemy URL (PostgreSQL through psycopg 3), or None for a named pyiceberg catalog."""
        if "://" not in self.catalog:
            return None
        try:
            url = sa.make_url(self.catalog)
        except (sa.exc.ArgumentError, ValueError):
            raise ConfigError(f"invalid catalog URL in lake URL {self.shown!r}") from None
        backend = url.get_backend_name()
        if backend == "postgresql":
            return url.set(drivername="postgresql+psycopg")
        if backend == "sqlite":
            return url
        raise ConfigError(
            f"catalog {redact_url(self.catalog)!r}: use sqlite:///..., postgresql://... or a catalog name"
        )
