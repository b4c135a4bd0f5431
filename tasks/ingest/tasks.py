"""The staging tasks: list a day of trace files and stage them (``staging``), cached on the files' identities.

Canonical traces are staged in bounded slices, one cached task each on the flow's task runner (``stage_day``), so
that no worker reads a whole day; span formats group spans across files and stay one task per day."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable
from typing import Any

from prefect import get_run_logger, task, unmapped
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext
from prefect.futures import as_completed
from prefect.runtime import task_run

from ragpulse.tasks.core import types as run_types
from ragpulse.tasks.core.fingerprint import code_fingerprint, digest
from ragpulse.tasks.core.retry import IO_RETRIES
from ragpulse.tasks.core.storage import SourceFile, filesystem, storage_errors
from ragpulse.tasks.core.types import BatchRef, StagedPartition
from ragpulse.tasks.ingest import adapters, counts, limits, reading, records, slicing, staging
from ragpulse.tasks.ingest import language as language_id
from ragpulse.tasks.ingest.config import SourceConfig
from ragpulse.tasks.ingest.slicing import SlicePiece, StagedSlice, combine_slices, plan_slices, slice_label
from ragpulse.tasks.ingest.staging import select_source_files, stage_records

__all__ = ["list_partition", "missing_batches", "plan_staging", "stage_day", "stage_partition", "stage_slice"]


@task(name="list-partition", cache_policy=NO_CACHE, persist_result=False, **IO_RETRIES)
def list_partition(source: SourceConfig, date: dt.date) -> list[SourceFile]:
    """List the day's trace files (never cached: new files must be seen); see ``select_source_files``."""
    files = select_source_files(
        source.url,
        date,
        source.storage_options,
        trace_format=source.format,
        partitioning=source.partitioning,
        late_arrival_hours=source.late_arrival_hours,
    )
    get_run_logger().info("%s: %d trace files, %d bytes", date, len(files), sum(f.size for f in files))
    return files


def _day_of(source: SourceConfig, date: dt.date) -> str:
    """The day, where it is part of a staging's identity: under event-time partitioning one file feeds two days."""
    return date.isoformat() if source.partitioning == "event-time" else ""


def _stage_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    source: SourceConfig = params["source"]
    identity = [(f.url, f.size, f.version) for f in params["files"]]
    options = adapters.parse_options(source.format, source.format_options).to_dict()
    return "stage-partition-" + digest(
        identity,
        params["batch_size"],
        params["staged_url"],
        source.format,
        json.dumps(options, sort_keys=True),
        source.partitioning,
        _day_of(source, params["date"]),
        source.language or "",
        code_fingerprint(
            sys.modules[__name__], staging, slicing, reading, counts, records, limits, adapters, run_types, language_id
        ),
    )


