"""OTel GenAI (OTLP/JSON lines) fixture -> canonical traces, through real staging."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.adapters import AdapterOptions
from ragpulse.tasks.ingest.adapters.otel_genai import any_value, spans
from tests.tasks.ingest.adapters.conftest import FIXTURES, Staged, quarantined

SOURCE = FIXTURES / "otel-genai"
T1, T2, T3, T4 = (
    "5b8efff798038103d269b633813fc60c",
    "0af7651916cd43dd8448eb211c80319c",
    "4bf92f3577b34da6a3ce929d0e0e4736",
    "a3ce929d0e0e47364bf92f3577b34da6",
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"stringValue": "x"}, "x"),
        ({"intValue": "350"}, 350),
        ({"doubleValue": 0.5}, 0.5),
        ({"boolValue": True}, True),
        ({"arrayValue": {"values": [{"intValue": "1"}, {"stringValue": "a"}]}}, [1, "a"]),
        ({"kvlistValue": {"values": [{"key": "id", "value": {"stringValue": "d"}}]}}, {"id": "d"}),
        ({"bytesValue": "AAE="}, "0001"),
        ({}, None),
    ],
)
def test_any_value_decodes_otlp_json(value: dict[str, Any], expected: Any) -> None:
    assert any_value(value) == expected


def test_retrieval_without_text_keeps_ids_and_scores_with_null_text(stager: Callable[..., Staged]) -> None:
    _, rows = stager(SOURCE, "otel-genai")
    t1 = rows[T1]
    assert t1["question"] == "how do I reset my password"  # gen_ai.retrieval.query.text
    assert t1["answer"] == "Open Settings > Security and choose Reset password."
    assert t1["contexts"] == [{"id": "kb-12", "text": None, "score": 0.93}, {"id": "kb-7", "text": None, "score": 0.71}]
    assert t1["metadata"]["model"] == "gpt-4o-2024-08-06"  # the response model wins over the request model
    assert t1["metadata"]["token_counts"] == {"input": 350, "output": 40}
    assert t1["metadata"]["service_name"] == "support-bot"
    assert t1["metadata"]["source"]["root_span_id"] == "a000000000000001"


def test_two_retrievals_and_a_chat_span_in_another_file(stager: Callable[..., Staged]) -> None:
    _, rows = stager(SOURCE, "otel-genai")
    t2 = rows[T2]
    assert [(c["id"], c["text"]) for c in t2["contexts"]] == [
        ("pol-1", "Refunds within 30 days."),
        ("faq-9", "Refunds go to the original card."),
    ]
    assert t2["answer"] == "Refunds are possible within 30 days, to the original card."
    t3 = rows[T3]
    assert (t3["question"], t3["answer"], t3["contexts"]) == ("what is 2+2", "4", [])  # from the chat messages


def test_unreadable_lines_and_spans_are_quarantined_alone(stager: Callable[..., Staged]) -> None:
    staged, rows = stager(SOURCE, "otel-genai")
    assert sorted(rows) == sorted([T1, T2, T3])  # T3 shares its line with the broken span
    assert quarantined(staged) == {
        (None, "resourceSpans"),
        (None, "resourceSpans[0].scopeSpans[0].spans[0].traceId"),
        (T4, "question"),
    }
    # the broken span shares its line with T3's spans, so its location names the span
    files = {q.field: q.source_file for q in staged.quarantined}
    broken = "resourceSpans[0].scopeSpans[0].spans[0].traceId"
    assert files[broken].endswith(f"otlp-0002.jsonl#{broken}")
    assert files["question"].endswith("otlp-0001.jsonl")  # T4 has its line to itself


def test_documents_that_are_not_a_list_name_the_span() -> None:
    line = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "t", "spanId": "s", "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "retrieval"}},
            {"key": "gen_ai.retrieval.documents", "value": {"stringValue": "{\"id\": 1}"}},
        ]}]}]}]}  # fmt: skip
    (error,) = list(spans(line, AdapterOptions()))
    assert isinstance(error, InvalidRecordError)
    assert (error.record_id, error.field) == ("t", "span s gen_ai.retrieval.documents")
