"""The data-quality gates as tasks: traces in (quarantine bad rows), scores out (block the publish).

The checks themselves are in ``checks``, which imports Great Expectations (6-15 s) only when a suite runs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.types import PartitionScores, RunInfo, StagedPartition
from ragpulse.tasks.quality.checks import TraceLimits, TraceValidation, check_scores, check_traces
from ragpulse.tasks.reporting.rejected import report_rejected_scores
from ragpulse.tasks.warehouse import Publication, open_warehouse
from ragpulse.tasks.warehouse.publication import build_publication

__all__ = ["OutputValidationError", "validate_scores", "validate_traces"]


class OutputValidationError(RagpulseError):
    """The score table failed its suite: nothing was published; names the expectations and counts."""


@task(name="validate-traces", cache_policy=NO_CACHE, persist_result=False)
def validate_traces(
    staged: StagedPartition,
    run: RunInfo,
    limits: TraceLimits,
    suite_path: str | None = None,
    docs_dir: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> TraceValidation:
    """Input gate: quarantine traces that fail the suite; duplicate context ids are only reported."""
    checked = check_traces(
        staged, run, limits=limits, suite_path=suite_path,
        docs_dir=Path(docs_dir) / "traces_in" if docs_dir else None, storage_options=storage_options,
    )  # fmt: skip
    get_run_logger().info(
        "dt=%s: input suite quarantined %d traces; findings: %s",
        staged.date, len(checked.excluded), ", ".join(f"{k}={v}" for k, v in checked.reported.items()) or "none",
    )  # fmt: skip
    return checked


@task(name="validate-scores", cache_policy=NO_CACHE, persist_result=False)
def validate_scores(
    warehouse_url: str,
    scores: PartitionScores,
    run: RunInfo,
    metrics: list[str],
    n_batches_cached: int,
    traces_checked: TraceValidation,
    max_failure_rate: float,
    suite_path: str | None = None,
    docs_dir: str | None = None,
    judge_usage: dict[str, dict[str, Any]] | None = None,
) -> Publication:
    """Output gate: the publication to write, or OutputValidationError (and nothing published)."""
    publication = build_publication(scores, run, metrics, n_batches_cached=n_batches_cached, judge_usage=judge_usage)
    results, failures = check_scores(
        publication, run, n_traces=len(scores.trace_ids), max_failure_rate=max_failure_rate,
        suite_path=suite_path, docs_dir=Path(docs_dir) if docs_dir else None,
    )  # fmt: skip
    validations = pa.concat_tables([traces_checked.results, results])
    if failures:
        open_warehouse(warehouse_url).record_validations(validations)
        report_rejected_scores(scores.date, run.run_id, failures, warehouse_url=warehouse_url)
        raise OutputValidationError(
            f"dt={scores.date}: score table failed {len(failures)} expectation(s); nothing was published and the "
            "previous rows stay as they were:\n- " + "\n- ".join(failures)
        )
    return dataclasses.replace(publication, validations=validations)
