"""A day of canonical traces in slices, one staging task each, so that no worker reads a whole day.

``plan_slices`` cuts the day: small files whole, larger plain JSONL files by byte range (a record belongs to the slice
where its line starts), Parquet files by row groups; gzip files cannot be cut and stay one slice each.
``PieceRecords`` reads a slice's part of a file. A byte-range slice cannot know the lines before it, so it numbers its
lines from its own start; ``combine_slices`` shifts them by the lines of the file's earlier slices, into the
quarantine entries and into ``BatchRef.line_offset``, which ``read_staged`` adds to the staged ``source_line``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from ragpulse.tasks.core.storage import SourceFile, filesystem, storage_errors
from ragpulse.tasks.core.types import BatchRef, QuarantinedRecord, StagedPartition, StagingCounts
from ragpulse.tasks.ingest.counts import check_counts
from ragpulse.tasks.ingest.reading import (
    CORRUPT_FILE,
    ByteRange,
    Record,
    corrupt_after,
    jsonl_lines,
    newline_at_or_after,
    read_records,
    row_group_rows,
)

__all__ = ["PieceRecords", "SlicePiece", "StagedSlice", "combine_slices", "plan_slices", "slice_label"]


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


class PieceRecords:
    """The records of a slice piece as ``read_records`` yields a file's. A byte range is read as the bytes from
    the newline before its first line start to the newline ending the last line that starts in it: line 1 is then
    that blank newline (a mid-file line is never taken for the file's first, whose byte order mark is dropped),
    and line n is the range's line n - 1. ``lines`` counts the range's lines once it has been read."""

    def __init__(self, piece: SlicePiece, storage_options: Mapping[str, Any] | None) -> None:
        self._piece = piece
        self._storage_options = storage_options
        self.lines = 0

    def __iter__(self) -> Iterator[Record]:
        piece = self._piece
        if piece.kind == "file":
            yield from read_records(piece.file, self._storage_options)
            return
        fs, path = filesystem(piece.file.url, self._storage_options)
        last = 0
        with storage_errors(piece.file.url):
            try:
                with fs.open(path, "rb") as handle:
                    if piece.kind == "row_groups":
                        parquet = pq.ParquetFile(handle)
                        last = sum(parquet.metadata.row_group(i).num_rows for i in range(piece.start))
                        for record in row_group_rows(parquet, range(piece.start, piece.stop), last):
                            last = record.line
                            yield record
                        return
                    lead = int(piece.start > 0)
                    view = ByteRange(handle, *_line_bounds(handle, piece))
                    yield from jsonl_lines(view, lead)
                    self.lines = max(view.newlines - lead, 0)  # no newline at all from the start on
            except CORRUPT_FILE as exc:  # a row group that cannot be decoded
                yield corrupt_after(last, exc)


def _line_bounds(handle: Any, piece: SlicePiece) -> tuple[int | None, int]:
    """Where the bytes of a byte-range piece's lines begin (None: no line starts in it) and end."""
    begin = 0 if piece.start == 0 else newline_at_or_after(handle, piece.start - 1)
    newline = newline_at_or_after(handle, piece.stop - 1) if piece.stop < piece.file.size else None
    return begin, piece.file.size if newline is None else newline + 1


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
    check_counts(date, counts, len(quarantined), records_parsed=counts.traces_read)
    return StagedPartition(date, files, batches, quarantined, counts)


def _shifted(ref: BatchRef, shift: int) -> BatchRef:
    """A batch whose lines read ``shift`` higher; its hash (the scoring cache key) covers the shift, since the
    same bytes staged from another place in a file are other lines."""
    if not shift:
        return ref
    content_hash = hashlib.sha256(f"{ref.content_hash}+{shift}".encode()).hexdigest()
    return BatchRef(ref.url, content_hash, ref.n_rows, line_offset=ref.line_offset + shift)
