"""OpenInference (Phoenix span export) -> canonical traces through real staging: the invented fixture
(openinference/dt=2026-03-02, hand-written in the documented shape for edge cases the real exports in
test_openinference_real.py lack: a reranker, a span split over two files, broken lines)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.adapters import AdapterOptions
from ragpulse.tasks.ingest.adapters.openinference import spans
from tests.tasks.ingest.adapters.conftest import FIXTURES, Staged, quarantined

SOURCE = FIXTURES / "openinference"


def test_fixture_day_becomes_canonical_traces_with_source_ids(stager: Callable[..., Staged]) -> None:
    _, rows = stager(SOURCE, "openinference")
    assert sorted(rows) == ["oi-t1", "oi-t2", "oi-t3", "oi-t5"]
    t1 = rows["oi-t1"]
    assert t1["question"] == "What is the capital of France?"
    assert t1["answer"] == "Paris is the capital of France."
    assert [(c["id"], c["score"]) for c in t1["contexts"]] == [("doc-fr", 0.91), ("doc-de", 0.42), ("17", 0.3)]
    assert t1["metadata"]["source"] == {
        "format": "openinference", "trace_id": "oi-t1", "root_span_id": "s1-root", "retriever_span_ids": ["s1-ret"],
        "contexts_from": "all_steps",  # no LLM call logged its input
    }  # fmt: skip
    assert t1["metadata"]["model"] == "gpt-4o-mini"
    assert t1["metadata"]["token_counts"] == {"prompt": 412, "completion": 9, "total": 421}
    assert t1["metadata"]["app"] == "geo-bot" and t1["metadata"]["session_id"] == "sess-1"


def test_reranker_output_is_the_ranking_of_a_multi_retriever_trace(stager: Callable[..., Staged]) -> None:
    _, rows = stager(SOURCE, "openinference")
    assert [c["id"] for c in rows["oi-t2"]["contexts"]] == ["doc-ham", "doc-mac"]
    assert rows["oi-t2"]["metadata"]["source"]["retriever_span_ids"] == ["s2-rr"]


def test_spans_in_two_files_make_one_trace_and_a_repeated_span_counts_once(stager: Callable[..., Staged]) -> None:
    staged, rows = stager(SOURCE, "openinference")
    t3 = rows["oi-t3"]
    assert t3["question"] == "How tall is Mont Blanc?"  # JSON input.value, read through question_keys
    assert [c["id"] for c in t3["contexts"]] == ["doc-mb", "doc-alps"]  # both retrievers, in start order
    assert t3["metadata"]["token_counts"] == {"prompt": 200, "completion": 7}  # the duplicate span is not summed twice
    assert staged.n_duplicate_spans == 1


def test_bad_traces_are_quarantined_naming_source_trace_and_field(stager: Callable[..., Staged]) -> None:
    staged, _ = stager(SOURCE, "openinference")
    assert quarantined(staged) == {
        (None, "<record>"),
        ("oi-t4", "question"),
    }
    by_trace = {q.trace_id: q for q in staged.quarantined}
    assert "root span input.value" in by_trace["oi-t4"].reason
    assert by_trace["oi-t4"].source_file.endswith("spans-000.jsonl") and by_trace["oi-t4"].line == 10


def test_a_document_without_id_is_kept_by_its_text(stager: Callable[..., Staged]) -> None:
    _, rows = stager(SOURCE, "openinference")
    contexts = rows["oi-t5"]["contexts"]
    assert [(c["id"], c["text"], c["score"]) for c in contexts] == [
        ("doc-rag", "RAG combines retrieval ...", 0.7), (None, "an unnamed chunk", 0.5),
    ]  # fmt: skip


def _retriever(documents: Any, **attributes: Any) -> dict[str, Any]:
    return {
        "context": {"trace_id": "t", "span_id": "s"}, "span_kind": "RETRIEVER",
        "attributes": {"retrieval": {"documents": documents}, **attributes},
    }  # fmt: skip


def test_document_id_and_score_fall_back_to_metadata_as_json_text_object_or_flat_keys() -> None:
    """Invented edge case: real fixtures carry ids in document.id (or LangChain's output.value) only."""
    record = _retriever([
        {"document": {"content": "a", "metadata": '{"doc_id": "m-a", "relevance_score": 0.9}'}},
        {"document": {"content": "b", "metadata": {"document_id": 7, "score": 0.4}}},
        {"document": {"content": "c", "id": "own", "metadata": {"id": "ignored"}}},
    ])  # fmt: skip
    record["attributes"]["retrieval.documents.3.document.content"] = "d"
    record["attributes"]["retrieval.documents.3.document.metadata.id"] = "flat"
    (span,) = spans(record, AdapterOptions())
    assert [(d.id, d.text, d.score) for d in span.documents or ()] == [
        ("m-a", "a", 0.9), (7, "b", 0.4), ("own", "c", None), ("flat", "d", None),
    ]  # fmt: skip


def test_langchain_ids_come_from_the_retriever_output_only_where_the_text_matches() -> None:
    """Invented edge case: the serialised ``{"lc": 1, "kwargs": ...}`` form of older langchain-core."""
    output = {"documents": [
        {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "document", "Document"],
         "kwargs": {"id": "lc-1", "page_content": "a"}},
        {"id": "other", "page_content": "not b"},
    ]}  # fmt: skip
    record = _retriever([{"document": {"content": "a"}}, {"document": {"content": "b"}}],
                        output={"value": json.dumps(output)})  # fmt: skip
    (span,) = spans(record, AdapterOptions())
    assert [d.id for d in span.documents or ()] == ["lc-1", None]


def test_a_retriever_span_without_documents_is_not_a_retriever_and_nan_token_counts_are_skipped() -> None:
    (retriever,) = spans(_retriever(None), AdapterOptions())
    assert retriever.documents is None
    llm = {"context.trace_id": "t", "context.span_id": "l", "span_kind": "LLM",
           "attributes.llm.token_count.prompt": 12.0, "attributes.llm.token_count.total": float("nan")}  # fmt: skip
    (span,) = spans(llm, AdapterOptions())
    assert span.tokens == {"prompt": 12}


def test_nested_and_flat_attributes_read_the_same() -> None:
    flat = {
        "context.trace_id": "t", "context.span_id": "s", "parent_id": None, "span_kind": "RETRIEVER",
        "attributes.retrieval.documents": [{"document.id": "d1", "document.content": "x", "document.score": 0.5}],
        "attributes.input.value": "q?",
    }  # fmt: skip
    nested: dict[str, Any] = {
        "context": {"trace_id": "t", "span_id": "s"},
        "attributes": '{"openinference": {"span": {"kind": "RETRIEVER"}}, "input": {"value": "q?"},'
        ' "retrieval": {"documents": [{"document": {"id": "d1", "content": "x", "score": 0.5}}]}}',
    }
    (a,), (b,) = list(spans(flat, AdapterOptions())), list(spans(nested, AdapterOptions()))
    assert a.kind == b.kind == "retriever"
    assert a.question == b.question == "q?"
    assert [(d.id, d.text, d.score) for d in a.documents or ()] == [("d1", "x", 0.5)]
    assert [(d.id, d.text, d.score) for d in b.documents or ()] == [("d1", "x", 0.5)]


def test_span_without_trace_id_names_the_field() -> None:
    with pytest.raises(InvalidRecordError, match=r"context\.trace_id"):
        list(spans({"context.span_id": "s"}, AdapterOptions()))
