"""Score one date partition of RAG traces, gate it with data-quality suites and publish the score tables."""

from __future__ import annotations

import datetime as dt
from typing import Any

from prefect import flow, unmapped
from prefect.task_runners import ThreadPoolTaskRunner

from ragpulse.metrics import DEFAULT_METRICS
from ragpulse.tasks.core.config import RunSettings
from ragpulse.tasks.core.workdir import local_docs_dir, lock_directory, result_storage, run_dir, staged_dir
from ragpulse.tasks.ingest.stage import list_partition, stage_partition
from ragpulse.tasks.quality.validate import TraceLimits, validate_scores, validate_traces
from ragpulse.tasks.reporting.summary import RunSummary, summarize_run
from ragpulse.tasks.scoring.judged import judge_score_batch
from ragpulse.tasks.scoring.score import count_cached, fresh_usage, score_batch, score_cache_policy
from ragpulse.tasks.warehouse.publish import assemble_scores, plan_run, publish_partition

__all__ = ["evaluate_partition"]


@flow(name="evaluate-partition", task_runner=ThreadPoolTaskRunner(max_workers=4), log_prints=False)
def evaluate_partition(
    source: str,
    date: dt.date,
    metrics: list[str] | None = None,
    warehouse: str = "duckdb:///ragpulse.duckdb",
    work_dir: str = ".ragpulse",
    batch_size: int = 5000,
    storage_options: dict[str, Any] | None = None,
    max_failure_rate: float = 0.05,
    input_suite: str | None = None,
    output_suite: str | None = None,
    limits: TraceLimits | None = None,
    judge_model: str | None = None,
    judge_base_url: str | None = None,
    judge_config: str | None = None,
    sample_rate: float = 1.0,
    trace_format: str = "ragpulse",
    format_options: dict[str, Any] | None = None,
    partitioning: str = "dt",
    late_arrival_hours: float = 6.0,
) -> RunSummary:
    """Read one day of ``source``, score it in cached parallel batches, validate, publish to ``warehouse``.

    The day is ``<source>/dt=<date>/``, or with ``partitioning="event-time"`` the traces whose event time
    falls on ``date`` (UTC) among files modified up to ``late_arrival_hours`` around it. ``trace_format``
    reads a tracing tool's export instead of canonical traces, ``format_options`` tunes its field mapping
    (docs/traces.md). Judge metrics need ``judge_model`` (or RAGPULSE_JUDGE_MODEL); without one they are
    skipped and the run says so. The API key only ever comes from the environment or a Prefect Secret block.
    """
    settings = RunSettings(
        source=source, warehouse=warehouse, work_dir=work_dir, batch_size=batch_size,
        metrics=tuple(metrics or DEFAULT_METRICS), storage_options=storage_options or {},
        max_failure_rate=max_failure_rate, input_suite=input_suite, output_suite=output_suite,
        sample_rate=sample_rate, judge_config=judge_config, trace_format=trace_format,
        format_options=format_options or {}, partitioning=partitioning, late_arrival_hours=late_arrival_hours,
    )  # fmt: skip
    planned = plan_run(settings, judge_model=judge_model, judge_base_url=judge_base_url)
    judge, options, plan, run = planned.judge, planned.options, planned.judging, planned.run
    storage = result_storage(work_dir, storage_options)
    outputs = run_dir(work_dir, date, run.run_id)
    docs = local_docs_dir(work_dir, date, run.run_id)

    files = list_partition(
        source, date, storage_options, trace_format=settings.trace_format, partitioning=settings.partitioning,
        late_arrival_hours=settings.late_arrival_hours,
    )  # fmt: skip
    staged = stage_partition.with_options(result_storage=storage)(
        date, files, staged_url=staged_dir(work_dir, storage_options), batch_size=batch_size,
        storage_options=storage_options, work_storage_options=storage_options, trace_format=settings.trace_format,
        format_options=settings.format_options, partitioning=settings.partitioning,
    )  # fmt: skip
    traces_checked = validate_traces.submit(staged, run, limits or TraceLimits(), input_suite, docs, storage_options)
    scoring = score_batch.with_options(
        cache_policy=score_cache_policy(lock_directory(work_dir)), result_storage=storage
    )
    futures = scoring.map(
        staged.batches, metric_names=unmapped(plan.plain), work_storage_options=unmapped(storage_options)
    )
    judged = judge_score_batch.with_options(result_storage=storage).map(
        plan.batches(staged), metric_names=unmapped(plan.judged), judge_settings=unmapped(judge),
        options=unmapped(options), sample_rate=unmapped(sample_rate), work_storage_options=unmapped(storage_options),
    )  # fmt: skip
    n_cached = count_cached(futures, judged)
    excluded = traces_checked.result().excluded
    scores = assemble_scores(staged, futures, judged, excluded, f"{outputs}/quarantine.jsonl", storage_options)
    usage = fresh_usage(judged)
    publication = validate_scores(
        warehouse, scores, run, plan.names, n_cached, traces_checked, max_failure_rate, output_suite, docs, usage
    )
    publish_partition(warehouse, publication)
    return summarize_run(scores, run, warehouse, n_cached, publication, docs, usage)


if __name__ == "__main__":
    import sys

    print(evaluate_partition(source=sys.argv[1], date=dt.date.fromisoformat(sys.argv[2])).to_dict())
