"""Object storage through fsspec: partition listing, file identity and error translation.

Any fsspec URL works (``file://``, plain paths, ``s3://`` via s3fs, ``gs://`` via gcsfs). s3fs reads
credentials and ``AWS_ENDPOINT_URL_S3`` from the environment; ``storage_options`` carries the rest
(e.g. ``endpoint_url`` for MinIO or R2).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import posixpath
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec import AbstractFileSystem

from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.exceptions import ConfigError, PartitionNotFoundError, StorageError
from ragpulse.tasks.core.partitions import DEFAULT_PARTITIONING, PARTITIONINGS, Partitioning
from ragpulse.tasks.core.redaction import carries_secret, redact_url, redacted_line, reject_credentials, secret_values

__all__ = [
    "DEFAULT_PARTITIONING",
    "PARTITIONINGS",
    "TRACE_SUFFIXES",
    "NoTraceFilesError",
    "Partitioning",
    "SourceFile",
    "carries_secret",
    "check_source_root",
    "event_time_window",
    "file_identity",
    "filesystem",
    "list_partition_files",
    "local_write_errors",
    "partition_dates",
    "redact_url",
    "redacted_line",
    "reject_credentials",
    "secret_values",
    "storage_errors",
]

TRACE_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
_log = logging.getLogger(__name__)
_PARTITION = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class SourceFile:
    """One trace file and the identity that tells whether it changed since a cached run."""

    url: str
    size: int
    version: str

    @property
    def name(self) -> str:
        return posixpath.basename(self.url)


def filesystem(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[AbstractFileSystem, str]:
    """The filesystem for ``url`` and the path inside it."""
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except (ImportError, ValueError) as exc:
        raise ConfigError(f"cannot open storage URL {url!r}: {exc}") from exc
    if fs.async_impl:
        _quiet_orphaned_body_writers()
    return fs, path.rstrip("/")


def _quiet_orphaned_body_writers() -> None:
    """Keep aiohttp's orphaned request-body writers off the terminal, on fsspec's event loop, which every s3fs
    client shares (sources, work dir, reports, pyiceberg's FsspecFileIO): a PUT sent with ``Expect: 100-continue``
    (botocore's) runs its body in a task of its own, and when the store drops the connection that task fails and
    nobody awaits it, so asyncio printed a "Task exception was never retrieved" traceback per attempt when it was
    collected. The request itself fails too, and that error (retried, then raised in one line) is the one that
    counts; the writer's becomes a DEBUG line. Any other unhandled exception on the loop goes to the handler that
    was there before."""
    import aiohttp
    import fsspec.asyn

    loop = fsspec.asyn.get_loop()
    previous = loop.get_exception_handler()
    if getattr(previous, "__name__", None) == "_body_writer_handler":
        return

    def _body_writer_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error, task = context.get("exception"), context.get("future")
        coro = task.get_coro() if isinstance(task, asyncio.Task) else None
        if isinstance(error, aiohttp.ClientConnectionError | OSError) and (
            getattr(coro, "__qualname__", None) == "ClientRequest.write_bytes"
        ):
            _log.debug("the body writer of a failed S3 request ended with %s: %s; the request's own error is "
                       "reported", type(error).__name__, redacted_line(error))  # fmt: skip
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(_body_writer_handler)


@contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """Translate client errors: missing and forbidden are final, everything else is transient."""
    try:
        yield
    except RagpulseError:
        raise
    except FileNotFoundError:
        raise
    except PermissionError as exc:
        raise ConfigError(f"access denied to {url}: {exc}; check the credentials in the environment") from exc
    except (OSError, TimeoutError, ConnectionError) as exc:
        raise StorageError(f"storage error on {url}: {exc}") from exc
    except Exception as exc:
        if isinstance(exc, _botocore_transient()):
            raise StorageError(f"storage error on {url}: {exc}") from exc
        raise


@contextmanager
def local_write_errors(out: str) -> Iterator[None]:
    """Around writing a command's local ``--out`` file: a path that cannot be written (a file where its folder
    should be, no permission) is the option's mistake, a one-line ConfigError, not a storage outage."""
    try:
        yield
    except OSError as exc:
        raise ConfigError(f"cannot write --out {out}: {exc}") from None


def _botocore_transient() -> tuple[type[BaseException], ...]:
    """botocore's connection and HTTP-client errors, which s3fs passes through untranslated (not OSErrors).

    Looked up lazily: when botocore is not loaded, no client of it can have raised.
    """
    exceptions = sys.modules.get("botocore.exceptions")
    if exceptions is None:
        return ()
    return (exceptions.ConnectionError, exceptions.HTTPClientError)


def _unstrip(fs: AbstractFileSystem, path: str) -> str:
    return fs.unstrip_protocol(path) if fs.protocol not in ("file", ("file", "local")) else path


def _version(info: Mapping[str, Any]) -> str:
    for key in ("ETag", "etag", "md5Hash", "generation", "mtime", "LastModified", "last_modified", "updated"):
        if info.get(key) is not None:
            return str(info[key]).strip('"')
    return ""


def partition_dates(source: str, storage_options: Mapping[str, Any] | None = None) -> list[dt.date]:
    """Every ``dt=YYYY-MM-DD`` partition under ``source``, sorted."""
    fs, root = filesystem(source, storage_options)
    with storage_errors(source):
        fs.invalidate_cache(root)
        try:
            entries = fs.ls(root, detail=False)
        except FileNotFoundError:
            return []
    dates = []
    for entry in entries:
        match = _PARTITION.match(posixpath.basename(str(entry).rstrip("/")))
        if match:
            dates.append(dt.date.fromisoformat(match[1]))
    return sorted(dates)


def file_identity(url: str, storage_options: Mapping[str, Any] | None = None) -> SourceFile:
    """The identity of one file named by URL (FileNotFoundError when it is not there)."""
    fs, path = filesystem(url, storage_options)
    with storage_errors(url):
        info = fs.info(path)
    return SourceFile(url=_unstrip(fs, info["name"]), size=int(info.get("size") or 0), version=_version(info))


def _modified(info: Mapping[str, Any]) -> dt.datetime | None:
    """Last modification time from a listing entry (local ``mtime``, S3 ``LastModified``, GCS ``updated``)."""
    for key in ("LastModified", "last_modified", "updated", "mtime", "created"):
        value = info.get(key)
        if isinstance(value, dt.datetime):
            return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        if isinstance(value, int | float):
            return dt.datetime.fromtimestamp(value, tz=dt.UTC)
        if isinstance(value, str):
            try:
                parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    return None


def event_time_window(date: dt.date, late_arrival_hours: float) -> tuple[dt.datetime, dt.datetime]:
    """Files modified in [D 00:00 - late, D+1 00:00 + late) UTC can hold spans of traces that started on D,
    or spans that tell a trace started the day before (a root flushed just before midnight)."""
    start = dt.datetime.combine(date, dt.time(), tzinfo=dt.UTC)
    late = dt.timedelta(hours=late_arrival_hours)
    return start - late, start + dt.timedelta(days=1) + late


class NoTraceFilesError(PartitionNotFoundError):
    """A day has no trace files for a reason other than a missing ``dt=`` folder; the message says which."""

    def __init__(self, source: str, date: dt.date, why: str) -> None:
        self.source = source
        self.date = date.isoformat()
        self.available = []
        Exception.__init__(self, f"no trace files for {date} under {source}: {why}")


def check_source_root(source: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Refuse a source root that is not there or is not a folder, before any work: a mistyped bucket or prefix would
    otherwise read as a day without traces (exit 3) every day. One ``info`` call (on S3 a HEAD and a one-key
    listing), never a listing of the source."""
    fs, root = filesystem(source, storage_options)
    with storage_errors(source):
        fs.invalidate_cache(root)
        try:
            info = fs.info(root)
        except FileNotFoundError:
            info = None
    if info is None or info.get("type") != "directory":
        what = "does not exist" if info is None else "is not a folder"
        raise ConfigError(f"source {redact_url(source)} {what} (setting `source`): check its bucket and prefix")


def list_partition_files(
    source: str,
    date: dt.date,
    storage_options: Mapping[str, Any] | None = None,
    *,
    partitioning: str = DEFAULT_PARTITIONING,
    late_arrival_hours: float = 0.0,
    recursive: bool = False,
    suffixes: tuple[str, ...] = TRACE_SUFFIXES,
) -> list[SourceFile]:
    """Trace files of one day in name order; raises PartitionNotFoundError when there are none.

    ``dt``: the files of ``<source>/dt=<date>/`` (and its subfolders when ``recursive``). ``event-time``:
    every file below ``source`` whose modification time lies in :func:`event_time_window`; a file whose
    store reports no modification time is read (staging's event-time filter still keeps only the day).
    """
    if partitioning not in PARTITIONINGS:
        raise ConfigError(f"unknown partitioning {partitioning!r}; use one of {', '.join(PARTITIONINGS)}")
    fs, root = filesystem(source, storage_options)
    directory = root if partitioning == "event-time" else f"{root}/dt={date.isoformat()}"
    with storage_errors(source):
        fs.invalidate_cache(directory)
        try:
            if recursive or partitioning == "event-time":
                listing = list(fs.find(directory, detail=True).values())
            else:
                listing = fs.ls(directory, detail=True)
        except FileNotFoundError:
            listing = []
    if partitioning == "event-time":
        low, high = event_time_window(date, late_arrival_hours)
        listing = [e for e in listing if (m := _modified(e)) is None or low <= m < high]
    files = sorted(
        (
            SourceFile(url=_unstrip(fs, entry["name"]), size=int(entry.get("size") or 0), version=_version(entry))
            for entry in listing
            if entry.get("type") == "file" and str(entry["name"]).endswith(suffixes)
        ),
        key=lambda f: f.url,
    )
    if not files:
        if partitioning == "event-time":
            low, high = event_time_window(date, late_arrival_hours)
            why = f"none was modified between {low:%Y-%m-%d %H:%M} and {high:%Y-%m-%d %H:%M} UTC (event-time)"
            raise NoTraceFilesError(source, date, why)
        present = partition_dates(source, storage_options)
        nearest = sorted(present, key=lambda d: abs((d - date).days))[:5]
        raise PartitionNotFoundError(source, date.isoformat(), [d.isoformat() for d in sorted(nearest)])
    return files
