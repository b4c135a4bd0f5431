"""Read one day of traces and stage it as content-addressed Parquet batches, without Prefect.

Staging validates every record once: good records go into batches of ``batch_size`` rows, bad
ones into the quarantine list with file, line and reason. Scoring tasks then read their batch
from the staging area, so no task ever holds a whole partition.

Every record read ends in exactly one place, staged, quarantined or left to another day, and staging checks that
its counts add up (``StagingCounts``) before it returns: a record that fits nowhere is a bug, not a lost trace.
Records over the limits of ``tasks/ingest/limits`` (size, nesting, duplicate keys) are quarantined unparsed.

Canonical traces are streamed line by line in bounded memory. Other formats (tasks/ingest/adapters) log a
request as many spans, possibly in different files, so their spans are grouped by trace id first:
staging holds the day's spans, projected to the fields assembly reads (ids, kind, start, question,
answer, documents, model, token counts), until every file is read, then assembles and writes the
traces batch by batch.

A day of canonical traces can be staged in slices (``plan_slices``, ``stage_slice``, ``combine_slices``), one task
each: small files whole, larger plain JSONL files by byte range (a record belongs to the slice where its line
starts), Parquet files by row groups; gzip files cannot be cut and stay one slice each. A byte-range slice numbers
its lines from its own start; ``combine_slices`` shifts them by the lines of the file's earlier slices, into the
quarantine entries and into ``BatchRef.line_offset``, which ``read_staged`` adds to the staged ``source_line``.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import itertools
import json
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ragpulse.metrics.errors import InvalidRecordError, RagpulseError
from ragpulse.tasks.core.storage import (
    TRACE_SUFFIXES,
    NoTraceFilesError,
    SourceFile,
    filesystem,
    list_partition_files,
    storage_errors,
)
from ragpulse.tasks.core.types import BatchRef, QuarantinedRecord, StagedPartition, StagingCounts
from ragpulse.tasks.ingest import limits
from ragpulse.tasks.ingest.adapters import Adapter, AdapterOptions, Span, adapter_for, assemble, parse_options
from ragpulse.tasks.ingest.language import identify_languages
from ragpulse.tasks.ingest.records import parse_record, staged_table

__all__ = [
    "RAW_EXCERPT_CHARS",
    "CountMismatchError",
    "SlicePiece",
    "StagedSlice",
    "combine_slices",
    "plan_slices",
    "select_source_files",
    "slice_label",
    "stage_records",
    "stage_slice",
]

RAW_EXCERPT_CHARS = 2000
_CHUNK_BYTES = 2**16  # read at a time; a line longer than this is joined from several reads
_BOM = b"\xef\xbb\xbf"


class CountMismatchError(RagpulseError, RuntimeError):
    """Staging's counts do not add up: some record went nowhere or twice. A bug; nothing is published."""


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


@dataclass(frozen=True)
class SlicePiece:
    """The part of one canonical trace file that a staging slice reads: the whole file, the lines that start in
    bytes [start, stop) of a plain JSONL file, or the row groups [start, stop) of a Parquet file."""

    file: SourceFile
    kind: Literal["file", "bytes", "row_groups"] = "file"
    start: int = 0
    stop: int = 0
    n_bytes: int = 0
    """Bytes it covers, its share of the day's work: stored bytes, uncompressed for Parquet."""


@dataclass(frozen=True)
class StagedSlice:
    """One staged slice. The lines of a byte-range slice count from the start of its range (``relative_to`` names
    the file); ``lines`` is how many lines start in it, for the line numbers of the file's later slices."""

    staged: StagedPartition
    relative_to: str | None = None
    lines: int = 0


