"""The default run on real tool exports with feedback (tests/fixtures/agents + tests/fixtures/feedback) publishes
every feedback name the day holds without listing it: ``user_feedback:<name>`` for what people and the application
said, ``tool_evaluation:<name>`` for what a tool's evaluators computed, never one as the other; checked in SQL on
DuckDB against generate.py's PLAN (the same mapping docs/metrics.md gives)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, ScoringConfig, SourceConfig
from tests.tasks.ingest.adapters.test_feedback_real import TURNS, _partition, plan

DAY = dt.date(2026, 11, 20)
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("trace_format", ["langfuse", "openinference"])
def test_the_default_run_publishes_every_feedback_name_apart_from_tool_evaluations(
    trace_format: str, tmp_path: Path, prefect_api: str
) -> None:
    source, partitioning = _partition(trace_format, tmp_path)
    warehouse = tmp_path / "w.duckdb"
    evaluate_partition(
        date=DAY,
        source=SourceConfig(url=str(source), format=trace_format, partitioning=partitioning),
        scoring=ScoringConfig(),  # the defaults: no feedback name listed
        output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
    )
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute(
            "SELECT t.question, s.metric, s.value, s.status, s.reason FROM scores s JOIN traces t USING (trace_id) "
            "WHERE s.metric LIKE 'user_feedback:%' OR s.metric LIKE 'tool_evaluation:%'"
        ).fetchall()
    published = {metric for _, metric, *_ in rows}
    assert published == {
        "user_feedback:thumbs", "user_feedback:stars", "user_feedback:correctness", "user_feedback:tone",
        "tool_evaluation:helpfulness", "tool_evaluation:format_check",
    }  # fmt: skip
    assert len(rows) == 12 * len(published)  # one row per turn and metric, not_applicable where nothing was said
    ok = {(TURNS[question], metric): value for question, metric, value, status, _ in rows if status == "ok"}
    assert ok == {
        (("s1_react_multihop", 1), "user_feedback:thumbs"): 1.0,
        (("s1_react_multihop", 1), "user_feedback:correctness"): 1.0,
        (("s1_react_multihop", 1), "tool_evaluation:helpfulness"): 0.9,
        (("s4_react_web_search", 1), "user_feedback:thumbs"): 0.0,
        (("s7_conversation_ja", 1), "user_feedback:thumbs"): 1.0,
        (("s7_conversation_ja", 1), "user_feedback:correctness"): 0.0,
        (("s7_conversation_ja", 2), "user_feedback:stars"): 0.75,
        (("s8_conversation_zh", 1), "user_feedback:thumbs"): 0.0,
        (("s8_conversation_zh", 1), "tool_evaluation:helpfulness"): 0.4,
        (("s8_conversation_zh", 2), "user_feedback:correctness"): 1.0,
        (("s9_tool_error_recovery", 1), "tool_evaluation:format_check"): 1.0,
    }
    reasons = {(TURNS[q], m): r for q, m, _, status, r in rows if status != "ok"}
    assert reasons[(("s5_chitchat_no_retrieval", 1), "user_feedback:tone")] == "unmapped_label:neutral"
    assert reasons[(("s2_react_parallel_tools", 1), "user_feedback:thumbs")] == "no_feedback"
    assert len(plan.PLAN) == 13  # the orphan's thumbs is quarantined at staging, not published
