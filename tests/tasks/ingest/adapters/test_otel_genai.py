"""OTel GenAI (OTLP/JSON lines) -> canonical traces: the invented fixture (otel-genai/dt=2026-03-02, hand-written
in the documented shape for edge cases: broken lines, a span without trace id, one trace over two files) through
real staging, and invented single lines for forms the real fixtures (test_otel_genai_real.py) lack."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.adapters import AdapterOptions, Span, assemble
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


# Invented edge cases: forms the real fixtures (otel-genai/real) do not contain.


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"kvlistValue": {"values": [{"key": k, "value": _value(v)} for k, v in value.items()]}}


def _kv(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in attributes.items()]


def _line(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


def _otlp_span(
    span_id: str, parent: str = "", events: tuple[dict[str, Any], ...] = (), **attributes: Any
) -> dict[str, Any]:
    return {
        "traceId": T1, "spanId": span_id, "parentSpanId": parent, "name": span_id,
        "startTimeUnixNano": f"17724384000000000{span_id[-2:]}", "attributes": _kv(attributes), "events": list(events),
    }  # fmt: skip


def _trace(line: dict[str, Any], **options: Any) -> dict[str, Any]:
    found = list(spans(line, AdapterOptions(**options)))
    assert all(isinstance(s, Span) for s in found), found
    return assemble(T1, found, source_format="otel-genai", options=AdapterOptions(**options))


def _retrieval(documents: list[dict[str, Any]], **attributes: Any) -> dict[str, Any]:
    return _line(
        _otlp_span("a000000000000001", **{"gen_ai.input.messages": '[{"role": "user", "content": "q"}]'}),
        _otlp_span("a000000000000002", "a000000000000001", **{
            "gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": json.dumps(documents), **attributes,
        }),
    )  # fmt: skip


def test_source_id_is_a_document_id_only_when_it_tells_documents_apart() -> None:
    distinct = [{"content": "a", "source_id": "doc-1"}, {"content": "b", "source_id": "doc-2"}]
    assert [c["id"] for c in _trace(_retrieval(distinct))["contexts"]] == ["doc-1", "doc-2"]
    shared = [{"content": "a", "source_id": "kb"}, {"content": "b", "source_id": "kb"}]
    assert [c["id"] for c in _trace(_retrieval(shared))["contexts"]] == [None, None]
    (named,) = _trace(_retrieval([{"content": "a", "source_id": "kb"}], **{"gen_ai.data_source.id": "kb"}))["contexts"]
    assert named == {"id": None, "text": "a", "score": None}  # the data source is no document
    (own,) = _trace(_retrieval([{"id": "d9", "content": "a", "source_id": "doc-1"}]))["contexts"]
    assert own["id"] == "d9"  # an id of its own wins


def test_a_document_with_neither_id_nor_text_names_its_field() -> None:
    with pytest.raises(InvalidRecordError) as error:
        _trace(_retrieval([{"score": 0.5, "source_id": "kb"}], **{"gen_ai.data_source.id": "kb"}))
    assert error.value.field == "span a000000000000002 gen_ai.retrieval.documents.0.id"


def test_documents_on_a_span_of_another_operation_are_still_retrieved() -> None:
    line = _retrieval([{"id": "d1", "score": 0.3}])
    line["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["attributes"][0]["value"] = {"stringValue": "execute_tool"}
    assert _trace(line)["contexts"] == [{"id": "d1", "text": None, "score": 0.3}]


def test_openllmetry_indexed_prompt_and_completion_attributes() -> None:
    line = _line(
        _otlp_span("a000000000000001"),
        _otlp_span("a000000000000002", "a000000000000001", **{
            "gen_ai.operation.name": "chat",
            "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "be brief",
            "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "what is OTLP",
            "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "a protocol",
        }),
    )  # fmt: skip
    trace = _trace(line)
    assert (trace["question"], trace["answer"]) == ("what is OTLP", "a protocol")


def test_span_events_of_older_conventions_carry_the_content() -> None:
    prompt = {
        "name": "gen_ai.content.prompt",
        "attributes": _kv({"gen_ai.prompt": '[{"role": "user", "content": "hi"}]'}),
    }
    completion = {"name": "gen_ai.content.completion", "attributes": _kv({"gen_ai.completion": "hello"})}
    older = _line(_otlp_span("a000000000000001", events=(prompt, completion), **{"gen_ai.operation.name": "chat"}))
    assert (_trace(older)["question"], _trace(older)["answer"]) == ("hi", "hello")
    details = {"name": "gen_ai.client.inference.operation.details", "attributes": _kv({
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "q?"}]}],
        "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": "a."}]}],
    })}  # fmt: skip
    newer = _line(_otlp_span("a000000000000001", events=(details,), **{"gen_ai.operation.name": "chat"}))
    assert (_trace(newer)["question"], _trace(newer)["answer"]) == ("q?", "a.")


def test_base64_ids_of_protobufs_json_mapping_read_as_hex() -> None:
    span = _otlp_span("a000000000000001", **{"gen_ai.retrieval.query.text": "q"})
    span |= {"traceId": "W47/95gDgQPSabYzgT/GDA==", "spanId": "oAAAAAAAAAE="}
    (read,) = spans(_line(span), AdapterOptions())
    assert isinstance(read, Span)
    assert (read.trace_id, read.span_id) == (T1, "a000000000000001")


def test_other_signals_of_a_shared_file_exporter() -> None:
    assert list(spans({"resourceMetrics": [{"scopeMetrics": []}]}, AdapterOptions())) == []
    app_log = {"timeUnixNano": "1772438400000000000", "body": {"stringValue": "GET /health"}}
    orphan = {"eventName": "gen_ai.user.message", "body": _value({"content": "q"})}
    found = list(spans({"resourceLogs": [{"scopeLogs": [{"logRecords": [app_log, orphan]}]}]}, AdapterOptions()))
    (error,) = found  # the application log is no trace; the GenAI event outside any span is reported
    assert isinstance(error, InvalidRecordError)
    assert error.field == "resourceLogs[0].scopeLogs[0].logRecords[1].traceId"
