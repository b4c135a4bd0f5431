"""metrics/registry.py: metric names, parsing, and computing a batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import (
    DEFAULT_METRICS,
    REGISTRY,
    MetricRequest,
    ShapeError,
    Status,
    TraceBatch,
    UnknownMetricError,
    compute,
    parse_metrics,
)
from ragpulse.metrics.registry import spec_name

Builder = Callable[..., Any]

FAMILIES = [
    "document_map",
    "document_mrr",
    "document_ndcg",
    "document_recall_single_hit",
    "document_recall_multi_hit",
    "recall",
    "precision",
    "hit_rate",
    "answer_exact_match",
    "answer_exact_match_normalized",
    "answer_f1",
]
AGENT_FAMILIES = ["retrieval_steps", "repeated_queries", "tool_errors", "tool_call_accuracy", "tool_call_f1"]
OPERATIONS_FAMILIES = [
    "latency_ms",
    "retrieval_latency_ms",
    "generation_latency_ms",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "error",
    "empty_retrieval",
    "answer_length",
]
REFUSAL_FAMILIES = ["refusal"]
FEEDBACK_FAMILIES = ["user_feedback", "tool_evaluation"]
JUDGE_FAMILIES = [
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_precision_without_reference",
    "context_recall",
    "context_relevance",
    "answer_correctness",
    "aspect_critique",
    "llm_judge",
    "answer_semantic_similarity",
    "embedding_context_relevance",
    "embedding_context_relevance_mean",
    "embedding_answer_support",
    "embedding_answer_relevance",
    "embedding_refusal",
    "agent_goal_accuracy",
]
EMBEDDING_FAMILIES = {name for name in JUDGE_FAMILIES if name.startswith("embedding_")} | {"answer_semantic_similarity"}


def test_registry_holds_every_family_keyed_by_spec_name() -> None:
    families = FAMILIES + AGENT_FAMILIES + OPERATIONS_FAMILIES + REFUSAL_FAMILIES + FEEDBACK_FAMILIES + JUDGE_FAMILIES
    assert list(REGISTRY) == families
    for name, definition in REGISTRY.items():
        assert definition.spec.name == name
        if name in AGENT_FAMILIES:
            assert definition.needs == "agent"
        elif name in OPERATIONS_FAMILIES:
            expected = {"empty_retrieval": "retrieval", "answer_length": "answers"}.get(name, "operations")
            assert definition.needs == expected
        elif name in REFUSAL_FAMILIES:
            assert definition.needs == "answers"
        elif name in FEEDBACK_FAMILIES:
            assert definition.needs == "feedback"
        elif name in JUDGE_FAMILIES:
            assert definition.needs == ("embeddings" if name in EMBEDDING_FAMILIES else "judge")
        else:
            assert definition.needs == ("answers" if name.startswith("answer_") else "ranking")


@pytest.mark.parametrize("name", DEFAULT_METRICS)
def test_default_names_round_trip(name: str) -> None:
    request = MetricRequest.parse(name)
    assert request.name == name
    assert MetricRequest.parse(request.name) == request
    assert request.version == REGISTRY[request.family].spec.version


def test_parse_cutoffs() -> None:
    assert MetricRequest.parse("precision@5") == MetricRequest("precision", 5)
    assert MetricRequest.parse(" document_ndcg@10 ") == MetricRequest("document_ndcg", 10)
    assert MetricRequest.parse("document_ndcg") == MetricRequest("document_ndcg", None)
    assert MetricRequest.parse("recall@007").name == "recall@7"


def test_precision_without_k() -> None:
    with pytest.raises(ShapeError, match=r"argument 'precision': expected a cutoff, e\.g\. precision@5, got no cutoff"):
        MetricRequest.parse("precision")


def test_cutoff_on_a_metric_without_one() -> None:
    with pytest.raises(
        ShapeError, match="argument 'document_map@3': expected document_map without a cutoff, got @3"
    ) as info:
        MetricRequest.parse("document_map@3")
    assert info.value.argument == "document_map@3"


def test_zero_cutoff() -> None:
    with pytest.raises(ShapeError, match="argument 'hit_rate@0': expected a cutoff k >= 1, got 0"):
        MetricRequest.parse("hit_rate@0")


@pytest.mark.parametrize("name", ["nope", "Precision@5", "precision@", "precision@-1", "@5", ""])
def test_unknown_names_list_the_known_ones(name: str) -> None:
    with pytest.raises(UnknownMetricError) as info:
        MetricRequest.parse(name)
    known = sorted(spec_name(d.spec) for d in REGISTRY.values())
    assert info.value.name == name
    assert info.value.known == known
    assert str(info.value) == f"unknown metric {name!r}; known metrics: {', '.join(known)}"
    assert "hit_rate@k" in known and "document_map" in known


def test_spec_name() -> None:
    assert spec_name(REGISTRY["precision"].spec) == "precision@k"
    assert spec_name(REGISTRY["document_ndcg"].spec) == "document_ndcg"


def test_parse_metrics_keeps_order_and_drops_repeats() -> None:
    requests = parse_metrics(["recall@5", "document_map", " recall@5", "recall@3"])
    assert [r.name for r in requests] == ["recall@5", "document_map", "recall@3"]


def test_parse_metrics_needs_one() -> None:
    with pytest.raises(ShapeError, match="argument 'metrics': expected at least one metric, got none"):
        parse_metrics([])


def test_compute_every_default_metric(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        make_record("q1", ["d1", "x", "d2"], relevant=["d1", "d2"], answer="The Paris", reference="paris"),
        make_record("q2", ["x"], answer="Rome"),
    )
    results = compute(batch, parse_metrics(DEFAULT_METRICS))
    assert list(results) == list(DEFAULT_METRICS)
    # The label-free defaults read what these canonical records have (answers, contexts) or say what they lack.
    label_free = OPERATIONS_FAMILIES + AGENT_FAMILIES + REFUSAL_FAMILIES
    unlabelled = {name: results.pop(name) for name in DEFAULT_METRICS if name in label_free}
    assert unlabelled["refusal"].values.tolist() == [0.0, 0.0]
    assert unlabelled["answer_length"].values.tolist() == [2.0, 1.0]
    assert unlabelled["empty_retrieval"].values.tolist() == [0.0, 0.0]
    for name, reason in (("latency_ms", "no_latency"), ("cost_usd", "no_usage"), ("retrieval_steps", "no_steps")):
        assert unlabelled[name].reasons.tolist() == [reason, reason], name
    first = {name: float(result.values[0]) for name, result in results.items()}
    assert first == pytest.approx(
        {
            "document_map": (1 + 2 / 3) / 2,
            "document_mrr": 1.0,
            "document_ndcg": 1.5 / (1 + 1 / np.log2(3)),
            "document_ndcg@10": 1.5 / (1 + 1 / np.log2(3)),
            "document_recall_single_hit": 1.0,
            "document_recall_multi_hit": 1.0,
            "precision@5": 0.4,
            "hit_rate@5": 1.0,
            "recall@5": 1.0,
            "answer_exact_match": 0.0,
            "answer_exact_match_normalized": 1.0,
            "answer_f1": 1.0,
        },
        rel=1e-15,
    )
    for name, result in results.items():
        assert result.status[1] == Status.NOT_APPLICABLE, name
        assert np.isnan(result.values[1]), name
        assert result.reasons[1] == ("no_reference" if name.startswith("answer_") else "no_relevance_labels")


def test_compute_empty_batch() -> None:
    results = compute(TraceBatch([], [], [], [], [], [], []), parse_metrics(DEFAULT_METRICS))
    assert all(len(result.values) == 0 for result in results.values())


def test_compute_shares_results_with_single_metric_calls(random_records: Builder) -> None:
    batch = TraceBatch.from_records(random_records(300, np.random.default_rng(0)))
    together = compute(batch, parse_metrics(DEFAULT_METRICS))
    for name in DEFAULT_METRICS:
        alone = compute(batch, parse_metrics([name]))[name]
        np.testing.assert_array_equal(alone.values, together[name].values)
        np.testing.assert_array_equal(alone.status, together[name].status)


def test_the_feedback_wildcards_are_left_to_the_run() -> None:
    """user_feedback:* stands for the day's names (tasks/scoring/feedback_names.py): compute scores nothing for it."""
    batch = TraceBatch(["t"], [[]], [[]], [None], [None], [None], [[]])
    assert compute(batch, parse_metrics(["user_feedback:*", "tool_evaluation:*", "answer_f1"])).keys() == {"answer_f1"}
