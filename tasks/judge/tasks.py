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
from numpy.typing import NDArray
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE, CacheKeyFnPolicy
from prefect.context import TaskRunContext
from prefect.transactions import get_transaction

from ragpulse import metrics
from ragpulse.metrics import STEP_FAMILIES, MetricResult, Status
from ragpulse.metrics.agent_goal_accuracy import judge_conversations as judge_each_conversation
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.embedding_signals import FAMILIES as SIGNAL_FAMILIES
from ragpulse.metrics.embedding_signals import embedded_texts as signal_texts
from ragpulse.metrics.judge import BUDGET_EXHAUSTED, JudgeContext, JudgeMetric, judge_batch
from ragpulse.metrics.refusal import EMBEDDING_SPEC as EMBEDDING_REFUSAL
from ragpulse.metrics.registry import build_conversation_metrics, build_judge_metrics, parse_metrics
from ragpulse.tasks.core import types as run_types
from ragpulse.tasks.core.fingerprint import code_fingerprint, digest
from ragpulse.tasks.core.types import BatchRef, ConversationScores, QuarantinedRecord, ScoredBatch, StagedPartition
from ragpulse.tasks.ingest import batches
from ragpulse.tasks.ingest.batches import judging_columns, read_staged, read_trace_batch
from ragpulse.tasks.judge import plan as judge_plan
from ragpulse.tasks.judge import step_judge
from ragpulse.tasks.judge.budget import Allowance, JudgeBudget, current_budget
from ragpulse.tasks.judge.config import JudgeConfig
from ragpulse.tasks.judge.conversations import read_conversations
from ragpulse.tasks.judge.plan import (
    embedder_for,
    expand_sample,
    judge_context_options,
    sample_batch,
    sampled,
    scorer_prompt_versions,
)
from ragpulse.tasks.judge.sample_size import (
    NO_BASELINE_SD,
    UNKNOWN_SEGMENT,
    JudgeSample,
    SampleTarget,
    baseline_deviations,
    sampled_by_segment,
    segment_thresholds,
)
from ragpulse.tasks.judge.step_judge import judge_steps
from ragpulse.tasks.scoring import step_scores
from ragpulse.tasks.scoring.config import ScoringConfig

if TYPE_CHECKING:
    from prefect.types import DateTime

__all__ = ["judge_conversations", "judge_score_batch", "plan_judge_sample"]

_SAMPLED_FAMILIES = SIGNAL_FAMILIES | {EMBEDDING_REFUSAL.name}
"""Run on the embedding signals' sample (``scoring.embedding_sample``): the signals and ``embedding_refusal``."""


def _judge_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    requests = parse_metrics(params["metric_names"])
    options = params["options"]
    built = build_judge_metrics(requests, options)
    prompt_versions = scorer_prompt_versions(built, options)
    scoring = params["scoring"]
    # What the steps are scored against only where a metric is scored per step: other keys stay as they were.
    per_step = [list(scoring.step_against)] if any(r.per_step for r in requests if r.is_judge) else []
    # The embedding signals' share of the day, where they are requested (it decides which traces get them).
    day = params.get("day_traces") or params["batch"].n_rows
    signal_rate = [scoring.embedding_rate(day)] if any(r.family in _SAMPLED_FAMILIES for r in requests) else []
    return "judge-batch-" + digest(
        params["batch"].content_hash,
        sorted((m.name, m.spec.version, prompt_versions[m.name]) for m in built),
        params["judge"].model,
        params["judge"].endpoint,
        json.dumps(options, sort_keys=True, default=str),
        scoring.sample_rate,
        params["sample"].thresholds if params.get("sample") else None,
        *per_step,
        *signal_rate,
        code_fingerprint(metrics, sys.modules[__name__], judge_plan, step_judge, step_scores, batches, run_types),
    )


