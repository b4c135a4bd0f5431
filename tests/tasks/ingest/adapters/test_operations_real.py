"""Latency, token usage and span errors of the agents' turns (tests/fixtures/agents) as each of the four tools
exported them: the turn's latency is checked against its root span's duration read here straight from the raw
export, the token usage against the model calls the application made (``expected.json``; its scripted model reports
120 input and 18 output tokens on every call of the ReAct graphs and nothing on the corrective-RAG graph's calls,
see app.py ``_ai``), and the errors against the tool the application made fail once. English, Japanese and Chinese
turns alike."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from ragpulse.metrics import REGISTRY, MetricRequest, compute
from ragpulse.metrics._spec import Status
from ragpulse.tasks.ingest.batches import read_scoring_table, read_staged, read_trace_batch
from tests.tasks.ingest.adapters.conftest import Staged
from tests.tasks.ingest.adapters.test_agents_real import AGENTS, SOURCES, _stage, _turns

UNREPORTED_USAGE = {"s3_corrective_rag"}
"""The corrective-RAG graph's scripted models answer with plain AIMessages, without usage_metadata."""
FAILING_TOOL = ("exchange_rate", "rate service did not answer within 5 s")


def _time(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value
    parsed = dt.datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text().splitlines():
        yield json.loads(line)


def _root_durations(source: str) -> dict[str, float]:
    """Each trace's root span duration in milliseconds, read from the export as the tool wrote it."""
    ms = dt.timedelta(milliseconds=1)
    if source == "openinference":
        spans = _jsonl(AGENTS / "openinference" / "dt=2026-11-20" / "agents.jsonl")
        return {
            s["context"]["trace_id"]: (_time(s["end_time"]) - _time(s["start_time"])) / ms
            for s in spans
            if not s["parent_id"]
        }
    if source == "langsmith":
        runs = _jsonl(AGENTS / "langsmith" / "dt=2026-11-20" / "agent-runs.jsonl")
        return {
            r["trace_id"]: (_time(r["end_time"]) - _time(r["start_time"])) / ms
            for r in runs
            if r["id"] == r["trace_id"]
        }
    if source == "openllmetry":
        requests = _jsonl(AGENTS / "otel-genai" / "dt=2026-11-20" / "agents-otlp.jsonl")
        otlp = [
            s for r in requests for rs in r.get("resourceSpans", []) for ss in rs["scopeSpans"] for s in ss["spans"]
        ]
        return {
            s["traceId"].lower(): (int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"])) / 1e6
            for s in otlp
            if not s.get("parentSpanId")
        }
    observations: list[dict[str, Any]] = []
    for path in sorted(SOURCES[source][1].glob("observations*/*")):
        observations += pq.read_table(path).to_pylist() if path.suffix == ".parquet" else list(_jsonl(path))
    return {
        o["trace_id"]: (_time(o["end_time"]) - _time(o["start_time"])) / ms
        for o in observations
        if not o["parent_observation_id"]
    }


@pytest.fixture(params=sorted(SOURCES))
def agent_turns(request: pytest.FixtureRequest, stager: Callable[..., Staged], tmp_path: Path) -> tuple[str, Staged]:
    return request.param, _stage(stager, tmp_path, request.param)


def test_latency_is_the_root_spans_duration(agent_turns: tuple[str, Staged]) -> None:
    source, (_, rows) = agent_turns
    durations = _root_durations(source)
    assert len(durations) == len(rows) == 12
    for trace_id, row in rows.items():
        # Times are kept to the microsecond: OTLP's nanoseconds lose up to 1 us at each end.
        assert row["latency_ms"] == pytest.approx(durations[trace_id], abs=0.002), trace_id
        assert "latency_from" not in row["metadata"]["source"]  # read from the root, not the spans' extent


def test_retrieval_and_generation_time_fit_in_the_turn(agent_turns: tuple[str, Staged]) -> None:
    """Both are unions of span intervals inside the root span; a turn without retrieval has no retrieval time."""
    _, (_, rows) = agent_turns
    assert any(row["generation_latency_ms"] > 0 for row in rows.values())
    for row, turn in _turns(rows):
        # Langfuse's legacy export writes milliseconds: a sub-millisecond call lasts 0 there.
        assert 0 <= row["generation_latency_ms"] <= row["latency_ms"], turn["scenario"]
        if turn["steps"]:
            assert 0 <= row["retrieval_latency_ms"] <= row["latency_ms"], turn["scenario"]
        else:
            assert row["retrieval_latency_ms"] is None, turn["scenario"]


def test_usage_has_one_entry_per_model_call(agent_turns: tuple[str, Staged]) -> None:
    _, (_, rows) = agent_turns
    languages = set()
    for row, turn in _turns(rows):
        counted = (None, None) if turn["scenario"] in UNREPORTED_USAGE else (120, 18)
        got = [(call["input_tokens"], call["output_tokens"]) for call in row["usage"]]
        assert got == [counted] * turn["llm_calls"], turn["scenario"]
        languages.add(turn["language"])
    assert {"ja", "zh"} <= languages


def test_the_failing_tool_is_the_turns_only_error(agent_turns: tuple[str, Staged]) -> None:
    _, (_, rows) = agent_turns
    for row, turn in _turns(rows):
        failed = [call["name"] for call in turn["tool_calls"] if call["error"]]
        assert [(error["kind"], error["name"]) for error in row["errors"]] == [("tool", n) for n in failed]
        assert all(FAILING_TOOL[1] in error["message"] for error in row["errors"])
    assert any(row["errors"] for row in rows.values())


def test_a_staged_agent_batch_reads_back_as_operations(agent_turns: tuple[str, Staged]) -> None:
    _, (staged, rows) = agent_turns
    for ref in staged.batches:
        batch = read_trace_batch(read_staged(ref))
        assert batch.operations is not None
        for trace_id, operations in zip(batch.trace_ids, batch.operations, strict=True):
            assert operations is not None
            assert operations.latency_ms == rows[trace_id]["latency_ms"]
            assert len(operations.usage or ()) == len(rows[trace_id]["usage"])
            assert operations.errors is not None  # every tool logs span status: () is "no error"


OPERATIONAL = [name for name, definition in REGISTRY.items() if definition.needs in ("operations", "retrieval")]


def test_scoring_reads_the_operational_columns_and_scores_as_from_the_whole_batch(
    agent_turns: tuple[str, Staged],
) -> None:
    """Score-batch reads only its metrics' columns (``read_scoring_table``): the operational metrics must score the
    same from those as from every column, and latency is known for every turn."""
    _, (staged, _) = agent_turns
    requests = [MetricRequest.parse(name) for name in OPERATIONAL]
    assert {"latency_ms", "error", "empty_retrieval"} <= set(OPERATIONAL)
    for ref in staged.batches:
        whole = compute(read_trace_batch(read_staged(ref)), requests)
        read = compute(read_trace_batch(read_scoring_table(ref, requests)), requests)
        for name in OPERATIONAL:
            np.testing.assert_array_equal(read[name].values, whole[name].values)
            assert list(read[name].reasons) == list(whole[name].reasons), name
        assert (read["latency_ms"].status == Status.OK).all()
