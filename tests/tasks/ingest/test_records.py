"""Tests of the trace contract: one raw record in, one STAGED_SCHEMA row out, or an InvalidRecordError naming it."""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

import pyarrow as pa
import pytest

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.records import STAGED_SCHEMA, parse_record

SOURCE = "s3://bucket/traces/dt=2024-03-11/part-0.jsonl"


def record(**changes: Any) -> dict[str, Any]:
    """A valid record using every field of the format; ``changes`` override (``None`` values are kept)."""
    base: dict[str, Any] = {
        "trace_id": "t1",
        "timestamp": "2024-03-11T09:30:00.250000Z",
        "question": "Who wrote the first program?",
        "answer": "Ada Lovelace.",
        "contexts": [
            {"id": "d1", "text": "Ada Lovelace wrote the first program.", "score": 0.91},
            {"id": "d2", "text": "Charles Babbage designed the engine.", "score": 3},
            {"id": "d3", "text": "Unscored passage.", "score": None},
        ],
        "reference": "Ada Lovelace",
        "reference_answers": ["Ada Lovelace", "Augusta Ada King"],
        "relevant_context_ids": ["d1"],
        "relevant_contexts": {"Ada Lovelace wrote the first program.": 2, "Charles Babbage designed the engine.": 0.5},
        "metadata": {"user": "u-7", "model": "gen-small"},
        "language": "EN-gb",
    }
    base.update(changes)
    return base


def without(field: str) -> dict[str, Any]:
    raw = record()
    del raw[field]
    return raw


def parse(raw: Any) -> dict[str, Any]:
    return parse_record(raw, source_file=SOURCE, line=3)


def test_full_record_round_trips_through_staged_schema() -> None:
    row = parse(record())

    table = pa.Table.from_pylist([row], schema=STAGED_SCHEMA)

    assert table.schema == STAGED_SCHEMA
    assert table.to_pylist() == [
        {
            "trace_id": "t1",
            "timestamp": dt.datetime(2024, 3, 11, 9, 30, 0, 250000, tzinfo=dt.UTC),
            "question": "Who wrote the first program?",
            "answer": "Ada Lovelace.",
            "contexts": [
                {"id": "d1", "text": "Ada Lovelace wrote the first program.", "score": 0.91},
                {"id": "d2", "text": "Charles Babbage designed the engine.", "score": 3.0},
                {"id": "d3", "text": "Unscored passage.", "score": None},
            ],
            "reference": "Ada Lovelace",
            "reference_answers": ["Ada Lovelace", "Augusta Ada King"],
            "relevant_context_ids": [{"key": "d1", "gain": 1.0}],
            "relevant_contexts": [
                {"key": "Ada Lovelace wrote the first program.", "gain": 2.0},
                {"key": "Charles Babbage designed the engine.", "gain": 0.5},
            ],
            "metadata": json.dumps({"model": "gen-small", "user": "u-7"}, sort_keys=True),
            "source_file": SOURCE,
            "source_line": 3,
            "language": "en-GB",  # BCP 47's canonical case
            "steps": None,
            "conversation_id": None,
            "history": None,
            "tool_calls": None,
            "reference_tool_calls": None,
            "latency_ms": None,
            "retrieval_latency_ms": None,
            "generation_latency_ms": None,
            "usage": None,
            "errors": None,
            "feedback": None,
        }
    ]
    assert type(row["contexts"][1]["score"]) is float


AGENT_TURN: dict[str, Any] = {
    "steps": [
        {"id": "s1", "name": "search_docs", "kind": "tool", "query": "Nordlicht founder",
         "contexts": [{"id": "d9", "text": "Nordlicht was founded in 2011."}]},
        {"id": 7, "kind": "retriever", "query": "Nordlicht Robotics founder name",
         "contexts": [{"id": "d1", "text": "Ada Lovelace wrote the first program.", "score": 0.8}]},
        {"name": "rerank", "kind": "reranker", "contexts": [{"id": "d1"}], "parent": 1, "error": None},
    ],
    "conversation_id": "thread-1",
    "history": [{"role": "user", "content": "こんにちは"}, {"role": "assistant", "content": "你好"}],
    "tool_calls": [{"name": "search_docs", "arguments": {"query": "Nordlicht founder"}, "step": 0},
                   {"name": "lookup", "arguments": "raw text", "error": "timeout"}],
    "reference_tool_calls": [{"name": "search_docs", "arguments": {"query": "Nordlicht founder"}}],
}  # fmt: skip


