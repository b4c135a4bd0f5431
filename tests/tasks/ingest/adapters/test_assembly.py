"""What every adapter shares: timestamps in every unit sources use, documents as frameworks log them, and the
assembly of spans whose documents lack ids."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.adapters import AdapterOptions, Span, assemble
from ragpulse.tasks.ingest.adapters.fields import document_from, parse_time
from ragpulse.tasks.ingest.adapters.span import Document

MOMENT = dt.datetime(2026, 3, 2, 9, 30, 15, 123456, tzinfo=dt.UTC)
EPOCH_SECONDS = 1772443815  # MOMENT without its fraction, computed independently: calendar.timegm


def test_epoch_seconds_constant_is_the_moment() -> None:
    import calendar

    assert calendar.timegm(MOMENT.timetuple()) == EPOCH_SECONDS


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(EPOCH_SECONDS, MOMENT.replace(microsecond=0), id="seconds"),
        pytest.param(EPOCH_SECONDS * 1000 + 123, MOMENT.replace(microsecond=123000), id="milliseconds-js-sdk"),
        pytest.param(str(EPOCH_SECONDS * 1000 + 123), MOMENT.replace(microsecond=123000), id="milliseconds-text"),
        pytest.param(EPOCH_SECONDS * 10**6 + 123456, MOMENT, id="microseconds"),
        # Nanoseconds: a float division would land on ...123455 or ...123457; integer arithmetic does not.
        pytest.param(EPOCH_SECONDS * 10**9 + 123456789, MOMENT, id="nanoseconds-otlp"),
        pytest.param(str(EPOCH_SECONDS * 10**9 + 123456999), MOMENT, id="nanoseconds-text"),
        pytest.param(EPOCH_SECONDS + 0.5, MOMENT.replace(microsecond=500000), id="float-seconds"),
        pytest.param("2026-03-02T09:30:15.123456Z", MOMENT, id="iso-z"),
        pytest.param("2026-03-02 18:30:15.123456+09:00", MOMENT, id="iso-offset"),
    ],
)
def test_timestamps_in_every_unit_sources_write(value: Any, expected: dt.datetime) -> None:
    assert parse_time(value, trace_id="t", field="start_time") == expected


def test_nanoseconds_keep_every_microsecond() -> None:
    """Every microsecond of a second survives; the old float division lost some (seen on OTLP data)."""
    base = EPOCH_SECONDS * 10**9
    for micros in range(0, 1_000_000, 997):
        parsed = parse_time(base + micros * 1000 + 999, trace_id="t", field="f")
        assert parsed is not None and parsed.microsecond == micros


def test_an_epoch_out_of_range_names_the_field() -> None:
    with pytest.raises(InvalidRecordError, match="out of range") as caught:
        parse_time(10**30, trace_id="t", field="run r1 start_time")
    assert caught.value.field == "run r1 start_time"


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(
            {"id": "d1", "page_content": "text", "metadata": {"id": "m1", "score": 0.5}},
            ("d1", "text", 0.5),
            id="langchain-top-level-id-wins",
        ),
        pytest.param(
            {"page_content": "text", "metadata": {"id": "m1"}, "type": "Document"},
            ("m1", "text", None),
            id="langchain-before-0.2.11",
        ),
        pytest.param(
            {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain", "schema", "document", "Document"],
                "kwargs": {"id": "d2", "page_content": "serialised", "metadata": {"relevance_score": 0.9}},
            },
            ("d2", "serialised", 0.9),
            id="langchain-serialised",
        ),
        pytest.param({"id_": "n1", "text": "node text", "metadata": {}}, ("n1", "node text", None), id="llamaindex"),
        pytest.param({"id": "h1", "content": "haystack", "score": 1.5}, ("h1", "haystack", 1.5), id="haystack"),
        pytest.param({"content": "no id", "metadata": {"document_id": "x"}}, ("x", "no id", None), id="document-id"),
    ],
)
def test_documents_are_read_at_the_keys_frameworks_use(doc: dict[str, Any], expected: tuple[Any, ...]) -> None:
    found = document_from(doc, AdapterOptions(), "outputs.documents.0")
    assert (found.id, found.text, found.score) == expected


def test_a_configured_key_is_used_alone() -> None:
    doc = {"id": "top", "page_content": "t", "metadata": {"doc_id": "mine", "score": 0.1}}
    found = document_from(doc, AdapterOptions(id_key="metadata.doc_id", score_key="metadata.missing"), "w")
    assert (found.id, found.score) == ("mine", None)


def _span(span_id: str, kind: Any, **fields: Any) -> Span:
    return Span(trace_id="t", span_id=span_id, parent_id=None if span_id == "root" else "root", kind=kind,
                name=span_id, start=MOMENT, **fields)  # fmt: skip


def test_documents_without_id_assemble_as_contexts_with_null_id() -> None:
    spans = [
        _span("root", "chain", question="Where is Paris?", answer="In France."),
        _span(
            "ret",
            "retriever",
            documents=(
                Document(None, "Paris is in France.", 0.8, "span ret doc.0"),
                Document("d2", None, None, "span ret doc.1"),
            ),
        ),
    ]
    trace = assemble("t", spans, source_format="otel-genai", options=AdapterOptions())
    assert trace["contexts"] == [{"id": None, "text": "Paris is in France.", "score": 0.8},
                                 {"id": "d2", "text": None, "score": None}]  # fmt: skip


def test_a_document_with_neither_id_nor_text_names_its_field() -> None:
    spans = [
        _span("root", "chain", question="q"),
        _span("ret", "retriever", documents=(Document(None, None, 0.2, "span ret doc.0"),)),
    ]
    with pytest.raises(InvalidRecordError, match="needs an id or a text") as caught:
        assemble("t", spans, source_format="otel-genai", options=AdapterOptions())
    assert caught.value.field == "span ret doc.0.id"


def test_a_retriever_nested_in_another_is_one_retrieval_and_an_empty_outer_one_hides_nothing() -> None:
    doc = (Document("d1", "one", 0.9, "w"),)
    outer = Span("t", "outer", "root", "retriever", "retrieve", MOMENT, documents=doc)
    inner = Span("t", "inner", "outer", "retriever", "_retrieve", MOMENT, documents=doc)
    spans = [_span("root", "chain", question="q"), outer, inner]
    trace = assemble("t", spans, source_format="openinference", options=AdapterOptions())
    assert [c["id"] for c in trace["contexts"]] == ["d1"]
    assert trace["metadata"]["source"]["retriever_span_ids"] == ["outer"]
    empty_outer = Span("t", "outer", "root", "retriever", "retrieve", MOMENT, documents=())
    trace = assemble("t", [spans[0], empty_outer, inner], source_format="openinference", options=AdapterOptions())
    assert [c["id"] for c in trace["contexts"]] == ["d1"]


def test_document_text_that_looks_like_json_is_kept_as_logged() -> None:
    found = document_from({"id": "d1", "page_content": '{"sku": 7}'}, AdapterOptions(), "w")
    assert found.text == '{"sku": 7}'


@pytest.mark.parametrize(("given", "language"), [("ja", "ja"), ("zh-tw", "zh-TW"), ("Japanese", None), (7, None)])
def test_a_root_language_tag_becomes_the_trace_language_and_anything_else_is_left_to_identify(
    given: Any, language: str | None
) -> None:
    spans = [_span("root", "chain", question="q", metadata={"language": given})]
    trace = assemble("t", spans, source_format="langsmith", options=AdapterOptions())
    assert trace["language"] == language and trace["metadata"]["language"] == given
