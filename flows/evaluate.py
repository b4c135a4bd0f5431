"""Score one date partition of RAG traces and publish the score tables."""

from __future__ import annotations

import datetime as dt
from typing import Any

from prefect import flow, unmapped
from prefect.task_runners import ThreadPoolTaskRunner

from metrics import DEFAULT_METRICS
from tasks.load import list_partition, stage_partition
from tasks.publish import describe_run, publish_partition
from tasks.report import RunSummary, summarize_run
from tasks.score import count_cached, score_batch, score_cache_policy
from tasks.settings import RunSettings
from tasks.workdir import lock_directory, result_storage, staged_dir

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
) -> RunSummary:
    """Read ``<source>/dt=<date>/``, score it in cached parallel batches, publish to ``warehouse``."""
    settings = RunSettings(
        source=source,
        warehouse=warehouse,
        work_dir=work_dir,
        batch_size=batch_size,
        metrics=tuple(metrics or DEFAULT_METRICS),
        storage_options=storage_options or {},
    )
    names = list(settings.metrics)
    run = describe_run(source, settings.model_dump(mode="json"), settings.fingerprint())
    storage = result_storage(work_dir, storage_options)

    files = list_partition(source, date, storage_options)
    staged = stage_partition.with_options(result_storage=storage)(
        date,
        files,
        staged_url=staged_dir(work_dir, storage_options),
        batch_size=batch_size,
        storage_options=storage_options,
        work_storage_options=storage_options,
    )
    scoring = score_batch.with_options(
        cache_policy=score_cache_policy(lock_directory(work_dir)), result_storage=storage
    )
    futures = scoring.map(staged.batches, metric_names=unmapped(names), work_storage_options=unmapped(storage_options))
    n_cached = count_cached(futures)
    scores = publish_partition(warehouse, staged, futures, run, names, n_cached)
    return summarize_run(scores, run, warehouse, n_cached)


if __name__ == "__main__":
    import sys

    print(evaluate_partition(source=sys.argv[1], date=dt.date.fromisoformat(sys.argv[2])).to_dict())
