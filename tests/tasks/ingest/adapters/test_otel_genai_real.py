"""OTLP/JSON written by the OpenTelemetry SDK and GenAI instrumentations (tests/fixtures/adapters/otel-genai/real,
see SOURCES.md there) -> canonical traces, through real staging.

Expected values are read from the fixture lines with plain ``json`` here, never through ragpulse: trace
ids are random per generation, so each trace is found by what its spans carry.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tasks.ingest.adapters.conftest import FIXTURES, Staged, quarantined

SOURCE = FIXTURES / "otel-genai" / "real"
DAY = SOURCE / "dt=2026-03-02"
LATEST, LEGACY, DEFAULT, PROTO = (DAY / f"otlp-{n}.jsonl" for n in ("latest", "legacy", "default", "proto-example"))


def _records(path: Path) -> Iterator[dict[str, Any]]:
    """Every span and log record of a file, with its attributes as a plain dict."""
    for line in path.read_text(encoding="utf-8").splitlines():
        request = json.loads(line)
        for resource in request.get("resourceSpans", []) + request.get("resourceLogs", []):
            for scope in resource.get("scopeSpans", []) + resource.get("scopeLogs", []):
                for record in scope.get("spans", []) + scope.get("logRecords", []):
                    attributes = {a["key"]: next(iter(a["value"].values())) for a in record.get("attributes", [])}
                    yield {**record, "attributes": attributes}


def _trace_ids(path: Path) -> set[str]:
    return {r["traceId"].lower() for r in _records(path)}


def _trace_of(path: Path, query: str) -> str:
    """The trace whose retrieval query (or, in the legacy file, user message event) is ``query``."""
    (trace_id,) = {
        r["traceId"]
        for r in _records(path)
        if r["attributes"].get("gen_ai.retrieval.query.text") == query
        or (r.get("body") or {}).get("kvlistValue", {}).get("values", [{}])[0].get("value") == {"stringValue": query}
    }
    return trace_id


def _span(path: Path, trace_id: str, operation: str) -> dict[str, Any]:
    (span,) = [
        r
        for r in _records(path)
        if r["traceId"] == trace_id and r["attributes"].get("gen_ai.operation.name") == operation
    ]
    return span


def _parts_text(messages_json: str, role: str) -> str:
    (message,) = [m for m in json.loads(messages_json) if m["role"] == role]
    return "".join(p["content"] for p in message["parts"] if p["type"] == "text")


@pytest.fixture
def real(stager: Callable[..., Staged]) -> Staged:
    return stager(SOURCE, "otel-genai")


def test_every_trace_of_every_file_is_read_or_quarantined(real: Staged) -> None:
    staged, rows = real
    counts = {path.name: len(_trace_ids(path)) for path in (LATEST, LEGACY, DEFAULT, PROTO)}
    assert counts == {
        "otlp-latest.jsonl": 3,
        "otlp-legacy.jsonl": 3,
        "otlp-default.jsonl": 3,
        "otlp-proto-example.jsonl": 1,
    }
    assert set(rows) == _trace_ids(LATEST) | _trace_ids(LEGACY)
    reasons = {q.trace_id: (q.field, q.reason) for q in staged.quarantined}
    assert set(reasons) == _trace_ids(DEFAULT) | _trace_ids(PROTO)
    # content capture off (openai-v2's default): no query text, no messages anywhere
    assert {reasons[t][0] for t in _trace_ids(DEFAULT)} == {"question"}
    assert all(reasons[t][1].startswith("no question in the otel-genai trace") for t in _trace_ids(DEFAULT))


def test_reference_scenario_documents_without_id_are_contexts_by_text(real: Staged) -> None:
    _, rows = real
    trace_id = _trace_of(LATEST, "Seattle weather")
    retrieval, chat = _span(LATEST, trace_id, "retrieval"), _span(LATEST, trace_id, "chat")
    logged = json.loads(retrieval["attributes"]["gen_ai.retrieval.documents"])
    assert [set(doc) for doc in logged] == [{"content", "source_id"}] * 2  # the reference scenarios' shape
    row = rows[trace_id]
    assert row["question"] == retrieval["attributes"]["gen_ai.retrieval.query.text"] == "Seattle weather"
    assert row["answer"] == _parts_text(chat["attributes"]["gen_ai.output.messages"], "assistant")
    # source_id names the data source (== gen_ai.data_source.id), so it is no document id
    assert {doc["source_id"] for doc in logged} == {retrieval["attributes"]["gen_ai.data_source.id"]}
    assert row["contexts"] == [{"id": None, "text": doc["content"], "score": None} for doc in logged]
    assert row["metadata"]["model"] == chat["attributes"]["gen_ai.response.model"]
    assert row["metadata"]["token_counts"] == {
        "input": int(chat["attributes"]["gen_ai.usage.input_tokens"]),
        "output": int(chat["attributes"]["gen_ai.usage.output_tokens"]),
    }
    root = next(r for r in _records(LATEST) if r["traceId"] == trace_id and not r.get("parentSpanId"))
    assert row["metadata"]["source"]["root_span_id"] == root["spanId"]
    assert row["metadata"]["source"]["retriever_span_ids"] == [retrieval["spanId"]]


def test_japanese_trace_keeps_the_specs_ids_and_scores(real: Staged) -> None:
    _, rows = real
    trace_id = _trace_of(LATEST, "東京の天気は？")
    retrieval, chat = _span(LATEST, trace_id, "retrieval"), _span(LATEST, trace_id, "chat")
    logged = json.loads(retrieval["attributes"]["gen_ai.retrieval.documents"])
    row = rows[trace_id]
    assert row["question"] == "東京の天気は？"
    assert row["question"] == _parts_text(chat["attributes"]["gen_ai.input.messages"], "user")
    assert row["answer"] == _parts_text(chat["attributes"]["gen_ai.output.messages"], "assistant")
    assert row["contexts"] == [{"id": doc["id"], "text": None, "score": doc["score"]} for doc in logged]


def test_haystack_shaped_chinese_document_keeps_its_id_and_text(real: Staged) -> None:
    _, rows = real
    trace_id = _trace_of(LATEST, "上海的天气怎么样？")
    (logged,) = json.loads(_span(LATEST, trace_id, "retrieval")["attributes"]["gen_ai.retrieval.documents"])
    assert rows[trace_id]["contexts"] == [{"id": logged["id"], "text": logged["content"], "score": None}]


def test_legacy_log_events_give_question_and_answer(real: Staged) -> None:
    _, rows = real
    trace_id = _trace_of(LEGACY, "東京の天気は？")
    events = {
        r["attributes"].get("event.name"): r for r in _records(LEGACY) if r["traceId"] == trace_id and "body" in r
    }
    assert set(events) == {"gen_ai.system.message", "gen_ai.user.message", "gen_ai.choice"}
    choice = {kv["key"]: kv["value"] for kv in events["gen_ai.choice"]["body"]["kvlistValue"]["values"]}
    message = {kv["key"]: kv["value"]["stringValue"] for kv in choice["message"]["kvlistValue"]["values"]}
    row = rows[trace_id]
    assert (row["question"], row["answer"], row["contexts"]) == ("東京の天気は？", message["content"], [])
    chat = _span(LEGACY, trace_id, "chat")
    assert events["gen_ai.choice"]["spanId"] == chat["spanId"]  # the event was emitted inside the chat span
    assert row["metadata"]["model"] == chat["attributes"]["gen_ai.response.model"]


def test_upper_case_hex_ids_of_the_proto_example_are_joined_lower_case(real: Staged) -> None:
    staged, _ = real
    (span,) = _records(PROTO)
    assert span["traceId"] != span["traceId"].lower()
    # A sub-tree (its parent span was not exported) is read from its top span; this one holds no question.
    assert (span["traceId"].lower(), "question") in quarantined(staged)
    (reason,) = [q.reason for q in staged.quarantined if q.trace_id == span["traceId"].lower()]
    assert span["parentSpanId"].lower() in reason  # its parent was never exported
