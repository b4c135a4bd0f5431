"""Staging a day in slices (file groups, byte ranges of plain JSONL, Parquet row groups) gives exactly the staging of
the whole day: the same rows in the same order, every quarantine entry at its file's real line, counts that add up;
and in a flow every slice is a cached task that a warm re-run of the day does not run again."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from prefect import flow

from ragpulse.tasks.core.storage import SourceFile, list_partition_files
from ragpulse.tasks.core.types import QuarantinedRecord, StagedPartition, StagingCounts
from ragpulse.tasks.core.workdir import result_storage
from ragpulse.tasks.ingest import staging
from ragpulse.tasks.ingest.batches import read_staged
from ragpulse.tasks.ingest.config import SourceConfig
from ragpulse.tasks.ingest.counts import CountMismatchError
from ragpulse.tasks.ingest.slicing import SlicePiece, StagedSlice, combine_slices, plan_slices, slice_label
from ragpulse.tasks.ingest.staging import stage_records, stage_slice
from ragpulse.tasks.ingest.tasks import stage_day

DATE = dt.date(2024, 3, 11)


def record(trace_id: str, *, pad: int = 0) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "timestamp": "2024-03-11T08:00:00Z",
        "question": f"question of {trace_id}?" + " x" * pad,
        "answer": f"answer of {trace_id}",
        "contexts": [{"id": f"{trace_id}-c0", "text": "a passage", "score": 0.5}],
        "relevant_context_ids": [f"{trace_id}-c0"],
    }


def hostile_jsonl(n: int) -> tuple[bytes, dict[int, str]]:
    """n lines of varied length with a BOM opening the file, CRLF endings, blank lines, a BOM opening a mid-file
    line, bad JSON, a record missing its question and no newline at the end; returns the bytes and the line
    number of each line that must be quarantined."""
    lines: list[bytes] = []
    bad: dict[int, str] = {}
    for number in range(1, n + 1):
        text = json.dumps(record(f"t{number}", pad=number % 17)).encode()
        if number % 11 == 0:
            text, bad[number] = b'{"trace_id": "broken', "<record>"
        elif number % 13 == 0:
            text, bad[number] = json.dumps({**record(f"t{number}"), "question": ""}).encode(), "question"
        elif number % 7 == 0:
            text = b""
        elif number == 40:
            text, bad[number] = b"\xef\xbb\xbf" + text, "<record>"  # not the file's start: invalid JSON
        ending = b"\r\n" if number % 5 == 0 else b"\n"
        lines.append(text + (b"" if number == n else ending))
    return b"\xef\xbb\xbf" + b"".join(lines), bad


def files_of(directory: Path) -> list[SourceFile]:
    return list_partition_files(str(directory.parent), DATE)


def staged_rows(staged: StagedPartition) -> list[dict[str, Any]]:
    return [row for ref in staged.batches for row in read_staged(ref).to_pylist()]


def locations(quarantined: list[QuarantinedRecord]) -> list[tuple[str, int, str, str]]:
    return [(q.source_file, q.line, q.field, q.reason) for q in quarantined]


def stage_sliced(files: list[SourceFile], staged_url: Path, slice_bytes: int, batch_size: int) -> StagedPartition:
    """The flow's staging without Prefect: plan, every slice on its own, combine."""
    parts = [
        stage_slice(DATE, pieces, staged_url=str(staged_url), batch_size=batch_size)
        for pieces in plan_slices(files, slice_bytes)
    ]
    return combine_slices(DATE, files, parts)


@pytest.fixture
def day(tmp_path: Path) -> Path:
    """A plain JSONL file of 120 hostile lines, a small one, a gzipped one and a Parquet file of 8 row groups."""
    directory = tmp_path / "traces" / f"dt={DATE.isoformat()}"
    directory.mkdir(parents=True)
    (directory / "a.jsonl").write_bytes(hostile_jsonl(120)[0])
    (directory / "b.jsonl").write_bytes(json.dumps(record("b1")).encode() + b"\n")
    (directory / "c.jsonl.gz").write_bytes(gzip.compress(b"".join(json.dumps(record(f"c{i}")).encode() + b"\n"
                                                                   for i in range(30))))  # fmt: skip
    rows = [record(f"p{i}") for i in range(40)]
    rows[29]["question"] = None  # row 30: the 6th row group of 5 rows
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, directory / "d.parquet", row_group_size=5)
    return directory


