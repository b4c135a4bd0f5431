"""Stage one day of traces as content-addressed Parquet batches, without Prefect.

Staging validates every record once: good records go into batches of ``batch_size`` rows, bad
ones into the quarantine list with file, line and reason. Scoring tasks then read their batch
from the staging area, so no task ever holds a whole partition. Every record read ends in exactly one
place, which ``counts`` checks before staging returns.

Canonical traces are streamed record by record (``reading``) in bounded memory, a day at once or in slices
(``slicing``). Other formats (tasks/ingest/adapters) log a request as many spans, possibly in different files, so
their spans are grouped by trace id first: staging holds the day's spans, projected to the fields assembly reads
(ids, kind, start, question, answer, documents, model, token counts), until every file is read, then assembles and
writes the traces batch by batch.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow.parquet as pq

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.core.storage import (
    DEFAULT_PARTITIONING,
    TRACE_SUFFIXES,
    NoTraceFilesError,
    SourceFile,
    filesystem,
    list_partition_files,
    storage_errors,
)
from ragpulse.tasks.core.types import BatchRef, QuarantinedRecord, StagedPartition, StagingCounts
from ragpulse.tasks.ingest import limits
from ragpulse.tasks.ingest.adapters import (
    CANONICAL_FORMAT,
    Adapter,
    AdapterOptions,
    Span,
    adapter_for,
    assemble,
    parse_options,
)
from ragpulse.tasks.ingest.counts import check_counts
from ragpulse.tasks.ingest.language import identify_languages
from ragpulse.tasks.ingest.reading import RAW_EXCERPT_CHARS, Undecodable, read_records
from ragpulse.tasks.ingest.records import parse_record, staged_table
from ragpulse.tasks.ingest.slicing import PieceRecords, SlicePiece, StagedSlice

__all__ = ["select_source_files", "stage_records", "stage_slice"]


def select_source_files(
    source: str,
    date: dt.date,
    storage_options: Mapping[str, Any] | None = None,
    *,
    trace_format: str = CANONICAL_FORMAT,
    partitioning: str = DEFAULT_PARTITIONING,
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
    trace_format: str = CANONICAL_FORMAT,
    format_options: Mapping[str, Any] | None = None,
    partitioning: str = DEFAULT_PARTITIONING,
    language: str | None = None,
) -> StagedPartition:
    """Stage the day's ``files`` (the body of the ``stage_partition`` task).

    Under ``event-time`` partitioning only traces whose timestamp lies in [date 00:00, date+1 00:00) UTC
    are staged; the others belong to another day's run and are counted, not quarantined. A trace without a
    ``language`` gets ``language`` (the run's default) or, without one, the language identified from its
    question (else its answer).

    A canonical record is one non-blank JSONL line or one Parquet row (the unreadable rest of a corrupt file
    counts as one record): records read = records quarantined unparsed + traces read, and traces read = staged
    + quarantined + other days. Raises CountMismatchError if they do not add up.
    """
    adapter = adapter_for(trace_format)
    if adapter is None:
        whole = tuple(SlicePiece(source_file, n_bytes=source_file.size) for source_file in files)
        return stage_slice(
            date,
            whole,
            staged_url=staged_url,
            batch_size=batch_size,
            storage_options=storage_options,
            work_storage_options=work_storage_options,
            partitioning=partitioning,
            language=language,
        ).staged
    options = parse_options(trace_format, format_options)
    day = _day_filter(date) if partitioning == "event-time" else None
    writer = _BatchWriter(staged_url, batch_size, work_storage_options, language)
    return _stage_spans(date, files, adapter, options, day, writer, storage_options)


def stage_slice(
    date: dt.date,
    pieces: Sequence[SlicePiece],
    *,
    staged_url: str,
    batch_size: int,
    storage_options: Mapping[str, Any] | None = None,
    work_storage_options: Mapping[str, Any] | None = None,
    partitioning: str = DEFAULT_PARTITIONING,
    language: str | None = None,
) -> StagedSlice:
    """Stage the canonical records of ``pieces`` (the body of the ``stage_slice`` task; see ``stage_records`` for
    the event-time filter, languages and the counts, which are checked for the slice)."""
    day = _day_filter(date) if partitioning == "event-time" else None
    writer = _BatchWriter(staged_url, batch_size, work_storage_options, language)
    quarantined: list[QuarantinedRecord] = []
    records_read = records_quarantined = traces_read = traces_quarantined = other_days = 0
    relative_to, lines = None, 0
    for piece in pieces:
        records = PieceRecords(piece, storage_options)
        source_file = piece.file
        for record in records:
            records_read += 1
            line, decoded = record.line, record.decoded
            if isinstance(decoded, Undecodable):
                quarantined.append(_unparsed(decoded, source_file.url, line, record.text))
                records_quarantined += 1
                continue
            traces_read += 1
            try:
                row = parse_record(decoded, source_file=source_file.url, line=line, check_text=record.check_text)
            except InvalidRecordError as exc:
                quarantined.append(_quarantine(exc, source_file.url, line, record.text))
                traces_quarantined += 1
                continue
            if day is not None and not day(row["timestamp"]):
                other_days += 1
                continue
            writer.add(row)
        if piece.kind == "bytes":
            relative_to, lines = source_file.url, records.lines
    batches = writer.close()
    counts = StagingCounts(
        records_read=records_read,
        records_quarantined=records_quarantined,
        traces_read=traces_read,
        traces_quarantined=traces_quarantined,
        staged=sum(batch.n_rows for batch in batches),
        other_days=other_days,
    )
    check_counts(date, counts, len(quarantined), records_parsed=traces_read)
    files = list(dict.fromkeys(piece.file for piece in pieces))
    return StagedSlice(StagedPartition(date, files, batches, quarantined, counts), relative_to, lines)


def _day_filter(date: dt.date) -> Any:
    start = dt.datetime.combine(date, dt.time(), tzinfo=dt.UTC)
    end = start + dt.timedelta(days=1)
    return lambda moment: moment is not None and start <= moment < end


def _quarantine(exc: InvalidRecordError, url: str, line: int, raw: str) -> QuarantinedRecord:
    """The entry for a bad record, its texts escaped where they hold what no warehouse stores (NUL, surrogates)."""
    record_id = None if exc.record_id is None else limits.printable(exc.record_id)
    excerpt = limits.printable(raw[:RAW_EXCERPT_CHARS])
    return QuarantinedRecord(url, line, record_id, limits.printable(exc.field), limits.printable(exc.reason), excerpt)


def _unparsed(record: Undecodable, url: str, line: int, raw: str) -> QuarantinedRecord:
    return _quarantine(InvalidRecordError(None, record.field, record.reason), url, line, raw)


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
    at ``<file>#trace=<id>`` or ``<file>#<span path>`` so that no two entries share a location.

    Records read = records quarantined unparsed + records parsed (which hold zero or more spans, some of
    them quarantined); traces read (distinct trace ids) = staged + quarantined + other days."""
    quarantined: list[QuarantinedRecord] = []
    by_trace: dict[str, dict[str, Span]] = {}
    first_seen: dict[str, tuple[str, int]] = {}
    traces_at: dict[tuple[str, int], set[str]] = {}
    by_span: list[tuple[Span, str, int, str]] = []
    duplicates = records_read = records_quarantined = records_parsed = spans_quarantined = 0
    for source_file in files:
        for record in read_records(source_file, storage_options):
            line, decoded = record.line, record.decoded
            records_read += 1
            try:
                if isinstance(decoded, Undecodable):
                    raise InvalidRecordError(None, decoded.field, decoded.reason)
                items = list(adapter.spans(decoded, options))
            except InvalidRecordError as exc:
                quarantined.append(_quarantine(exc, source_file.url, line, record.text))
                records_quarantined += 1
                continue
            records_parsed += 1
            seen_here = traces_at.setdefault((source_file.url, line), set())
            for item in items:
                if isinstance(item, Span) and not item.trace_id:  # an annotation that names only its span
                    by_span.append((item, source_file.url, line, record.text))
                elif isinstance(item, Span):
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
                    quarantined.append(_quarantine(item, url, line, record.text))
                    spans_quarantined += 1
    trace_of = {span_id: trace_id for trace_id, spans in by_trace.items() for span_id in spans}
    for item, url, line, text in by_span:
        owner = trace_of.get(item.parent_id or "")
        if owner is None:
            reason = f"feedback on span {item.parent_id!r}, which is not in the partition"
            quarantined.append(_quarantine(InvalidRecordError(None, "span_id", reason), url, line, text))
            spans_quarantined += 1
        else:
            by_trace[owner][item.span_id] = dataclasses.replace(item, trace_id=owner)
    other_days = traces_quarantined = 0
    for trace_id, spans in by_trace.items():
        url, line = first_seen[trace_id]
        raw_trace: dict[str, Any] | None = None
        try:
            raw_trace = assemble(
                trace_id,
                list(spans.values()),
                source_format=adapter.name,
                options=options,
                question_places=adapter.question_places,
            )
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
            traces_quarantined += 1
            continue
        if day is not None and not day(row["timestamp"]):
            other_days += 1
            continue
        writer.add(row)
    batches = writer.close()
    counts = StagingCounts(
        records_read=records_read,
        records_quarantined=records_quarantined,
        traces_read=len(by_trace),
        traces_quarantined=traces_quarantined,
        staged=sum(batch.n_rows for batch in batches),
        other_days=other_days,
        spans_quarantined=spans_quarantined,
        duplicate_spans=duplicates,
    )
    check_counts(date, counts, len(quarantined), records_parsed=records_parsed)
    return StagedPartition(date, files, batches, quarantined, counts)


def _span_summary(trace_id: str, spans: Any) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "spans": [{"span_id": s.span_id, "parent_id": s.parent_id, "kind": s.kind, "name": s.name} for s in spans],
    }


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
        """Languages of the batch's traces that gave none: the run's default, else identified in one call from the
        user's question; a question too short to tell ("OK?") takes its answer's language, else its earlier turns'
        user messages', else the language of another turn of its conversation in the batch."""
        unknown = [row for row in self._rows if row["language"] is None]
        if not unknown:
            return
        if self._language is not None:
            found: list[str | None] = [self._language] * len(unknown)
        else:
            found = identify_languages([row["question"] for row in unknown])
            for text_of in (_answer_text, _earlier_user_text):
                retry = [i for i, tag in enumerate(found) if tag is None and text_of(unknown[i])]
                for i, tag in zip(retry, identify_languages([text_of(unknown[i]) for i in retry]), strict=True):
                    found[i] = tag
        for row, tag in zip(unknown, found, strict=True):
            row["language"] = tag
        by_conversation = {row["conversation_id"]: row["language"] for row in self._rows if row["language"]}
        for row in unknown:
            if row["language"] is None and row["conversation_id"] is not None:
                row["language"] = by_conversation.get(row["conversation_id"])

    def _flush(self) -> None:
        self._fill_languages()
        table = staged_table(self._rows)
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


def _answer_text(row: Mapping[str, Any]) -> str:
    return str(row["answer"] or "")


def _earlier_user_text(row: Mapping[str, Any]) -> str:
    """The conversation's earlier user messages, newest first: the user's language when this turn is too short."""
    return " ".join(m["content"] for m in reversed(row["history"] or ()) if m["role"] == "user")