def plan_slices(
    files: Sequence[SourceFile], slice_bytes: int, storage_options: Mapping[str, Any] | None = None
) -> list[tuple[SlicePiece, ...]]:
    """Cut a day's canonical files, in order, into slices of about ``slice_bytes`` each: consecutive small files
    together, a larger file alone or in pieces (plain JSONL: equal byte ranges; Parquet: runs of row groups, a
    row group never cut; gzip: never cut). Parquet is measured by its uncompressed size, which its footer gives
    (one small read per Parquet file; compressed column chunks can hold ten times their size); gzip can only be
    measured by its stored size."""
    if slice_bytes < 1:
        raise ValueError(f"slice_bytes must be at least 1, got {slice_bytes}")
    slices: list[tuple[SlicePiece, ...]] = []
    group: list[SlicePiece] = []
    for source_file in files:
        pieces = _pieces(source_file, slice_bytes, storage_options)
        if len(pieces) == 1 and pieces[0].n_bytes <= slice_bytes:
            if group and sum(piece.n_bytes for piece in group) + pieces[0].n_bytes > slice_bytes:
                slices.append(tuple(group))
                group = []
            group.append(pieces[0])
            continue
        if group:
            slices.append(tuple(group))
            group = []
        slices.extend((piece,) for piece in pieces)
    if group:
        slices.append(tuple(group))
    return slices


