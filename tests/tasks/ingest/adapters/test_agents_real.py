"""One LangGraph application's agent turns (tests/fixtures/agents, written by the four tracers themselves) read as
each tool exported them, checked turn by turn against what the application did (``expected.json``, logged by the
application itself, never read through ragpulse): the user's question and its language, every retrieval step with
its own query and documents, the documents the final LLM call received, the conversation and its earlier turns, and
the tool calls. Scenarios: a two-hop ReAct agent, parallel tool calls, corrective RAG that rejects a retrieved set,
a web-search tool returning JSON, a turn without retrieval, three two-turn conversations (English, Japanese, Chinese)
and a tool error the agent recovers from."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.tasks.ingest.adapters.conftest import Staged, copy_with_mtime

AGENTS = Path(__file__).parents[3] / "fixtures" / "agents"
DAY = dt.date(2026, 11, 20)
EXPECTED: list[dict[str, Any]] = json.loads((AGENTS / "expected.json").read_text())
LANGFUSE = AGENTS / "langfuse" / "bucket" / "langfuse-exports"
SOURCES = {
    "openinference": ("openinference", AGENTS / "openinference"),
    "langsmith": ("langsmith", AGENTS / "langsmith"),
    "openllmetry": ("otel-genai", AGENTS / "otel-genai"),
    "langfuse-legacy": ("langfuse", LANGFUSE / "cmagent0legacy00000000001"),
    "langfuse-events": ("langfuse", LANGFUSE / "cmagent0events00000000002"),
    "langfuse-parquet": ("langfuse", LANGFUSE / "cmagent0parquet0000000003"),
}
LOSES_DOCUMENT_IDS = {"openllmetry"}
"""OpenLLMetry logs a retriever's documents as page_content and metadata, without Document.id (SOURCES.md)."""


def _stage(stager: Callable[..., Staged], tmp_path: Path, source: str) -> Staged:
    trace_format, path = SOURCES[source]
    if trace_format == "langfuse":  # hourly export windows, read by event time from the files' modification time
        mtime = dt.datetime(2026, 11, 20, 10, 5, tzinfo=dt.UTC).timestamp()
        return stager(
            copy_with_mtime(path, tmp_path / "bucket", mtime), trace_format, day=DAY, partitioning="event-time"
        )
    return stager(path, trace_format, day=DAY)


