"""Judge and semantic metrics as cached async Prefect tasks, beside the retrieval metrics.

The call-level cache (tasks/judge/cache.py) makes re-runs and interrupted backfills free of repeated
calls; this task's own cache skips whole batches whose content, metrics, prompts and judge model
are unchanged. Failures heal on the next run: a batch with any failed score is not written to the task
cache, and a failed call or an unparsable reply is not in the call cache, so a re-run re-asks exactly the
failed calls. ``scoring.rescore="all"`` (run the task with ``refresh_cache=True`` too) re-asks every call.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from prefect import get_run_logger, task
from prefect.cache_policies import CacheKeyFnPolicy
from prefect.context import TaskRunContext
from prefect.transactions import get_transaction

from ragpulse import metrics
from ragpulse.metrics import MetricResult, Status
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.judge import JudgeContext, JudgeMetric, judge_batch
from ragpulse.metrics.registry import build_judge_metrics, parse_metrics
from ragpulse.tasks.core import types as run_types
from ragpulse.tasks.core.fingerprint import code_fingerprint, digest
from ragpulse.tasks.core.types import BatchRef, ScoredBatch
from ragpulse.tasks.ingest import batches
from ragpulse.tasks.ingest.batches import read_staged, read_trace_batch
from ragpulse.tasks.judge import plan as judge_plan
from ragpulse.tasks.judge.config import JudgeConfig
from ragpulse.tasks.judge.plan import (
    embedder_for,
    expand_sample,
    judge_context_options,
    sample_batch,
    sampled,
    scorer_prompt_versions,
)
from ragpulse.tasks.scoring.config import ScoringConfig

if TYPE_CHECKING:
    from prefect.types import DateTime

__all__ = ["judge_score_batch"]


def _judge_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    requests = parse_metrics(params["metric_names"])
    options = params["options"]
    built = build_judge_metrics(requests, options)
    prompt_versions = scorer_prompt_versions(built, options)
    return "judge-batch-" + digest(
        params["batch"].content_hash,
        sorted((m.name, m.spec.version, prompt_versions[m.name]) for m in built),
        params["judge"].model,
        params["judge"].endpoint,
        json.dumps(options, sort_keys=True, default=str),
        params["scoring"].sample_rate,
        code_fingerprint(metrics, sys.modules[__name__], judge_plan, batches, run_types),
    )


@task(name="judge-batch", cache_policy=CacheKeyFnPolicy(cache_key_fn=_judge_key), persist_result=True)
async def judge_score_batch(
    batch: BatchRef,
    metric_names: list[str],
    judge: JudgeConfig,
    options: dict[str, Any],
    scoring: ScoringConfig,
    work_storage_options: dict[str, Any] | None = None,
) -> ScoredBatch:
    """Judge one staged batch with ``judge`` (resolved in the run's environment) on the sample of
    ``scoring.sample_rate``. A failed call is a NaN with a reason on that score, never a failed task; the batch is
    then kept out of the task cache. ``scoring.rescore="all"`` bypasses the call cache (not part of the key)."""
    from ragpulse.tasks.judge.client import OpenAIJudge

    table = read_staged(batch, work_storage_options)
    traces = read_trace_batch(table)
    judge_metrics = build_judge_metrics(parse_metrics(metric_names), options)
    mask = sampled(traces.trace_ids, scoring.sample_rate)
    uses_llm = any(m.uses_llm for m in judge_metrics)
    client = OpenAIJudge(judge, refresh_cache=scoring.rescore == "all") if uses_llm else None
    embedder = embedder_for(options, judge_metrics)
    subset = sample_batch(traces, mask)
    # The texts the metrics will embed, encoded in large batches beside the judge's calls (not before them: the
    # first calls would wait for the whole encode); the metrics' own encodes queue behind and hit the LRU.
    prefetch = (
        asyncio.ensure_future(embedder.prefetch(_embedded_texts(subset, judge_metrics)))
        if embedder is not None
        else None
    )
    context = JudgeContext(judge=client, embedder=embedder, options=judge_context_options(options))  # type: ignore[arg-type]
    try:
        raw = await judge_batch(subset, judge_metrics, context)
        if prefetch is not None:
            await prefetch
    finally:
        if prefetch is not None and not prefetch.done():
            prefetch.cancel()
        if client is not None:
            await client.aclose()
    results = {name: expand_sample(result, mask) for name, result in raw.items()}
    usage = client.usage.snapshot() if client is not None else {}
    logger = get_run_logger()
    logger.info(
        "judged %d of %d traces x %d metrics: %d calls asked of the judge (new, failed before or rescored), "
        "%d answered by the call cache",
        int(mask.sum()), len(traces), len(judge_metrics),
        sum(u["http_calls"] for u in usage.values()), sum(u["cache_hits"] for u in usage.values()),
    )  # fmt: skip
    if failures := _failure_reasons(results):
        await _keep_out_of_task_cache()
        logger.warning(
            "%d judge score(s) failed (%s): batch not cached, a re-run re-asks those calls",
            sum(failures.values()), ", ".join(f"{reason} x{count}" for reason, count in sorted(failures.items())),
        )  # fmt: skip
    return ScoredBatch(
        trace_ids=np.asarray(traces.trace_ids, dtype=object),
        source_files=np.asarray(table.column("source_file").to_pylist(), dtype=object),
        source_lines=table.column("source_line").to_numpy().astype(np.int64),
        results=results,
        versions={m.name: m.spec.version for m in judge_metrics},
        prompt_versions=scorer_prompt_versions(judge_metrics, options),
        judge_model=client.model if client is not None else None,
        usage=usage,
    )


def _embedded_texts(traces: TraceBatch, judge_metrics: Sequence[JudgeMetric]) -> list[str]:
    """What the embedding metrics compare, stripped as they strip it: questions for answer_relevancy (whose
    generated questions are known only from the judge's replies), answers and references for answer_correctness
    and answer_semantic_similarity."""
    families = {m.spec.name for m in judge_metrics}
    texts: list[str] = []
    if "answer_relevancy" in families:
        texts += [q.strip() for q in traces.questions or [] if q and q.strip()]
    if families & {"answer_correctness", "answer_semantic_similarity"}:
        texts += [a.strip() for a in traces.answers if a and a.strip()]
        texts += [r.strip() for refs in traces.references for r in refs if r and r.strip()]
    return texts


async def _keep_out_of_task_cache() -> None:
    """Leave this batch without a task cache record, so the next run re-runs it and re-asks only the failed
    calls (the others are in the call cache).

    Prefect writes the record when the task's transaction commits, unless ``write_on_commit`` is off. A task run
    with ``refresh_cache`` (``rescore="all"``) may have an older, valid record under the same key, which the next
    run would serve: it is overwritten with one that has already expired, which Prefect treats as absent.
    """
    transaction = get_transaction()
    if transaction is None or transaction.key is None:
        return
    transaction.write_on_commit = False
    if transaction.overwrite and transaction.store is not None:
        expired = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        # Prefect annotates its own DateTime type, a datetime subclass; it takes any timezone-aware datetime.
        await transaction.store.awrite(None, key=transaction.key, expiration=cast("DateTime", expired))


def _failure_reasons(results: dict[str, MetricResult]) -> dict[str, int]:
    """How many scores failed, by reason (not-applicable scores are final and do not count)."""
    counts: dict[str, int] = {}
    for result in results.values():
        for reason in result.reasons[result.status == Status.FAILED]:
            counts[str(reason)] = counts.get(str(reason), 0) + 1
    return counts
