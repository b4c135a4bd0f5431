"""The agent metrics computed without a judge (metrics/agent_steps.py, metrics/tool_calls.py). Every expected value
is worked out by hand from the definitions in docs/metrics.md (ragas' for the tool-call metrics)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import (
    CONVERSATION_FAMILIES,
    REGISTRY,
    STEP_FAMILIES,
    MetricRequest,
    ShapeError,
    Status,
    Step,
    ToolCall,
    TraceBatch,
    compute,
    parse_metrics,
)
from ragpulse.metrics.registry import build_conversation_metrics, build_judge_metrics
from ragpulse.metrics.tool_calls import tool_call_accuracy, tool_call_f1

AGENT = ["retrieval_steps", "repeated_queries", "tool_errors", "tool_call_accuracy", "tool_call_f1"]


def _step(index: int, query: str | None, kind: str = "retriever") -> Step:
    return Step(index, f"s{index}", None, kind, query, ("d",), ("text",), parent=0 if kind == "reranker" else None)


def _batch(n: int, **fields: Any) -> TraceBatch:
    return TraceBatch(
        trace_ids=[f"t{i}" for i in range(n)],
        context_ids=[[] for _ in range(n)],
        context_texts=[[] for _ in range(n)],
        relevant_ids=[None] * n,
        relevant_texts=[None] * n,
        answers=[None] * n,
        references=[[] for _ in range(n)],
        **fields,
    )


def _values(batch: TraceBatch, name: str) -> list[Any]:
    result = compute(batch, [MetricRequest.parse(name)])[name]
    return [
        float(v) if s == Status.OK else (Status(int(s)).label, r)
        for v, s, r in zip(result.values, result.status, result.reasons, strict=True)
    ]


STEPS = [
    _step(0, "東京の 人口"),
    _step(1, "東京の\u3000人口"),  # an ideographic space: NFKC makes it a space, so a repeat of step 0
    _step(2, "\uff34\uff2f\uff2b\uff39\uff2f population"),  # full-width TOKYO: "tokyo population", new
    _step(3, "Tokyo   POPULATION"),  # repeat of step 2 (case and white space)
    _step(4, "東京の 人口", "reranker"),  # a reranker reorders, it asks nothing: not counted
    _step(5, None),  # no query: not compared
    _step(6, "２０２４年北京人口"),  # full-width digits
    _step(7, "2024年北京人口"),  # repeat of step 6
]


def test_retrieval_steps_and_repeated_queries() -> None:
    batch = _batch(3, steps=[STEPS, [], None])
    # 8 steps, of which steps 1, 3 and 7 repeat an earlier query; a turn that said "no steps" counts 0.
    assert _values(batch, "retrieval_steps") == [8.0, 0.0, ("not_applicable", "no_steps")]
    assert _values(batch, "repeated_queries") == [3.0, 0.0, ("not_applicable", "no_steps")]


def test_a_batch_built_without_steps_is_not_applicable() -> None:
    batch = _batch(2)
    assert _values(batch, "retrieval_steps") == [("not_applicable", "no_steps")] * 2
    assert _values(batch, "tool_errors") == [("not_applicable", "no_tool_calls")] * 2
    assert _values(batch, "tool_call_accuracy") == [("not_applicable", "no_tool_calls")] * 2


def test_tool_errors() -> None:
    calls = [
        ToolCall("search", {"q": "上海天气"}, "HTTP 503"),
        ToolCall("search", {"q": "上海天气"}),
        ToolCall("weather", {"city": "上海"}, ""),
        ToolCall("weather", {"city": "上海"}, "  "),
        ToolCall("clock", None, "タイムアウト"),
    ]
    assert _values(_batch(3, tool_calls=[calls, [], None]), "tool_errors") == [
        2.0,
        0.0,
        ("not_applicable", "no_tool_calls"),
    ]


SEARCH = ToolCall("search", {"query": "東京の天気"})
WEATHER_REF = ToolCall("weather", {"city": "東京", "day": "今日"})


@pytest.mark.parametrize(
    ("made", "reference", "expected"),
    [
        # Same names in the same order; search's one argument matches (1), weather's city matches and day is
        # missing (1/2); the extra "unit" costs nothing. (1 + 1/2) / 2.
        ([SEARCH, ToolCall("weather", {"city": "東京", "unit": "c"})], [SEARCH, WEATHER_REF], 0.75),
        ([ToolCall("weather", {"city": "東京", "day": "今日"}), SEARCH], [SEARCH, WEATHER_REF], 0.0),  # order
        ([SEARCH, WEATHER_REF, SEARCH], [SEARCH, WEATHER_REF], 0.0),  # an extra call: the names differ
        ([SEARCH], [SEARCH, WEATHER_REF], 0.0),  # a missing call
        ([], [], 1.0),
        ([], [SEARCH], 0.0),
        ([SEARCH], [], 0.0),
        # JSON text is read as the object it holds; values compare as text, so 5 matches "5".
        (
            [ToolCall("weather", '{"city": "上海", "days": 5}')],
            [ToolCall("weather", {"city": "上海", "days": "5"})],
            1.0,
        ),
        # Plain text is one argument named "input".
        ([ToolCall("search", "上海天气")], [ToolCall("search", {"input": "上海天气"})], 1.0),
        # No reference arguments: 1 when the call has none either, else 0.
        ([ToolCall("clock"), ToolCall("clock", {"tz": "JST"})], [ToolCall("clock", {}), ToolCall("clock")], 0.5),
    ],
)
def test_tool_call_accuracy(made: list[ToolCall], reference: list[ToolCall], expected: float) -> None:
    assert tool_call_accuracy(made, reference) == pytest.approx(expected, abs=1e-12)


A = ToolCall("search", {"query": "北京天气"})
B = ToolCall("weather", {"city": "北京"})
C = ToolCall("weather", {"city": "上海"})
D = ToolCall("clock", {"tz": "Asia/Shanghai"})


@pytest.mark.parametrize(
    ("made", "reference", "expected"),
    [
        ([A, B, C], [A, B], 0.8),  # P = 2/3, R = 1: 2 (2/3) / (5/3)
        ([A, A], [A], 1.0),  # sets: the repeat is one call
        ([B, A], [A, B], 1.0),  # order does not count
        ([C], [B], 0.0),  # same tool, other arguments
        ([], [], 0.0),  # ragas: no calls on either side is 0, not 1
        ([A, C], [A, B, D], 0.4),  # P = 1/2, R = 1/3: 2 (1/6) / (5/6)
        ([A, C, D], [A, B, ToolCall("x"), ToolCall("y")], 0.2857),  # P = 1/3, R = 1/4: 2/7 rounded to 4 places
        # Nested arguments compare by value; JSON text equals the object it holds.
        (
            [ToolCall("f", '{"filter": {"lang": "ja", "tags": ["a"]}}')],
            [ToolCall("f", {"filter": {"tags": ["a"], "lang": "ja"}})],
            1.0,
        ),
    ],
)
def test_tool_call_f1(made: list[ToolCall], reference: list[ToolCall], expected: float) -> None:
    assert tool_call_f1(made, reference) == expected


def test_tool_call_metrics_over_a_batch() -> None:
    batch = _batch(
        4,
        tool_calls=[[A, B, C], None, [A], []],
        reference_tool_calls=[[A, B], [A], None, []],
    )
    assert _values(batch, "tool_call_f1") == [
        0.8,
        ("not_applicable", "no_tool_calls"),
        ("not_applicable", "no_reference_tool_calls"),
        0.0,
    ]
    # [A, B, C] against [A, B]: the name sequences differ, so 0.
    assert _values(batch, "tool_call_accuracy")[0::3] == [0.0, 1.0]


def test_agent_metrics_are_registered_and_computed_by_compute() -> None:
    for name in AGENT:
        definition = REGISTRY[name]
        assert (definition.needs, definition.spec.version) == ("agent", "1.0.0")
        assert definition.spec.summary.strip()
        assert not MetricRequest.parse(name).is_judge
    assert math.isinf(REGISTRY["tool_errors"].spec.upper) and not REGISTRY["tool_errors"].spec.higher_is_better
    assert REGISTRY["tool_call_f1"].spec.upper == 1.0
    batch = _batch(1, steps=[STEPS[:2]], tool_calls=[[A]], reference_tool_calls=[[A]])
    results = compute(batch, parse_metrics([*AGENT, "document_mrr"]))
    assert {name: float(results[name].values[0]) for name in AGENT} == {
        "retrieval_steps": 2.0,
        "repeated_queries": 1.0,
        "tool_errors": 0.0,
        "tool_call_accuracy": 1.0,
        "tool_call_f1": 1.0,
    }
    assert results["document_mrr"].reasons[0] == "no_relevance_labels"  # computed alongside, as before


def test_step_and_conversation_families() -> None:
    assert {
        "document_map",
        "document_mrr",
        "document_ndcg",
        "document_recall_single_hit",
        "document_recall_multi_hit",
        "recall",
        "precision",
        "hit_rate",
        "context_relevance",
        "context_precision",
        "context_precision_without_reference",
        "context_recall",
    } == STEP_FAMILIES
    assert MetricRequest.parse("precision@5").per_step and not MetricRequest.parse("faithfulness").per_step
    assert {"agent_goal_accuracy"} == CONVERSATION_FAMILIES
    requests = parse_metrics(["agent_goal_accuracy", "context_relevance", "retrieval_steps"])
    assert [r.is_conversation for r in requests] == [True, False, False]
    assert [m.name for m in build_judge_metrics(requests, {})] == ["context_relevance"]
    assert [m.name for m in build_conversation_metrics(requests, {})] == ["agent_goal_accuracy"]
    with pytest.raises(ShapeError, match="agent_goal_accuracy"):
        compute(_batch(1), requests[:1])


def test_results_are_float_arrays_with_nan_where_not_applicable() -> None:
    result = compute(_batch(2, steps=[[], None]), [MetricRequest.parse("retrieval_steps")])["retrieval_steps"]
    assert result.values.dtype == np.float64 and result.values[0] == 0.0 and np.isnan(result.values[1])
