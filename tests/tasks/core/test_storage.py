"""Tests of the object-storage layer against a real S3 HTTP server (moto) reached through s3fs, and local files."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import socket
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragpulse.tasks.core.exceptions import ConfigError, PartitionNotFoundError, StorageError
from ragpulse.tasks.core.retry import only_transient
from ragpulse.tasks.core.storage import SourceFile, filesystem, list_partition_files, partition_dates, redact_url
from ragpulse.tasks.ingest.staging import stage_records

DATE = dt.date(2024, 3, 11)
PARTITION = f"root/dt={DATE.isoformat()}"


def trace(trace_id: str, **changes: Any) -> dict[str, Any]:
    base = {"trace_id": trace_id, "timestamp": "2024-03-11T08:00:00Z", "question": f"{trace_id}?", "contexts": []}
    base.update(changes)
    return base


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def parquet_bytes(records: list[dict[str, Any]]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(records), buffer)
    return buffer.getvalue()


def closed_port() -> int:
    """A loopback port nobody listens on: bound, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unreachable_options() -> dict[str, Any]:
    # One attempt and a short connect timeout: the failure must surface in about a second, not after retries.
    return {
        "endpoint_url": f"http://127.0.0.1:{closed_port()}",
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
    }


def test_list_partition_files_returns_sorted_trace_files_with_size_and_etag(s3: Any) -> None:
    objects = {
        "b.jsonl": jsonl([trace("b1")]),
        "a.jsonl.gz": gzip.compress(jsonl([trace("a1"), trace("a2")])),
        "c.parquet": parquet_bytes([trace("c1")]),
        "_SUCCESS": b"",
        ".c.parquet.crc": b"crc",
        "b.jsonl.crc": b"crc",
        "README.txt": b"not traces",
        "nested/d.jsonl": jsonl([trace("d1")]),  # a sub-directory is not part of the partition's files
    }
    for name, payload in objects.items():
        s3.fs.pipe(f"{s3.name}/{PARTITION}/{name}", payload)

    files = list_partition_files(f"{s3.url}/root", DATE)

    names = ["a.jsonl.gz", "b.jsonl", "c.parquet"]
    assert [f.url for f in files] == [f"{s3.url}/{PARTITION}/{name}" for name in names]
    assert [f.name for f in files] == names
    assert [f.size for f in files] == [len(objects[name]) for name in names]
    etags = [s3.fs.info(f"{s3.name}/{PARTITION}/{name}")["ETag"].strip('"') for name in names]
    assert [f.version for f in files] == etags
    assert etags[1] == hashlib.md5(objects["b.jsonl"]).hexdigest()  # S3's ETag of a single-part upload


def test_trailing_slash_and_explicit_endpoint_give_the_same_listing(s3: Any) -> None:
    s3.fs.pipe(f"{s3.name}/{PARTITION}/a.jsonl", jsonl([trace("a1")]))

    plain = list_partition_files(f"{s3.url}/root", DATE)
    explicit = list_partition_files(f"{s3.url}/root/", DATE, s3.endpoint.storage_options)

    assert plain == explicit
    assert len(plain) == 1


def test_changed_object_gets_a_new_version(s3: Any) -> None:
    path = f"{s3.name}/{PARTITION}/a.jsonl"
    s3.fs.pipe(path, jsonl([trace("a1")]))
    before = list_partition_files(f"{s3.url}/root", DATE)

    s3.fs.pipe(path, jsonl([trace("a1", question="edited?")]))
    after = list_partition_files(f"{s3.url}/root", DATE)

    assert before[0].url == after[0].url
    assert before[0].version != after[0].version


def test_partition_dates_lists_dt_directories_sorted(s3: Any) -> None:
    for day in ("2024-03-15", "2024-03-09", "2024-03-11"):
        s3.fs.pipe(f"{s3.name}/root/dt={day}/a.jsonl", jsonl([trace("t")]))
    s3.fs.pipe(f"{s3.name}/root/dt=yesterday/a.jsonl", b"{}\n")
    s3.fs.pipe(f"{s3.name}/root/other/a.jsonl", b"{}\n")
    s3.fs.pipe(f"{s3.name}/root/dt=2024-03-01.jsonl", b"{}\n")

    assert partition_dates(f"{s3.url}/root") == [dt.date(2024, 3, 9), dt.date(2024, 3, 11), dt.date(2024, 3, 15)]
    assert partition_dates(f"{s3.url}/no-such-root") == []


