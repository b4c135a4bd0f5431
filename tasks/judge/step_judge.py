"""The context judges on an agent's retrieval steps (``STEP_FAMILIES``), beside the turn they belong to.

A turn with several steps is judged in one request per metric where the metric can (``StepJudgeMetric``:
context_relevance), else row by row on ``TraceBatch.step_batch``. The judge's sample is the turn's: a step is judged
when its turn is. A step row whose question and documents are its turn's (a single retrieval that fed the answer
as it was) is the turn's request again: it takes the turn's outcome instead of asking anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics import MetricResult, Status, TraceBatch
from ragpulse.metrics.batch import StepAgainst, StepRows
from ragpulse.metrics.judge import JudgeContext, JudgeMetric, Outcome, StepJudgeMetric, judge_batch, result_of
from ragpulse.tasks.core.types import StepScores
from ragpulse.tasks.judge.plan import NOT_SAMPLED, sample_batch
from ragpulse.tasks.scoring.step_scores import step_scores

__all__ = ["judge_steps"]


async def judge_steps(
    traces: TraceBatch,
    mask: NDArray[np.bool_],
    metrics: Sequence[JudgeMetric],
    turns: dict[str, MetricResult],
    context: JudgeContext,
    against: Sequence[StepAgainst],
    prompt_versions: dict[str, str],
) -> tuple[StepScores, ...]:
    """``metrics`` (those of ``STEP_FAMILIES``) on every step of the traces ``mask`` samples, once per ``against``;
    ``turns`` are the same metrics' results on the traces (reused where a step row is its turn's row). None when no
    trace has steps. Failed calls are failed outcomes with their reason, as for turns."""
    if not metrics or not any(traces.steps or ()):
        return ()
    step_rows = [(target, traces.step_batch(target)) for target in against]
    jobs = [_judge_metric(traces, mask, metric, turns[metric.name], context, target, rows)
            for target, rows in step_rows for metric in metrics]  # fmt: skip
    results = iter(await asyncio.gather(*jobs))
    versions = {metric.name: metric.spec.version for metric in metrics}
    prompts = {metric.name: prompt_versions[metric.name] for metric in metrics}
    return tuple(
        step_scores(rows, target, {metric.name: next(results) for metric in metrics}, versions, prompts)
        for target, rows in step_rows
    )


async def _judge_metric(
    traces: TraceBatch,
    mask: NDArray[np.bool_],
    metric: JudgeMetric,
    turn: MetricResult,
    context: JudgeContext,
    against: StepAgainst,
    rows: StepRows,
) -> MetricResult:
    """One metric on the step rows ``rows``: by turn where the metric judges a turn's steps together, by row
    elsewhere, the turn's outcome where a row is the turn's, not sampled where the turn is not."""
    n = len(rows.batch)
    outcomes: list[Outcome | None] = [None] * n
    by_turn: dict[int, list[int]] = {}
    for row, trace in enumerate(rows.trace_rows.tolist()):
        by_turn.setdefault(trace, []).append(row)
    per_row = np.zeros(n, dtype=bool)
    together: list[tuple[int, list[int]]] = []
    by_steps = metric if isinstance(metric, StepJudgeMetric) else None
    for trace, members in by_turn.items():
        if not mask[trace]:
            for row in members:
                outcomes[row] = Outcome.not_applicable(NOT_SAMPLED)
        elif by_steps is not None and len(members) > 1:
            together.append((trace, members))
        else:
            for row in members:
                if _same_as_turn(traces, trace, rows.batch, row):
                    outcomes[row] = Outcome(float(turn.values[trace]), Status(turn.status[trace]),
                                            turn.reasons[trace])  # fmt: skip
                else:
                    per_row[row] = True
    judged_rows = np.flatnonzero(per_row)
    grouped = [by_steps.score_steps(traces, trace, context, against=against) for trace, _ in together
               if by_steps is not None]  # fmt: skip
    one_by_one = judge_batch(sample_batch(rows.batch, per_row), [metric], context)
    turn_outcomes, singles = await asyncio.gather(asyncio.gather(*grouped), one_by_one)
    for (_, members), found in zip(together, turn_outcomes, strict=True):
        for row, outcome in zip(members, found, strict=True):
            outcomes[row] = outcome
    single = singles[metric.name]
    for position, row in enumerate(judged_rows.tolist()):
        outcomes[row] = Outcome(float(single.values[position]), Status(single.status[position]),
                                single.reasons[position])  # fmt: skip
    done = [outcome for outcome in outcomes if outcome is not None]
    if len(done) != n:
        raise RuntimeError(f"{metric.name}: {n - len(done)} step row(s) left without an outcome")
    return result_of(done)


def _same_as_turn(traces: TraceBatch, trace: int, steps: TraceBatch, row: int) -> bool:
    """Whether step row ``row`` asks what its turn asks: the same question and the same documents (the rest of a
    step row is its turn's)."""
    turn_question = traces.questions[trace] if traces.questions is not None else None
    step_question = steps.questions[row] if steps.questions is not None else None
    return (
        step_question == turn_question
        and tuple(steps.context_ids[row]) == tuple(traces.context_ids[trace])
        and tuple(steps.context_texts[row]) == tuple(traces.context_texts[trace])
    )