@pytest.mark.parametrize(
    "slice_bytes",
    [pytest.param(1, marks=pytest.mark.slow), pytest.param(7, marks=pytest.mark.slow), 64, 333, 1000, 4096, 10**9],
)
def test_slices_stage_the_same_rows_and_quarantine_as_the_whole_day(
    day: Path, tmp_path: Path, slice_bytes: int
) -> None:
    files = files_of(day)
    whole = stage_records(DATE, files, staged_url=str(tmp_path / "whole"), batch_size=9)
    sliced = stage_sliced(files, tmp_path / "sliced", slice_bytes, batch_size=9)

    assert staged_rows(sliced) == staged_rows(whole)
    assert locations(sliced.quarantined) == locations(whole.quarantined)
    assert [q.raw for q in sliced.quarantined] == [q.raw for q in whole.quarantined]
    assert sliced.counts == whole.counts
    assert sliced.files == files
    if slice_bytes == 10**9:  # one slice: the very batches of today's staging
        assert [(b.content_hash, b.n_rows) for b in sliced.batches] == [
            (b.content_hash, b.n_rows) for b in whole.batches
        ]


def test_quarantine_and_staged_lines_are_the_files_lines_across_byte_range_cuts(day: Path, tmp_path: Path) -> None:
    content, bad = hostile_jsonl(120)
    files = [f for f in files_of(day) if f.name == "a.jsonl"]
    plan = plan_slices(files, 200)
    assert len(plan) > 20 and all(len(pieces) == 1 and pieces[0].kind == "bytes" for pieces in plan)

    sliced = stage_sliced(files, tmp_path / "sliced", 200, batch_size=4)

    assert {q.line: q.field for q in sliced.quarantined} == bad
    lines = content.split(b"\n")
    for row in staged_rows(sliced):  # each staged row is the very line it says it is
        assert json.loads(lines[row["source_line"] - 1].lstrip(b"\xef\xbb\xbf"))["trace_id"] == row["trace_id"]
    assert [row["source_line"] for row in staged_rows(sliced)] == sorted(
        n for n in range(1, 121) if n not in bad and n % 7
    )


@pytest.mark.parametrize(
    ("cut", "first_slice"),
    [
        ("line 1's newline", ["s1"]),
        ("inside line 2", ["s1", "s2"]),
        ("start of line 3", ["s1", "s2"]),
        ("inside line 3", ["s1", "s2", "s3"]),
    ],
)
def test_a_record_straddling_a_cut_belongs_to_the_slice_where_its_line_starts(
    tmp_path: Path, cut: str, first_slice: list[str]
) -> None:
    directory = tmp_path / "traces" / f"dt={DATE.isoformat()}"
    directory.mkdir(parents=True)
    first, second, third = (json.dumps(record(name)).encode() + b"\n" for name in ("s1", "s2", "s3"))
    (directory / "s.jsonl").write_bytes(first + second + third)
    (source,) = files_of(directory)
    at = {
        "line 1's newline": len(first) - 1,
        "inside line 2": len(first) + 5,
        "start of line 3": len(first) + len(second),
        "inside line 3": len(first) + len(second) + 1,
    }[cut]
    pieces = [SlicePiece(source, "bytes", 0, at, at), SlicePiece(source, "bytes", at, source.size, source.size - at)]

    parts = [stage_slice(DATE, (piece,), staged_url=str(tmp_path / "s"), batch_size=10) for piece in pieces]
    staged = combine_slices(DATE, [source], parts)

    assert [row["trace_id"] for row in staged_rows(parts[0].staged)] == first_slice
    assert [p.lines for p in parts] == [len(first_slice), 3 - len(first_slice)]
    assert [(row["trace_id"], row["source_line"]) for row in staged_rows(staged)] == [("s1", 1), ("s2", 2), ("s3", 3)]