def test_missing_partition_names_the_date_and_the_nearest_present_ones(s3: Any) -> None:
    for day in ("2024-03-01", "2024-03-05", "2024-03-09", "2024-03-11", "2024-03-15", "2024-03-20", "2024-03-31"):
        s3.fs.pipe(f"{s3.name}/root/dt={day}/a.jsonl", jsonl([trace("t")]))

    with pytest.raises(PartitionNotFoundError) as caught:
        list_partition_files(f"{s3.url}/root", dt.date(2024, 3, 12))

    # Distances 11, 7, 3, 1, 3, 8, 19 days: the five nearest, in date order.
    nearest = ["2024-03-05", "2024-03-09", "2024-03-11", "2024-03-15", "2024-03-20"]
    assert caught.value.available == nearest
    assert caught.value.date == "2024-03-12"
    assert str(caught.value) == (
        f"no trace files for dt=2024-03-12 under {s3.url}/root. Nearest partitions present: {', '.join(nearest)}."
    )
    assert isinstance(caught.value, LookupError)


def test_partition_with_only_non_trace_files_is_missing(s3: Any) -> None:
    s3.fs.pipe(f"{s3.name}/{PARTITION}/_SUCCESS", b"")

    with pytest.raises(PartitionNotFoundError, match=r"dt=2024-03-11 .*Nearest partitions present: 2024-03-11\."):
        list_partition_files(f"{s3.url}/root", DATE)


def test_missing_partition_in_an_empty_source_says_so(s3: Any) -> None:
    with pytest.raises(PartitionNotFoundError, match=r"^no trace files for dt=2024-03-11 under .*No dt= partitions"):
        list_partition_files(f"{s3.url}/root", DATE)


def test_files_added_after_a_listing_are_seen_by_the_next_one(s3: Any) -> None:
    s3.fs.pipe(f"{s3.name}/{PARTITION}/a.jsonl", jsonl([trace("a1")]))
    assert [f.name for f in list_partition_files(f"{s3.url}/root", DATE)] == ["a.jsonl"]
    assert partition_dates(f"{s3.url}/root") == [DATE]
    # Written through another client: the production filesystem's listing cache must not hide them.
    s3.fs.pipe(f"{s3.name}/{PARTITION}/b.jsonl", jsonl([trace("b1")]))
    s3.fs.pipe(f"{s3.name}/root/dt=2024-03-12/a.jsonl", jsonl([trace("c1")]))

    assert [f.name for f in list_partition_files(f"{s3.url}/root", DATE)] == ["a.jsonl", "b.jsonl"]
    assert partition_dates(f"{s3.url}/root") == [DATE, dt.date(2024, 3, 12)]


def test_a_partition_created_after_a_miss_is_found(s3: Any) -> None:
    with pytest.raises(PartitionNotFoundError):
        list_partition_files(f"{s3.url}/root", DATE)

    s3.fs.pipe(f"{s3.name}/{PARTITION}/a.jsonl", jsonl([trace("a1")]))

    assert [f.name for f in list_partition_files(f"{s3.url}/root", DATE)] == ["a.jsonl"]


def test_stage_records_reads_from_s3_and_writes_batches_to_s3(s3: Any) -> None:
    s3.fs.pipe(
        f"{s3.name}/{PARTITION}/a.jsonl.gz",
        gzip.compress(jsonl([trace("a1"), trace("a2", question=None), trace("a3")])),
    )
    s3.fs.pipe(f"{s3.name}/{PARTITION}/b.parquet", parquet_bytes([trace("b1"), trace("b2"), trace("b3")]))
    files = list_partition_files(f"{s3.url}/root", DATE)
    staged_url = f"{s3.url}/work/staged"

    staged = stage_records(
        DATE, files, staged_url=staged_url, batch_size=2, work_storage_options=s3.endpoint.storage_options
    )

    assert [ref.n_rows for ref in staged.batches] == [2, 2, 1]
    assert [(q.source_file, q.line, q.trace_id, q.field) for q in staged.quarantined] == [
        (f"{s3.url}/{PARTITION}/a.jsonl.gz", 2, "a2", "question")
    ]
    s3.fs.invalidate_cache()
    stored = sorted(s3.fs.ls(f"{s3.name}/work/staged"))
    assert stored == sorted(f"{s3.name}/work/staged/{ref.content_hash}.parquet" for ref in staged.batches)
    rows = []
    for ref in staged.batches:
        assert ref.url == f"{staged_url}/{ref.content_hash}.parquet"
        payload = s3.fs.cat(ref.url)
        assert hashlib.sha256(payload).hexdigest() == ref.content_hash
        rows += pq.read_table(io.BytesIO(payload)).to_pylist()
    assert [(r["trace_id"], r["source_file"].rsplit("/", 1)[1], r["source_line"]) for r in rows] == [
        ("a1", "a.jsonl.gz", 1),
        ("a3", "a.jsonl.gz", 3),
        ("b1", "b.parquet", 1),
        ("b2", "b.parquet", 2),
        ("b3", "b.parquet", 3),
    ]

    again = stage_records(
        DATE, files, staged_url=staged_url, batch_size=2, work_storage_options=s3.endpoint.storage_options
    )

    assert again.batches == staged.batches
    s3.fs.invalidate_cache()
    assert sorted(s3.fs.ls(f"{s3.name}/work/staged")) == stored  # no new objects, no '*.partial' left behind


