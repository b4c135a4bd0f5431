"""Read one day of traces and stage it as content-addressed Parquet batches, without Prefect.

Staging validates every record once: good records go into batches of ``batch_size`` rows, bad
ones into the quarantine list with file, line and reason. Scoring tasks then read their batch
from the staging area, so no task ever holds a whole partition.

Canonical traces are streamed line by line in bounded memory. Other formats (tasks/ingest/adapters) log a
request as many spans, possibly in different files, so their spans are grouped by trace id first:
staging holds the day's spans, projected to the fields assembly reads (ids, kind, start, question,
answer, documents, model, token counts), until every file is read, then assembles and writes the
traces batch by batch.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.core.storage import (
    TRACE_SUFFIXES,
    NoTraceFilesError,
    SourceFile,
    filesystem,
    list_partition_files,
    storage_errors,
)
from ragpulse.tasks.core.types import BatchRef, QuarantinedRecord, StagedPartition
from ragpulse.tasks.ingest.adapters import Adapter, AdapterOptions, Span, adapter_for, assemble, parse_options
from ragpulse.tasks.ingest.language import identify_languages
from ragpulse.tasks.ingest.records import STAGED_SCHEMA, parse_record

__all__ = ["RAW_EXCERPT_CHARS", "select_source_files", "stage_records"]

RAW_EXCERPT_CHARS = 2000


def select_source_files(
    source: str,
    date: dt.date,
    storage_options: Mapping[str, Any] | None = None,
    *,
    trace_format: str = "ragpulse",
    partitioning: str = "dt",
    late_arrival_hours: float = 0.0,
) -> list[SourceFile]:
    """The day's files: the ``dt=`` folder or the event-time window; an adapter may narrow them (Langfuse
    keeps only files that a complete run's manifest lists). Canonical ``dt=`` folders are not recursed."""
    adapter = adapter_for(trace_format)
    suffixes = TRACE_SUFFIXES if adapter is None or adapter.select_files is None else (*TRACE_SUFFIXES, ".json")
    files = list_partition_files(
        source,
        date,
        storage_options,
        partitioning=partitioning,
        late_arrival_hours=late_arrival_hours,
        recursive=adapter is not None,
        suffixes=suffixes,
    )
    if adapter is None or adapter.select_files is None:
        return files
    selected = adapter.select_files(files, storage_options)
    if not selected:
        raise NoTraceFilesError(
            source, date, f"no {adapter.name} export files (no manifests/*.json listing files, no data files)"
        )
    return selected


def stage_records(
    date: dt.date,
    files: list[SourceFile],
    *,
    staged_url: str,
    batch_size: int,
    storage_options: Mapping[str, Any] | None = None,
    work_storage_options: Mapping[str, Any] | None = None,
    trace_format: str = "ragpulse",
    format_options: Mapping[str, Any] | None = None,
    partitioning: str = "dt",
    language: str | None = None,
) -> StagedPartition:
    """Stage the day's ``files`` (the body of the ``stage_partition`` task).

    Under ``event-time`` partitioning only traces whose timestamp lies in [date 00:00, date+1 00:00) UTC
    are staged; the others belong to another day's run and are counted, not quarantined. A trace without a
    ``language`` gets ``language`` (the run's default) or, without one, the language identified from its
    question (else its answer).
    """
    adapter = adapter_for(trace_format)
    options = parse_options(trace_format, format_options)
    day = _day_filter(date) if partitioning == "event-time" else None
    writer = _BatchWriter(staged_url, batch_size, work_storage_options, language)
    if adapter is not None:
        return _stage_spans(date, files, adapter, options, day, writer, storage_options)
    quarantined: list[QuarantinedRecord] = []
    other_days = 0
    for source_file in files:
        for line, decoded, raw in _read_records(source_file, storage_options):
            try:
                if isinstance(decoded, _Undecodable):
                    raise InvalidRecordError(None, "<record>", decoded.reason, location=f"{source_file.url}:{line}")
                row = parse_record(decoded, source_file=source_file.url, line=line)
            except InvalidRecordError as exc:
                quarantined.append(_quarantine(exc, source_file.url, line, raw))
                continue
            if day is not None and not day(row["timestamp"]):
                other_days += 1
                continue
            writer.add(row)
    return StagedPartition(date, files, writer.close(), quarantined, n_other_days=other_days)


def _day_filter(date: dt.date) -> Any:
    start = dt.datetime.combine(date, dt.time(), tzinfo=dt.UTC)
    end = start + dt.timedelta(days=1)
    return lambda moment: moment is not None and start <= moment < end


