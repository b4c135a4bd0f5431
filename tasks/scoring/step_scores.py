"""Scores of an agent's retrieval steps: the metrics of ``STEP_FAMILIES`` computed on ``TraceBatch.step_batch``
(one row per step), and those rows joined across a partition's batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics import MetricRequest, MetricResult, compute
from ragpulse.metrics.batch import StepAgainst, StepRows, TraceBatch
from ragpulse.tasks.core.types import StepScores

__all__ = ["keep_steps", "rank_steps", "step_scores"]


def step_scores(
    rows: StepRows,
    against: str,
    results: dict[str, MetricResult],
    versions: dict[str, str],
    prompt_versions: dict[str, str] | None = None,
) -> StepScores:
    """``results`` of the step rows ``rows`` as the scores a batch hands on."""
    return StepScores(
        trace_ids=np.asarray(rows.batch.trace_ids, dtype=object),
        step_index=rows.step_index,
        step_ids=rows.step_ids,
        against=against,
        results=results,
        versions=versions,
        prompt_versions=prompt_versions or {},
        trace_rows=rows.trace_rows,
    )


def rank_steps(
    traces: TraceBatch, requests: Sequence[MetricRequest], against: Sequence[StepAgainst]
) -> tuple[StepScores, ...]:
    """The metrics among ``requests`` that need no judge and are computed per step, once per ``against``; none when
    no metric is or no trace has steps."""
    per_step = [request for request in requests if request.per_step and not request.is_judge]
    if not per_step or not any(traces.steps or ()):
        return ()
    versions = {request.name: request.version for request in per_step}
    return tuple(
        step_scores(rows, target, compute(rows.batch, per_step), versions)
        for target in against
        for rows in [traces.step_batch(target)]
    )


def keep_steps(batches: Sequence[tuple[Sequence[StepScores], NDArray[np.int64]]]) -> tuple[StepScores, ...]:
    """Join the step scores of a partition's batches, one entry per ``against``. Each batch comes with where its
    traces went (``kept[row]``: the trace's position among the partition's kept traces, -1 when the partition
    dropped it); the steps of a dropped trace are dropped with it, as its turn scores are."""
    parts: dict[str, list[StepScores]] = {}
    for steps, kept in batches:
        for scores in _by_against(steps):
            rows = kept[_trace_rows(scores)]
            parts.setdefault(scores.against, []).append(_rows(scores, rows >= 0, rows))
    return tuple(_concatenated(found) for found in parts.values())


def _by_against(steps: Sequence[StepScores]) -> list[StepScores]:
    """One batch's entries with one ``against`` (its retrieval and its judge metrics, over the same rows) as one."""
    merged: dict[str, StepScores] = {}
    for scores in steps:
        known = merged.get(scores.against)
        if known is None:
            merged[scores.against] = scores
            continue
        same = np.array_equal(_trace_rows(known), _trace_rows(scores)) and np.array_equal(
            known.step_index, scores.step_index
        )
        if not same:
            raise ValueError(f"step scores against {scores.against} of one batch hold different steps")
        merged[scores.against] = replace(
            known,
            results={**known.results, **scores.results},
            versions={**known.versions, **scores.versions},
            prompt_versions={**known.prompt_versions, **scores.prompt_versions},
        )
    return list(merged.values())


def _trace_rows(scores: StepScores) -> NDArray[np.int64]:
    if scores.trace_rows is None:
        raise ValueError(f"step scores against {scores.against} do not say their traces' rows")
    return scores.trace_rows


def _rows(scores: StepScores, mask: NDArray[np.bool_], trace_rows: NDArray[np.int64]) -> StepScores:
    """The rows ``mask`` keeps, their traces numbered as ``trace_rows`` says."""
    return replace(
        scores,
        trace_ids=scores.trace_ids[mask],
        step_index=scores.step_index[mask],
        step_ids=scores.step_ids[mask],
        results={
            name: MetricResult(result.values[mask], result.status[mask], result.reasons[mask])
            for name, result in scores.results.items()
        },
        trace_rows=trace_rows[mask],
    )


def _concatenated(parts: Sequence[StepScores]) -> StepScores:
    first = parts[0]
    names = set(first.results)
    if any(set(part.results) != names for part in parts):
        raise ValueError(f"the batches' step scores against {first.against} hold different metrics")

    def cat(arrays: list[NDArray[Any]], dtype: Any) -> NDArray[Any]:
        return np.concatenate(arrays).astype(dtype, copy=False)

    return replace(
        first,
        trace_ids=cat([p.trace_ids for p in parts], object),
        step_index=cat([p.step_index for p in parts], np.int64),
        step_ids=cat([p.step_ids for p in parts], object),
        results={
            name: MetricResult(
                cat([p.results[name].values for p in parts], np.float64),
                cat([p.results[name].status for p in parts], np.int8),
                cat([p.results[name].reasons for p in parts], object),
            )
            for name in first.results
        },
        trace_rows=cat([_trace_rows(p) for p in parts], np.int64),
    )