def test_agent_turn_round_trips_through_staged_schema() -> None:
    row = parse(record(**AGENT_TURN))

    staged = pa.Table.from_pylist([row], schema=STAGED_SCHEMA).to_pylist()[0]

    assert [s["query"] for s in staged["steps"]] == ["Nordlicht founder", "Nordlicht Robotics founder name", None]
    assert staged["steps"][1]["id"] == "7"  # integer span ids are text, as contexts' ids are
    assert staged["steps"][2] == {
        "id": None, "name": "rerank", "kind": "reranker", "query": None,
        "contexts": [{"id": "d1", "text": None, "score": None}], "parent": 1, "error": None,
    }  # fmt: skip
    assert staged["steps"][0]["kind"] == "tool"
    assert staged["conversation_id"] == "thread-1"
    assert staged["history"] == AGENT_TURN["history"]
    assert staged["tool_calls"] == [
        {"name": "search_docs", "arguments": '{"query": "Nordlicht founder"}', "error": None, "step": 0},
        {"name": "lookup", "arguments": '"raw text"', "error": "timeout", "step": None},
    ]
    assert staged["reference_tool_calls"] == [{"name": "search_docs", "arguments": '{"query": "Nordlicht founder"}'}]


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        ({"steps": {"query": "q"}}, "steps", "expected a list of retrieval steps"),
        ({"steps": ["q"]}, "steps[0]", "expected an object"),
        ({"steps": [{"kind": "web"}]}, "steps[0].kind", "expected one of retriever, tool, reranker"),
        ({"steps": [{"parent": 0}]}, "steps[0].parent", "index of an earlier step"),
        ({"steps": [{"query": 3}]}, "steps[0].query", "expected a string or null"),
        ({"steps": [{"contexts": [{"score": 1}]}]}, "steps[0].contexts[0].id", "a context needs an id"),
        ({"conversation_id": ""}, "conversation_id", "non-empty string"),
        ({"history": [{"role": "tool", "content": "x"}]}, "history[0].role", "expected one of user, assistant"),
        ({"history": [{"role": "user"}]}, "history[0].content", "required field missing"),
        ({"tool_calls": [{"arguments": {}}]}, "tool_calls[0].name", "required field missing"),
        ({"tool_calls": [{"name": "t", "step": 0}]}, "tool_calls[0].step", "index of a step"),
        ({"tool_calls": [{"name": "t", "arguments": {1, 2}}]}, "tool_calls[0].arguments", "expected JSON"),
        ({"reference_tool_calls": "search"}, "reference_tool_calls", "expected a list of tool calls"),
    ],
)
def test_bad_agent_fields_name_the_field(changes: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidRecordError) as caught:
        parse(record(**changes))

    assert caught.value.field == field
    assert reason in str(caught.value)


def test_unstorable_text_in_a_step_names_the_step() -> None:
    steps = [{"query": "ok", "contexts": [{"id": "d1", "text": "bad\x00text"}]}]

    with pytest.raises(InvalidRecordError) as caught:
        parse(record(steps=steps))

    assert caught.value.field == "steps[0].contexts[0].text"


def test_minimal_record_fills_optional_fields() -> None:
    raw = {"trace_id": "t2", "timestamp": "2024-03-11T00:00:00Z", "question": "Why?"}

    row = parse(raw)

    assert row["answer"] is None
    assert row["contexts"] == []
    assert row["reference"] is None
    assert row["reference_answers"] is None
    assert row["relevant_context_ids"] is None
    assert row["relevant_contexts"] is None
    assert json.loads(row["metadata"]) == {}
    pa.Table.from_pylist([row], schema=STAGED_SCHEMA)  # nulls and empty lists fit the schema


def test_empty_contexts_and_labels_are_kept_empty_not_null() -> None:
    row = parse(record(contexts=[], relevant_context_ids=[], relevant_contexts={}))

    assert row["contexts"] == []
    assert row["relevant_context_ids"] == []
    assert row["relevant_contexts"] == []