def _quarantine(exc: InvalidRecordError, url: str, line: int, raw: str) -> QuarantinedRecord:
    return QuarantinedRecord(url, line, exc.record_id, exc.field, exc.reason, raw[:RAW_EXCERPT_CHARS])


def _stage_spans(
    date: dt.date,
    files: list[SourceFile],
    adapter: Adapter,
    options: AdapterOptions,
    day: Any,
    writer: _BatchWriter,
    storage_options: Mapping[str, Any] | None,
) -> StagedPartition:
    """Group the spans of every file by trace id (a repeated span id keeps the later copy), then assemble
    each trace in order of first sight and validate it like a canonical record, located at its first span.

    Where one record holds spans of several traces (OTLP lines), a quarantined trace or span is located
    at ``<file>#trace=<id>`` or ``<file>#<span path>`` so that no two entries share a location."""
    quarantined: list[QuarantinedRecord] = []
    by_trace: dict[str, dict[str, Span]] = {}
    first_seen: dict[str, tuple[str, int]] = {}
    traces_at: dict[tuple[str, int], set[str]] = {}
    duplicates = 0
    for source_file in files:
        for line, decoded, raw in _read_records(source_file, storage_options):
            try:
                if isinstance(decoded, _Undecodable):
                    raise InvalidRecordError(None, "<record>", decoded.reason)
                items = list(adapter.spans(decoded, options))
            except InvalidRecordError as exc:
                quarantined.append(_quarantine(exc, source_file.url, line, raw))
                continue
            seen_here = traces_at.setdefault((source_file.url, line), set())
            for item in items:
                if isinstance(item, Span):
                    spans = by_trace.setdefault(item.trace_id, {})
                    duplicates += item.span_id in spans
                    spans[item.span_id] = item
                    first_seen.setdefault(item.trace_id, (source_file.url, line))
                    seen_here.add(item.trace_id)
            for item in items:
                if isinstance(item, InvalidRecordError):
                    # A record that also holds good spans (an OTLP line) names the bad span in a URL fragment,
                    # so the location of the quarantined entry is not that of a staged trace.
                    url = f"{source_file.url}#{item.field}" if seen_here else source_file.url
                    quarantined.append(_quarantine(item, url, line, raw))
    other_days = 0
    for trace_id, spans in by_trace.items():
        url, line = first_seen[trace_id]
        raw_trace: dict[str, Any] | None = None
        try:
            raw_trace = assemble(trace_id, list(spans.values()), source_format=adapter.name, options=options)
            row = parse_record(raw_trace, source_file=url, line=line)
        except InvalidRecordError as exc:
            # A fragment of a trace that started on another day is that day's, not a broken trace.
            earliest = min((s.start for s in spans.values() if s.start is not None), default=None)
            if day is not None and earliest is not None and not day(earliest):
                other_days += 1
                continue
            excerpt = raw_trace if raw_trace is not None else _span_summary(trace_id, spans.values())
            shared = len(traces_at[(url, line)]) > 1
            location = f"{url}#trace={trace_id}" if shared else url
            quarantined.append(_quarantine(exc, location, line, json.dumps(excerpt, default=str)))
            continue
        if day is not None and not day(row["timestamp"]):
            other_days += 1
            continue
        writer.add(row)
    return StagedPartition(
        date, files, writer.close(), quarantined, n_other_days=other_days, n_duplicate_spans=duplicates
    )


def _span_summary(trace_id: str, spans: Any) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "spans": [{"span_id": s.span_id, "parent_id": s.parent_id, "kind": s.kind, "name": s.name} for s in spans],
    }


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

    def __init__(
        self, staged_url: str, batch_size: int, storage_options: Mapping[str, Any] | None, language: str | None
    ) -> None:
        self._fs, self._root = filesystem(staged_url, storage_options)
        self._url_prefix = staged_url.rstrip("/")
        self._batch_size = batch_size
        self._language = language
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

    def _fill_languages(self) -> None:
        """Languages of the batch's traces that gave none: the run's default, else identified in one call."""
        unknown = [row for row in self._rows if row["language"] is None]
        if not unknown:
            return
        if self._language is not None:
            found: list[str | None] = [self._language] * len(unknown)
        else:
            found = identify_languages([row["question"] for row in unknown])
            retry = [i for i, tag in enumerate(found) if tag is None and unknown[i]["answer"]]
            for i, tag in zip(retry, identify_languages([unknown[i]["answer"] for i in retry]), strict=True):
                found[i] = tag
        for row, tag in zip(unknown, found, strict=True):
            row["language"] = tag

    def _flush(self) -> None:
        self._fill_languages()
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
