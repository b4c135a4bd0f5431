"""The traces and steps tables: excerpts of exactly the traces a partition keeps and of their retrieval steps, read
from the staged batches a batch at a time as they are published."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from ragpulse.metrics import MetricResult
from ragpulse.tasks.core.storage import SourceFile
from ragpulse.tasks.core.types import TRACE_ROWS_SCHEMA, QuarantinedRecord, RunInfo, ScoredBatch, StagedPartition
from ragpulse.tasks.ingest.staging import stage_records
from ragpulse.tasks.scoring.assemble import assemble_partition, build_partition_scores
from ragpulse.tasks.warehouse import TRACES_SCHEMA
from ragpulse.tasks.warehouse.duckdb import DuckDBWarehouse
from ragpulse.tasks.warehouse.publication import (
    CONTEXT_EXCERPT_CHARS,
    EXCERPT_CHARS,
    STEP_ROWS_SCHEMA,
    build_publication,
    retrieval_steps,
    trace_excerpts,
)

DAY = dt.date(2026, 11, 1)
LONG = "ü" * 1500 + "🦆"


def _trace(trace_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "timestamp": "2026-11-01T10:00:00Z",
        "question": f"question of {trace_id}",
        "answer": f"answer of {trace_id}",
        "contexts": [{"id": "d1", "text": f"text of {trace_id}", "score": 0.5}],
        "metadata": {"app": "support-bot"},
        **fields,
    }


def _stage(tmp_path: Path, lines: list[str]) -> StagedPartition:
    path = tmp_path / "traces" / "a.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    files = [SourceFile(str(path), path.stat().st_size, "1")]
    return stage_records(DAY, files, staged_url=str(tmp_path / "staged"), batch_size=2)


def _scored(staged: StagedPartition) -> list[ScoredBatch]:
    """One ScoredBatch per staged batch, as score_batch makes them: same rows, same order."""
    batches = []
    for ref in staged.batches:
        rows = pq.read_table(ref.url, columns=["trace_id", "source_file", "source_line"])
        n = rows.num_rows
        batches.append(
            ScoredBatch(
                trace_ids=np.array(rows["trace_id"].to_pylist(), dtype=object),
                source_files=np.array(rows["source_file"].to_pylist(), dtype=object),
                source_lines=np.array(rows["source_line"].to_pylist(), dtype=np.int64),
                results={"m": MetricResult.from_values(np.linspace(0, 1, n))},
                versions={"m": "1.0.0"},
            )
        )
    return batches


@pytest.fixture
def staged(tmp_path: Path) -> StagedPartition:
    return _stage(
        tmp_path,
        [
            json.dumps(_trace("t1", question=LONG, answer=None)),
            "{not json",
            json.dumps(_trace("t2", contexts=[{"id": "d1", "text": LONG, "score": None}, {"id": "d2", "text": None}])),
            json.dumps(_trace("t1", question="the repeated t1")),
            json.dumps(_trace("t3", metadata={"app": "search", "tier": 2})),
            json.dumps(_trace("t4")),
        ],
    )


def test_traces_are_the_kept_traces_cut_to_excerpts_in_score_order(staged: StagedPartition) -> None:
    assert len(staged.batches) == 3
    source = staged.files[0].url
    excluded = [QuarantinedRecord(source, 6, "t4", "answer", "failed the input suite", "")]
    scores = build_partition_scores(staged, _scored(staged), [], excluded)
    assert list(scores.trace_ids) == ["t1", "t2", "t3"]
    traces = trace_excerpts(scores).to_table()
    assert traces.schema == TRACE_ROWS_SCHEMA
    assert traces["trace_id"].to_pylist() == ["t1", "t2", "t3"]
    # The first t1 (line 1) is kept, the repeat on line 4 is quarantined; line 2 never was a trace.
    assert traces["source_line"].to_pylist() == [1, 3, 5]
    assert set(traces["source_file"].to_pylist()) == {source}
    t1, t2, t3 = traces.to_pylist()
    assert t1["question"] == "ü" * EXCERPT_CHARS and t1["answer"] is None
    assert t1["timestamp"] == dt.datetime(2026, 11, 1, 10, tzinfo=dt.UTC)
    assert json.loads(t2["contexts"]) == [
        {"id": "d1", "text": "ü" * CONTEXT_EXCERPT_CHARS, "score": None},
        {"id": "d2", "text": None, "score": None},
    ]
    assert json.loads(t3["metadata"]) == {"app": "search", "tier": 2}
    assert json.loads(t3["contexts"]) == [{"id": "d1", "text": "text of t3", "score": 0.5}]


def test_the_excerpts_are_those_of_the_rows_kept_whatever_the_batch_order(staged: StagedPartition) -> None:
    scores = assemble_partition(staged, list(reversed(_scored(staged))))
    traces = trace_excerpts(scores).to_table()
    # Batches [t1, t2] [t1, t3] [t4] reversed: the t1 of line 4 now comes first and is the one kept.
    assert list(scores.trace_ids) == ["t4", "t1", "t3", "t2"]
    kept = {row["trace_id"]: row for row in traces.to_pylist()}
    assert sorted(kept) == sorted(scores.trace_ids) and traces.num_rows == 4
    assert kept["t1"]["source_line"] == 4 and kept["t1"]["question"] == "the repeated t1"


def test_the_excerpts_are_read_batch_by_batch_only_when_published(staged: StagedPartition, tmp_path: Path) -> None:
    scores = build_partition_scores(staged, _scored(staged), [], [])
    run = RunInfo("r1", "file:///traces", "cfg", {}, dt.datetime(2026, 11, 2, tzinfo=dt.UTC))
    publication = build_publication(scores, run, ["m"], n_batches_cached=0)
    batches = publication.traces.batches()
    first = next(batches)
    assert first.num_rows == 2 and publication.traces.num_rows == 4  # one staged batch, then the next
    for ref in staged.batches[1:]:
        Path(ref.url).unlink()
    with pytest.raises(FileNotFoundError, match="staged batch"):
        next(batches)


def test_scores_of_other_batches_are_refused(staged: StagedPartition, tmp_path: Path) -> None:
    other = _stage(tmp_path / "other", [json.dumps(_trace("x1"))])
    scores = assemble_partition(other, _scored(other))
    with pytest.raises(ValueError, match="where 1 were scored: they do not belong"):
        trace_excerpts(dataclasses.replace(scores, staged_batches=staged.batches)).to_table()


def test_the_publication_carries_the_traces_and_the_warehouse_returns_them(
    staged: StagedPartition, tmp_path: Path
) -> None:
    scores = build_partition_scores(staged, _scored(staged), [], [])
    run = RunInfo("r1", "file:///traces", "cfg", {}, dt.datetime(2026, 11, 2, tzinfo=dt.UTC))
    publication = build_publication(scores, run, ["m"], n_batches_cached=0)
    traces = publication.traces.to_table()
    assert traces.schema == TRACES_SCHEMA
    assert set(traces["run_id"].to_pylist()) == {"r1"}
    assert set(traces["partition_date"].to_pylist()) == {DAY}
    warehouse = DuckDBWarehouse(f"duckdb:///{tmp_path}/w.duckdb")
    warehouse.publish(publication)
    assert warehouse.read("traces").to_pylist() == traces.to_pylist()
    scored = warehouse.read("scores", columns=["trace_id"])["trace_id"].to_pylist()
    assert sorted(scored) == sorted(warehouse.read("traces", columns=["trace_id"])["trace_id"].to_pylist())


def _step(query: str | None, *contexts: tuple[str, str], kind: str = "retriever", **fields: Any) -> dict[str, Any]:
    return {
        "id": f"span-{query}",
        "name": "search",
        "kind": kind,
        "query": query,
        "contexts": [{"id": doc, "text": text, "score": 1.0 / (rank + 1)} for rank, (doc, text) in enumerate(contexts)],
        **fields,
    }


@pytest.fixture
def agent_staged(tmp_path: Path) -> StagedPartition:
    """Agent turns in batches of two: a Japanese two-hop turn with a reranker, a Chinese one-hop turn repeated (the
    repeat is dropped), a turn that did not retrieve, and an older-style trace without steps."""
    hops = [
        _step("富士山の高さ" + "は" * 1200, ("d1", "富士山は標高3776メートル。" * 30), ("d2", "日本一の山")),
        _step("富士山 登山 季節", ("d3", "7月から9月")),
        _step(None, ("d3", "7月から9月"), ("d1", "富士山"), kind="reranker", parent=0, error="timeout"),
    ]
    return _stage(
        tmp_path,
        [
            json.dumps(_trace("t1", steps=hops, conversation_id="c-ja")),
            json.dumps(_trace("t2", steps=[_step("长城有多长", ("z1", "长城全长两万多公里"))], conversation_id="c-zh")),
            json.dumps(_trace("t2", steps=[_step("repeated", ("x", "y"))], conversation_id="c-zh")),
            json.dumps(_trace("t3", steps=[], conversation_id="c-ja")),
            json.dumps(_trace("t4")),
        ],
    )


def test_steps_are_those_of_the_kept_traces_cut_like_the_excerpts(agent_staged: StagedPartition) -> None:
    scores = build_partition_scores(agent_staged, _scored(agent_staged), [], [])
    assert list(scores.trace_ids) == ["t1", "t2", "t3", "t4"]
    source = retrieval_steps(scores)
    assert source.num_rows == 4
    steps = source.to_table()
    assert steps.schema == STEP_ROWS_SCHEMA
    rows = [{k: v for k, v in row.items() if k != "contexts"} for row in steps.to_pylist()]
    assert [(r["trace_id"], r["step_index"], r["parent_index"], r["kind"], r["n_contexts"]) for r in rows] == [
        ("t1", 0, None, "retriever", 2),
        ("t1", 1, None, "retriever", 1),
        ("t1", 2, 0, "reranker", 2),
        ("t2", 0, None, "retriever", 1),  # the repeated t2 (line 3) is dropped with its step
    ]
    assert rows[0]["query"] == "富士山の高さ" + "は" * (EXCERPT_CHARS - 6)
    assert rows[0]["step_id"] == "span-富士山の高さ" + "は" * 1200  # ids are never cut
    assert rows[2]["query"] is None and rows[2]["error"] == "timeout" and rows[1]["error"] is None
    assert rows[3]["query"] == "长城有多长" and rows[3]["step_id"] == "span-长城有多长"
    first = json.loads(steps["contexts"][0].as_py())
    assert first[0] == {"id": "d1", "text": ("富士山は標高3776メートル。" * 30)[:CONTEXT_EXCERPT_CHARS], "score": 1.0}
    assert first[1] == {"id": "d2", "text": "日本一の山", "score": 0.5}
    traces = trace_excerpts(scores).to_table()
    assert traces["conversation_id"].to_pylist() == ["c-ja", "c-zh", "c-ja", None]


def test_steps_are_read_only_when_published_and_a_rerun_replaces_them(
    agent_staged: StagedPartition, tmp_path: Path
) -> None:
    scores = build_partition_scores(agent_staged, _scored(agent_staged), [], [])
    run = RunInfo("r1", "file:///traces", "cfg", {}, dt.datetime(2026, 11, 2, tzinfo=dt.UTC))
    moved = {ref.url: Path(ref.url).rename(f"{ref.url}.away") for ref in agent_staged.batches}
    publication = build_publication(scores, run, ["m"], n_batches_cached=0)  # reads no staged batch
    for url, away in moved.items():
        away.rename(url)
    warehouse = DuckDBWarehouse(f"duckdb:///{tmp_path}/w.duckdb")
    warehouse.publish(publication)
    warehouse.publish(build_publication(scores, dataclasses.replace(run, run_id="r2"), ["m"], n_batches_cached=0))
    steps = warehouse.read("steps")
    assert steps.num_rows == 4 and set(steps["run_id"].to_pylist()) == {"r2"}
    assert sorted(steps["query"].to_pylist(), key=str)[-1] == "长城有多长"
    traces = warehouse.read("traces", columns=["trace_id", "conversation_id"]).to_pylist()
    assert sorted((t["trace_id"], t["conversation_id"]) for t in traces) == [
        ("t1", "c-ja"), ("t2", "c-zh"), ("t3", "c-ja"), ("t4", None),
    ]  # fmt: skip


def test_batches_staged_before_steps_existed_have_no_steps_and_no_conversation(
    agent_staged: StagedPartition, tmp_path: Path
) -> None:
    """A staged batch written before schema v10 (without the agent columns) still publishes its traces."""
    for ref in agent_staged.batches:
        table = pq.read_table(ref.url)
        pq.write_table(table.drop_columns(["steps", "conversation_id", "history", "tool_calls"]), ref.url)
    scores = build_partition_scores(agent_staged, _scored(agent_staged), [], [])
    assert retrieval_steps(scores).num_rows == 0 and retrieval_steps(scores).to_table().num_rows == 0
    assert trace_excerpts(scores).to_table()["conversation_id"].null_count == 4