def test_parquet_is_cut_at_row_groups_and_keeps_its_row_numbers(day: Path, tmp_path: Path) -> None:
    files = [f for f in files_of(day) if f.name == "d.parquet"]
    metadata = pq.ParquetFile(files[0].url).metadata
    sizes = [metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)]  # uncompressed
    slice_bytes = 2 * max(sizes)
    plan = plan_slices(files, slice_bytes)
    runs = [(p.kind, p.start, p.stop) for (p,) in plan]
    assert 2 <= len(runs) <= 4 and all(kind == "row_groups" and stop - start >= 2 for kind, start, stop in runs)
    assert [start for _, start, _ in runs[1:]] == [stop for _, _, stop in runs[:-1]] and runs[-1][2] == 8
    assert all(p.n_bytes == sum(sizes[p.start : p.stop]) <= slice_bytes for (p,) in plan)

    sliced = stage_sliced(files, tmp_path / "sliced", slice_bytes, batch_size=4)

    assert [(q.line, q.trace_id, q.field) for q in sliced.quarantined] == [(30, "p29", "question")]
    rows = staged_rows(sliced)
    assert [row["source_line"] for row in rows] == [n for n in range(1, 41) if n != 30]
    assert [row["trace_id"] for row in rows] == [f"p{n - 1}" for n in range(1, 41) if n != 30]
    per_slice = [5 * (stop - start) - (start < 6 <= stop) for _, start, stop in runs]
    assert [ref.n_rows for ref in sliced.batches] == [  # batches end where slices end
        size for n in per_slice for size in [4] * (n // 4) + [n % 4] * (n % 4 > 0)
    ]


def test_small_files_share_a_slice_and_gzip_is_never_cut(day: Path) -> None:
    files = files_of(day)
    sizes = {f.name: f.size for f in files}
    plan = plan_slices(files, sizes["c.jsonl.gz"] - 1)
    names = [[(p.file.name, p.kind) for p in pieces] for pieces in plan]
    assert [("c.jsonl.gz", "file")] in names
    assert sum(1 for pieces in names for name, _ in pieces if name == "c.jsonl.gz") == 1
    assert plan_slices(files, 10**9) == [tuple(p for pieces in plan_slices(files, 10**9) for p in pieces)]
    with pytest.raises(ValueError, match="at least 1"):
        plan_slices(files, 0)


def test_a_batch_of_a_later_slice_reads_its_lines_shifted_and_hashes_apart(day: Path, tmp_path: Path) -> None:
    """Two slices holding the same bytes are other lines: their batches differ in hash (the scoring cache key)."""
    directory = tmp_path / "same" / f"dt={DATE.isoformat()}"
    directory.mkdir(parents=True)
    line = json.dumps(record("same")).encode() + b"\n"
    (directory / "r.jsonl").write_bytes(line * 4)
    files = files_of(directory)
    staged = stage_sliced(files, tmp_path / "s", 2 * len(line), batch_size=10)

    first, second = staged.batches
    assert first.url == second.url  # one content-addressed file: the slices' rows are the same bytes
    assert (first.line_offset, second.line_offset) == (0, 2)
    assert first.content_hash != second.content_hash
    assert read_staged(second).column("source_line").to_pylist() == [3, 4]
    assert read_staged(second, columns=["trace_id"]).column_names == ["trace_id"]
    assert pq.read_table(second.url).column("source_line").to_pylist() == [1, 2]


def test_the_counts_of_the_day_are_checked_when_slices_are_combined(day: Path, tmp_path: Path) -> None:
    files = files_of(day)
    parts = [
        stage_slice(DATE, pieces, staged_url=str(tmp_path / "s"), batch_size=9) for pieces in plan_slices(files, 500)
    ]
    broken = StagedSlice(
        StagedPartition(DATE, [], [], [], StagingCounts(records_read=1, records_quarantined=1)), None, 0
    )
    with pytest.raises(CountMismatchError, match="quarantine entries = records"):
        combine_slices(DATE, files, [*parts, broken])


@pytest.mark.usefixtures("prefect_api")
def test_a_warm_rerun_hits_the_cache_of_every_slice_and_a_gone_batch_restages_its_slice_only(
    day: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    files = files_of(day)
    plan = plan_slices(files, 600)
    staged_slices: list[str] = []  # the slices whose task body ran, i.e. that the cache did not answer

    def counted(date: dt.date, pieces: Any, **options: Any) -> StagedSlice:
        staged_slices.append(slice_label(pieces))
        return stage_slice(date, pieces, **options)

    monkeypatch.setattr(staging, "stage_slice", counted)

    @flow
    def staging_flow() -> StagedPartition:
        source = SourceConfig(url=str(day.parent), slice_mb=600 / 2**20)
        return stage_day(
            DATE, files, source, staged_url=str(work / "staged"), batch_size=9, result_storage=result_storage(str(work))
        )

    cold = staging_flow()
    assert len(plan) > 5 and sorted(staged_slices) == sorted(slice_label(pieces) for pieces in plan)
    staged_slices.clear()
    assert staging_flow() == cold
    assert staged_slices == []

    gone = cold.batches[-1]
    Path(gone.url).unlink()
    assert staging_flow() == cold
    assert staged_slices == [slice_label(plan[-1])]
    assert Path(gone.url).exists()
    shutil.rmtree(work / "staged")
    assert staged_rows(staging_flow()) == staged_rows(
        stage_records(DATE, files, staged_url=str(tmp_path / "whole"), batch_size=9)
    )