def _turns(rows: dict[str, dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each staged turn with the expected turn of the same start (turns start minutes apart, see SOURCES.md)."""

    def start(turn: dict[str, Any]) -> dt.datetime:
        return dt.datetime.fromisoformat(turn["start_time"].replace("Z", "+00:00"))

    paired = [(row, min(EXPECTED, key=lambda turn: abs(start(turn) - row["timestamp"]))) for row in rows.values()]
    assert all(abs(start(turn) - row["timestamp"]) < dt.timedelta(seconds=30) for row, turn in paired)
    return paired


@pytest.fixture(params=sorted(SOURCES))
def agent_turns(request: pytest.FixtureRequest, stager: Callable[..., Staged], tmp_path: Path) -> tuple[str, Staged]:
    return request.param, _stage(stager, tmp_path, request.param)


def test_every_turn_is_staged_once(agent_turns: tuple[str, Staged]) -> None:
    _, (staged, rows) = agent_turns
    assert not staged.quarantined
    assert sorted((turn["scenario"], turn["turn"]) for _, turn in _turns(rows)) == sorted(
        (turn["scenario"], turn["turn"]) for turn in EXPECTED
    )


def test_question_is_the_users_message_in_its_language(agent_turns: tuple[str, Staged]) -> None:
    """Never a sub-query ("Polaris picker manufacturer") nor the corrective-RAG grader's prompt."""
    _, (_, rows) = agent_turns
    for row, turn in _turns(rows):
        assert (row["question"], row["language"]) == (turn["question"], turn["language"]), turn["scenario"]
        assert row["answer"] == turn["answer"]


def test_each_retrieval_step_keeps_its_own_query_and_documents(agent_turns: tuple[str, Staged]) -> None:
    """Steps in the order the agent ran them; the two parallel calls of scenario 2 may start in either order."""
    source, (_, rows) = agent_turns
    for row, turn in _turns(rows):
        got = [(step["kind"], step["query"], [c["id"] for c in step["contexts"]]) for step in row["steps"]]
        expected = [(step["kind"], step["query"], step["document_ids"]) for step in turn["steps"]]
        if source in LOSES_DOCUMENT_IDS:
            expected = [
                (kind, query, [None] * len(ids) if kind == "retriever" else ids) for kind, query, ids in expected
            ]
        if turn["parallel_tool_calls"]:
            got, expected = sorted(got, key=str), sorted(expected, key=str)
        assert got == expected, turn["scenario"]
        assert all(step["id"] for step in row["steps"])  # the span, run or observation id


def test_contexts_are_what_the_final_llm_call_received(agent_turns: tuple[str, Staged]) -> None:
    """Corrective RAG's rejected set is a step but not a context; a document two hops found is one context."""
    source, (_, rows) = agent_turns
    for row, turn in _turns(rows):
        received = [turn["steps"][i] for i in turn["generator_steps"]]
        if source in LOSES_DOCUMENT_IDS:
            texts = [
                c["text"] for i in turn["generator_steps"] for c in row["steps"][_step_of(row, turn, i)]["contexts"]
            ]
            assert [c["text"] for c in row["contexts"]] == list(dict.fromkeys(texts)), turn["scenario"]
        else:
            ids = list(dict.fromkeys(doc for step in received for doc in step["document_ids"]))
            assert sorted(c["id"] for c in row["contexts"]) == sorted(ids), turn["scenario"]
        assert row["metadata"]["source"]["contexts_from"] == ("final_llm_input" if turn["steps"] else "no_retrieval")


def _step_of(row: dict[str, Any], turn: dict[str, Any], index: int) -> int:
    """The staged step of the expected step ``index`` (same query, for sources whose start order may differ)."""
    query = turn["steps"][index]["query"]
    return next(i for i, step in enumerate(row["steps"]) if step["query"] == query)


def test_conversations_are_the_threads_with_their_earlier_turns(agent_turns: tuple[str, Staged]) -> None:
    """The thread id the application passed (not LangSmith's project id), and the follow-up's history as the agent's
    model call received it."""
    _, (_, rows) = agent_turns
    for row, turn in _turns(rows):
        assert row["conversation_id"] == turn["conversation_id"], turn["scenario"]
        assert (row["history"] or []) == turn["history"], turn["scenario"]
        assert row["metadata"].get("session_id") in (None, turn["conversation_id"])  # never LangSmith's project


def test_tool_calls_with_errors_and_the_steps_they_made(agent_turns: tuple[str, Staged]) -> None:
    _, (_, rows) = agent_turns
    for row, turn in _turns(rows):
        got = [
            (call["name"], json.loads(call["arguments"]), call["error"] is not None) for call in row["tool_calls"] or []
        ]
        expected = [(call["name"], call["arguments"], call["error"] is not None) for call in turn["tool_calls"]]
        assert sorted(got, key=str) == sorted(expected, key=str), turn["scenario"]  # the model's own arguments
        for call in row["tool_calls"] or []:
            if call["step"] is not None:
                arguments = json.loads(call["arguments"])
                query = arguments["query"] if isinstance(arguments, dict) else arguments
                assert query == row["steps"][call["step"]]["query"]
        by_tools = [step for step in turn["steps"] if step["tool"]]  # corrective RAG's graph retrieves without one
        assert sum(call["step"] is not None for call in row["tool_calls"] or []) == len(by_tools), turn["scenario"]


def test_expected_tool_calls_in_metadata_become_reference_tool_calls(agent_turns: tuple[str, Staged]) -> None:
    source, (_, rows) = agent_turns
    (row,) = [row for row, turn in _turns(rows) if turn["reference_tool_calls"]]
    if source == "openllmetry":  # it logs a list of objects in metadata as an empty array (SOURCES.md)
        assert row["reference_tool_calls"] is None
        return
    (turn,) = [turn for turn in EXPECTED if turn["reference_tool_calls"]]
    assert [(c["name"], json.loads(c["arguments"])) for c in row["reference_tool_calls"]] == [
        (c["name"], c["arguments"]) for c in turn["reference_tool_calls"]
    ]
