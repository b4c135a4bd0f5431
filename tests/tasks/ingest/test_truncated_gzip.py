"""Issue 29, item 1: a ``.jsonl.gz`` cut short (an upload interrupted, a writer killed) keeps every complete line
before the cut, staged, and one quarantine entry saying after which line of the file it is corrupt; on local disk
and on S3, whole (``stage_records``) and as a planned slice (``stage_slice``). What the cut bytes hold is found
independently, by zlib's own streaming decoder, and what was staged is counted by DuckDB over the staged files."""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from ragpulse.tasks.core.types import StagedPartition
from ragpulse.tasks.ingest.slicing import combine_slices, plan_slices
from ragpulse.tasks.ingest.staging import select_source_files, stage_records, stage_slice
from tests.tasks.ingest.test_staging import DATE, trace


@dataclass(frozen=True)
class CutFile:
    """A gzipped day file cut at ``offset`` bytes and what its bytes before the cut hold."""

    data: bytes
    complete_lines: int
    """Complete lines (blank ones included) that the bytes before the cut decompress to."""
    trace_ids: list[str]
    """The trace ids of those lines, in file order."""


def cut_file(n_lines: int, offset: int) -> CutFile:
    """``n_lines`` traces (every 37th line blank, so line numbers are not record numbers), gzipped, cut at
    ``offset`` (negative: that many bytes before the end)."""
    lines = [b"" if i % 37 == 36 else json.dumps(trace(f"t{i}")).encode() for i in range(n_lines)]
    whole = gzip.compress(b"\n".join(lines) + b"\n", mtime=0)
    data = whole[:offset]
    assert len(data) < len(whole)
    readable = zlib.decompressobj(wbits=31).decompress(data)  # everything decodable before the cut, no error
    complete = readable.split(b"\n")[:-1]  # the last piece is a line the cut broke (or empty)
    ids = [json.loads(line)["trace_id"] for line in complete if line]
    return CutFile(data, len(complete), ids)


# (lines, cut offset): in the gzip header, in the first 64 KiB, in the middle of larger files, and only the
# 8-byte trailer missing (every line complete).
CUTS = {
    "header": (200, 6),
    "200-lines-half": (200, 3_000),
    "2000-lines-half": (2_000, 14_000),
    "20000-lines-half": (20_000, 140_000),
    "trailer-missing": (2_000, -8),
}


def staged_ids(staged: StagedPartition) -> list[str]:
    """The staged trace ids in line order, counted by DuckDB over the staged Parquet files."""
    if not staged.batches:
        return []
    paths = [ref.url for ref in staged.batches]
    with duckdb.connect() as db:
        rows = db.execute("SELECT trace_id FROM read_parquet(?) ORDER BY source_line", [paths]).fetchall()
    return [row[0] for row in rows]


def check(staged: StagedPartition, cut: CutFile) -> None:
    assert staged_ids(staged) == cut.trace_ids
    (entry,) = staged.quarantined
    assert entry.line == cut.complete_lines + 1
    assert entry.reason.startswith(f"file is corrupt after line {cut.complete_lines}: EOFError"), entry.reason
    counts = staged.counts
    assert counts is not None and (counts.staged, counts.records_quarantined) == (len(cut.trace_ids), 1)


def stage_both_ways(source: str, staged_root: Path, storage_options: dict[str, Any] | None) -> list[StagedPartition]:
    """The day staged whole and as planned slices (a gzip file is never cut: one slice, read from its start)."""
    files = select_source_files(source, DATE, storage_options)
    whole = stage_records(
        DATE, files, staged_url=str(staged_root / "whole"), batch_size=700, storage_options=storage_options,
        language="en",
    )  # fmt: skip
    slices = [
        stage_slice(
            DATE, pieces, staged_url=str(staged_root / "sliced"), batch_size=700, storage_options=storage_options,
            language="en",
        )
        for pieces in plan_slices(files, 1024, storage_options)
    ]  # fmt: skip
    return [whole, combine_slices(DATE, files, slices)]


@pytest.mark.parametrize(("n_lines", "offset"), CUTS.values(), ids=CUTS.keys())
def test_a_cut_gzip_file_on_disk_stages_every_complete_line(tmp_path: Path, n_lines: int, offset: int) -> None:
    cut = cut_file(n_lines, offset)
    folder = tmp_path / "traces" / f"dt={DATE}"
    folder.mkdir(parents=True)
    (folder / "cut.jsonl.gz").write_bytes(cut.data)
    for staged in stage_both_ways(str(tmp_path / "traces"), tmp_path / "staged", None):
        check(staged, cut)


@pytest.mark.parametrize("name", ["200-lines-half", "20000-lines-half", "trailer-missing"])
def test_a_cut_gzip_file_on_s3_stages_every_complete_line(s3: Any, tmp_path: Path, name: str) -> None:
    cut = cut_file(*CUTS[name])
    s3.fs.pipe(f"{s3.name}/traces/dt={DATE}/cut.jsonl.gz", cut.data)
    storage_options = s3.endpoint.storage_options
    for staged in stage_both_ways(f"{s3.url}/traces", tmp_path / "staged", storage_options):
        check(staged, cut)


def test_the_cli_publishes_the_complete_lines_of_a_cut_gzip_file_from_s3(
    prefect_api: str, s3: Any, tmp_path: Path
) -> None:
    """The user's path: ``ragpulse evaluate`` on an S3 day holding a cut file; counted in the published tables."""
    from ragpulse.cli import app
    from ragpulse.cli.startup import quiet_run_failures

    cut = cut_file(*CUTS["2000-lines-half"])
    s3.fs.pipe(f"{s3.name}/traces/dt={DATE}/cut.jsonl.gz", cut.data)
    warehouse = tmp_path / "w.duckdb"
    args = ["evaluate", "--date", str(DATE), "--source", f"{s3.url}/traces", "--warehouse", f"duckdb:///{warehouse}",
            "--work-dir", str(tmp_path / "work"), "--metrics", "document_mrr", "--language", "en"]  # fmt: skip
    try:
        result = CliRunner().invoke(app, args)
    finally:
        quiet_run_failures(False)
    assert result.exit_code == 0, result.output
    with duckdb.connect(str(warehouse), read_only=True) as db:
        scored = db.execute("SELECT trace_id FROM scores ORDER BY trace_id").fetchall()
        quarantine = db.execute("SELECT line, reason FROM quarantine").fetchall()
        n_staged = db.execute("SELECT n_staged FROM runs").fetchone()
    assert [row[0] for row in scored] == sorted(cut.trace_ids)
    assert n_staged == (len(cut.trace_ids),)
    ((line, reason),) = quarantine
    assert line == cut.complete_lines + 1 and f"file is corrupt after line {cut.complete_lines}: EOFError" in reason