def _pieces(source_file: SourceFile, slice_bytes: int, storage_options: Mapping[str, Any] | None) -> list[SlicePiece]:
    """One file as pieces of at most ``slice_bytes`` where it can be cut."""
    url, size = source_file.url, source_file.size
    if url.endswith(".jsonl") and size > slice_bytes:
        n = -(-size // slice_bytes)
        cuts = [size * i // n for i in range(n + 1)]
        return [SlicePiece(source_file, "bytes", a, b, b - a) for a, b in itertools.pairwise(cuts)]
    if not url.endswith(".parquet"):  # small JSONL, or gzip: a stream that can only be read from its start
        return [SlicePiece(source_file, n_bytes=size)]
    fs, path = filesystem(url, storage_options)
    with storage_errors(url):
        try:
            with fs.open(path, "rb") as handle:
                metadata = pq.read_metadata(handle)
        except pa.ArrowInvalid:  # not Parquet: staging quarantines it, whole
            return [SlicePiece(source_file, n_bytes=size)]
    sizes = [metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)]
    runs: list[list[int]] = []
    for index, group_bytes in enumerate(sizes):
        if runs and sum(sizes[i] for i in runs[-1]) + group_bytes <= slice_bytes:
            runs[-1].append(index)
        else:
            runs.append([index])
    if len(runs) <= 1:
        return [SlicePiece(source_file, n_bytes=sum(sizes))]
    return [SlicePiece(source_file, "row_groups", r[0], r[-1] + 1, sum(sizes[i] for i in r)) for r in runs]


def slice_label(pieces: Sequence[SlicePiece]) -> str:
    """A short name for a slice (its task run's name): ``a.jsonl[0:1048576)``, ``b.parquet#rg[2:4)``, ``c.jsonl``,
    ``d.jsonl+3`` for four whole files from d.jsonl on."""
    first = pieces[0]
    if first.kind == "bytes":
        return f"{first.file.name}[{first.start}:{first.stop})"
    if first.kind == "row_groups":
        return f"{first.file.name}#rg[{first.start}:{first.stop})"
    return first.file.name + (f"+{len(pieces) - 1}" if len(pieces) > 1 else "")


def stage_slice(
    date: dt.date,
    pieces: Sequence[SlicePiece],
    *,
    staged_url: str,
    batch_size: int,
    storage_options: Mapping[str, Any] | None = None,
    work_storage_options: Mapping[str, Any] | None = None,
    partitioning: str = "dt",
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
        records = _PieceRecords(piece, storage_options)
        source_file = piece.file
        for record in records:
            records_read += 1
            line, decoded = record.line, record.decoded
            if isinstance(decoded, _Undecodable):
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
    _check_counts(date, counts, len(quarantined), records_parsed=traces_read)
    files = list(dict.fromkeys(piece.file for piece in pieces))
    return StagedSlice(StagedPartition(date, files, batches, quarantined, counts), relative_to, lines)


def combine_slices(date: dt.date, files: list[SourceFile], slices: Sequence[StagedSlice]) -> StagedPartition:
    """The day's staging from its slices in plan order: batches and quarantine entries in source order, the lines
    of byte-range slices made the file's (shifted by the lines of its earlier slices), the counts summed and
    checked for the day."""
    batches: list[BatchRef] = []
    quarantined: list[QuarantinedRecord] = []
    lines_before: dict[str, int] = {}
    for part in slices:
        shift = 0
        if part.relative_to is not None:
            shift = lines_before.get(part.relative_to, 0)
            lines_before[part.relative_to] = shift + part.lines
        batches.extend(_shifted(ref, shift) for ref in part.staged.batches)
        quarantined.extend(replace(q, line=q.line + shift) if shift else q for q in part.staged.quarantined)
    totals = {
        f.name: sum(getattr(part.staged.counts, f.name) for part in slices if part.staged.counts is not None)
        for f in fields(StagingCounts)
        if f.name not in ("spans_quarantined", "duplicate_spans")  # span formats are staged in one task
    }
    counts = StagingCounts(**totals)
    _check_counts(date, counts, len(quarantined), records_parsed=counts.traces_read)
    return StagedPartition(date, files, batches, quarantined, counts)


def _shifted(ref: BatchRef, shift: int) -> BatchRef:
    """A batch whose lines read ``shift`` higher; its hash (the scoring cache key) covers the shift, since the
    same bytes staged from another place in a file are other lines."""
    if not shift:
        return ref
    content_hash = hashlib.sha256(f"{ref.content_hash}+{shift}".encode()).hexdigest()
    return BatchRef(ref.url, content_hash, ref.n_rows, line_offset=ref.line_offset + shift)


def _check_counts(date: dt.date, counts: StagingCounts, n_quarantine: int, *, records_parsed: int) -> None:
    """Refuse to hand on a partition whose counts do not add up (see StagingCounts)."""
    identities = {
        "records read = records quarantined + records parsed": (
            counts.records_read,
            counts.records_quarantined + records_parsed,
        ),
        "traces read = staged + traces quarantined + other days": (
            counts.traces_read,
            counts.staged + counts.traces_quarantined + counts.other_days,
        ),
        "quarantine entries = records + spans + traces quarantined": (n_quarantine, counts.quarantined),
    }
    problems = [f"{name}: {left} != {right}" for name, (left, right) in identities.items() if left != right]
    if problems:
        raise CountMismatchError(f"internal error staging dt={date}, nothing was published: {'; '.join(problems)}")


def _day_filter(date: dt.date) -> Any:
    start = dt.datetime.combine(date, dt.time(), tzinfo=dt.UTC)
    end = start + dt.timedelta(days=1)
    return lambda moment: moment is not None and start <= moment < end


def _quarantine(exc: InvalidRecordError, url: str, line: int, raw: str) -> QuarantinedRecord:
    """The entry for a bad record, its texts escaped where they hold what no warehouse stores (NUL, surrogates)."""
    record_id = None if exc.record_id is None else limits.printable(exc.record_id)
    excerpt = limits.printable(raw[:RAW_EXCERPT_CHARS])
    return QuarantinedRecord(url, line, record_id, limits.printable(exc.field), limits.printable(exc.reason), excerpt)


def _unparsed(record: _Undecodable, url: str, line: int, raw: str) -> QuarantinedRecord:
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
    duplicates = records_read = records_quarantined = records_parsed = spans_quarantined = 0
    for source_file in files:
        for record in _read_records(source_file, storage_options):
            line, decoded = record.line, record.decoded
            records_read += 1
            try:
                if isinstance(decoded, _Undecodable):
                    raise InvalidRecordError(None, decoded.field, decoded.reason)
                items = list(adapter.spans(decoded, options))
            except InvalidRecordError as exc:
                quarantined.append(_quarantine(exc, source_file.url, line, record.text))
                records_quarantined += 1
                continue
            records_parsed += 1
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
                    quarantined.append(_quarantine(item, url, line, record.text))
                    spans_quarantined += 1
    other_days = traces_quarantined = 0
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
    _check_counts(date, counts, len(quarantined), records_parsed=records_parsed)
    return StagedPartition(date, files, batches, quarantined, counts)


def _span_summary(trace_id: str, spans: Any) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "spans": [{"span_id": s.span_id, "parent_id": s.parent_id, "kind": s.kind, "name": s.name} for s in spans],
    }


@dataclass(frozen=True)
class _Undecodable:
    """A record that cannot be parsed: not UTF-8, not JSON, over a limit, unreadable Parquet values."""

    reason: str
    field: str = "<record>"


class _Record(NamedTuple):
    """One canonical record as read: its line (or row) number, its value (or _Undecodable) and its raw text."""

    line: int
    decoded: Any
    raw: str | None
    """None for a Parquet row: its raw text is its JSON, made only when it is needed (``text``)."""
    batch_may_hold_nul: bool = True
    """For a Parquet row: whether a string of its record batch may hold a NUL (``_may_hold_nul``)."""

    @property
    def text(self) -> str:
        return self.raw if self.raw is not None else json.dumps(self.decoded, default=str)

    @property
    def check_text(self) -> bool:
        """Whether its strings may hold what no warehouse can store (NUL, lone surrogate), so that parse_record
        must look: JSON text is searched for the escapes that write one, a Parquet row's batch was searched."""
        return self.batch_may_hold_nul if self.raw is None else limits.may_hold_unstorable(self.raw)


# A file that cannot be decoded past some point: what was read stays, the rest is one quarantine entry.
_CORRUPT_FILE = (EOFError, gzip.BadGzipFile, zlib.error, pa.ArrowInvalid)


def _read_records(source_file: SourceFile, storage_options: Mapping[str, Any] | None) -> Iterator[_Record]:
    """The file's records in file order."""
    fs, path = filesystem(source_file.url, storage_options)
    last = 0
    with storage_errors(source_file.url):
        try:
            with fs.open(path, "rb", compression="gzip" if path.endswith(".gz") else None) as handle:
                rows = _parquet_rows(handle) if path.endswith(".parquet") else _jsonl_lines(handle)
                for record in rows:
                    last = record.line
                    yield record
        except _CORRUPT_FILE as exc:  # a Parquet file (JSON lines end in their own record)
            yield _corrupt_after(last, exc)


def _corrupt_after(last: int, exc: BaseException) -> _Record:
    """The one record for the undecodable rest of a file whose records up to line (or row) ``last`` were read."""
    return _Record(last + 1, _Undecodable(f"file is corrupt after line {last}: {type(exc).__name__}: {exc}"), "")


class _PieceRecords:
    """The records of a slice piece as ``_read_records`` yields a file's. A byte range is read as the bytes from
    the newline before its first line start to the newline ending the last line that starts in it: line 1 is then
    that blank newline (a mid-file line is never taken for the file's first, whose byte order mark is dropped),
    and line n is the range's line n - 1. ``lines`` counts the range's lines once it has been read."""

    def __init__(self, piece: SlicePiece, storage_options: Mapping[str, Any] | None) -> None:
        self._piece = piece
        self._storage_options = storage_options
        self.lines = 0

    def __iter__(self) -> Iterator[_Record]:
        piece = self._piece
        if piece.kind == "file":
            yield from _read_records(piece.file, self._storage_options)
            return
        fs, path = filesystem(piece.file.url, self._storage_options)
        last = 0
        with storage_errors(piece.file.url):
            try:
                with fs.open(path, "rb") as handle:
                    if piece.kind == "row_groups":
                        parquet = pq.ParquetFile(handle)
                        last = sum(parquet.metadata.row_group(i).num_rows for i in range(piece.start))
                        for record in _row_group_rows(parquet, range(piece.start, piece.stop), last):
                            last = record.line
                            yield record
                        return
                    lead = int(piece.start > 0)
                    view = _ByteRange(handle, *_line_bounds(handle, piece))
                    yield from _jsonl_lines(view, lead)
                    self.lines = max(view.newlines - lead, 0)  # no newline at all from the start on
            except _CORRUPT_FILE as exc:  # a row group that cannot be decoded
                yield _corrupt_after(last, exc)


def _line_bounds(handle: Any, piece: SlicePiece) -> tuple[int | None, int]:
    """Where the bytes of a byte-range piece's lines begin (None: no line starts in it) and end."""
    begin = 0 if piece.start == 0 else _newline_at_or_after(handle, piece.start - 1)
    newline = _newline_at_or_after(handle, piece.stop - 1) if piece.stop < piece.file.size else None
    return begin, piece.file.size if newline is None else newline + 1


def _newline_at_or_after(handle: Any, position: int) -> int | None:
    handle.seek(position)
    while chunk := handle.read(_CHUNK_BYTES):
        if (found := chunk.find(b"\n")) >= 0:
            return position + found
        position += len(chunk)
    return None


class _ByteRange(io.RawIOBase):
    """Bytes [start, stop) of an open binary file as a file of their own, counting the newlines it hands out."""

    def __init__(self, handle: Any, start: int | None, stop: int) -> None:
        super().__init__()
        start = stop if start is None else start  # no line starts in the range
        handle.seek(start)
        self._handle = handle
        self._left = max(stop - start, 0)
        self.newlines = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._handle.read(min(len(buffer), self._left)) if self._left else b""
        buffer[: len(data)] = data
        self._left -= len(data)
        self.newlines += data.count(b"\n")
        return len(data)


def _row_group_rows(parquet: pq.ParquetFile, groups: range, before: int) -> Iterator[_Record]:
    """Rows of some row groups (a slice's, or a whole file's for ``_parquet_rows``), numbered from ``before`` + 1;
    a batch Python cannot read is read row by row."""
    number = before
    for record_batch in parquet.iter_batches(batch_size=2048, row_groups=groups):
        try:
            rows = record_batch.to_pylist()
        except (ValueError, OverflowError, pa.ArrowException):  # e.g. a timestamp beyond year 9999
            rows = [_parquet_row(record_batch.slice(i, 1)) for i in range(record_batch.num_rows)]
        check_text = _may_hold_nul(record_batch)
        for row in rows:
            number += 1
            yield _Record(number, row, "") if isinstance(row, _Undecodable) else _Record(number, row, None, check_text)


def _may_hold_nul(batch: pa.RecordBatch) -> bool:
    """Whether a string of ``batch``, or a field name (which can become a metadata key), may hold a NUL. Arrow's
    strings are valid UTF-8 (Python refuses encoded surrogates), so NUL is the one character read from Parquet
    that no warehouse can store; this looks at the values in bulk instead of at each row in Python."""
    return _names_hold_nul(batch.schema) or any(map(_array_may_hold_nul, batch.columns))


def _names_hold_nul(fields: Iterable[pa.Field]) -> bool:
    """Whether the name of one of ``fields``, or of a field nested in them, holds a NUL."""
    return any(
        "\x00" in field.name or _names_hold_nul(field.type.field(i) for i in range(field.type.num_fields))
        for field in fields
    )


def _array_may_hold_nul(array: pa.Array) -> bool:
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return pc.any(pc.match_substring(array, "\x00")).as_py() is True
    if pa.types.is_dictionary(kind):
        return _array_may_hold_nul(array.dictionary)
    if pa.types.is_struct(kind):
        return any(_array_may_hold_nul(array.field(i)) for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _array_may_hold_nul(array.keys) or _array_may_hold_nul(array.items)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _array_may_hold_nul(array.values)
    return kind.num_fields > 0  # another nested type (union, list view): let parse_record look


def _jsonl_lines(handle: Any, lead: int = 0) -> Iterator[_Record]:
    """Non-blank lines as records, numbered from 1 - ``lead``; a UTF-8 byte order mark opening the file is dropped,
    CRLF endings are read. A stream that cannot be decoded past some point (a gzip file cut short) ends in one
    record for its rest, numbered after its last complete line, blank or not."""
    number = -lead  # the last line read whole: a file that cannot be decoded further is corrupt after it
    lines = enumerate(_split_lines(handle), start=1 - lead)
    while True:
        try:
            number, (line, size) = next(lines)
        except StopIteration:
            return
        except _CORRUPT_FILE as exc:
            yield _corrupt_after(number, exc)
            return
        if number == 1 - lead and line.startswith(_BOM):
            line = line[len(_BOM) :]
        if size > limits.MAX_RECORD_BYTES:
            reason = f"line is {size:,} bytes, over the limit of {limits.MAX_RECORD_BYTES:,}"
            yield _Record(number, _Undecodable(reason), line.decode("utf-8", "replace"))
            continue
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield _Record(
                number, _Undecodable(f"line is not UTF-8: {exc.reason} at byte {exc.start}"), repr(line[:200])
            )
            continue
        raw = text.rstrip("\r\n")
        try:
            value = limits.loads_record(text, line)
        except limits.DuplicateKeyError as exc:
            yield _Record(number, _Undecodable(str(exc), limits.printable(exc.key)), raw)
        except limits.NestingError as exc:
            yield _Record(number, _Undecodable(str(exc)), raw)
        except json.JSONDecodeError as exc:
            yield _Record(number, _Undecodable(f"invalid JSON: {exc.msg} at column {exc.colno}"), raw)
        except ValueError:  # Python reads integers of up to 4,300 digits
            yield _Record(number, _Undecodable("a number has more than 4,300 digits, more than Python reads"), raw)
        else:
            yield _Record(number, value, raw)


def _split_lines(handle: Any) -> Iterator[tuple[bytes, int]]:
    """(line without its newline, its length in bytes) in file order, in memory bounded by MAX_RECORD_BYTES:
    of a longer line only the first RAW_EXCERPT_CHARS bytes are kept.

    Each chunk read is split, and the lines it completes handed out, before the next read: a gzip stream cut short
    raises only on the read after its last decompressed bytes, so every complete line before the cut comes out (a
    buffered reader's ``readline`` loses what the fill that meets the cut had decompressed). ``read1`` returns
    what one decompression step gives; fsspec's remote files and ``_ByteRange`` have ``read`` only."""
    read = getattr(handle, "read1", handle.read)
    limit = limits.MAX_RECORD_BYTES
    head: list[bytes] = []  # the start of a line that earlier chunks began, cut to an excerpt once over the limit
    size = 0  # that line's length so far
    while chunk := read(_CHUNK_BYTES):
        lines = chunk.split(b"\n")
        tail = lines.pop()  # after the chunk's last newline: a line not complete yet
        if head and lines:
            head.append(lines[0])
            size += len(lines[0])
            line = b"".join(head)
            yield line[:RAW_EXCERPT_CHARS] if size > limit else line, size
            head, size = [], 0
            del lines[0]
        yield from zip(lines, map(len, lines), strict=True)  # a chunk is far smaller than the limit
        if tail:
            head.append(tail)
            size += len(tail)
            if size > limit:
                head = [b"".join(head)[:RAW_EXCERPT_CHARS]]
    if head:  # a last line without a newline
        line = b"".join(head)
        yield line[:RAW_EXCERPT_CHARS] if size > limit else line, size


def _parquet_rows(handle: Any) -> Iterator[_Record]:
    """A Parquet file's rows, numbered from 1."""
    parquet = pq.ParquetFile(handle)
    return _row_group_rows(parquet, range(parquet.num_row_groups), 0)


def _parquet_row(row: pa.RecordBatch) -> dict[str, Any] | _Undecodable:
    try:
        return row.to_pylist()[0]
    except (ValueError, OverflowError, pa.ArrowException) as exc:
        return _Undecodable(f"row has values Python cannot read: {type(exc).__name__}: {exc}")


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