@task(name="stage-partition", cache_key_fn=_stage_key, persist_result=True, **IO_RETRIES)
def stage_partition(
    date: dt.date, files: list[SourceFile], source: SourceConfig, *, staged_url: str, batch_size: int
) -> StagedPartition:
    """Validate and stage every trace of the day; cached on the files' identities (URL, size, ETag), the
    format and its options, the default language, and the code."""
    staged = stage_records(
        date,
        files,
        staged_url=staged_url,
        batch_size=batch_size,
        storage_options=source.storage_options,
        work_storage_options=source.storage_options,
        trace_format=source.format,
        format_options=source.format_options,
        partitioning=source.partitioning,
        language=source.language,
    )
    get_run_logger().info(
        "%s (%s): read %d records, staged %d traces in %d batches, quarantined %d records, "
        "%d traces of other days left out, %d duplicate spans",
        date,
        source.format,
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


@task(name="plan-staging", cache_policy=NO_CACHE, persist_result=False, **IO_RETRIES)
def plan_staging(files: list[SourceFile], source: SourceConfig) -> list[tuple[SlicePiece, ...]]:
    """The day's staging slices of about ``source.slice_mb`` (never cached, like the listing it cuts)."""
    return plan_slices(files, source.slice_bytes, source.storage_options)


def _slice_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    source: SourceConfig = params["source"]
    identity = [(p.file.url, p.file.size, p.file.version, p.kind, p.start, p.stop) for p in params["pieces"]]
    return "stage-slice-" + digest(
        identity,
        params["batch_size"],
        params["staged_url"],
        source.partitioning,
        _day_of(source, params["date"]),
        source.language or "",
        code_fingerprint(
            sys.modules[__name__], staging, slicing, reading, counts, records, limits, run_types, language_id
        ),
    )


def _slice_run_name() -> str:
    return f"stage-slice {slice_label(task_run.parameters['pieces'])}"


@task(name="stage-slice", task_run_name=_slice_run_name, cache_key_fn=_slice_key, persist_result=True, **IO_RETRIES)
def stage_slice(
    date: dt.date, pieces: tuple[SlicePiece, ...], source: SourceConfig, *, staged_url: str, batch_size: int
) -> StagedSlice:
    """Validate and stage one slice of a day of canonical traces; cached on the identities of its files and the
    ranges it reads, the batch size, the partitioning, the default language and the code."""
    return staging.stage_slice(
        date,
        pieces,
        staged_url=staged_url,
        batch_size=batch_size,
        storage_options=source.storage_options,
        work_storage_options=source.storage_options,
        partitioning=source.partitioning,
        language=source.language,
    )


def stage_day(
    date: dt.date,
    files: list[SourceFile],
    source: SourceConfig,
    *,
    staged_url: str,
    batch_size: int,
    result_storage: Any,
    on_slice: Callable[[int, int, int], None] | None = None,
) -> StagedPartition:
    """Stage a day from a flow: canonical traces as slices of about ``source.slice_mb`` mapped on the flow's task
    runner and combined here, a span format in one ``stage_partition`` task. The staged batches go to
    ``staged_url``, reached with the source's storage options. A cached slice (or staging) whose batches are gone
    is staged again, and only that one.

    ``on_slice(slices, of, traces)``, if given, is called here, in the caller's thread: once before staging (0 of
    the day's slices), then as each slice is done, with the valid traces staged so far (a span format is one
    slice). A slice staged again because its batches were gone is not reported twice."""
    logger = get_run_logger()
    work_options = source.storage_options
    if adapters.adapter_for(source.format) is not None:
        whole = stage_partition.with_options(result_storage=result_storage)
        if on_slice is not None:
            on_slice(0, 1, 0)
        staged = whole(date, files, source, staged_url=staged_url, batch_size=batch_size)
        if on_slice is not None:
            on_slice(1, 1, staged.n_valid)
        if gone := missing_batches(staged, work_options):
            logger.warning("%d staged batches of the cached staging are gone; staging the day again", len(gone))
            staged = whole.with_options(refresh_cache=True)(
                date, files, source, staged_url=staged_url, batch_size=batch_size
            )
        return staged
    plan = plan_staging(files, source)
    stage = stage_slice.with_options(result_storage=result_storage)

    def stage_all(
        pieces: list[tuple[SlicePiece, ...]], task: Any = stage, report: Callable[[int, int, int], None] | None = None
    ) -> list[StagedSlice]:
        futures = task.map(
            pieces=pieces, date=unmapped(date), source=unmapped(source), staged_url=staged_url, batch_size=batch_size
        )
        if report is not None:
            report(0, len(futures), 0)
            traces = 0
            for done, future in enumerate(as_completed(list(futures)), start=1):
                future.wait()  # sets the future's final state; a failed slice raises below, in plan order
                if future.state.is_completed():
                    traces += future.result().staged.n_valid
                report(done, len(futures), traces)
        return [future.result() for future in futures]

    parts = stage_all(plan, report=on_slice)
    stale = [i for i, part in enumerate(parts) if missing_batches(part.staged, work_options)]
    if stale:
        logger.warning("%d cached staging slices have batches that are gone; staging them again", len(stale))
        again = stage_all([plan[i] for i in stale], stage.with_options(refresh_cache=True))
        for i, part in zip(stale, again, strict=True):
            parts[i] = part
    staged = combine_slices(date, files, parts)
    counts = staged.counts or run_types.StagingCounts()
    logger.info(
        "%s: %d slices read %d records, staged %d traces in %d batches, quarantined %d records, "
        "%d traces of other days left out",
        date, len(plan), counts.records_read, staged.n_valid, len(staged.batches), len(staged.quarantined),
        staged.n_other_days,
    )  # fmt: skip
    return staged
