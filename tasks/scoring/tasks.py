"""The scoring tasks: score staged batches with the pure metrics (cached on content, metrics and code), and
assemble a partition's scores."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE, CacheKeyFnPolicy
from prefect.context import TaskRunContext
from prefect.locking.filesystem import FileSystemLockManager
from prefect.transactions import IsolationLevel

from ragpulse import metrics
from ragpulse.metrics import MetricRequest, compute, refusal
from ragpulse.metrics.batch import StepAgainst
from ragpulse.metrics.feedback import FAMILIES as FEEDBACK_FAMILIES
from ragpulse.metrics.feedback import FeedbackReading
from ragpulse.metrics.operations import COST_USD
from ragpulse.metrics.prices import TokenPrice, prices_digest
from ragpulse.tasks.core import types as run_types
from ragpulse.tasks.core.fingerprint import code_fingerprint, digest
from ragpulse.tasks.core.types import (
    BatchRef,
    ConversationScores,
    PartitionScores,
    QuarantinedRecord,
    ScoredBatch,
    StagedPartition,
)
from ragpulse.tasks.ingest import batches
from ragpulse.tasks.ingest.batches import read_scoring_table, read_trace_batch, shared_strings
from ragpulse.tasks.scoring import step_scores
from ragpulse.tasks.scoring.assemble import build_partition_scores
from ragpulse.tasks.scoring.config import ScoringConfig
from ragpulse.tasks.scoring.step_scores import rank_steps

__all__ = [
    "assemble_scores",
    "count_cached",
    "score_batch",
    "score_cache_policy",
    "scoring_fingerprint",
]


def scoring_fingerprint() -> str:
    """Hash of every module whose code can change a score."""
    return code_fingerprint(metrics, sys.modules[__name__], batches, step_scores, run_types)


def _score_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    requests = [MetricRequest.parse(name) for name in params["metric_names"]]
    # What the steps are scored against only where a metric is scored per step: other keys stay as they were.
    per_step = [list(params.get("step_against", _STEP_QUERY))] if any(r.per_step for r in requests) else []
    # The prices only where cost_usd is scored, and only when the run has its own: other keys stay as they were.
    prices = params.get("prices")
    costed = bool(prices) and any(r.family == COST_USD.name for r in requests)
    priced = [prices_digest(_price_table(prices))] if costed else []
    # The run's feedback labels and scales only where a feedback metric is scored and the run has its own.
    reading = params.get("feedback_reading")
    fed = bool(reading) and any(r.family in FEEDBACK_FAMILIES for r in requests)
    read = [json.dumps(reading, sort_keys=True)] if fed else []
    # The application's fallback phrases only where refusal is scored and the run names some.
    phrases = params.get("refusal_phrases")
    declined = [sorted(phrases)] if phrases and any(r.family == refusal.SPEC.name for r in requests) else []
    return "score-batch-" + digest(
        params["batch"].content_hash, sorted((r.name, r.version) for r in requests), *per_step, *priced, *read,
        *declined, scoring_fingerprint(),
    )  # fmt: skip


def _price_table(prices: Mapping[str, Mapping[str, float]] | None) -> dict[str, TokenPrice]:
    """The built-in prices with the run's own (``ScoringConfig.prices``)."""
    return ScoringConfig(prices={model: dict(price) for model, price in (prices or {}).items()}).price_table()


_STEP_QUERY: tuple[StepAgainst, ...] = ("step_query",)


def score_cache_policy(lock_dir: Any | None) -> CacheKeyFnPolicy:
    """Cache on the batch content, metric names and versions and the scoring code.

    With a lock directory, identical tasks running at once (two runs of the same date) compute once.
    """
    policy = CacheKeyFnPolicy(cache_key_fn=_score_key)
    if lock_dir is None:
        return policy
    return policy.configure(
        isolation_level=IsolationLevel.SERIALIZABLE, lock_manager=FileSystemLockManager(lock_files_directory=lock_dir)
    )


@task(name="score-batch", cache_policy=score_cache_policy(None), persist_result=True)
def score_batch(
    batch: BatchRef,
    metric_names: Sequence[str],
    work_storage_options: dict[str, Any] | None = None,
    step_against: Sequence[StepAgainst] = _STEP_QUERY,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    feedback_reading: Mapping[str, Any] | None = None,
    refusal_phrases: Sequence[str] = (),
) -> ScoredBatch:
    """Compute the requested metrics for one staged batch, and those of ``STEP_FAMILIES`` per retrieval step too,
    against each of ``step_against``; ``cost_usd`` with the built-in prices and the run's own ``prices``; feedback
    metrics with the run's ``feedback_reading`` ({"labels", "scales"} of ScoringConfig); ``refusal`` with the
    application's own ``refusal_phrases``. Pure scoring: never retried."""
    requests = [MetricRequest.parse(name) for name in metric_names]  # may be none: judge metrics only
    table = read_scoring_table(batch, requests, work_storage_options)
    traces = read_trace_batch(table)
    own = feedback_reading or {}
    reading = FeedbackReading.with_own(own.get("labels"), own.get("scales"))
    results = compute(
        traces, requests, prices=_price_table(prices), feedback_reading=reading, refusal_phrases=refusal_phrases
    )
    steps = rank_steps(traces, requests, step_against)
    get_run_logger().info(
        "scored %d traces x %d metrics, %d retrieval steps", len(traces), len(results),
        len(steps[0].trace_ids) if steps else 0,
    )  # fmt: skip
    return ScoredBatch(
        trace_ids=np.asarray(traces.trace_ids, dtype=object),
        source_files=shared_strings(table.column("source_file")),
        source_lines=table.column("source_line").to_numpy().astype(np.int64),
        results=results,
        versions={r.name: r.version for r in requests},
        steps=steps,
    )


@task(name="assemble-partition", cache_policy=NO_CACHE, persist_result=False)
def assemble_scores(
    staged: StagedPartition,
    scored: list[ScoredBatch],
    judged: list[ScoredBatch],
    excluded: list[QuarantinedRecord],
    quarantine_copy_url: str | None = None,
    storage_options: dict[str, Any] | None = None,
    conversations: ConversationScores | None = None,
) -> PartitionScores:
    """Join retrieval and judge results per batch (their steps' too), de-duplicate, drop excluded rows (and their
    steps), copy the quarantine, add the day's conversation scores."""
    return build_partition_scores(staged, scored, judged, excluded, quarantine_copy_url, storage_options, conversations)


def count_cached(*per_batch: Sequence[Any]) -> int:
    """Batches whose every scoring task (one list of futures per kind, batch-aligned) came from the cache.

    Raises the first scoring failure: a batch that could not be scored must fail the run, never reach
    the publish as missing. An empty list (a kind with nothing to do) does not count against a batch.
    """
    for futures in per_batch:
        for future in futures:
            future.result()
    kinds = [futures for futures in per_batch if futures]
    return sum(all(f.state.name == "Cached" for f in batch) for batch in zip(*kinds, strict=True)) if kinds else 0