@pytest.mark.parametrize(
    ("raw", "field", "reason"),
    [
        pytest.param(record(question=None), "question", "required field missing", id="question-null"),
        pytest.param(without("question"), "question", "required field missing", id="question-missing"),
        pytest.param(record(question=" "), "question", "expected a non-empty string", id="question-blank"),
        pytest.param(record(question=["q"]), "question", "expected a non-empty string, got list", id="question-list"),
        pytest.param(without("timestamp"), "timestamp", "required field missing", id="timestamp-missing"),
        pytest.param(record(timestamp="yesterday"), "timestamp", "ISO-8601 timestamp, got 'yesterday'", id="ts-text"),
        pytest.param(record(timestamp=1710149400), "timestamp", "ISO-8601 string, got int", id="timestamp-epoch"),
        pytest.param(record(answer=42), "answer", "string or null, got int", id="answer-int"),
        pytest.param(record(contexts="d1"), "contexts", "list of contexts, got str", id="contexts-str"),
        pytest.param(record(contexts={"id": "d1"}), "contexts", "list of contexts, got dict", id="contexts-object"),
        pytest.param(record(contexts=[{"id": "d1", "text": "a"}, "d2"]), "contexts[1]", "got str", id="context-str"),
        pytest.param(
            record(contexts=[{"id": "d1", "text": "a"}, {"score": 0.5}]),
            "contexts[1].id",
            "required field missing",
            id="context-id-and-text-missing",
        ),
        pytest.param(
            record(contexts=[{"id": 7, "text": "a"}]),
            "contexts[0].id",
            "non-empty string or null, got int",
            id="context-id-int",
        ),
        pytest.param(
            record(contexts=[{"id": "d1", "text": 3}]),
            "contexts[0].text",
            "expected a string or null",
            id="context-text-int",
        ),
        pytest.param(
            record(contexts=[{"id": "d1", "text": "a", "score": "high"}]),
            "contexts[0].score",
            "number or null, got str",
            id="context-score-str",
        ),
        pytest.param(
            record(contexts=[{"id": "d1", "text": "a", "score": True}]),
            "contexts[0].score",
            "number or null, got bool",
            id="context-score-bool",
        ),
        pytest.param(
            record(contexts=[{"id": "d1", "text": "a", "score": math.nan}]),
            "contexts[0].score",
            "number or null, got float",
            id="context-score-nan",
        ),
        pytest.param(record(reference=["Ada"]), "reference", "string or null, got list", id="reference-list"),
        pytest.param(
            record(reference_answers="Ada"),
            "reference_answers",
            "list of strings or null, got str",
            id="reference-answers-str",
        ),
        pytest.param(
            record(reference_answers=["Ada", 1]),
            "reference_answers",
            "list of strings or null",
            id="reference-answers-mixed",
        ),
        pytest.param(
            record(relevant_context_ids=[1, 2]),
            "relevant_context_ids",
            "list of id strings or an object",
            id="labels-int-ids",
        ),
        pytest.param(
            record(relevant_context_ids=[{"id": "d1"}]),
            "relevant_context_ids",
            "list of id strings",
            id="labels-list-of-objects",
        ),
        pytest.param(
            record(relevant_context_ids=7), "relevant_context_ids", "expected an object, got int", id="labels-int"
        ),
        pytest.param(
            record(relevant_contexts="d1"),
            "relevant_contexts",
            "an object of grades, or their JSON text",
            id="text-labels-bad-json",
        ),
        pytest.param(record(metadata=["a", "b"]), "metadata", "expected an object, got list", id="metadata-list"),
        pytest.param(record(metadata="{not json"), "metadata", "object or JSON object text", id="metadata-bad-json"),
        pytest.param(record(metadata="[1, 2]"), "metadata", "expected an object, got list", id="metadata-json-list"),
    ],
)
def test_invalid_field_names_record_and_field(raw: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidRecordError) as caught:
        parse(raw)

    error = caught.value
    assert (error.record_id, error.field, error.location) == ("t1", field, f"{SOURCE}:3")
    assert reason in error.reason
    assert str(error) == f"record 't1' ({SOURCE}:3), field {field!r}: {error.reason}"


def test_message_names_record_and_nested_field() -> None:
    raw = record(contexts=[{"id": "d1", "text": "a"}, {"id": "", "text": "b"}])

    with pytest.raises(InvalidRecordError, match=r"record 't1' .*field 'contexts\[1\]\.id'"):
        parse(raw)


@pytest.mark.parametrize(
    ("raw", "field", "reason"),
    [
        pytest.param(without("trace_id"), "trace_id", "required field missing", id="missing"),
        pytest.param(record(trace_id=None), "trace_id", "required field missing", id="null"),
        pytest.param(record(trace_id=""), "trace_id", "expected a non-empty string, got str", id="empty"),
        pytest.param(record(trace_id=17), "trace_id", "expected a non-empty string, got int", id="int"),
        pytest.param(["t1", "question"], "<record>", "expected a JSON object, got list", id="not-an-object"),
        pytest.param("t1", "<record>", "expected a JSON object, got str", id="string"),
        pytest.param(None, "<record>", "expected a JSON object, got NoneType", id="null-record"),
    ],
)
def test_record_without_usable_id_has_record_none(raw: Any, field: str, reason: str) -> None:
    with pytest.raises(InvalidRecordError, match=rf"^record \({SOURCE}:3\), field '{field}'") as caught:
        parse(raw)

    assert caught.value.record_id is None
    assert caught.value.field == field
    assert reason in caught.value.reason


