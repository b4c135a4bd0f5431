"""Runs written by the LangSmith SDKs (tests/fixtures/adapters/langsmith/real, see SOURCES.md there) ->
canonical traces, through real staging, as JSONL of runs and as a bulk-export Parquet of the same runs.

Expected values are read from the fixture lines with plain ``json`` here, never through ragpulse: run ids
of the generated files are random per generation, so each trace is found by what its runs carry.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragpulse.tasks.ingest.adapters import AdapterOptions
from ragpulse.tasks.ingest.adapters.langsmith import spans
from tests.tasks.ingest.adapters.conftest import FIXTURES, Staged

REAL = FIXTURES / "langsmith" / "real"
WRAP_OPENAI = REAL / "sdk-test-data" / "wrap-openai-runs.jsonl"
GENERATED_PY = REAL / "generated" / "rag-runs.jsonl"
GENERATED_JS = REAL / "generated" / "rag-runs-js.jsonl"
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _runs(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _trace_ids(path: Path) -> set[str]:
    return {run["trace_id"] for run in _runs(path)}


def _root(path: Path, name: str) -> dict[str, Any]:
    (root,) = [r for r in _runs(path) if r["name"] == name and r.get("parent_run_id") is None]
    return root


def _child(path: Path, root: dict[str, Any], run_type: str) -> dict[str, Any]:
    (child,) = [r for r in _runs(path) if r.get("parent_run_id") == root["id"] and r["run_type"] == run_type]
    return child


def _time(value: Any) -> dt.datetime:
    """A run timestamp as the SDKs send it: ISO text, or epoch milliseconds from the JS SDK."""
    if isinstance(value, int):
        return EPOCH + dt.timedelta(milliseconds=value)
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(dt.UTC)


def _day_folder(tmp_path: Path, path: Path) -> Path:
    day = tmp_path / "source" / "dt=2026-03-02"
    day.mkdir(parents=True)
    shutil.copy(path, day / path.name)
    return tmp_path / "source"


def _bulk_export(tmp_path: Path, path: Path) -> Path:
    """The runs as a bulk export writes them: one Parquet row per run, nested fields as JSON text, times as
    timestamps."""
    runs = _runs(path)
    columns = sorted({key for run in runs for key in run})  # the SDKs leave out absent fields, a table has them all
    rows = [{key: _cell(key, run.get(key)) for key in columns} for run in runs]
    day = tmp_path / "export" / "dt=2026-03-02"
    day.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), day / f"{path.stem}.parquet")
    return tmp_path / "export"


def _cell(key: str, value: Any) -> Any:
    if key in ("start_time", "end_time") and value is not None:
        return _time(value)
    return json.dumps(value) if isinstance(value, dict | list) and key != "tags" else value


@pytest.fixture(params=["jsonl", "parquet"])
def source_of(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[Path], Path]:
    return lambda path: _day_folder(tmp_path, path) if request.param == "jsonl" else _bulk_export(tmp_path, path)


def test_wrap_openai_runs_of_both_sdks_keep_question_and_answer(
    source_of: Callable[[Path], Path], stager: Callable[..., Staged]
) -> None:
    runs = _runs(WRAP_OPENAI)
    assert len(runs) == len(_trace_ids(WRAP_OPENAI)) == 8  # one root llm run per trace
    staged, rows = stager(source_of(WRAP_OPENAI), "langsmith")
    assert sorted(rows) == sorted(_trace_ids(WRAP_OPENAI)) and staged.quarantined == []
    for run in runs:
        row = rows[run["trace_id"]]
        assert row["question"] == run["inputs"]["messages"][-1]["content"]
        assert row["answer"] == run["outputs"]["choices"][0]["message"]["content"]
        assert row["timestamp"] == _time(run["start_time"])
        assert row["contexts"] == []
        assert row["metadata"]["model"] == run["extra"]["metadata"]["ls_model_name"]
        usage = run["outputs"].get("usage_metadata")  # null where the stream reported no usage
        expected = usage and {
            "prompt": usage["input_tokens"],
            "completion": usage["output_tokens"],
            "total": usage["total_tokens"],
        }
        assert row["metadata"].get("token_counts") == expected


def test_js_sdk_epoch_milliseconds_are_read_exactly(stager: Callable[..., Staged], tmp_path: Path) -> None:
    (js,) = [r for r in _runs(WRAP_OPENAI) if r["start_time"] == 1728803137170]
    assert js["extra"]["runtime"]["sdk"] == "langsmith-js"
    _, rows = stager(_day_folder(tmp_path, WRAP_OPENAI), "langsmith")
    assert rows[js["trace_id"]]["timestamp"] == dt.datetime(2024, 10, 13, 7, 5, 37, 170000, tzinfo=dt.UTC)
    assert rows[js["trace_id"]]["answer"] == "Howdy! How can I assist you today?"


def test_generated_python_traces_read_even_under_an_unnamed_key(
    source_of: Callable[[Path], Path], stager: Callable[..., Staged]
) -> None:
    """``status_lookup``'s argument is ``ticket_text``, a key no convention names: its text is the user's message
    because it reached the model call (``"lookup: " + ticket_text``), and the turn is read, not quarantined."""
    unnamed_question = _root(GENERATED_PY, "status_lookup")
    assert "question" not in unnamed_question["inputs"]  # the function's argument is ticket_text
    assert len(_trace_ids(GENERATED_PY)) == 7
    staged, rows = stager(source_of(GENERATED_PY), "langsmith")
    assert sorted(rows) == sorted(_trace_ids(GENERATED_PY))
    assert not staged.quarantined
    row = rows[unnamed_question["trace_id"]]
    assert row["question"] == unnamed_question["inputs"]["ticket_text"] == "Where is the status page?"
    assert row["metadata"]["source"]["question_from"] == "root_input"


def test_lcel_chain_in_japanese_field_by_field(stager: Callable[..., Staged], tmp_path: Path) -> None:
    (root,) = [
        r
        for r in _runs(GENERATED_PY)
        if r["inputs"].get("input") == "返品の送料はかかりますか？" and r["id"] == r["trace_id"]
    ]
    (retriever,) = [
        r for r in _runs(GENERATED_PY) if r["trace_id"] == root["trace_id"] and r["run_type"] == "retriever"
    ]
    documents = retriever["outputs"]["documents"]
    _, rows = stager(_day_folder(tmp_path, GENERATED_PY), "langsmith")
    row = rows[root["trace_id"]]
    assert row["question"] == root["inputs"]["input"] == "返品の送料はかかりますか？"
    assert row["answer"] == root["outputs"]["output"] == "購入から30日以内なら送料無料で返品できます。"
    assert row["contexts"] == [{"id": d["id"], "text": d["page_content"], "score": None} for d in documents]
    assert [c["id"] for c in row["contexts"]] == ["kb-ja-002", "kb-ja-001"]  # LangChain's top-level Document.id
    assert row["timestamp"] == _time(root["start_time"])
    assert row["metadata"]["source"]["retriever_span_ids"] == [retriever["id"]]
    # The SDK copies its LANGSMITH_* settings into every run's metadata; they describe the tracer, not the request.
    assert "LANGSMITH_ENDPOINT" in root["extra"]["metadata"]
    assert not [key for key in row["metadata"] if key.startswith(("LANGSMITH_", "ls_"))]


def test_traceable_pipeline_with_wrap_openai_field_by_field(stager: Callable[..., Staged], tmp_path: Path) -> None:
    root = _root(GENERATED_PY, "support_rag")
    documents = _child(GENERATED_PY, root, "retriever")["outputs"]["documents"]
    llm = _child(GENERATED_PY, root, "llm")
    _, rows = stager(_day_folder(tmp_path, GENERATED_PY), "langsmith")
    row = rows[root["trace_id"]]
    assert (row["question"], row["answer"]) == (root["inputs"]["question"], root["outputs"]["output"])
    assert row["answer"] == llm["outputs"]["choices"][0]["message"]["content"]
    expected = [
        {"id": d["id"], "text": d["page_content"], "score": d["metadata"]["relevance_score"]} for d in documents
    ]
    assert row["contexts"] == expected and expected[0]["score"] == 0.91
    usage = llm["outputs"]["usage_metadata"]
    assert row["metadata"]["token_counts"] == {
        "prompt": usage["input_tokens"],
        "completion": usage["output_tokens"],
        "total": usage["total_tokens"],
    }
    assert row["metadata"]["model"] == "gpt-4o-mini"


def test_traceable_retriever_without_ids_in_chinese(stager: Callable[..., Staged], tmp_path: Path) -> None:
    root = _root(GENERATED_PY, "pricing_rag")
    documents = _child(GENERATED_PY, root, "retriever")["outputs"]["output"]  # a returned list is logged as output
    _, rows = stager(_day_folder(tmp_path, GENERATED_PY), "langsmith")
    row = rows[root["trace_id"]]
    assert (row["question"], row["answer"]) == ("团队套餐多少钱？", root["outputs"]["output"])
    assert row["contexts"] == [{"id": None, "text": d["page_content"], "score": None} for d in documents]


def test_llm_roots_langchain_chat_model_and_completions(stager: Callable[..., Staged], tmp_path: Path) -> None:
    chat = _root(GENERATED_PY, "FakeListChatModel")
    (completion,) = [r for r in _runs(GENERATED_PY) if r["inputs"].get("prompt", "").startswith("Q:")]
    _, rows = stager(_day_folder(tmp_path, GENERATED_PY), "langsmith")
    assert rows[chat["trace_id"]]["question"] == chat["inputs"]["messages"][0][0]["kwargs"]["content"]
    assert rows[chat["trace_id"]]["answer"] == chat["outputs"]["generations"][0][0]["text"]
    assert rows[completion["trace_id"]]["question"] == completion["inputs"]["prompt"]
    assert rows[completion["trace_id"]]["answer"] == completion["outputs"]["choices"][0]["text"] == "Tokyo."


def test_chain_ending_in_a_chat_model_answers_with_its_message(stager: Callable[..., Staged], tmp_path: Path) -> None:
    (root,) = [
        r
        for r in _runs(GENERATED_PY)
        if r["inputs"].get("input") == "How long does shipping take?" and r["id"] == r["trace_id"]
    ]
    _, rows = stager(_day_folder(tmp_path, GENERATED_PY), "langsmith")
    assert rows[root["trace_id"]]["answer"] == root["outputs"]["output"]["content"]


def test_generated_js_traces_field_by_field(source_of: Callable[[Path], Path], stager: Callable[..., Staged]) -> None:
    assert len(_trace_ids(GENERATED_JS)) == 2
    staged, rows = stager(source_of(GENERATED_JS), "langsmith")
    assert sorted(rows) == sorted(_trace_ids(GENERATED_JS)) and staged.quarantined == []
    faq = _root(GENERATED_JS, "faq_rag")
    documents = _child(GENERATED_JS, faq, "retriever")["outputs"]["outputs"]  # JS logs a returned list as outputs
    row = rows[faq["trace_id"]]
    assert (row["question"], row["answer"]) == (faq["inputs"]["input"], faq["outputs"]["outputs"])
    assert row["question"] == "如何重置密码？"
    assert row["contexts"] == [
        {"id": d["id"], "text": d["page_content"], "score": d["metadata"]["score"]} for d in documents
    ]
    refund = _root(GENERATED_JS, "refund_rag")
    assert rows[refund["trace_id"]]["question"] == refund["inputs"]["args"][0]  # several arguments: inputs.args
    assert rows[refund["trace_id"]]["answer"] == refund["outputs"]["outputs"]


def _span_of(run: dict[str, Any]) -> Any:
    (span,) = spans(run, AdapterOptions())
    return span


def test_js_traceable_root_answers_with_its_returned_string() -> None:
    root = _root(GENERATED_JS, "faq_rag")
    assert _span_of(root).answer == root["outputs"]["outputs"]


def test_responses_api_llm_run_answer() -> None:
    llm = _child(GENERATED_PY, _root(GENERATED_PY, "pricing_rag"), "llm")
    assert llm["outputs"]["object"] == "response"
    assert _span_of(llm).answer == llm["outputs"]["output"][0]["content"][0]["text"]


def test_chat_generation_without_text_answers_with_its_message() -> None:
    """Edge case, derived from a real run: older langchain-core left ``text`` empty for some chat generations."""
    run = json.loads(json.dumps(_root(GENERATED_PY, "FakeListChatModel")))
    generation = run["outputs"]["generations"][0][0]
    generation["text"] = ""
    assert _span_of(run).answer == generation["message"]["kwargs"]["content"] == "Paris is the capital of France."


def test_explicit_documents_path_is_used_alone() -> None:
    retriever = _child(GENERATED_PY, _root(GENERATED_PY, "pricing_rag"), "retriever")
    (span,) = spans(retriever, AdapterOptions(documents_path="hits"))
    assert span.documents == ()


def test_uuid_objects_as_run_ids() -> None:
    """Edge case (invented): Parquet readers that map a UUID column to ``uuid.UUID`` objects."""
    run = _root(GENERATED_PY, "support_rag")
    span = _span_of({**run, "id": uuid.UUID(run["id"]), "trace_id": uuid.UUID(run["trace_id"])})
    assert (span.span_id, span.trace_id) == (run["id"], run["trace_id"])
