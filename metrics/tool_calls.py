"""Tool-call accuracy and tool-call F1: the turn's tool calls against labelled reference calls (ragas).

Both follow ragas' ``ToolCallAccuracy`` (strict order, exact argument match) and ``ToolCallF1``; the edge
cases are ragas' too (see each function). Arguments are compared as mappings: an object as logged, JSON text
decoded when it holds an object, None as no arguments, and any other text as one argument named ``input``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from ragpulse.metrics._spec import MetricResult, MetricSpec
from ragpulse.metrics.agent_steps import NO_TOOL_CALLS
from ragpulse.metrics.batch import ToolCall, TraceBatch

__all__ = [
    "NO_REFERENCE_TOOL_CALLS",
    "TOOL_CALL_ACCURACY",
    "TOOL_CALL_F1",
    "argument_match",
    "arguments_of",
    "score_accuracy",
    "score_f1",
    "tool_call_accuracy",
    "tool_call_f1",
]

NO_REFERENCE_TOOL_CALLS = "no_reference_tool_calls"

TOOL_CALL_ACCURACY = MetricSpec(
    name="tool_call_accuracy",
    version="1.0.0",
    summary="0 unless the turn called the reference tools by name in the reference order; then the mean share of "
    "each reference call's arguments matched exactly (ragas).",
)
TOOL_CALL_F1 = MetricSpec(
    name="tool_call_f1",
    version="1.0.0",
    summary="F1 of the set of (tool name, arguments) calls made against the reference calls' set (ragas).",
)


def arguments_of(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as a mapping (see the module docstring).

    >>> arguments_of(ToolCall("search", '{"q": "東京"}')), arguments_of(ToolCall("search", "東京"))
    ({'q': '東京'}, {'input': '東京'})
    """
    arguments = call.arguments
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        decoded = json.loads(arguments)
    except ValueError:
        decoded = None
    return dict(decoded) if isinstance(decoded, dict) else {"input": arguments}


def argument_match(made: Mapping[str, Any], reference: Mapping[str, Any]) -> float:
    """The share of the reference's arguments the call made with the same value (compared as text, as ragas'
    exact match does); extra arguments cost nothing. No arguments on either side: 1; only on the call's: 0.

    >>> argument_match({"city": "北京", "unit": "c"}, {"city": "北京", "day": "今天"})
    0.5
    """
    if not reference:
        return 0.0 if made else 1.0
    return sum(key in made and str(made[key]) == str(value) for key, value in reference.items()) / len(reference)


def tool_call_accuracy(made: Sequence[ToolCall], reference: Sequence[ToolCall]) -> float:
    """ragas' ToolCallAccuracy in its default strict order.

    Both empty: 1. Either empty: 0. The sequences of tool names must be equal (same tools, same order, same
    length), else 0; then the mean of :func:`argument_match` over the paired calls.
    >>> search, lookup = ToolCall("search", {"q": "東京"}), ToolCall("lookup", {"id": 7})
    >>> tool_call_accuracy([search, ToolCall("lookup", {"id": "8"})], [search, lookup])
    0.5
    >>> tool_call_accuracy([lookup, search], [search, lookup]), tool_call_accuracy([], [])
    (0.0, 1.0)
    """
    if not made and not reference:
        return 1.0
    if not made or not reference:
        return 0.0
    if [call.name for call in made] != [call.name for call in reference]:
        return 0.0
    total = sum(argument_match(arguments_of(m), arguments_of(r)) for m, r in zip(made, reference, strict=True))
    return total / len(reference)


def _frozen(value: Any) -> Hashable:
    """A hashable stand-in equal exactly when the values are equal (nested objects and lists included)."""
    if isinstance(value, Mapping):
        return frozenset((key, _frozen(item)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return tuple(_frozen(item) for item in value)
    return value  # type: ignore[no-any-return]


def _call_set(calls: Sequence[ToolCall]) -> set[tuple[str, Hashable]]:
    return {(call.name, _frozen(arguments_of(call))) for call in calls}


def tool_call_f1(made: Sequence[ToolCall], reference: Sequence[ToolCall]) -> float:
    """ragas' ToolCallF1: the calls as sets of (name, arguments), so order and repeats do not count.

    P = |made ∩ ref| / |made|, R = |made ∩ ref| / |ref| (0 when the set is empty), F1 = 2PR / (P + R), 0 when
    P + R = 0 (so 0 also when both are empty), rounded to 4 decimals as ragas does.
    >>> a, b, c = ToolCall("search", {"q": "上海"}), ToolCall("weather", {"city": "上海"}), ToolCall("clock")
    >>> tool_call_f1([a, b, c], [a, b])
    0.8
    """
    actual, expected = _call_set(made), _call_set(reference)
    hits = len(actual & expected)
    precision = hits / len(actual) if actual else 0.0
    recall = hits / len(expected) if expected else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return round(f1, 4)


def _score(batch: TraceBatch, formula: Callable[[Sequence[ToolCall], Sequence[ToolCall]], float]) -> MetricResult:
    n = len(batch)
    made = batch.tool_calls or [None] * n
    labels = batch.reference_tool_calls or [None] * n
    values = np.zeros(n, dtype=np.float64)
    reasons = np.full(n, None, dtype=object)
    for row, (calls, reference) in enumerate(zip(made, labels, strict=True)):
        if calls is None:
            reasons[row] = NO_TOOL_CALLS
        elif reference is None:
            reasons[row] = NO_REFERENCE_TOOL_CALLS
        else:
            values[row] = formula(calls, reference)
    return MetricResult.from_values(values, reasons)


def score_accuracy(batch: TraceBatch) -> MetricResult:
    """:func:`tool_call_accuracy` per turn; not applicable without logged calls or reference calls."""
    return _score(batch, tool_call_accuracy)


def score_f1(batch: TraceBatch) -> MetricResult:
    """:func:`tool_call_f1` per turn; not applicable without logged calls or reference calls."""
    return _score(batch, tool_call_f1)