def test_first_invalid_field_wins_over_later_ones() -> None:
    # question is checked before timestamp and contexts: the message points at one field, deterministically.
    with pytest.raises(InvalidRecordError, match="field 'question'"):
        parse(record(question=None, timestamp="bad", contexts="bad"))


def test_unknown_fields_go_to_metadata_and_metadata_keys_win() -> None:
    raw = record(metadata={"user": "from-metadata", "tags": ["a"]}, user="from-extra", queue_ms=812, retrieved_at=None)

    row = parse(raw)

    assert json.loads(row["metadata"]) == {
        "queue_ms": 812,
        "retrieved_at": None,
        "tags": ["a"],
        "user": "from-metadata",
    }
    assert set(row) == set(STAGED_SCHEMA.names)


def test_extras_are_kept_when_metadata_is_missing_or_null() -> None:
    missing = without("metadata")
    missing["session"] = {"id": "s-1"}

    assert json.loads(parse(missing)["metadata"]) == {"session": {"id": "s-1"}}
    assert json.loads(parse(record(metadata=None, env="prod"))["metadata"]) == {"env": "prod"}


def test_metadata_as_json_text_is_accepted() -> None:
    row = parse(record(metadata='{"user": "u-9", "n": 2}', env="prod"))

    assert json.loads(row["metadata"]) == {"env": "prod", "n": 2, "user": "u-9"}


def test_list_labels_have_gain_one_and_are_deduplicated_in_order() -> None:
    row = parse(record(relevant_context_ids=["d3", "d1", "d3", "d2", "d1"], relevant_contexts=("x", "y")))

    assert row["relevant_context_ids"] == [
        {"key": "d3", "gain": 1.0},
        {"key": "d1", "gain": 1.0},
        {"key": "d2", "gain": 1.0},
    ]
    assert row["relevant_contexts"] == [{"key": "x", "gain": 1.0}, {"key": "y", "gain": 1.0}]


def test_object_labels_are_graded() -> None:
    row = parse(record(relevant_context_ids={"d1": 3, "d2": 0.5, "d4": 0}))

    assert row["relevant_context_ids"] == [
        {"key": "d1", "gain": 3.0},
        {"key": "d2", "gain": 0.5},
        {"key": "d4", "gain": 0.0},
    ]
    assert all(type(label["gain"]) is float for label in row["relevant_context_ids"])


@pytest.mark.parametrize(
    ("grade", "shown"),
    [
        (-1, "int -1"),
        (-0.5, "float -0.5"),
        (math.nan, "float nan"),
        (math.inf, "float inf"),
        (True, "bool True"),
        ("2", "str '2'"),
        (None, "NoneType None"),
    ],
)
def test_bad_grades_are_rejected(grade: Any, shown: str) -> None:
    with pytest.raises(InvalidRecordError, match=r"record 't1' .*field 'relevant_context_ids\.d2'") as caught:
        parse(record(relevant_context_ids={"d1": 1, "d2": grade}))

    assert caught.value.reason == f"expected a graded relevance >= 0, got {shown}"


def test_arrow_map_pairs_are_accepted_for_metadata_and_labels() -> None:
    # What pyarrow's to_pylist() yields for map<string, ...> columns read from Parquet.
    metadata = pa.array([[("user", "u-1"), ("model", "gen")]], type=pa.map_(pa.string(), pa.string())).to_pylist()[0]
    graded = pa.array([[("d1", 2.0), ("d2", 0.0)]], type=pa.map_(pa.string(), pa.float64())).to_pylist()[0]
    assert metadata == [("user", "u-1"), ("model", "gen")]

    row = parse(record(metadata=metadata, relevant_context_ids=graded, relevant_contexts=[("passage", 1)]))

    assert json.loads(row["metadata"]) == {"model": "gen", "user": "u-1"}
    assert row["relevant_context_ids"] == [{"key": "d1", "gain": 2.0}, {"key": "d2", "gain": 0.0}]
    assert row["relevant_contexts"] == [{"key": "passage", "gain": 1.0}]


