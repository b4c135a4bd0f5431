"""The staging tasks: list a day of trace files and stage them (``staging``), cached on the files' identities."""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext

from ragpulse.tasks.core import types as run_types
from ragpulse.tasks.core.fingerprint import code_fingerprint, digest
from ragpulse.tasks.core.retry import IO_RETRIES
from ragpulse.tasks.core.storage import SourceFile, filesystem, storage_errors
from ragpulse.tasks.core.types import BatchRef, StagedPartition
from ragpulse.tasks.ingest import adapters, limits, records, staging
from ragpulse.tasks.ingest import language as language_id
from ragpulse.tasks.ingest.staging import select_source_files, stage_records

__all__ = ["list_partition", "missing_batches", "stage_partition"]


@task(name="list-partition", cache_policy=NO_CACHE, persist_result=False, **IO_RETRIES)
def list_partition(
    source: str,
    date: dt.date,
    storage_options: dict[str, Any] | None = None,
    *,
    trace_format: str = "ragpulse",
    partitioning: str = "dt",
    late_arrival_hours: float = 0.0,
) -> list[SourceFile]:
    """List the day's trace files (never cached: new files must be seen); see ``select_source_files``."""
    files = select_source_files(
        source,
        date,
        storage_options,
        trace_format=trace_format,
        partitioning=partitioning,
        late_arrival_hours=late_arrival_hours,
    )
    get_run_logger().info("%s: %d trace files, %d bytes", date, len(files), sum(f.size for f in files))
    return files


def _stage_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    files = params["files"]
    identity = [(f.url, f.size, f.version) for f in files]
    trace_format = params.get("trace_format", "ragpulse")
    options = adapters.parse_options(trace_format, params.get("format_options")).to_dict()
    # Under event-time partitioning one file can feed two days, so the day is part of the key.
    partitioning = params.get("partitioning", "dt")
    day = params["date"].isoformat() if partitioning == "event-time" else ""
    language = params.get("language") or ""
    return "stage-partition-" + digest(
        identity,
        params["batch_size"],
        params["staged_url"],
        trace_format,
        json.dumps(options, sort_keys=True),
        partitioning,
        day,
        language,
        code_fingerprint(sys.modules[__name__], staging, records, limits, adapters, run_types, language_id),
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
    trace_format: str = "ragpulse",
    format_options: dict[str, Any] | None = None,
    partitioning: str = "dt",
    language: str | None = None,
) -> StagedPartition:
    """Validate and stage every trace of the day; cached on the files' identities (URL, size, ETag), the
    format and its options, the default language, and the code."""
    staged = stage_records(
        date,
        files,
        staged_url=staged_url,
        batch_size=batch_size,
        storage_options=storage_options,
        work_storage_options=work_storage_options,
        trace_format=trace_format,
        format_options=format_options,
        partitioning=partitioning,
        language=language,
    )
    get_run_logger().info(
        "%s (%s): read %d records, staged %d traces in %d batches, quarantined %d records, "
        "%d traces of other days left out, %d duplicate spans",
        date,
        trace_format,
        staged.counts.records_read if staged.counts is not None else 0,
        staged.n_valid,
        len(staged.batches),
        len(staged.quarantined),
        staged.n_other_days,
        staged.n_duplicate_spans,
    )
    return staged


def missing_batches(staged: StagedPartition, storage_options: dict[str, Any] | None = None) -> list[BatchRef]:
    """The staged batches of a (possibly cached) staging whose files are gone: a cleaned work dir or a bucket
    lifecycle rule removes them while the task cache still points at them, and the day must be staged again."""
    if not staged.batches:
        return []
    fs, _ = filesystem(staged.batches[0].url, storage_options)
    fs.invalidate_cache()  # another process may have removed (or written) them since this one last looked
    with storage_errors(staged.batches[0].url):
        return [batch for batch in staged.batches if not fs.exists(filesystem(batch.url, storage_options)[1])]
