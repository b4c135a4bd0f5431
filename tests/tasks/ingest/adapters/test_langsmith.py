"""LangSmith bulk export (Parquet of runs) -> canonical traces through real staging: the invented fixture
(langsmith/runs-part-*.jsonl, hand-written for what the real runs in test_langsmith_real.py lack: the export's
server-side columns such as token counts and session_id, a run exported twice, a trace from the day before)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tasks.ingest.adapters.conftest import Staged, langsmith_parquet, quarantined


def U(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return langsmith_parquet(tmp_path / "langsmith")


def test_runs_become_traces_with_configured_score_key(export: Path, stager: Callable[..., Staged]) -> None:
    staged, rows = stager(export, "langsmith", partitioning="event-time", score_key="metadata.relevance_score")
    assert sorted(rows) == [U(1), U(10)]
    first = rows[U(1)]
    assert (first["question"], first["answer"]) == (
        "What does the free tier include?",
        "The free tier includes 5 projects.",
    )
    assert [(c["id"], c["score"]) for c in first["contexts"]] == [("pr-free", 0.92), ("pr-team", 0.41)]
    assert first["metadata"]["model"] == "gpt-4o-mini"
    assert first["metadata"]["token_counts"] == {"prompt": 280, "completion": 9, "total": 289}
    assert first["metadata"]["app"] == "pricing-bot" and "ls_run_depth" not in first["metadata"]
    assert first["metadata"]["source"]["root_span_id"] == U(1)
    assert staged.n_duplicate_spans == 1  # the retriever run exported twice
    assert staged.n_other_days == 1  # the trace that started at 23:59:58 the day before


def test_root_without_outputs_has_no_answer_and_both_retrievers(export: Path, stager: Callable[..., Staged]) -> None:
    _, rows = stager(export, "langsmith", partitioning="event-time")
    second = rows[U(10)]
    assert second["answer"] is None
    # ids and scores at the default keys: metadata.id, then metadata.relevance_score (after score, metadata.score)
    assert [(c["id"], c["score"]) for c in second["contexts"]] == [("dep-1", 7.5), ("dep-2", 0.77)]


def test_explicit_score_key_is_used_alone(export: Path, stager: Callable[..., Staged]) -> None:
    _, rows = stager(export, "langsmith", partitioning="event-time", score_key="metadata.score")
    assert [(c["id"], c["score"]) for c in rows[U(10)]["contexts"]] == [("dep-1", None), ("dep-2", None)]


def test_root_without_question_is_quarantined(export: Path, stager: Callable[..., Staged]) -> None:
    staged, _ = stager(export, "langsmith", partitioning="event-time")
    assert quarantined(staged) == {(U(20), "question")}
    (entry,) = staged.quarantined
    assert "root run's inputs" in entry.reason and entry.source_file.endswith("runs-part-0.parquet")