@task(name="judge-batch", cache_policy=CacheKeyFnPolicy(cache_key_fn=_judge_key), persist_result=True)
async def judge_score_batch(
    batch: BatchRef,
    metric_names: list[str],
    judge: JudgeConfig,
    options: dict[str, Any],
    scoring: ScoringConfig,
    work_storage_options: dict[str, Any] | None = None,
    day_traces: int | None = None,
    sample: JudgeSample | None = None,
    allowance: Allowance | None = None,
) -> ScoredBatch:
    """Judge one staged batch with ``judge`` (resolved in the run's environment) on the sample of
    ``scoring.sample_rate`` (the embedding signals on that of ``scoring.embedding_sample`` for a day of
    ``day_traces`` traces, this batch's own count when not given; with ``scoring.sample_rate = "auto"`` the traces
    below their language's threshold in ``sample``: ``plan_judge_sample``), and the retrieval steps of the sampled
    traces with the metrics of ``STEP_FAMILIES``, against each of ``scoring.step_against`` (after the turns: a step
    asking what its turn asked takes its outcome). Its judge calls count against the run's judge budget, or against
    ``allowance`` where one is given (a Dask worker).
    A failed call is a NaN with a reason on that score, never a failed task; the batch is then kept out of the task
    cache. ``scoring.rescore="all"`` bypasses the call cache (not part of the key)."""
    from ragpulse.tasks.judge.client import OpenAIJudge

    judge_metrics = build_judge_metrics(parse_metrics(metric_names), options)
    per_step = [m for m in judge_metrics if m.spec.name in STEP_FAMILIES]
    table = read_staged(batch, work_storage_options, columns=judging_columns(steps=bool(per_step)))
    traces = read_trace_batch(table)
    mask = _judged(traces, scoring, sample)
    # The same hash with its own rate: the smaller of the two samples lies inside the larger (of a fixed rate).
    signal_mask = sampled(traces.trace_ids, scoring.embedding_rate(day_traces or len(traces)))
    signals = [m for m in judge_metrics if m.spec.name in _SAMPLED_FAMILIES]
    judged_here = [m for m in judge_metrics if m.spec.name not in _SAMPLED_FAMILIES]
    uses_llm = any(m.uses_llm for m in judge_metrics)
    budget = _budget(judge, allowance)
    client = OpenAIJudge(judge, refresh_cache=scoring.rescore == "all", budget=budget) if uses_llm else None
    embedder = embedder_for(options, judge_metrics)
    subset, signal_subset = sample_batch(traces, mask), sample_batch(traces, signal_mask)
    # The texts the metrics will embed, encoded in large batches beside the judge's calls (not before them: the
    # first calls would wait for the whole encode); the metrics' own encodes queue behind and hit the LRU.
    queries, passages = signal_texts(signal_subset, frozenset(m.spec.name for m in signals))
    if any(m.spec.name == EMBEDDING_REFUSAL.name for m in signals):  # the answers, as answer relevance embeds them
        queries += [a.strip() for a in signal_subset.answers if a and a.strip()]
    prefetch = (
        asyncio.ensure_future(embedder.prefetch([*_embedded_texts(subset, judged_here), *queries], passages=passages))
        if embedder is not None
        else None
    )
    context = JudgeContext(judge=client, embedder=embedder, options=judge_context_options(options, judge_metrics))  # type: ignore[arg-type]
    prompt_versions = scorer_prompt_versions(judge_metrics, options)
    try:
        raw = await judge_batch(subset, judged_here, context)
        results = {name: expand_sample(result, mask) for name, result in raw.items()}
        raw = await judge_batch(signal_subset, signals, context) if signals else {}
        results |= {name: expand_sample(result, signal_mask) for name, result in raw.items()}
        results = {m.name: results[m.name] for m in judge_metrics}  # in the order asked
        steps = await judge_steps(traces, mask, per_step, results, context, scoring.step_against, prompt_versions)
        if prefetch is not None:
            await prefetch
    finally:
        if prefetch is not None and not prefetch.done():
            prefetch.cancel()
        if client is not None:
            await client.aclose()
    if client is not None:  # the sample each LLM metric judged: what the expected cost of a later run scales by
        for metric in judge_metrics:
            if metric.uses_llm:
                sample_of = signal_mask if metric.spec.name in _SAMPLED_FAMILIES else mask
                client.usage.add(metric.name, judged=int(sample_of.sum()))
    usage = client.usage.snapshot() if client is not None else {}
    logger = get_run_logger()
    logger.info(
        "judged %d of %d traces x %d metrics (the embedding signals %d) and %d retrieval steps: %d calls asked of "
        "the judge (new, failed before or rescored), %d answered by the call cache",
        int(mask.sum()), len(traces), len(judge_metrics), int(signal_mask.sum()),
        len(steps[0].trace_ids) if steps else 0,
        sum(u["http_calls"] for u in usage.values()), sum(u["cache_hits"] for u in usage.values()),
    )  # fmt: skip
    every_result = [results, *(s.results for s in steps)]
    if failures := _failure_reasons(every_result):
        await _keep_out_of_task_cache()
        logger.warning(
            "%d judge score(s) failed (%s): batch not cached, a re-run re-asks those calls",
            sum(failures.values()), ", ".join(f"{reason} x{count}" for reason, count in sorted(failures.items())),
        )  # fmt: skip
    if over_budget := _over_budget(every_result):
        await _keep_out_of_task_cache()
        logger.warning(
            "the judge budget is spent: %d judge score(s) of this batch are %s; batch not cached, a run with more "
            "budget judges them", over_budget, BUDGET_EXHAUSTED,
        )  # fmt: skip
    return ScoredBatch(
        trace_ids=np.asarray(traces.trace_ids, dtype=object),
        source_files=np.asarray(table.column("source_file").to_pylist(), dtype=object),
        source_lines=table.column("source_line").to_numpy().astype(np.int64),
        results=results,
        versions={m.name: m.spec.version for m in judge_metrics},
        prompt_versions=prompt_versions,
        judge_model=client.model if client is not None else None,
        usage=usage,
        steps=steps,
    )


