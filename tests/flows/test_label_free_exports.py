"""The default run on a tool export says something (issue 32): one LangGraph application's day as four tracers
exported it (tests/fixtures/agents), evaluated as a new user would, ``ragpulse evaluate`` with no metric list, no
labels, no references and no judge, against a running Prefect server. Before the label-free metrics this day scored
0 ok of 144 and exited 4 (``nothing_scored``); now every turn must carry the operational metrics, refusal and the
embedding signals wherever its spans hold what they read, checked in SQL against the application's own log
(``expected.json``), and every score that is not ok must say the trace lacked the data."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ragpulse.metrics import DEFAULT_EMBEDDING_METRICS
from tests.tasks.ingest.adapters.conftest import copy_with_mtime

AGENTS = Path(__file__).parents[1] / "fixtures" / "agents"
DAY = dt.date(2026, 11, 20)
EXPECTED: list[dict[str, Any]] = json.loads((AGENTS / "expected.json").read_text(encoding="utf-8"))
LANGFUSE_EXPORT = AGENTS / "langfuse" / "bucket" / "langfuse-exports" / "cmagent0events00000000002"
SOURCES = {
    "openinference": ("openinference", AGENTS / "openinference"),
    "langsmith": ("langsmith", AGENTS / "langsmith"),
    "openllmetry": ("otel-genai", AGENTS / "otel-genai"),
    "langfuse": ("langfuse", LANGFUSE_EXPORT),
}
LABEL_FREE = (
    "latency_ms", "retrieval_latency_ms", "generation_latency_ms", "input_tokens", "output_tokens", "cost_usd",
    "error", "empty_retrieval", "answer_length", "retrieval_steps", "refusal", *DEFAULT_EMBEDDING_METRICS,
)  # fmt: skip
DATA_ABSENT = {
    "no_retrieval", "no_retrieval_latency", "no_contexts", "no_context_text", "no_answer", "no_usage",
    "no_token_counts", "no_model_name",
}  # fmt: skip
"""Reasons that say the trace did not log what the metric reads (and ``unpriced_model:<name>``: the price table does not
know the model, OpenLLMetry's ``unknown`` for the fake chat model); ``not_sampled``, ``no_embedder`` or a label's
absence would mean the run left out a trace it could have scored."""

pytestmark = pytest.mark.slow


def _evaluate(source: str, tmp_path: Path, api_url: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    trace_format, path = SOURCES[source]
    args = ["--source", str(path), "--format", trace_format]
    if source == "langfuse":  # hourly export windows, read by event time as docs/traces.md says
        bucket = copy_with_mtime(path, tmp_path / "bucket", dt.datetime(2026, 11, 20, 10, 5, tzinfo=dt.UTC).timestamp())
        args = ["--source", str(bucket), "--format", trace_format, "--partitioning", "event-time"]
    warehouse = tmp_path / "w.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGPULSE_", "OPENAI_"))}
    env.update(PREFECT_API_URL=api_url, PREFECT_SERVER_ANALYTICS_ENABLED="false")
    command = [sys.executable, "-m", "ragpulse.cli", "evaluate", "--json", "--date", str(DAY), *args]
    command += ["--warehouse", f"duckdb:///{warehouse}", "--work-dir", str(tmp_path / "work")]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600), warehouse


def _turn(question: str) -> dict[str, Any]:
    return next(e for e in EXPECTED if e["question"] == question)


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_default_run_on_a_tool_export_scores_every_turn_that_has_the_data(
    source: str, tmp_path: Path, prefect_api: str
) -> None:
    done, warehouse = _evaluate(source, tmp_path, prefect_api)
    assert done.returncode == 0, done.stderr[-3000:]
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute(
            "SELECT t.question, s.metric, s.status, s.value, s.reason FROM scores s JOIN traces t USING (trace_id) "
            f"WHERE s.metric IN ({', '.join(repr(m) for m in LABEL_FREE)})"
        ).fetchall()
    by_turn: dict[str, dict[str, tuple[str, float | None, str | None]]] = {}
    for question, metric, status, value, reason in rows:
        by_turn.setdefault(question, {})[metric] = (status, value, reason)
    assert sorted(by_turn) == sorted(e["question"] for e in EXPECTED)
    for question, scores in by_turn.items():
        turn = _turn(question)
        assert set(scores) == set(LABEL_FREE), question
        ok = {metric for metric, (status, *_) in scores.items() if status == "ok"}
        lacking = {metric: reason for metric, (status, _, reason) in scores.items() if status != "ok"}
        assert all(r in DATA_ABSENT or r.startswith("unpriced_model:") for r in lacking.values()), (question, lacking)
        # What every span of every tool holds: times, statuses, the answer.
        assert {"latency_ms", "generation_latency_ms", "error", "answer_length", "refusal"} <= ok, (question, lacking)
        assert scores["retrieval_steps"][:2] == ("ok", len(turn["steps"]))
        # The application's own log says whether a tool failed: a root or span error is the only way to 1.
        assert scores["error"][1] == float(any(call["error"] for call in turn["tool_calls"])), question
        assert scores["answer_length"][1] >= 5  # words, each Han or kana character one: never one per answer
        assert scores["refusal"][1] == 0.0  # every scripted answer answers
        retrieved, reached = bool(turn["steps"]), bool(turn["generator_steps"])
        assert ("empty_retrieval" in ok) == retrieved and ("retrieval_latency_ms" in ok) == retrieved, question
        assert ("embedding_context_relevance" in ok) == reached, (question, lacking)
        assert ("embedding_answer_support" in ok) == reached, (question, lacking)
        assert {"embedding_answer_relevance", "embedding_refusal"} <= ok, (question, lacking)
