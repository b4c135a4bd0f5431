"""Staged agent traces read back: the retrieval and agent metrics, per turn and per step, read only what they need
and score as the whole batch does; the judge's read carries steps, histories and conversation ids (Japanese)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import MetricRequest, ToolCall, compute, parse_metrics
from ragpulse.tasks.core.storage import list_partition_files
from ragpulse.tasks.core.types import StagedPartition
from ragpulse.tasks.ingest.batches import judging_columns, read_scoring_table, read_staged, read_trace_batch
from ragpulse.tasks.ingest.staging import stage_records
from ragpulse.tasks.scoring.step_scores import rank_steps

DAY = dt.date(2026, 11, 21)
NAMES = ["document_mrr", "precision@2", "recall@2", "retrieval_steps", "repeated_queries", "tool_call_accuracy"]
DOCS = [{"id": f"d{i}", "text": f"富士山についての文書{i}。"} for i in range(5)]


def _records() -> list[dict[str, Any]]:
    """Batches of 3: labelled by id (batch 1), by text (batch 2), without steps (batch 3)."""
    records = []
    for i in range(9):
        steps = [
            {"id": f"t{i}-a", "query": "富士山 高さ", "contexts": [DOCS[i % 5], DOCS[(i + 1) % 5]]},
            {"id": f"t{i}-b", "query": " 富士山　高さ ", "contexts": [DOCS[(i + 2) % 5]]},
            {"id": f"t{i}-c", "kind": "reranker", "parent": 0, "contexts": [DOCS[(i + 1) % 5]]},
        ]
        record: dict[str, Any] = {
            "trace_id": f"t{i}", "timestamp": "2026-11-21T08:00:00Z", "question": "富士山の高さは？",
            "answer": "3776メートルです。", "contexts": [DOCS[(i + 1) % 5]],
            "relevant_context_ids": [DOCS[(i + 1) % 5]["id"]],
            "conversation_id": f"c{i % 2}", "history": [{"role": "user", "content": "こんにちは"}],
            "steps": steps if i < 6 else None,
            "tool_calls": [{"name": "search", "arguments": {"q": "富士山 高さ"}, "step": 0 if i < 6 else None}],
            "reference_tool_calls": [{"name": "search", "arguments": {"q": "富士山 高さ"}}],
        }  # fmt: skip
        if 3 <= i < 6:
            record["relevant_contexts"] = [DOCS[(i + 2) % 5]["text"]]
            del record["relevant_context_ids"]
        records.append(record)
    return records


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> StagedPartition:
    root: Path = tmp_path_factory.mktemp("step-reads")
    folder = root / "traces" / f"dt={DAY}"
    folder.mkdir(parents=True)
    lines = (json.dumps(record, ensure_ascii=False) for record in _records())
    (folder / "agents.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return stage_records(DAY, list_partition_files(str(root / "traces"), DAY), staged_url=str(root / "s"), batch_size=3)


def test_step_and_agent_metrics_read_what_they_need_and_score_as_the_whole_batch(staged: StagedPartition) -> None:
    requests = parse_metrics(NAMES)
    plain = [r for r in requests if not r.is_judge]
    for ref in staged.batches:
        whole = read_trace_batch(read_staged(ref))
        table = read_scoring_table(ref, plain)
        read = read_trace_batch(table)
        for name, result in compute(whole, plain).items():
            assert np.array_equal(compute(read, plain)[name].values, result.values, equal_nan=True), name
        for mine, theirs in zip(
            rank_steps(read, plain, ["step_query", "question"]), rank_steps(whole, plain, ["step_query", "question"]),
            strict=True,
        ):  # fmt: skip
            assert list(mine.step_ids) == list(theirs.step_ids) and list(mine.trace_rows) == list(theirs.trace_rows)
            for name, result in theirs.results.items():
                assert np.array_equal(mine.results[name].values, result.values, equal_nan=True), name
        step_type = table.schema.field("steps").type.value_type
        # The steps' documents' texts only for a batch labelled by text, as the turns' own.
        texts_read = "text" in step_type.field("contexts").type.value_type.names
        assert (
            texts_read == (table.column("relevant_contexts").null_count < table.num_rows) == (ref is staged.batches[1])
        )
        assert set(step_type.names) == {"id", "kind", "query", "contexts"}  # never the steps' names or errors
        assert "history" not in table.column_names and "conversation_id" not in table.column_names


def test_steps_are_scored_per_step_only_where_traces_have_steps(staged: StagedPartition) -> None:
    plain = parse_metrics(["document_mrr", "answer_f1"])
    first = read_trace_batch(read_scoring_table(staged.batches[0], plain))
    (scores,) = rank_steps(first, plain, ["step_query"])
    assert list(scores.trace_ids) == ["t0"] * 3 + ["t1"] * 3 + ["t2"] * 3
    assert list(scores.step_index) == [0, 1, 2] * 3 and list(scores.trace_rows) == [0] * 3 + [1] * 3 + [2] * 3
    assert set(scores.results) == {"document_mrr"}  # answer_f1 is a turn metric only
    assert list(scores.results["document_mrr"].values[:3]) == [0.5, 0.0, 1.0]  # d1 second, absent, first
    assert rank_steps(first, [MetricRequest.parse("answer_f1")], ["step_query"]) == ()
    # A batch none of whose traces has steps scores no steps.
    last = read_trace_batch(read_scoring_table(staged.batches[-1], plain))
    assert last.steps == [None, None, None] and rank_steps(last, plain, ["step_query"]) == ()


def test_the_judges_read_carries_steps_history_and_conversation(staged: StagedPartition) -> None:
    traces = read_trace_batch(read_staged(staged.batches[0], columns=judging_columns(steps=True)))
    assert traces.histories == [(("user", "こんにちは"),)] * 3
    assert traces.conversation_ids == ["c0", "c1", "c0"]
    assert traces.steps is not None and traces.steps[0] is not None
    reranker = traces.steps[0][2]
    assert (reranker.kind, reranker.parent, reranker.query, reranker.context_texts) == (
        "reranker", 0, None, (DOCS[1]["text"],),
    )  # fmt: skip
    assert traces.tool_calls is None  # the judge never reads them
    without_steps = read_staged(staged.batches[0], columns=judging_columns(steps=False))
    assert "steps" not in without_steps.column_names
    calls = read_trace_batch(read_staged(staged.batches[0])).tool_calls
    assert calls is not None and calls[0] == [ToolCall("search", {"q": "富士山 高さ"}, None, 0)]
