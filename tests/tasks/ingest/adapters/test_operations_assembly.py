"""How assembly reads latencies, token usage and span errors from spans: the cases the real exports do not contain
(parallel retrievals, one model call logged by two instrumentations, clock skew, a trace-level record without an
end, the older OTel GenAI token names)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ragpulse.tasks.ingest.adapters import AdapterOptions, Span, assemble
from ragpulse.tasks.ingest.adapters.otel_genai import spans as otel_spans
from ragpulse.tasks.ingest.adapters.span import Document
from ragpulse.tasks.ingest.records import parse_record

T0 = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)


def at(ms: float) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=ms)


def span(span_id: str, parent: str | None, kind: Any, start: float | None, end: float | None, **fields: Any) -> Span:
    return Span(
        "t",
        span_id,
        parent,
        kind,
        fields.pop("name", span_id),
        None if start is None else at(start),
        end=None if end is None else at(end),
        **fields,
    )


def root(end: float | None = 1000.0, **fields: Any) -> Span:
    return span("root", None, "chain", 0.0, end, question="東京の天気は？", **fields)


def turn(*spans: Span) -> dict[str, Any]:
    return assemble("t", spans, source_format="openinference", options=AdapterOptions())


def docs(text: str) -> tuple[Document, ...]:
    return (Document(id=text, text=text, score=None, where="w"),)


def test_parallel_retrievals_count_once_and_sequential_ones_add_up() -> None:
    trace = turn(
        root(),
        span("r1", "root", "retriever", 100, 300, documents=docs("a")),
        span("r2", "root", "retriever", 150, 250, documents=docs("b")),  # inside r1's interval
        span("r3", "root", "retriever", 280, 400, documents=docs("c")),  # overlaps r1's end
        span("r4", "root", "retriever", 600, 650, documents=docs("d")),
        span("g", "root", "llm", 700, 900),
    )

    assert trace["latency_ms"] == 1000.0
    assert trace["retrieval_latency_ms"] == 300.0 + 50.0  # [100, 400] and [600, 650]
    assert trace["generation_latency_ms"] == 200.0
    assert "latency_from" not in trace["metadata"]["source"]


def test_one_model_call_logged_twice_is_one_usage_entry() -> None:
    """A framework's chat-model span around the client library's span: the counts sit on the inner one."""
    trace = turn(
        root(),
        span("chat", "root", "llm", 100, 500, model="gpt-4o-mini"),
        span("client", "chat", "llm", 110, 490, tokens={"prompt": 812, "completion": 64, "total": 876}),
        span("second", "root", "llm", 600, 700, model="qwen2.5", tokens={"input": 30}),
    )

    assert trace["usage"] == [
        {"model": "gpt-4o-mini", "input_tokens": 812, "output_tokens": 64},
        {"model": "qwen2.5", "input_tokens": 30, "output_tokens": None},
    ]
    assert trace["generation_latency_ms"] == 500.0


def test_errors_name_the_root_and_each_failed_span_and_none_is_an_empty_list() -> None:
    failed = turn(
        root(error="PipelineRuntimeError: generator failed"),
        span("g", "root", "llm", 10, 20, error="InternalServerError: 500", name="OpenAI.chat"),
        span("ok", "root", "tool", 30, 40),
    )
    clean = turn(root(), span("g", "root", "llm", 10, 20))

    assert failed["errors"] == [
        {"kind": "root", "name": "root", "message": "PipelineRuntimeError: generator failed"},
        {"kind": "llm", "name": "OpenAI.chat", "message": "InternalServerError: 500"},
    ]
    assert clean["errors"] == []
    assert clean["usage"] == [{"model": None, "input_tokens": None, "output_tokens": None}]
    assert clean["retrieval_latency_ms"] is None  # no retrieval, not a retrieval of 0 ms


def test_without_the_roots_end_latency_is_the_spans_extent_and_says_so() -> None:
    trace = turn(root(end=None), span("a", "root", "llm", 50, 200), span("b", "root", "tool", 180, 420))

    assert trace["latency_ms"] == 370.0
    assert trace["metadata"]["source"]["latency_from"] == "span_extent"


def test_a_trace_level_record_stands_for_its_single_top_observation() -> None:
    """Langfuse: the traces row has no end; the root observation's duration is the turn's."""
    record = Span("t", "trace:t", None, "trace", "agent", T0, question="你好吗？")
    trace = turn(record, span("top", None, "chain", 5, 905, error="boom"), span("g", "top", "llm", 10, 20))

    assert trace["latency_ms"] == 900.0
    assert "latency_from" not in trace["metadata"]["source"]
    assert trace["errors"] == [{"kind": "root", "name": "top", "message": "boom"}]


def test_clock_skew_gives_no_latency_rather_than_a_negative_one() -> None:
    trace = turn(root(end=-5.0), span("g", "root", "llm", 300, 200))

    assert trace["latency_ms"] is None
    assert trace["generation_latency_ms"] is None
    row = parse_record(trace, source_file="f", line=1)  # a valid record: the trace is not quarantined for it
    assert row["latency_ms"] is None


def test_otel_genai_token_names_before_v1_27_are_read() -> None:
    def attribute(key: str, value: Any) -> dict[str, Any]:
        kind = "intValue" if isinstance(value, int) else "stringValue"
        return {"key": key, "value": {kind: value}}

    chat = {
        "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "chat gpt-4",
        "startTimeUnixNano": "1763629200000000000", "endTimeUnixNano": "1763629200250000000",
        "attributes": [attribute("gen_ai.operation.name", "chat"), attribute("gen_ai.request.model", "gpt-4"),
                       attribute("gen_ai.usage.prompt_tokens", 97), attribute("gen_ai.usage.completion_tokens", 52)],
    }  # fmt: skip
    (found,) = otel_spans({"resourceSpans": [{"scopeSpans": [{"spans": [chat]}]}]}, AdapterOptions())

    assert isinstance(found, Span)
    assert found.tokens == {"input": 97, "output": 52}
    assert found.end is not None and found.start is not None
    assert (found.end - found.start) / dt.timedelta(milliseconds=1) == 250.0
