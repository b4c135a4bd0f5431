"""Reading trace files record by record, in bounded memory: JSONL lines (plain or gzip), Parquet rows, byte ranges.

A record that cannot be decoded (not UTF-8, not JSON, over the limits of ``tasks/ingest/limits``, Parquet values
Python cannot read) comes out in its place as an ``Undecodable`` with the reason, numbered like the others, so that
its reader can quarantine it at its line; so does the unreadable rest of a corrupt file (a gzip file cut short). Only
bytes to numbered records: what becomes of a record is staging's business.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ragpulse.tasks.core.storage import SourceFile, filesystem, storage_errors
from ragpulse.tasks.ingest import limits

__all__ = [
    "CORRUPT_FILE",
    "RAW_EXCERPT_CHARS",
    "ByteRange",
    "Record",
    "Undecodable",
    "corrupt_after",
    "jsonl_lines",
    "newline_at_or_after",
    "read_records",
    "row_group_rows",
]

RAW_EXCERPT_CHARS = 2000
_CHUNK_BYTES = 2**16  # read at a time; a line longer than this is joined from several reads
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Undecodable:
    """A record that cannot be parsed: not UTF-8, not JSON, over a limit, unreadable Parquet values."""

    reason: str
    field: str = "<record>"


class Record(NamedTuple):
    """One canonical record as read: its line (or row) number, its value (or Undecodable) and its raw text."""

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
CORRUPT_FILE = (EOFError, gzip.BadGzipFile, zlib.error, pa.ArrowInvalid)


def read_records(source_file: SourceFile, storage_options: Mapping[str, Any] | None) -> Iterator[Record]:
    """The file's records in file order."""
    fs, path = filesystem(source_file.url, storage_options)
    last = 0
    with storage_errors(source_file.url):
        try:
            with fs.open(path, "rb", compression="gzip" if path.endswith(".gz") else None) as handle:
                rows = _parquet_rows(handle) if path.endswith(".parquet") else jsonl_lines(handle)
                for record in rows:
                    last = record.line
                    yield record
        except CORRUPT_FILE as exc:  # a Parquet file (JSON lines end in their own record)
            yield corrupt_after(last, exc)


def corrupt_after(last: int, exc: BaseException) -> Record:
    """The one record for the undecodable rest of a file whose records up to line (or row) ``last`` were read."""
    return Record(last + 1, Undecodable(f"file is corrupt after line {last}: {type(exc).__name__}: {exc}"), "")


def newline_at_or_after(handle: Any, position: int) -> int | None:
    """Where the first newline at or after byte ``position`` of an open binary file is (None: there is none)."""
    handle.seek(position)
    while chunk := handle.read(_CHUNK_BYTES):
        found: int = chunk.find(b"\n")
        if found >= 0:
            return position + found
        position += len(chunk)
    return None


class ByteRange(io.RawIOBase):
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


def row_group_rows(parquet: pq.ParquetFile, groups: range, before: int) -> Iterator[Record]:
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
            yield Record(number, row, "") if isinstance(row, Undecodable) else Record(number, row, None, check_text)


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
    return bool(kind.num_fields > 0)  # another nested type (union, list view): let parse_record look


def jsonl_lines(handle: Any, lead: int = 0) -> Iterator[Record]:
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
        except CORRUPT_FILE as exc:
            yield corrupt_after(number, exc)
            return
        if number == 1 - lead and line.startswith(_BOM):
            line = line[len(_BOM) :]
        if size > limits.MAX_RECORD_BYTES:
            reason = f"line is {size:,} bytes, over the limit of {limits.MAX_RECORD_BYTES:,}"
            yield Record(number, Undecodable(reason), line.decode("utf-8", "replace"))
            continue
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield Record(number, Undecodable(f"line is not UTF-8: {exc.reason} at byte {exc.start}"), repr(line[:200]))
            continue
        raw = text.rstrip("\r\n")
        try:
            value = limits.loads_record(text, line)
        except limits.DuplicateKeyError as exc:
            yield Record(number, Undecodable(str(exc), limits.printable(exc.key)), raw)
        except limits.NestingError as exc:
            yield Record(number, Undecodable(str(exc)), raw)
        except json.JSONDecodeError as exc:
            yield Record(number, Undecodable(f"invalid JSON: {exc.msg} at column {exc.colno}"), raw)
        except ValueError:  # Python reads integers of up to 4,300 digits
            yield Record(number, Undecodable("a number has more than 4,300 digits, more than Python reads"), raw)
        else:
            yield Record(number, value, raw)


def _split_lines(handle: Any) -> Iterator[tuple[bytes, int]]:
    """(line without its newline, its length in bytes) in file order, in memory bounded by MAX_RECORD_BYTES:
    of a longer line only the first RAW_EXCERPT_CHARS bytes are kept.

    Each chunk read is split, and the lines it completes handed out, before the next read: a gzip stream cut short
    raises only on the read after its last decompressed bytes, so every complete line before the cut comes out (a
    buffered reader's ``readline`` loses what the fill that meets the cut had decompressed). ``read1`` returns
    what one decompression step gives; fsspec's remote files and ``ByteRange`` have ``read`` only."""
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


def _parquet_rows(handle: Any) -> Iterator[Record]:
    """A Parquet file's rows, numbered from 1."""
    parquet = pq.ParquetFile(handle)
    return row_group_rows(parquet, range(parquet.num_row_groups), 0)


def _parquet_row(row: pa.RecordBatch) -> dict[str, Any] | Undecodable:
    try:
        record: dict[str, Any] = row.to_pylist()[0]
        return record
    except (ValueError, OverflowError, pa.ArrowException) as exc:
        return Undecodable(f"row has values Python cannot read: {type(exc).__name__}: {exc}")
