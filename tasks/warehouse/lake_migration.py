"""Moving a lake from ragpulse's manifest layout (before Iceberg) into Iceberg tables, once: ``ragpulse migrate-lake``.

The manifest layout kept, per date, numbered manifests under ``_<meta>/commits/dt=<date>/``; the newest one named the
date's live Parquet files of every table. Only those are read: files no newest manifest names (a crashed publisher's,
or replaced ones not yet swept) are not rows of the lake. Each date is imported into the Iceberg lake as one replace
per table, so a migration that stops half-way can simply run again, and a date's row counts are compared with the
source before the next date starts.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.exceptions import ConfigError, WarehouseError
from ragpulse.tasks.core.storage import filesystem, redact_url, redacted_line
from ragpulse.tasks.warehouse._schema import SCHEMA_VERSION, TABLES
from ragpulse.tasks.warehouse.iceberg import IcebergLake
from ragpulse.tasks.warehouse.protocol import TableNames

__all__ = ["LakeMigration", "migrate_lake", "read_manifest_lake"]

_log = logging.getLogger(__name__)
_GENERATION = re.compile(r"^(\d{20})\.json$")
_PARTITION = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})$")


@dataclass
class LakeMigration:
    """What a migration moved: rows per table, over how many dates."""

    dates: list[dt.date] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))


def read_manifest_lake(
    url: str, *, tables: TableNames | None = None, storage_options: dict[str, Any] | None = None
) -> Iterator[tuple[dt.date, dict[str, pa.Table]]]:
    """Every date of a manifest-layout lake at ``url``, oldest first, with the rows of each table its newest manifest
    names, in the current schema (columns added since the lake's version read as NULL). Read a date at a time, so
    memory holds one date; the layout is checked before the first."""
    names = tables or TableNames()
    fs, root = filesystem(url.partition("?")[0], storage_options)
    meta = f"{root}/_{names.meta}"
    fs.invalidate_cache()
    if not fs.exists(f"{meta}/schema.json"):
        raise ConfigError(f"no lake in the manifest layout at {redact_url(url)}: {meta}/schema.json does not exist")
    version = int(json.loads(fs.cat_file(f"{meta}/schema.json"))["version"])
    if version > SCHEMA_VERSION:
        raise WarehouseError(f"the lake at {redact_url(url)} is at schema version {version}, newer than this ragpulse")
    return _dates(fs, root, meta)


def _dates(fs: Any, root: str, meta: str) -> Iterator[tuple[dt.date, dict[str, pa.Table]]]:
    for entry in sorted(fs.ls(f"{meta}/commits", detail=False)):
        match = _PARTITION.match(posixpath.basename(entry.rstrip("/")))
        if match is None:
            continue
        generations = sorted(
            m[0] for name in fs.ls(entry, detail=False) if (m := _GENERATION.match(posixpath.basename(name)))
        )
        if not generations:
            continue
        manifest = json.loads(fs.cat_file(f"{entry}/{generations[-1]}"))
        files: dict[str, list[str]] = manifest["files"]
        yield (
            dt.date.fromisoformat(match[1]),
            {
                key: _read(fs, [f"{root}/{path}" for path in files.get(key, [])], spec.schema)
                for key, spec in TABLES.items()
            },
        )


def _read(fs: Any, paths: list[str], schema: pa.Schema) -> pa.Table:
    """The files' rows in ``schema``: a column a file lacks (written before its version) is NULL."""
    parts = []
    for path in paths:
        with fs.open(path, "rb") as handle:
            rows = pq.read_table(handle)
        parts.append(
            pa.table(
                [rows[f.name] if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type) for f in schema],
                schema=schema,
            )
        )
    return pa.concat_tables(parts) if parts else schema.empty_table()


def migrate_lake(
    source: str,
    target: str,
    *,
    tables: TableNames | None = None,
    storage_options: dict[str, Any] | None = None,
    progress: Callable[[dt.date, dict[str, int]], None] | None = None,
) -> LakeMigration:
    """Import every date of the manifest lake at ``source`` into the Iceberg lake at ``target`` (they may share a
    root: the Iceberg tables live under ``<root>/<namespace>/``). Idempotent: a date imported again is replaced.
    Each date is read back from Iceberg and its row counts compared with the source's; a difference stops the
    migration with WarehouseError."""
    names = tables or TableNames()
    lake = IcebergLake(target, tables=names, storage_options=storage_options, migrating=True)
    report = LakeMigration()
    for day, rows in _reading(read_manifest_lake(source, tables=names, storage_options=storage_options), source):
        lake.replace_partition(day, rows, action=f"importing dt={day}")
        counts = {key: table.num_rows for key, table in rows.items()}
        stored = {key: lake.read(key, start=day, end=day, columns=["partition_date"]).num_rows for key in rows}
        if stored != counts:
            raise WarehouseError(f"dt={day}: the Iceberg lake holds {stored} rows where the source has {counts}")
        report.dates.append(day)
        for key, n in counts.items():
            report.rows[key] += n
        if progress is not None:
            progress(day, counts)
        _log.info("dt=%s imported into %s: %s", day, lake.url, counts)
    return report


def _reading(
    dates: Iterator[tuple[dt.date, dict[str, pa.Table]]], source: str
) -> Iterator[tuple[dt.date, dict[str, pa.Table]]]:
    """``dates``, a storage or format failure while reading them a WarehouseError naming the source."""
    try:
        yield from dates
    except RagpulseError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise WarehouseError(f"reading the manifest lake at {redact_url(source)} failed: {redacted_line(exc)}") from exc
