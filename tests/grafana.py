"""Running the dashboard's SQL as Grafana's PostgreSQL data source sends it (macros and variables expanded)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import psycopg

PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"

_MACRO_TIME_FILTER = re.compile(r"\$__timeFilter\(([^)]*)\)")
_VARIABLE = re.compile(r"\$\{(\w+):sqlstring\}")


def _sqlstring(values: list[str]) -> str:
    """Grafana's ``sqlstring`` format: each value quoted, quotes doubled, joined by commas."""
    return ",".join("'" + value.replace("'", "''") + "'" for value in values)


def grafana_sql(raw: str, picked: dict[str, list[str]], days: tuple[dt.date, dt.date]) -> str:
    """``raw`` as Grafana's PostgreSQL data source sends it: the time macro and ``${var:sqlstring}`` expanded."""
    first, last = days
    window = f"'{first:%Y-%m-%d}T00:00:00Z' AND '{last:%Y-%m-%d}T23:59:59Z'"
    expanded = _MACRO_TIME_FILTER.sub(lambda m: f"{m.group(1)} BETWEEN {window}", raw)
    assert "$__" not in expanded, expanded
    return _VARIABLE.sub(lambda m: _sqlstring(picked[m.group(1)]), expanded)


def pg_rows(raw_sql: str) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    """Column names, PostgreSQL type names and rows of a query, as the data source receives them."""
    with psycopg.connect(PG_DSN) as con:
        cursor = con.execute(raw_sql)  # type: ignore[arg-type]
        rows = cursor.fetchall()
        types = [con.adapters.types.get(d.type_code).name for d in cursor.description or []]  # type: ignore[union-attr]
        return [d.name for d in cursor.description or []], types, rows


def panels(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The dashboard's panels, rows left out."""
    return [panel for panel in document["panels"] if panel["type"] != "row"]
