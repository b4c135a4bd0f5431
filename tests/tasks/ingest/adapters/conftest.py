"""Fixture exports of each source (tests/fixtures/adapters) staged through the real staging code."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragpulse.tasks.core.types import StagedPartition
from ragpulse.tasks.ingest.batches import read_staged
from ragpulse.tasks.ingest.staging import select_source_files, stage_records

FIXTURES = Path(__file__).parents[3] / "fixtures" / "adapters"
DAY = dt.date(2026, 3, 2)
MIDDAY = dt.datetime(2026, 3, 2, 13, tzinfo=dt.UTC).timestamp()

Staged = tuple[StagedPartition, dict[str, dict[str, Any]]]


def stage(source: Path | str, trace_format: str, tmp_path: Path, **options: Any) -> Staged:
    """Select and stage the day; returns the staged partition and its rows by trace id (metadata decoded)."""
    partitioning = options.pop("partitioning", "dt")
    day = options.pop("day", DAY)
    files = select_source_files(str(source), day, trace_format=trace_format, partitioning=partitioning,
                                late_arrival_hours=options.pop("late_arrival_hours", 6.0))  # fmt: skip
    staged = stage_records(
        day, files, staged_url=str(tmp_path / "staged"), batch_size=2, trace_format=trace_format,
        format_options=options or None, partitioning=partitioning,
    )  # fmt: skip
    rows = {}
    for batch in staged.batches:
        for row in read_staged(batch).to_pylist():
            row["metadata"] = json.loads(row["metadata"])
            rows[row["trace_id"]] = row
    return staged, rows


def quarantined(staged: StagedPartition) -> set[tuple[str | None, str]]:
    return {(q.trace_id, q.field) for q in staged.quarantined}


def copy_with_mtime(source: Path, target: Path, mtime: float = MIDDAY) -> Path:
    """A copy of a fixture folder whose files were all modified at ``mtime`` (event-time partitioning reads it)."""
    for path in source.rglob("*"):
        if path.is_file():
            dest = target / path.relative_to(source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(path.read_bytes())
            os.utime(dest, (mtime, mtime))
    return target


def langsmith_parquet(target: Path, mtime: float = MIDDAY) -> Path:
    """The LangSmith fixture runs as a bulk export writes them: Parquet, inputs/outputs/extra as JSON text."""
    target.mkdir(parents=True, exist_ok=True)
    for part in sorted((FIXTURES / "langsmith").glob("*.jsonl")):
        rows = [json.loads(line) for line in part.read_text().splitlines()]
        path = target / f"{part.stem}.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path)
        os.utime(path, (mtime, mtime))
    return target


@pytest.fixture
def stager(tmp_path: Path) -> Callable[..., Staged]:
    return lambda source, trace_format, **options: stage(source, trace_format, tmp_path, **options)