def test_bad_grade_in_map_pairs_is_rejected() -> None:
    with pytest.raises(InvalidRecordError, match=r"field 'relevant_context_ids\.d1'"):
        parse(record(relevant_context_ids=[("d1", -2.0)]))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("2024-03-11T09:30:00", dt.datetime(2024, 3, 11, 9, 30, tzinfo=dt.UTC), id="naive"),
        pytest.param("2024-03-11T09:30:00Z", dt.datetime(2024, 3, 11, 9, 30, tzinfo=dt.UTC), id="zulu"),
        pytest.param("2024-03-11T11:30:00+02:00", dt.datetime(2024, 3, 11, 9, 30, tzinfo=dt.UTC), id="plus-two"),
        pytest.param("2024-03-10T21:00:00-05:00", dt.datetime(2024, 3, 11, 2, 0, tzinfo=dt.UTC), id="crosses-day"),
        pytest.param("2024-03-11", dt.datetime(2024, 3, 11, tzinfo=dt.UTC), id="date-only"),
        pytest.param(dt.datetime(2024, 3, 11, 9, 30), dt.datetime(2024, 3, 11, 9, 30, tzinfo=dt.UTC), id="py-naive"),
        pytest.param(
            dt.datetime(2024, 3, 11, 10, 30, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            dt.datetime(2024, 3, 11, 9, 30, tzinfo=dt.UTC),
            id="py-aware",
        ),
    ],
)
def test_timestamps_are_normalised_to_utc(value: Any, expected: dt.datetime) -> None:
    stamp = parse(record(timestamp=value))["timestamp"]

    assert stamp == expected
    assert stamp.tzinfo is dt.UTC
    assert (stamp.hour, stamp.day) == (expected.hour, expected.day)  # the wall clock moved, not just the zone label


def test_labels_as_json_text_in_list_and_object_form() -> None:
    listed = parse_record(
        {"trace_id": "t1", "timestamp": "2024-03-11T08:00:00Z", "question": "q", "relevant_context_ids": '["d1","d1"]'},
        source_file="f",
        line=1,
    )
    graded = parse_record(
        {"trace_id": "t1", "timestamp": "2024-03-11T08:00:00Z", "question": "q", "relevant_contexts": '{"x": 2}'},
        source_file="f",
        line=1,
    )
    assert listed["relevant_context_ids"] == [{"key": "d1", "gain": 1.0}]
    assert graded["relevant_contexts"] == [{"key": "x", "gain": 2.0}]
    with pytest.raises(InvalidRecordError, match="field 'relevant_context_ids': expected a list of ids"):
        parse_record(
            {"trace_id": "t1", "timestamp": "2024-03-11T08:00:00Z", "question": "q", "relevant_context_ids": "d1"},
            source_file="f",
            line=1,
        )


def test_context_without_text_is_kept_with_null_text() -> None:
    """Sources such as OTel GenAI log ids and scores only; the text is null, never an invented string."""
    row = parse_record(
        record(contexts=[{"id": "d1", "score": 0.4}, {"id": "d2", "text": None}]), source_file="f", line=1
    )
    assert row["contexts"] == [{"id": "d1", "text": None, "score": 0.4}, {"id": "d2", "text": None, "score": None}]


def test_context_without_id_is_kept_with_null_id_and_one_with_neither_is_refused() -> None:
    """The OTel GenAI reference scenarios log retrieved text without an id: judge and text metrics still apply."""
    row = parse_record(record(contexts=[{"text": "Paris is in France."}, {"id": "d2", "text": "x"}]), source_file="f",
                       line=1)  # fmt: skip
    assert row["contexts"] == [{"id": None, "text": "Paris is in France.", "score": None},
                               {"id": "d2", "text": "x", "score": None}]  # fmt: skip
    with pytest.raises(InvalidRecordError, match="a context needs an id, a text or both") as caught:
        parse_record(record(contexts=[{"id": "d1", "text": "a"}, {"score": 0.3}]), source_file="f", line=1)
    assert caught.value.field == "contexts[1].id"
    with pytest.raises(InvalidRecordError, match="non-empty string or null, got str"):
        parse_record(record(contexts=[{"id": "", "text": "a"}]), source_file="f", line=1)


@pytest.mark.parametrize(("value", "shown"), [("日本語", "BCP 47"), ("en_US", "BCP 47"), (7, "got int 7")])
def test_a_language_that_is_not_a_bcp47_tag_is_refused(value: Any, shown: str) -> None:
    with pytest.raises(InvalidRecordError, match=shown) as caught:
        parse(record(language=value))
    assert caught.value.field == "language"


def test_a_missing_language_is_null_for_staging_to_fill() -> None:
    assert parse(without("language"))["language"] is None and parse(record(language=""))["language"] is None
