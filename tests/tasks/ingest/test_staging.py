"""Tests of staging one partition from real files: batching, quarantine, content addressing and bounded memory."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragpulse.tasks.core.storage import SourceFile, list_partition_files
from ragpulse.tasks.core.types import BatchRef, StagedPartition
from ragpulse.tasks.ingest.staging import stage_records

DATE = dt.date(2024, 3, 11)
CONTEXT = pa.struct([("id", pa.string()), ("text", pa.string()), ("score", pa.float64())])


def trace(trace_id: str, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "trace_id": trace_id,
        "timestamp": "2024-03-11T08:00:00Z",
        "question": f"question of {trace_id}?",
        "answer": f"answer of {trace_id}",
        "contexts": [{"id": f"{trace_id}-c0", "text": "first passage", "score": 0.5}],
        "reference": None,
        "reference_answers": None,
        "relevant_context_ids": [f"{trace_id}-c0"],
        "metadata": {"user": "u-1"},
    }
    base.update(changes)
    return base


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def write_parquet(path: Path, ids: list[str], *, graded_labels: bool) -> None:
    """Parquet as tracing exporters write it: nested contexts, labels as map or list, metadata as a struct."""
    labels_type = pa.map_(pa.string(), pa.float64()) if graded_labels else pa.list_(pa.string())
    labels = [[(f"{i}-c0", 2.0), (f"{i}-c1", 0.5)] for i in ids] if graded_labels else [[f"{i}-c1"] for i in ids]
    table = pa.table(
        {
            "trace_id": pa.array(ids, pa.string()),
            "timestamp": pa.array([dt.datetime(2024, 3, 11, 9, 0)] * len(ids), pa.timestamp("ms", tz="UTC")),
            "question": pa.array([f"question of {i}?" for i in ids], pa.string()),
            "answer": pa.array([None] * len(ids), pa.string()),
            "contexts": pa.array(
                [
                    [{"id": f"{i}-c0", "text": "p0", "score": 1.5}, {"id": f"{i}-c1", "text": "p1", "score": None}]
                    for i in ids
                ],
                pa.list_(CONTEXT),
            ),
            "relevant_context_ids": pa.array(labels, labels_type),
            "metadata": pa.array(
                [{"user": "u-2", "shard": 4}] * len(ids), pa.struct([("user", pa.string()), ("shard", pa.int64())])
            ),
        }
    )
    pq.write_table(table, path)


@pytest.fixture
def partition(tmp_path: Path) -> Path:
    """dt=2024-03-11 with 5 + 4 + 3 + 2 valid traces in a .jsonl, a .jsonl.gz and two .parquet files."""
    directory = tmp_path / "traces" / f"dt={DATE.isoformat()}"
    directory.mkdir(parents=True)
    (directory / "a.jsonl").write_bytes(jsonl([trace(f"a{n}") for n in range(1, 6)]))
    (directory / "b.jsonl.gz").write_bytes(gzip.compress(jsonl([trace(f"b{n}") for n in range(1, 5)])))
    write_parquet(directory / "c.parquet", ["c1", "c2", "c3"], graded_labels=True)
    write_parquet(directory / "d.parquet", ["d1", "d2"], graded_labels=False)
    return directory


def files_of(directory: Path) -> list[SourceFile]:
    return list_partition_files(str(directory.parent), DATE)


def stage(directory: Path, staged: Path, *, batch_size: int) -> StagedPartition:
    return stage_records(DATE, files_of(directory), staged_url=str(staged), batch_size=batch_size)


def read_batch(ref: BatchRef) -> list[dict[str, Any]]:
    return pq.read_table(ref.url).to_pylist()


def test_batches_split_exactly_by_batch_size_across_files_in_file_order(partition: Path, tmp_path: Path) -> None:
    staged = stage(partition, tmp_path / "staged", batch_size=4)

    assert [ref.n_rows for ref in staged.batches] == [4, 4, 4, 2]
    assert staged.n_valid == 14
    assert staged.quarantined == []
    rows = [row for ref in staged.batches for row in read_batch(ref)]
    assert [row["trace_id"] for row in rows] == [
        *(f"a{n}" for n in range(1, 6)),
        *(f"b{n}" for n in range(1, 5)),
        "c1",
        "c2",
        "c3",
        "d1",
        "d2",
    ]
    assert [(Path(row["source_file"]).name, row["source_line"]) for row in rows[3:7]] == [
        ("a.jsonl", 4),
        ("a.jsonl", 5),
        ("b.jsonl.gz", 1),
        ("b.jsonl.gz", 2),
    ]
    assert [row["source_line"] for row in rows[9:]] == [1, 2, 3, 1, 2]
    assert {ref.n_rows for ref in staged.batches} == {len(read_batch(ref)) for ref in staged.batches}


@pytest.mark.parametrize(("batch_size", "sizes"), [(1, [1] * 14), (5, [5, 5, 4]), (14, [14]), (100, [14])])
def test_batch_sizes(partition: Path, tmp_path: Path, batch_size: int, sizes: list[int]) -> None:
    staged = stage(partition, tmp_path / "staged", batch_size=batch_size)

    assert [ref.n_rows for ref in staged.batches] == sizes


def test_parquet_rows_are_staged_like_json_records(partition: Path, tmp_path: Path) -> None:
    staged = stage(partition, tmp_path / "staged", batch_size=100)
    rows = {row["trace_id"]: row for row in read_batch(staged.batches[0])}

    graded, listed, from_json = rows["c2"], rows["d1"], rows["a1"]
    assert graded["timestamp"] == dt.datetime(2024, 3, 11, 9, 0, tzinfo=dt.UTC)
    assert graded["contexts"] == [
        {"id": "c2-c0", "text": "p0", "score": 1.5},
        {"id": "c2-c1", "text": "p1", "score": None},
    ]
    assert graded["relevant_context_ids"] == [{"key": "c2-c0", "gain": 2.0}, {"key": "c2-c1", "gain": 0.5}]
    assert listed["relevant_context_ids"] == [{"key": "d1-c1", "gain": 1.0}]
    assert json.loads(graded["metadata"]) == {"shard": 4, "user": "u-2"}
    # Columns absent from the Parquet file are null, as missing JSON fields are.
    assert graded["reference"] is None and graded["relevant_contexts"] is None
    assert from_json["timestamp"] == dt.datetime(2024, 3, 11, 8, 0, tzinfo=dt.UTC)
    assert json.loads(from_json["metadata"]) == {"user": "u-1"}


def test_bad_records_are_quarantined_with_file_line_field_and_reason(tmp_path: Path) -> None:
    directory = tmp_path / "traces" / f"dt={DATE.isoformat()}"
    directory.mkdir(parents=True)
    lines = [
        json.dumps(trace("ok1")).encode(),  # 1
        b"",  # 2: blank, skipped but counted
        b'{"trace_id": "broken", "question": ',  # 3
        b'{"trace_id": "latin1", "question": "caf\xe9"}',  # 4
        json.dumps({k: v for k, v in trace("q5").items() if k != "question"}).encode(),  # 5
        json.dumps(trace("q6", contexts="ctx-1")).encode(),  # 6
        b"   ",  # 7: whitespace only
        json.dumps(trace("q8", timestamp="11/03/2024 08:00")).encode(),  # 8
        b'["q9", "not an object"]',  # 9
        json.dumps(trace("ok2")).encode(),  # 10
    ]
    (directory / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (directory / "b.jsonl.gz").write_bytes(gzip.compress(jsonl([trace("ok3"), trace("g2", question=7)])))
    url_a, url_b = (str(directory / name) for name in ("a.jsonl", "b.jsonl.gz"))

    staged = stage(directory, tmp_path / "staged", batch_size=10)

    assert [(q.source_file, q.line, q.trace_id, q.field) for q in staged.quarantined] == [
        (url_a, 3, None, "<record>"),
        (url_a, 4, None, "<record>"),
        (url_a, 5, "q5", "question"),
        (url_a, 6, "q6", "contexts"),
        (url_a, 8, "q8", "timestamp"),
        (url_a, 9, None, "<record>"),
        (url_b, 2, "g2", "question"),
    ]
    reasons = [q.reason for q in staged.quarantined]
    assert reasons[0].startswith("invalid JSON: Expecting value at column")
    assert reasons[1].startswith("line is not UTF-8: invalid continuation byte at byte ")
    assert reasons[2] == "required field missing"
    assert reasons[3] == "expected a list of contexts, got str 'ctx-1'"
    assert reasons[4] == "expected an ISO-8601 timestamp, got '11/03/2024 08:00'"
    assert reasons[5] == "expected a JSON object, got list"
    assert reasons[6] == "expected a non-empty string, got int 7"
    assert staged.quarantined[0].raw == '{"trace_id": "broken", "question": '
    assert "caf\\xe9" in staged.quarantined[1].raw
    assert json.loads(staged.quarantined[2].raw)["trace_id"] == "q5"
    # The run goes on: every good record around the bad ones is staged.
    assert [row["trace_id"] for row in read_batch(staged.batches[0])] == ["ok1", "ok2", "ok3"]
    assert [row["source_line"] for row in read_batch(staged.batches[0])] == [1, 10, 1]


def test_bad_parquet_rows_are_quarantined_by_row_number(tmp_path: Path) -> None:
    directory = tmp_path / "traces" / f"dt={DATE.isoformat()}"
    directory.mkdir(parents=True)
    table = pa.table(
        {
            "trace_id": ["p1", "p2", None, "p4"],
            "timestamp": ["2024-03-11T08:00:00Z", "2024-03-11T08:00:00Z", "2024-03-11T08:00:00Z", "soon"],
            "question": ["q?", None, "q?", "q?"],
        }
    )
    pq.write_table(table, directory / "p.parquet", row_group_size=2)  # rows numbered across row groups

    staged = stage(directory, tmp_path / "staged", batch_size=10)

    url = str(directory / "p.parquet")
    assert [(q.source_file, q.line, q.trace_id, q.field) for q in staged.quarantined] == [
        (url, 2, "p2", "question"),
        (url, 3, None, "trace_id"),
        (url, 4, "p4", "timestamp"),
    ]
    assert json.loads(staged.quarantined[0].raw)["trace_id"] == "p2"
    assert staged.n_valid == 1


def test_quarantined_raw_excerpt_is_truncated(tmp_path: Path) -> None:
    directory = tmp_path / "traces" / f"dt={DATE.isoformat()}"
    directory.mkdir(parents=True)
    (directory / "a.jsonl").write_bytes(b'{"trace_id": "big", "blob": "' + b"x" * 10_000 + b"\n")

    staged = stage(directory, tmp_path / "staged", batch_size=10)

    assert staged.quarantined[0].line == 1
    assert len(staged.quarantined[0].raw) == 2000
    assert staged.batches == []


def test_staged_files_are_named_by_sha256_of_their_content(partition: Path, tmp_path: Path) -> None:
    staged_dir = tmp_path / "staged"

    staged = stage(partition, staged_dir, batch_size=4)

    assert len({ref.content_hash for ref in staged.batches}) == 4
    for ref in staged.batches:
        payload = Path(ref.url).read_bytes()
        assert ref.content_hash == hashlib.sha256(payload).hexdigest()
        assert ref.url == f"{staged_dir}/{ref.content_hash}.parquet"
        assert pq.read_schema(ref.url).names[:3] == ["trace_id", "timestamp", "question"]
    assert sorted(p.name for p in staged_dir.iterdir()) == sorted(
        f"{ref.content_hash}.parquet" for ref in staged.batches
    )


def test_restaging_identical_input_reuses_identical_files(partition: Path, tmp_path: Path) -> None:
    staged_dir = tmp_path / "staged"
    first = stage(partition, staged_dir, batch_size=4)
    before = {p.name: p.stat().st_mtime_ns for p in staged_dir.iterdir()}

    second = stage(partition, staged_dir, batch_size=4)

    assert second.batches == first.batches
    assert {p.name: p.stat().st_mtime_ns for p in staged_dir.iterdir()} == before  # nothing new, nothing rewritten
    regrouped = stage(partition, staged_dir, batch_size=5)
    assert {ref.content_hash for ref in regrouped.batches}.isdisjoint(ref.content_hash for ref in first.batches)
    assert len(list(staged_dir.iterdir())) == len(first.batches) + len(regrouped.batches)


def test_changed_record_changes_only_its_batch_hash(partition: Path, tmp_path: Path) -> None:
    first = stage(partition, tmp_path / "staged", batch_size=4)
    (partition / "a.jsonl").write_bytes(jsonl([trace("a1", answer="edited"), *(trace(f"a{n}") for n in range(2, 6))]))

    second = stage(partition, tmp_path / "staged", batch_size=4)

    assert second.batches[0].content_hash != first.batches[0].content_hash
    assert second.batches[1:] == first.batches[1:]


def test_no_partial_file_remains_after_staging(partition: Path, tmp_path: Path) -> None:
    reference = stage(partition, tmp_path / "reference", batch_size=4)
    staged_dir = tmp_path / "staged"
    staged_dir.mkdir()
    # A writer that crashed between write and rename left half a batch under the temporary name.
    first = reference.batches[0].content_hash
    leftover = staged_dir / f"{first}.parquet.{first[:8]}.partial"
    leftover.write_bytes(b"PAR1 half a batch")

    staged = stage(partition, staged_dir, batch_size=4)

    assert staged.batches == [
        BatchRef(f"{staged_dir}/{ref.content_hash}.parquet", ref.content_hash, ref.n_rows) for ref in reference.batches
    ]
    assert sorted(p.name for p in staged_dir.iterdir()) == sorted(
        f"{ref.content_hash}.parquet" for ref in staged.batches
    )
    assert hashlib.sha256((staged_dir / f"{first}.parquet").read_bytes()).hexdigest() == first
    assert not list(tmp_path.rglob("*.partial"))


# Bounded memory: 12k records of 10 contexts x ~220 chars, about 33 MB of JSONL. Fewer, larger records than
# the 30k x 100 chars first tried keep the file size and make the test ~2.5x faster under tracemalloc (~6 s, not ~16 s).
N_RECORDS = 12_000
N_CONTEXTS = 10


@pytest.fixture(scope="module")
def big_partition(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("big") / "traces" / f"dt={DATE.isoformat()}"
    directory.mkdir(parents=True)
    passage = "lorem ipsum dolor sit amet " * 8  # 216 characters
    with (directory / "big.jsonl").open("w") as handle:
        for n in range(N_RECORDS):
            contexts = [{"id": f"d{n}-{k}", "text": f"{k} {passage}", "score": k / 10} for k in range(N_CONTEXTS)]
            handle.write(json.dumps(trace(f"t{n}", contexts=contexts, relevant_context_ids=[f"d{n}-0"])) + "\n")
    return directory


@pytest.mark.slow
def test_staging_memory_is_bounded_by_batch_not_file(big_partition: Path, tmp_path: Path) -> None:
    file_size = (big_partition / "big.jsonl").stat().st_size
    assert file_size > 30_000_000
    files = files_of(big_partition)
    # Warm up on a one-record file: the first Parquet write imports pandas lazily (~25 MB of module objects),
    # a one-time cost that says nothing about how memory grows with the partition.
    small = tmp_path / "small" / f"dt={DATE.isoformat()}"
    small.mkdir(parents=True)
    (small / "one.jsonl").write_bytes(jsonl([trace("warm-up")]))
    stage(small, tmp_path / "warm-up", batch_size=500)

    tracemalloc.start()
    try:
        staged = stage_records(DATE, files, staged_url=str(tmp_path / "staged"), batch_size=500)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert staged.n_valid == N_RECORDS
    assert [ref.n_rows for ref in staged.batches] == [500] * (N_RECORDS // 500)
    # tracemalloc sees Python objects only (Arrow buffers live in Arrow's own pool), which is where an unbounded
    # reader would show: parsed records kept alive, or the file read whole. Measured on this file (34.5 MB):
    # peak 3.4 MB with batch_size=500 (one batch of row dicts), 18.6 MB at 3,000 and 74 MB when one batch holds
    # all 12k records. The bound, 1/4 of the file (8.6 MB), leaves 2.5x margin over the measured peak and fails
    # for any reader that keeps the partition (or the file's bytes) in memory.
    assert peak < file_size / 4, f"peak {peak / 1e6:.1f} MB for a {file_size / 1e6:.1f} MB file"


def test_corrupt_files_keep_what_was_read_and_quarantine_the_rest(tmp_path: Path) -> None:
    directory = tmp_path / "traces" / f"dt={DATE.isoformat()}"
    directory.mkdir(parents=True)
    whole = gzip.compress(jsonl([trace(f"t{n}") for n in range(1, 2001)]))
    (directory / "a-truncated.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (directory / "b-not-gzip.jsonl.gz").write_bytes(jsonl([trace("plain")]))
    (directory / "c-garbage.parquet").write_bytes(b"this is not parquet")
    (directory / "d-good.jsonl").write_bytes(jsonl([trace("good")]))

    staged = stage(directory, tmp_path / "staged", batch_size=10_000)

    by_file = {Path(q.source_file).name: q for q in staged.quarantined}
    assert sorted(by_file) == ["a-truncated.jsonl.gz", "b-not-gzip.jsonl.gz", "c-garbage.parquet"]
    truncated = by_file["a-truncated.jsonl.gz"]
    read_before = [row["trace_id"] for ref in staged.batches for row in read_batch(ref)]
    assert truncated.reason.startswith(f"file is corrupt after line {truncated.line - 1}: EOFError")
    assert 0 < truncated.line - 1 <= 2000 and len(read_before) >= truncated.line - 2
    assert "BadGzipFile" in by_file["b-not-gzip.jsonl.gz"].reason
    assert by_file["c-garbage.parquet"].reason.startswith("file is corrupt after line 0: ArrowInvalid")
    assert read_before[-1] == "good"


def test_a_trace_language_is_given_else_the_runs_default_else_identified(tmp_path: Path) -> None:
    day = tmp_path / "in" / f"dt={DATE}"
    day.mkdir(parents=True)
    traces = [
        trace("given", question="Wo ist das?", language="de-AT"),
        trace("ja", question="日本の首都はどこですか？", answer="東京です。"),
        trace("zh", question="中国的首都是哪里？", answer="北京。"),
        trace("by-answer", question="2026?", answer="今年です。"),
    ]
    (day / "a.jsonl").write_bytes(jsonl(traces))
    identified = stage_records(DATE, files_of(day), staged_url=str(tmp_path / "s1"), batch_size=10)
    languages = {row["trace_id"]: row["language"] for ref in identified.batches for row in read_batch(ref)}
    assert languages == {"given": "de-AT", "ja": "ja", "zh": "zh", "by-answer": "ja"}
    defaulted = stage_records(DATE, files_of(day), staged_url=str(tmp_path / "s2"), batch_size=10, language="ko")
    languages = {row["trace_id"]: row["language"] for ref in defaulted.batches for row in read_batch(ref)}
    assert languages == {"given": "de-AT", "ja": "ko", "zh": "ko", "by-answer": "ko"}