@task(name="judge-conversations", cache_policy=NO_CACHE, persist_result=False)
async def judge_conversations(
    staged: StagedPartition,
    metric_names: list[str],
    judge: JudgeConfig,
    options: dict[str, Any],
    scoring: ScoringConfig,
    excluded: list[QuarantinedRecord],
    work_storage_options: dict[str, Any] | None = None,
    sample: JudgeSample | None = None,
    allowance: Allowance | None = None,
) -> ConversationScores:
    """Judge the day's conversations (its kept traces grouped by conversation id: ``read_conversations``) with the
    conversation metrics among ``metric_names``, on the sample of ``scoring.sample_rate`` chosen by conversation id
    (``auto``: the share of the day's traces ``sample`` judges).
    Not task-cached: a day's conversations span its batches, and the call cache answers every call asked before.
    A failed call is a NaN with a reason on that conversation's score."""
    from ragpulse.tasks.judge.client import OpenAIJudge

    conversation_metrics = build_conversation_metrics(parse_metrics(metric_names), options)
    day = read_conversations(staged.batches, excluded, work_storage_options)
    ids = [c.conversation_id for c in day.conversations]
    mask = sampled(ids, sample.share if sample is not None else float(scoring.sample_rate))
    chosen = [c for c, keep in zip(day.conversations, mask.tolist(), strict=True) if keep]
    budget = _budget(judge, allowance)
    client = OpenAIJudge(judge, refresh_cache=scoring.rescore == "all", budget=budget) if chosen else None
    context = JudgeContext(judge=client, options=judge_context_options(options))  # type: ignore[arg-type]
    try:
        raw = await judge_each_conversation(chosen, conversation_metrics, context)  # none chosen: none asked
    finally:
        if client is not None:
            await client.aclose()
    results = {name: expand_sample(result, mask) for name, result in raw.items()}
    if client is not None:
        for metric in conversation_metrics:
            if metric.uses_llm:
                client.usage.add(metric.name, judged=len(chosen))
    usage = client.usage.snapshot() if client is not None else {}
    get_run_logger().info(
        "judged %d of %d conversations (%d turns) x %d metrics: %d calls asked of the judge, %d answered by the "
        "call cache",
        len(chosen), len(ids), sum(day.n_turns), len(conversation_metrics),
        sum(u["http_calls"] for u in usage.values()), sum(u["cache_hits"] for u in usage.values()),
    )  # fmt: skip
    return ConversationScores(
        conversation_ids=np.asarray(ids, dtype=object),
        n_turns=np.asarray(day.n_turns, dtype=np.int64),
        first_trace_ids=np.asarray(day.first_trace_ids, dtype=object),
        last_trace_ids=np.asarray(day.last_trace_ids, dtype=object),
        results=results,
        versions={m.name: m.spec.version for m in conversation_metrics},
        prompt_versions={m.name: m.prompt_version for m in conversation_metrics},
        judge_model=client.model if client is not None else judge.model,
        usage=usage,
    )


