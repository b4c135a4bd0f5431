"""metrics/batch.py for agents: steps, tool calls, history and conversation ids, and the batch of step rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import InvalidRecordError, ShapeError, Step, StepRows, ToolCall, TraceBatch

AGENT_TURN: dict[str, Any] = {
    "trace_id": "t1",
    "question": "それで、大阪の人口は？",
    "answer": "大阪市の人口は約275万人です。",
    "reference": "約275万人",
    "language": "ja",
    "relevant_context_ids": ["d2"],
    "contexts": [{"id": "d2", "text": "大阪市の人口は約275万人。"}],
    "conversation_id": "thread-7",
    "history": [
        {"role": "user", "content": "東京の人口は？"},
        {"role": "assistant", "content": "約1400万人です。"},
    ],
    "steps": [
        {
            "id": "span-a",
            "name": "search",
            "kind": "tool",
            "query": "大阪 人口",
            "contexts": [
                {"id": "d1", "text": "大阪府の人口は約880万人。"},
                {"id": "d2", "text": "大阪市の人口は約275万人。"},
            ],
            "parent": None,
            "error": None,
        },
        {
            "id": "span-b",
            "name": "rerank",
            "kind": "reranker",
            "query": "大阪 人口",
            "contexts": [{"id": "d2", "text": "大阪市の人口は約275万人。"}],
            "parent": 0,
            "error": None,
        },
    ],
    "tool_calls": [
        {"name": "search", "arguments": {"query": "大阪 人口"}, "error": None, "step": 0},
        {"name": "calculator", "arguments": '{"expr": "275/1400"}', "error": "timeout", "step": None},
    ],
    "reference_tool_calls": [{"name": "search", "arguments": {"query": "大阪 人口"}}],
}
SINGLE_SHOT: dict[str, Any] = {
    "trace_id": "t2",
    "question": "北京的人口是多少？",
    "contexts": [{"id": "z1", "text": "北京"}],
}
NO_RETRIEVAL: dict[str, Any] = {"trace_id": "t3", "question": "你好", "steps": [], "tool_calls": []}


def test_from_records_reads_the_agent_fields() -> None:
    batch = TraceBatch.from_records([AGENT_TURN, SINGLE_SHOT, NO_RETRIEVAL])
    assert batch.steps is not None and batch.steps[1] is None and batch.steps[2] == []
    first, rerank = batch.steps[0] or []
    assert first == Step(
        index=0,
        id="span-a",
        name="search",
        kind="tool",
        query="大阪 人口",
        context_ids=("d1", "d2"),
        context_texts=("大阪府の人口は約880万人。", "大阪市の人口は約275万人。"),
    )
    assert (rerank.index, rerank.kind, rerank.parent, rerank.context_ids) == (1, "reranker", 0, ("d2",))
    assert batch.tool_calls == [
        [
            ToolCall("search", {"query": "大阪 人口"}, None, 0),
            ToolCall("calculator", '{"expr": "275/1400"}', "timeout", None),
        ],
        None,
        [],
    ]
    assert batch.reference_tool_calls == [[ToolCall("search", {"query": "大阪 人口"})], None, None]
    assert batch.histories == [(("user", "東京の人口は？"), ("assistant", "約1400万人です。")), (), ()]
    assert batch.conversation_ids == ["thread-7", None, None]
    assert batch.history_of(0)[0] == ("user", "東京の人口は？") and batch.history_of(1) == ()


def test_a_batch_built_without_the_agent_fields_still_works() -> None:
    batch = TraceBatch(["q1"], [["d1"]], [["one"]], [None], [None], ["a"], [[]])
    assert (batch.steps, batch.tool_calls, batch.histories, batch.conversation_ids) == (None, None, None, None)
    assert batch.history_of(0) == ()
    rows = batch.step_batch("step_query")
    assert len(rows.batch) == 0 and rows.trace_rows.dtype == np.int64


def _batch(**overrides: Any) -> TraceBatch:
    fields: dict[str, Any] = {
        "trace_ids": ["q1"],
        "context_ids": [["d1"]],
        "context_texts": [["one"]],
        "relevant_ids": [None],
        "relevant_texts": [None],
        "answers": ["a"],
        "references": [[]],
    }
    return TraceBatch(**{**fields, **overrides})


@pytest.mark.parametrize("field", ["steps", "tool_calls", "reference_tool_calls", "histories", "conversation_ids"])
def test_agent_fields_need_one_entry_per_trace(field: str) -> None:
    with pytest.raises(ShapeError, match=rf"argument '{field}': expected length 1 \(one per trace\), got length 2"):
        _batch(**{field: [None, None] if field != "histories" else [(), ()]})


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (Step(1, None, None, "retriever", "q", (), ()), r"field 'steps\[0\]': index must be its position 0, got 1"),
        (
            Step(0, None, None, "retriever", "q", ("d1",), ()),
            r"field 'steps\[0\]\.contexts': 1 ids but 0 texts",
        ),
        (Step(0, None, None, "reranker", "q", (), (), parent=0), r"field 'steps\[0\]\.parent': must be the index of"),
    ],
)
def test_steps_are_checked_and_errors_name_the_record(step: Step, message: str) -> None:
    with pytest.raises(InvalidRecordError, match=rf"record 'q1', {message}"):
        _batch(steps=[[step]])


def test_step_rows_take_the_step_query_and_contexts_and_the_turn_rest() -> None:
    batch = TraceBatch.from_records([SINGLE_SHOT, AGENT_TURN, NO_RETRIEVAL])
    rows = batch.step_batch("step_query")
    assert isinstance(rows, StepRows)
    assert rows.trace_rows.tolist() == [1, 1] and rows.trace_rows.dtype == np.int64
    assert rows.step_index.tolist() == [0, 1] and rows.step_index.dtype == np.int64
    assert rows.step_ids.dtype == object and rows.step_ids.tolist() == ["span-a", "span-b"]
    steps = rows.batch
    assert steps.trace_ids == ["t1", "t1"]
    assert steps.questions == ["大阪 人口", "大阪 人口"]
    assert steps.context_ids == [("d1", "d2"), ("d2",)]
    assert steps.context_texts[1] == ("大阪市の人口は約275万人。",)
    assert steps.answers == ["大阪市の人口は約275万人です。"] * 2
    assert steps.references == [["約275万人"]] * 2
    assert steps.relevant_ids == [{"d2": 1.0}] * 2
    assert steps.languages == ["ja", "ja"]
    assert steps.histories is not None and steps.histories[0] == (
        ("user", "東京の人口は？"),
        ("assistant", "約1400万人です。"),
    )
    assert steps.conversation_ids == ["thread-7", "thread-7"]
    assert steps.steps is None and steps.tool_calls is None


def test_step_rows_against_the_question() -> None:
    rows = TraceBatch.from_records([AGENT_TURN]).step_batch("question")
    assert rows.batch.questions == ["それで、大阪の人口は？"] * 2
    assert rows.batch.context_ids == [("d1", "d2"), ("d2",)]


def test_step_rows_of_a_batch_without_questions() -> None:
    batch = _batch(steps=[[Step(0, "s", None, "retriever", "q", ("d1",), ("one",))]])
    assert batch.step_batch("question").batch.questions == [None]
    with pytest.raises(ShapeError, match="argument 'against'"):
        batch.step_batch("answer")  # type: ignore[arg-type]
