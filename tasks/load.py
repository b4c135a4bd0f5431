"""Read one date partition of traces in bounded memory and stage it as content-addressed Parquet batches.

Staging validates every record once: good records go into batches of ``batch_size`` rows, bad
ones into the quarantine list with file, line and reason. Scoring tasks then read their batch
from the staging area, so no task ever holds a whole partition.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import sys
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext

from metrics.errors import InvalidRecordError
from tasks import traces
from tasks._fingerprint import code_fingerprint, digest
from tasks._retry import IO_RETRIES
from tasks.storage import SourceFile, filesystem, list_partition_files, storage_errors
from tasks.traces import STAGED_SCHEMA, parse_record

__all__ = ["BatchRef", "QuarantinedRecord", "StagedPartition", "list_partition", "stage_partition", "stage_records"]

RAW_EXCERPT_CHARS = 2000


@dataclass(frozen=True)
class BatchRef:
    """A staged batch: where it is and a hash of its content (the scoring cache key)."""

    url: str
    content_hash: str
    n_rows: int


@dataclass(frozen=True)
class QuarantinedRecord:
    """A record that does not fit the trace format, kept with where it came from and why."""

    source_file: str
    line: int
    trace_id: str | None
    field: str
    reason: str
    raw: str


@dataclass(frozen=True)
class StagedPartition:
    date: dt.date
    files: list[SourceFile]
    batches: list[BatchRef]
    quarantined: list[QuarantinedRecord] = field(default_factory=list)

    @property
    def n_valid(self) -> int:
        return sum(batch.n_rows for batch in self.batches)


@task(name="list-partition", cache_policy=NO_CACHE, persist_result=False, **IO_RETRIES)
def list_partition(source: str, date: dt.date, storage_options: dict[str, Any] | None = None) -> list[SourceFile]:
    """List the partition's trace files (never cached: new files must be seen)."""
    files = list_partition_files(source, date, storage_options)
    get_run_logger().info("dt=%s: %d trace files, %d bytes", date, len(files), sum(f.size for f in files))
    return files


def _stage_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    files = params["files"]
    identity = [(f.url, f.size, f.version) for f in files]
    return "stage-partition-" + digest(
        identity, params["batch_size"], params["staged_url"], code_fingerprint(sys.modules[__name__], traces)
    )


@task(name="stage-partition", cache_key_fn=_stage_key, persist_result=True, **IO_RETRIES)
def stage_partition(
    date: dt.date,
    files: list[SourceFile],
    *,
    staged_url: str,
    batch_size: int,
    storage_options: dict[str, Any] | None = None,
    work_storage_options: dict[str, Any] | None = None,
) -> StagedPartition:
    """Validate and stage every record of the partition; cached on the files' identities (URL, size, ETag)."""
    staged = stage_records(
        date,
        files,
        staged_url=staged_url,
        batch_size=batch_size,
        storage_options=storage_options,
        work_storage_options=work_storage_options,
    )
    get_run_logger().info(
        "dt=%s: staged %d traces in %d batches, quarantined %d records",
        date,
        staged.n_valid,
        len(staged.batches),
        len(staged.quarantined),
    )
    return staged


def stage_records(
    date: dt.date,
    files: list[SourceFile],
    *,
    staged_url: str,
    batch_size: int,
    storage_options: Mapping[str, Any] | None = None,
    work_storage_options: Mapping[str, Any] | None = None,
) -> StagedPartition:
    """The body of ``stage_partition``, callable without Prefect."""
    writer = _BatchWriter(staged_url, batch_size, work_storage_options)
    quarantined: list[QuarantinedRecord] = []
    for source_file in files:
        for line, decoded, raw in _read_records(source_file, storage_options):
            try:
                if isinstance(decoded, _Undecodable):
                    raise InvalidRecordError(None, "<record>", decoded.reason, location=f"{source_file.url}:{line}")
                writer.add(parse_record(decoded, source_file=source_file.url, line=line))
            except InvalidRecordError as exc:
                quarantined.append(
                    QuarantinedRecord(
                        source_file.url, line, exc.record_id, exc.field, exc.reason, raw[:RAW_EXCERPT_CHARS]
                    )
                )
    return StagedPartition(date, files, writer.close(), quarantined)


@dataclass(frozen=True)
class _Undecodable:
    reason: str


# A file that cannot be decoded past some point: what was read stays, the rest is one quarantine entry.
_CORRUPT_FILE = (EOFError, gzip.BadGzipFile, zlib.error, pa.ArrowInvalid)


def _read_records(source_file: SourceFile, storage_options: Mapping[str, Any] | None) -> Iterator[tuple[int, Any, str]]:
    """Yield (line or row number, decoded record or _Undecodable, raw text) in file order."""
    fs, path = filesystem(source_file.url, storage_options)
    last = 0
    with storage_errors(source_file.url):
        try:
            with fs.open(path, "rb", compression="gzip" if path.endswith(".gz") else None) as handle:
                rows = _parquet_rows(handle) if path.endswith(".parquet") else _jsonl_lines(handle)
                for last, decoded, raw in rows:
                    yield last, decoded, raw
        except _CORRUPT_FILE as exc:
            reason = f"file is corrupt after line {last}: {type(exc).__name__}: {exc}"
            yield last + 1, _Undecodable(reason), ""


def _jsonl_lines(handle: Any) -> Iterator[tuple[int, Any, str]]:
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, _Undecodable(f"line is not UTF-8: {exc.reason} at byte {exc.start}"), repr(line[:200])
            continue
        try:
            yield number, json.loads(text), text.rstrip("\n")
        except json.JSONDecodeError as exc:
            yield number, _Undecodable(f"invalid JSON: {exc.msg} at column {exc.colno}"), text.rstrip("\n")


def _parquet_rows(handle: Any) -> Iterator[tuple[int, Any, str]]:
    number = 0
    for record_batch in pq.ParquetFile(handle).iter_batches(batch_size=2048):
        for row in record_batch.to_pylist():
            number += 1
            yield number, row, json.dumps(row, default=str)


class _BatchWriter:
    """Accumulates valid rows and writes each full batch once, named by the hash of its bytes."""

    def __init__(self, staged_url: str, batch_size: int, storage_options: Mapping[str, Any] | None) -> None:
        self._fs, self._root = filesystem(staged_url, storage_options)
        self._url_prefix = staged_url.rstrip("/")
        self._batch_size = batch_size
        self._rows: list[dict[str, Any]] = []
        self._refs: list[BatchRef] = []

    def add(self, row: dict[str, Any]) -> None:
        self._rows.append(row)
        if len(self._rows) >= self._batch_size:
            self._flush()

    def close(self) -> list[BatchRef]:
        if self._rows:
            self._flush()
        return self._refs

    def _flush(self) -> None:
        table = pa.Table.from_pylist(self._rows, schema=STAGED_SCHEMA)
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd")
        payload = buffer.getvalue()
        content_hash = hashlib.sha256(payload).hexdigest()
        name = f"{content_hash}.parquet"
        with storage_errors(self._url_prefix):
            self._fs.makedirs(self._root, exist_ok=True)
            target = f"{self._root}/{name}"
            if not self._fs.exists(target):
                # Write under a temporary name and rename, so a reader never sees half a batch.
                partial = f"{target}.{content_hash[:8]}.partial"
                self._fs.pipe_file(partial, payload)
                self._fs.mv(partial, target)
        self._refs.append(BatchRef(f"{self._url_prefix}/{name}", content_hash, table.num_rows))
        self._rows = []