@task(name="plan-judge-sample", cache_policy=NO_CACHE, persist_result=False)
def plan_judge_sample(
    staged: StagedPartition,
    scoring: ScoringConfig,
    judged: list[str],
    warehouse_url: str,
    work_storage_options: dict[str, Any] | None = None,
) -> JudgeSample:
    """For ``scoring.sample_rate = "auto"``, the hash threshold of each language of the day: as many of its traces
    as the ``sample_*`` targets need, from the standard deviation of the ``judged`` metrics' scores over the
    baseline (``tasks/judge/sample_size.py``)."""
    segments: dict[str, list[str]] = {}
    for batch in staged.batches:
        table = read_staged(batch, work_storage_options, columns=["trace_id", "language"])
        for trace_id, language in zip(*(table.column(c).to_pylist() for c in ("trace_id", "language")), strict=True):
            segments.setdefault(language or UNKNOWN_SEGMENT, []).append(trace_id)
    sds, window = baseline_deviations(warehouse_url, staged.date, judged)
    chosen = segment_thresholds(segments, sds, SampleTarget.of(scoring))
    get_run_logger().info(
        "sample_rate=auto over %d baseline partition(s): %s",
        len(window),
        ", ".join(
            f"{segment} {n} of {total} (sd {sds.get(segment, NO_BASELINE_SD):.3g}"
            f"{'' if segment in sds else ', no baseline'})"
            for segment, (_, n, total) in sorted(chosen.items(), key=lambda item: -item[1][2])
        ),
    )
    judged_traces = sum(n for _, n, _ in chosen.values())
    return JudgeSample(
        {segment: threshold for segment, (threshold, _, _) in chosen.items()},
        judged_traces / max(staged.n_valid, 1),
    )


def _judged(traces: TraceBatch, scoring: ScoringConfig, sample: JudgeSample | None) -> NDArray[np.bool_]:
    """Which traces of the batch the judge scores: by their language's threshold (``auto``), else the fixed rate."""
    if sample is not None:
        languages = traces.languages or [None] * len(traces)
        return sampled_by_segment(traces.trace_ids, languages, sample.thresholds)
    return sampled(traces.trace_ids, float(scoring.sample_rate))


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


def _budget(judge: JudgeConfig, allowance: Allowance | None) -> JudgeBudget | None:
    """The task's own allowance (a Dask worker cannot reach the run's budget), else the run's budget if it has one."""
    return JudgeBudget.of_allowance(allowance, judge) if allowance is not None else current_budget()


def _over_budget(results: Sequence[dict[str, MetricResult]]) -> int:
    """How many scores wait for a call the judge budget did not allow."""
    every = (result for by_metric in results for result in by_metric.values())
    return sum(int((result.reasons == BUDGET_EXHAUSTED).sum()) for result in every)


def _failure_reasons(results: Sequence[dict[str, MetricResult]]) -> dict[str, int]:
    """How many scores failed, by reason (not-applicable scores are final and do not count)."""
    counts: dict[str, int] = {}
    for result in (result for by_metric in results for result in by_metric.values()):
        for reason in result.reasons[result.status == Status.FAILED]:
            counts[str(reason)] = counts.get(str(reason), 0) + 1
    return counts