def test_unreachable_endpoint_is_a_transient_storage_error(s3: Any) -> None:
    options = unreachable_options()

    with pytest.raises(StorageError, match=rf"^storage error on {s3.url}/root: .*127\.0\.0\.1") as listing:
        list_partition_files(f"{s3.url}/root", DATE, options)
    with pytest.raises(StorageError):
        partition_dates(f"{s3.url}/root", options)

    assert type(listing.value) is StorageError
    assert type(listing.value.__cause__).__module__ == "botocore.exceptions"  # translated, with the cause chained


def test_unreachable_endpoint_while_reading_or_writing_batches_is_a_storage_error(s3: Any, tmp_path: Path) -> None:
    source = SourceFile(f"{s3.url}/{PARTITION}/a.jsonl", size=10, version="x")
    with pytest.raises(StorageError, match=f"storage error on {source.url}"):
        stage_records(DATE, [source], staged_url=str(tmp_path), batch_size=10, storage_options=unreachable_options())

    local = tmp_path / "src" / f"dt={DATE.isoformat()}"
    local.mkdir(parents=True)
    (local / "a.jsonl").write_bytes(jsonl([trace("a1")]))
    files = list_partition_files(str(local.parent), DATE)
    with pytest.raises(StorageError, match=f"storage error on {s3.url}/work/staged"):
        stage_records(
            DATE, files, staged_url=f"{s3.url}/work/staged", batch_size=10, work_storage_options=unreachable_options()
        )


class _FailedState:
    """Just enough of a Prefect State for the retry condition: result() re-raises the task's exception."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def result(self) -> None:
        raise self.error


def test_only_storage_errors_are_retried(s3: Any) -> None:
    with pytest.raises(StorageError) as transient:
        partition_dates(f"{s3.url}/root", unreachable_options())
    with pytest.raises(PartitionNotFoundError) as final:
        list_partition_files(f"{s3.url}/root", DATE)

    assert only_transient(None, None, _FailedState(transient.value)) is True
    assert only_transient(None, None, _FailedState(final.value)) is False


def test_missing_object_is_not_transient(s3: Any, tmp_path: Path) -> None:
    source = SourceFile(f"{s3.url}/{PARTITION}/gone.jsonl", size=10, version="x")

    with pytest.raises(FileNotFoundError):
        stage_records(DATE, [source], staged_url=str(tmp_path), batch_size=10)


def test_unknown_protocol_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot open storage URL 'nosuchproto://bucket/root'"):
        filesystem("nosuchproto://bucket/root")


def test_local_paths_list_as_plain_paths(tmp_path: Path) -> None:
    directory = tmp_path / f"dt={DATE.isoformat()}"
    directory.mkdir()
    (directory / "a.jsonl").write_bytes(jsonl([trace("a1")]))
    (directory / "_SUCCESS").write_bytes(b"")

    files = list_partition_files(str(tmp_path), DATE)

    assert [(f.url, f.size) for f in files] == [(str(directory / "a.jsonl"), len(jsonl([trace("a1")])))]
    assert files[0].version != ""
    assert partition_dates(str(tmp_path)) == [DATE]
    assert partition_dates(f"file://{tmp_path}") == [DATE]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://bucket/traces", "s3://bucket/traces"),
        ("http://127.0.0.1:9000/bucket", "http://127.0.0.1:9000/bucket"),
        ("https://minio:s3cr3t@minio.internal:9000/traces", "https://minio:***@minio.internal:9000/traces"),
        ("postgresql://ragpulse:pa%40ss@db/warehouse", "postgresql://ragpulse:***@db/warehouse"),
        ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
        ("s3://bucket/key:with@signs", "s3://bucket/key:with@signs"),
        ("from https://a:one@h/x to https://b:two@h/y", "from https://a:***@h/x to https://b:***@h/y"),
    ],
)
def test_redact_url_hides_passwords(url: str, expected: str) -> None:
    redacted = redact_url(url)

    assert redacted == expected
    for secret in ("s3cr3t", "pa%40ss", "hunter2", "one", "two"):
        assert secret not in redacted
