"""Fixtures of the warehouse tests: a namespace of its own in the Iceberg SQL catalog in the real PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"


@pytest.fixture
def namespace() -> Iterator[str]:
    """A fresh Iceberg namespace for a lake whose catalog is in PostgreSQL; its catalog rows are deleted afterwards
    (the objects live in the test's bucket, which the s3 fixture removes)."""
    name = f"t{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(PG_DSN, autocommit=True) as con:
        for table, column in (("iceberg_tables", "table_namespace"), ("iceberg_namespace_properties", "namespace")):
            if con.execute("SELECT to_regclass(%s)", (table,)).fetchone() != (None,):
                query = sql.SQL("DELETE FROM {} WHERE {} = %s").format(sql.Identifier(table), sql.Identifier(column))
                con.execute(query, (name,))
