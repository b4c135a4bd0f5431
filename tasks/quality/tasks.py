"""The data-quality gates as tasks: traces in (quarantine bad rows), scores out (block the publish).

The checks themselves are in ``checks``, which imports Great Expectations (6-15 s) only when a suite runs.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE, CacheKeyFnPolicy
from prefect.context import TaskRunContext

from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core import types as run_types
from ragpulse.tasks.core.fingerprint import code_fingerprint, digest
from ragpulse.tasks.core.types import BatchRef, PartitionScores, RunInfo, StagedPartition
from ragpulse.tasks.ingest import batches
from ragpulse.tasks.quality import checks
from ragpulse.tasks.quality.checks import (
    TraceLimits,
    TraceValidation,
    batch_profile,
    check_scores,
    check_traces,
    suite_digest,
)
from ragpulse.tasks.quality.config import QualityConfig
from ragpulse.tasks.reporting.rejected import report_rejected_scores
from ragpulse.tasks.warehouse import Publication, open_warehouse
from ragpulse.tasks.warehouse.publication import build_publication, content_key_of, published_run

__all__ = [
    "OutputValidationError",
    "for_run",
    "profile_batch",
    "standing_publication",
    "validate_scores",
    "validate_traces",
]


class OutputValidationError(RagpulseError):
    """The score table failed its suite: nothing was published; names the expectations and counts."""


def _profile_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    return "profile-batch-" + digest(params["batch"], code_fingerprint(checks, batches, run_types))


@task(name="profile-batch", cache_policy=CacheKeyFnPolicy(cache_key_fn=_profile_key), persist_result=True)
def profile_batch(batch: BatchRef, storage_options: dict[str, Any] | None = None) -> pd.DataFrame:
    """The input suite's per-trace profile of one staged batch (lengths and counts, no text): one bounded task per
    batch, cached on the batch, so the suite reads neither the whole day nor, on a re-run, any batch."""
    return batch_profile(batch, storage_options)


def _traces_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    """The input suite's verdict follows from the staged rows, the day (timestamp bounds), the suite's text, the
    limits and the code; not from the run, whose id the flow stamps on the cached result rows (``for_run``)."""
    staged: StagedPartition = params["staged"]
    quality: QualityConfig = params["quality"]
    return "validate-traces-" + digest(
        staged.date, staged.batches, suite_digest(quality.input_suite, "traces_in"), quality.trace_limits(),
        params.get("docs_dir") is not None,
        code_fingerprint(checks, sys.modules[__name__], batches, run_types),
    )  # fmt: skip


def for_run(validation: TraceValidation, run: RunInfo) -> TraceValidation:
    """``validation`` as this run's: a result taken from the cache carries the run id of the run that computed it."""
    results = validation.results
    run_ids = pa.array([run.run_id] * results.num_rows, pa.string())
    stamped = results.set_column(results.schema.get_field_index("run_id"), "run_id", run_ids)
    return dataclasses.replace(validation, results=stamped)


@task(name="validate-traces", cache_policy=CacheKeyFnPolicy(cache_key_fn=_traces_key), persist_result=True)
def validate_traces(
    staged: StagedPartition,
    run: RunInfo,
    quality: QualityConfig,
    docs_dir: str | None = None,
    storage_options: dict[str, Any] | None = None,
    profiles: list[pd.DataFrame] | None = None,
) -> TraceValidation:
    """Input gate: quarantine traces that fail ``quality``'s input suite and size limits; duplicate context ids are
    only reported. ``profiles``
    are the staged batches' ``profile_batch`` results, in order (computed here when not given). Cached: an
    unchanged day is not validated again (its data docs are those of the run that validated it)."""
    checked = check_traces(
        staged, run, limits=TraceLimits(**quality.trace_limits()), suite_path=quality.input_suite,
        docs_dir=Path(docs_dir) / "traces_in" if docs_dir else None, storage_options=storage_options,
        profiles=profiles,
    )  # fmt: skip
    get_run_logger().info(
        "dt=%s: input suite quarantined %d traces; findings: %s",
        staged.date, len(checked.excluded), ", ".join(f"{k}={v}" for k, v in checked.reported.items()) or "none",
    )  # fmt: skip
    return checked


@task(name="find-standing-publication", cache_policy=NO_CACHE, persist_result=False)
def standing_publication(
    warehouse_url: str, scores: PartitionScores, run: RunInfo, metrics: list[str], quality: QualityConfig
) -> tuple[str, str | None]:
    """The content key of this run's publication (``content_key_of``), and the run whose identical publication
    already stands in the warehouse as the date's newest, if one does: then there is nothing to validate or publish.
    The quality settings and the output suite's text are part of the key: a changed gate checks the rows again."""
    extra = (quality.model_dump(mode="json"), suite_digest(quality.output_suite, "scores_out"))
    key = content_key_of(scores, metrics, run, *extra)
    return key, published_run(warehouse_url, scores.date, key)


@task(name="validate-scores", cache_policy=NO_CACHE, persist_result=False)
def validate_scores(
    warehouse_url: str,
    scores: PartitionScores,
    run: RunInfo,
    metrics: list[str],
    n_batches_cached: int,
    traces_checked: TraceValidation,
    quality: QualityConfig,
    docs_dir: str | None = None,
    judge_usage: dict[str, dict[str, Any]] | None = None,
    storage_options: dict[str, Any] | None = None,
    content_key: str | None = None,
) -> Publication:
    """Output gate (``quality``'s output suite and failure rate): the publication to write, or OutputValidationError
    (and nothing published). The excerpts are
    read from the staged batches (in the work dir, reached with ``storage_options``) as the warehouse writes them."""
    publication = build_publication(
        scores, run, metrics, n_batches_cached=n_batches_cached, judge_usage=judge_usage,
        storage_options=storage_options, content_key=content_key,
    )  # fmt: skip
    results, failures = check_scores(
        publication, run, n_traces=len(scores.trace_ids), max_failure_rate=quality.max_failure_rate,
        suite_path=quality.output_suite, docs_dir=Path(docs_dir) if docs_dir else None,
    )  # fmt: skip
    validations = pa.concat_tables([for_run(traces_checked, run).results, results])
    if failures:
        open_warehouse(warehouse_url).record_validations(validations)
        report_rejected_scores(scores.date, run.run_id, failures, warehouse_url=warehouse_url)
        raise OutputValidationError(
            f"dt={scores.date}: score table failed {len(failures)} expectation(s); nothing was published and the "
            "previous rows stay as they were:\n- " + "\n- ".join(failures)
        )
    return dataclasses.replace(publication, validations=validations)
