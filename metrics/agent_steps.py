"""What an agent did in one turn, counted from its trace without a judge: retrieval steps, repeated queries and
failed tool calls. Counts are floats like every metric value; a turn whose source did not log the data is
``not_applicable`` (``no_steps``, ``no_tool_calls``), never 0, since 0 means "logged, and none"."""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from ragpulse.metrics._spec import MetricResult, MetricSpec
from ragpulse.metrics.batch import Step, ToolCall, TraceBatch

__all__ = [
    "NO_STEPS",
    "NO_TOOL_CALLS",
    "REPEATED_QUERIES",
    "RETRIEVAL_STEPS",
    "TOOL_ERRORS",
    "normalized_query",
    "repeated_queries",
    "score_repeated_queries",
    "score_retrieval_steps",
    "score_tool_errors",
    "tool_errors",
]

NO_STEPS = "no_steps"
NO_TOOL_CALLS = "no_tool_calls"

RETRIEVAL_STEPS = MetricSpec(
    name="retrieval_steps",
    version="1.0.0",
    summary="Retrieval steps (retrievers, document tools, rerankers) the agent ran in the turn; 0 = it did not "
    "retrieve.",
    upper=math.inf,
)
"""Higher is better only in the sense drift needs: a turn that stops retrieving (answers from memory) is the
regression to flag; a rise in steps is watched through ``repeated_queries`` and latency."""
REPEATED_QUERIES = MetricSpec(
    name="repeated_queries",
    version="1.0.0",
    summary="Retrieval steps whose query repeats an earlier step's query of the same turn (NFKC, case and white "
    "space ignored).",
    upper=math.inf,
    higher_is_better=False,
)
TOOL_ERRORS = MetricSpec(
    name="tool_errors",
    version="1.0.0",
    summary="Tool calls of the turn that ended in an error.",
    upper=math.inf,
    higher_is_better=False,
)

_Item = TypeVar("_Item")


def normalized_query(query: str) -> str:
    """A query as repeats are compared: NFKC (full-width forms folded), case-folded, white space collapsed.

    >>> normalized_query("  東京の　人口 ") == normalized_query("東京の 人口"), normalized_query("\\uff32AG  Eval")
    (True, 'rag eval')
    """
    return " ".join(unicodedata.normalize("NFKC", query).casefold().split())


def repeated_queries(steps: Sequence[Step]) -> int:
    """How many steps ask a query an earlier step of the turn already asked (the first asking is not counted).

    Rerankers are left out: they reorder a retrieval's documents for the same query, which is no repeat. Steps
    without a query are not compared.
    >>> def step(i, query, kind="retriever"):
    ...     return Step(i, None, None, kind, query, (), ())
    >>> repeated_queries([step(0, "Tokyo population"), step(1, "tokyo  POPULATION"), step(2, "Osaka"),
    ...                   step(3, "Tokyo population", "reranker"), step(4, "Tokyo population")])
    2
    """
    seen: set[str] = set()
    repeats = 0
    for step in steps:
        if step.kind == "reranker" or step.query is None or not step.query.strip():
            continue
        query = normalized_query(step.query)
        repeats += query in seen
        seen.add(query)
    return repeats


def tool_errors(calls: Sequence[ToolCall]) -> int:
    """How many calls carry an error (a blank error text is none)."""
    return sum(bool(call.error and call.error.strip()) for call in calls)


def _per_trace(
    values: Sequence[Sequence[_Item] | None] | None, n: int, reason: str, count: Callable[[Sequence[_Item]], int]
) -> MetricResult:
    """``count`` of each trace's items, not applicable with ``reason`` where the trace (or batch) has none logged."""
    entries: Sequence[Sequence[_Item] | None] = [None] * n if values is None else values
    counts = np.array([0.0 if items is None else float(count(items)) for items in entries], dtype=np.float64)
    reasons = np.array([reason if items is None else None for items in entries], dtype=object)
    return MetricResult.from_values(counts, reasons)


def score_retrieval_steps(batch: TraceBatch) -> MetricResult:
    """The number of retrieval steps per turn."""
    return _per_trace(batch.steps, len(batch), NO_STEPS, len)


def score_repeated_queries(batch: TraceBatch) -> MetricResult:
    """The number of repeated retrieval queries per turn (:func:`repeated_queries`)."""
    return _per_trace(batch.steps, len(batch), NO_STEPS, repeated_queries)


def score_tool_errors(batch: TraceBatch) -> MetricResult:
    """The number of failed tool calls per turn (:func:`tool_errors`)."""
    return _per_trace(batch.tool_calls, len(batch), NO_TOOL_CALLS, tool_errors)
