"""One LangGraph application's agent day as four tracers really exported it (tests/fixtures/agents) through the
whole evaluate flow into DuckDB, checked in SQL against what the application itself logged (``expected.json``):
every retrieval step in order with its id, the user's question and language per turn, the three conversations with
their two turns, the agent scores per turn, context relevance per step, agent goal accuracy per conversation, and
the judge's requests (a turn's steps in one request, a follow-up judged with its earlier turn). Langfuse runs
through ``ragpulse evaluate`` in a subprocess, twice (the second run publishes nothing new); the others through the
flow function. Real Prefect, real DuckDB, the scripted judge over HTTP through the real openai client."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.metrics import DEFAULT_METRICS
from ragpulse.metrics.registry import MetricRequest
from ragpulse.tasks.config import OutputConfig, ScoringConfig, SourceConfig, TraceFormat
from tests.doubles.judge_server import JudgeServer, running_judge_server
from tests.tasks.ingest.adapters.conftest import copy_with_mtime

AGENTS = Path(__file__).parents[1] / "fixtures" / "agents"
DAY = dt.date(2026, 11, 20)
EXPECTED: list[dict[str, Any]] = json.loads((AGENTS / "expected.json").read_text(encoding="utf-8"))
AGENT_METRICS = ("context_relevance", "retrieval_steps", "tool_errors", "tool_call_accuracy", "agent_goal_accuracy")
METRICS = tuple(dict.fromkeys((*DEFAULT_METRICS, *AGENT_METRICS)))  # retrieval_steps is a default too
TURN_METRICS = len(METRICS) - 1
"""agent_goal_accuracy scores conversations, not turns: every other metric has one row per trace."""
STEP_METRICS = {m for m in DEFAULT_METRICS if MetricRequest.parse(m).per_step} | {"context_relevance"}
"""Scored per step as well: the ranking families and the context judges (design §4)."""
SOURCES: dict[str, tuple[TraceFormat, Path]] = {
    "openinference": ("openinference", AGENTS / "openinference"),
    "langsmith": ("langsmith", AGENTS / "langsmith"),
    "openllmetry": ("otel-genai", AGENTS / "otel-genai"),
    "langfuse": ("langfuse", AGENTS / "langfuse" / "bucket" / "langfuse-exports" / "cmagent0events00000000002"),
}
LOSES_REFERENCE_TOOL_CALLS = {"openllmetry"}
"""OpenLLMetry logs the run metadata's list of reference calls as an empty array (SOURCES.md)."""
REJECTED = "Unused accessories"
"""The corrective-RAG turn's first, rejected retrieval returns this document: the scripted judge finds nothing
relevant in that step, so its step score tells it apart from the accepted step."""
JUDGE_MODEL = "judge-agent-real"
KEY = tuple[str, int]

pytestmark = pytest.mark.slow


def scripted(body: dict[str, Any]) -> dict[str, Any]:
    """The first context of a turn or step is relevant, except in the rejected set; every goal is achieved."""
    kind = body["response_format"]["json_schema"]["name"]
    data = json.loads(body["messages"][-1]["content"])

    def relevant(contexts: list[str]) -> list[str]:
        return [] if any(text.startswith(REJECTED) for text in contexts) else contexts[:1]

    if kind == "context_relevance_relevant_statements":
        return {"relevant_statements": relevant(data["contexts"])}
    if kind == "context_relevance_relevant_statements_by_step":
        return {"steps": [{"relevant_statements": relevant(step["contexts"])} for step in data["steps"]]}
    if kind == "agent_goal_accuracy_goal":
        return {"user_goal": "learn about the company", "end_state": "the agent answered"}
    if kind == "agent_goal_accuracy_verdict":
        return {"reason": "answered", "verdict": 1}
    raise AssertionError(f"unexpected judge request {kind!r}")


@dataclass(frozen=True)
class Run:
    """One tracer's day evaluated: the warehouse, the summary as a mapping, the judge's request bodies, and the
    ``(scenario, turn)`` of each trace id (paired by start time, as the adapters' tests do)."""

    source: str
    warehouse: Path
    summary: dict[str, Any]
    requests: list[dict[str, Any]]
    turns: dict[str, KEY]

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        with duckdb.connect(str(self.warehouse), read_only=True) as con:
            return con.execute(query).fetchall()


def _start(turn: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(turn["start_time"].replace("Z", "+00:00"))


def _pair(warehouse: Path) -> dict[str, KEY]:
    """Each published trace with the expected turn that started at the same time (turns start a minute or more
    apart; an export's own times are the real elapsed milliseconds)."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute("SELECT trace_id, timestamp FROM traces").fetchall()
    paired = {}
    for trace_id, timestamp in rows:
        turn = min(EXPECTED, key=lambda e: abs(_start(e) - timestamp))
        assert abs(_start(turn) - timestamp) < dt.timedelta(seconds=30), trace_id
        paired[trace_id] = (turn["scenario"], turn["turn"])
    return paired


def _cli(args: list[str], tmp_path: Path, api_url: str, judge: JudgeServer) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGPULSE_"))}
    env.update(
        PREFECT_API_URL=api_url, PREFECT_SERVER_ANALYTICS_ENABLED="false", RAGPULSE_JUDGE_API_KEY="sk-agents-real",
        RAGPULSE_JUDGE_CACHE_URL=str(tmp_path / "judge-cache"),
    )  # fmt: skip
    command = [sys.executable, "-m", "ragpulse.cli", "evaluate", "--json", "--date", str(DAY), *args]
    command += ["--judge-model", JUDGE_MODEL, "--judge-base-url", judge.base_url, "--metrics", ",".join(METRICS)]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def _through_the_cli(tmp_path: Path, api_url: str, judge: JudgeServer) -> tuple[Run, dict[str, Any]]:
    """Langfuse's hourly export windows read by event time (files modified at 10:05 UTC), as a user runs it:
    ``ragpulse evaluate``, twice. Returns the first run and the second run's summary and row counts."""
    trace_format, path = SOURCES["langfuse"]
    bucket = copy_with_mtime(path, tmp_path / "bucket", dt.datetime(2026, 11, 20, 10, 5, tzinfo=dt.UTC).timestamp())
    warehouse = tmp_path / "w.duckdb"
    args = [
        "--source", str(bucket), "--format", trace_format, "--partitioning", "event-time",
        "--warehouse", f"duckdb:///{warehouse}", "--work-dir", str(tmp_path / "work"),
    ]  # fmt: skip
    done = _cli(args, tmp_path, api_url, judge)
    assert done.returncode == 0, done.stderr[-3000:]
    requests = [r.body for r in judge.chat_requests()]
    run = Run("langfuse", warehouse, json.loads(done.stdout), requests, _pair(warehouse))
    counts = _counts(run)
    again = _cli(args, tmp_path, api_url, judge)
    assert again.returncode == 0, again.stderr[-3000:]
    return run, {"summary": json.loads(again.stdout), "counts": counts, "recounted": _counts(run),
                 "new_requests": len(judge.chat_requests()) - len(requests)}  # fmt: skip


def _through_the_flow(tmp_path: Path, source: str, judge: JudgeServer) -> Run:
    trace_format, path = SOURCES[source]
    warehouse = tmp_path / "w.duckdb"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAGPULSE_JUDGE_MODEL", JUDGE_MODEL)
        env.setenv("RAGPULSE_JUDGE_BASE_URL", judge.base_url)
        env.setenv("RAGPULSE_JUDGE_API_KEY", "sk-agents-real")
        env.setenv("RAGPULSE_JUDGE_CACHE_URL", str(tmp_path / "judge-cache"))
        summary = evaluate_partition(
            date=DAY, source=SourceConfig(url=str(path), format=trace_format), scoring=ScoringConfig(metrics=METRICS),
            output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
        )  # fmt: skip
    requests = [r.body for r in judge.chat_requests()]
    return Run(source, warehouse, summary.to_dict(), requests, _pair(warehouse))


TABLES = ("traces", "steps", "scores", "step_scores", "conversation_scores", "runs")


def _counts(run: Run) -> dict[str, int]:
    return {table: run.sql(f"SELECT count(*) FROM {table}")[0][0] for table in TABLES}


@dataclass(frozen=True)
class Evaluated:
    run: Run
    rerun: dict[str, Any] | None
    """The CLI's second run: its summary, the row counts before and after it, the judge requests it made."""


@pytest.fixture(scope="module", params=sorted(SOURCES))
def evaluated(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, prefect_api: str
              ) -> Evaluated:  # fmt: skip
    """Each tracer's day evaluated once for every test of this module (the judge's requests copied right away)."""
    source: str = request.param
    tmp_path = tmp_path_factory.mktemp(f"agents-{source}")
    judge = running_judge_server()
    judge.reset()
    judge.responder = scripted
    try:
        if source == "langfuse":
            return Evaluated(*_through_the_cli(tmp_path, prefect_api, judge))
        return Evaluated(_through_the_flow(tmp_path, source, judge), None)
    finally:
        judge.reset()


def _by_turn(run: Run, rows: list[tuple[Any, ...]]) -> dict[KEY, list[tuple[Any, ...]]]:
    """Rows whose first column is a trace id, grouped by the expected turn, in query order."""
    grouped: dict[KEY, list[tuple[Any, ...]]] = {key: [] for key in run.turns.values()}
    for trace_id, *rest in rows:
        grouped[run.turns[trace_id]].append(tuple(rest))
    return grouped


def _expected(key: KEY) -> dict[str, Any]:
    return next(e for e in EXPECTED if (e["scenario"], e["turn"]) == key)


def test_every_turn_is_published_once_and_the_run_scored(evaluated: Evaluated) -> None:
    run = evaluated.run
    assert sorted(run.turns.values()) == sorted((e["scenario"], e["turn"]) for e in EXPECTED)
    assert run.summary["outcome"] == "scored"
    assert (run.summary["n_traces"], run.summary["n_quarantined"]) == (len(EXPECTED), 0)
    n_steps = sum(len(e["steps"]) for e in EXPECTED)
    assert {m for (m,) in run.sql("SELECT DISTINCT metric FROM step_scores")} == STEP_METRICS
    assert _counts(run) == {
        "traces": len(EXPECTED), "steps": n_steps, "scores": len(EXPECTED) * TURN_METRICS,
        "step_scores": n_steps * len(STEP_METRICS), "conversation_scores": 3, "runs": 1,
    }  # fmt: skip
    duplicates = {
        "scores": "trace_id, metric",
        "steps": "trace_id, step_index",
        "step_scores": "trace_id, step_index, metric, against",
        "conversation_scores": "conversation_id, metric",
    }
    for table, key in duplicates.items():
        assert run.sql(f"SELECT count(*) FROM (SELECT {key} FROM {table} GROUP BY ALL HAVING count(*) > 1)") == [
            (0,)
        ], table
    # Every judge call the server answered is one the summary counted.
    assert sum(usage["http_calls"] for usage in run.summary["judge_usage"].values()) == len(run.requests)


def test_a_second_cli_run_publishes_nothing_new(evaluated: Evaluated) -> None:
    if evaluated.rerun is None:
        pytest.skip("the command line runs Langfuse's day twice; the others run through the flow function once")
    rerun, first = evaluated.rerun, evaluated.run.summary
    assert rerun["summary"]["outcome"] == "unchanged"
    assert rerun["summary"]["unchanged_since"] == first["run_id"]
    assert rerun["recounted"] == rerun["counts"]  # not even a run row: the first run's publication stands
    assert rerun["new_requests"] == 0  # every judge reply came from the cache
    for table in ("traces", "steps", "scores", "step_scores", "conversation_scores"):
        assert evaluated.run.sql(f"SELECT DISTINCT run_id FROM {table}") == [(first["run_id"],)], table


def test_steps_are_the_agents_retrievals_in_order(evaluated: Evaluated) -> None:
    """Each turn's steps with their own queries in the order the agent ran them (the two parallel calls of
    scenario 2 in either order), each with its source id; the corrective-RAG turn keeps its rejected set as a step."""
    run = evaluated.run
    steps = _by_turn(run, run.sql("SELECT trace_id, step_index, step_id, kind, query, n_contexts FROM steps "
                                  "ORDER BY 1, 2"))  # fmt: skip
    for key, rows in steps.items():
        expected = _expected(key)
        assert [index for index, *_ in rows] == list(range(len(expected["steps"]))), key
        got = [(kind, query, n) for _, _, kind, query, n in rows]
        want = [(step["kind"], step["query"], len(step["document_ids"])) for step in expected["steps"]]
        if expected["parallel_tool_calls"]:
            got, want = sorted(got), sorted(want)
        assert got == want, key
        assert all(step_id for _, step_id, *_ in rows), key
    assert [query for *_, query, _ in steps[("s3_corrective_rag", 1)]] == [
        "Can I return a Polaris if it breaks?", "Nordlicht robot warranty repair",
    ]  # fmt: skip
    assert steps[("s5_chitchat_no_retrieval", 1)] == [] and steps[("s9_tool_error_recovery", 1)] == []


def test_traces_hold_the_users_question_language_and_thread(evaluated: Evaluated) -> None:
    run = evaluated.run
    rows = _by_turn(run, run.sql("SELECT trace_id, question, language, conversation_id FROM traces"))
    for key, ((question, language, conversation_id),) in rows.items():
        expected = _expected(key)
        assert (question, language, conversation_id) == (
            expected["question"], expected["language"], expected["conversation_id"],
        ), key  # fmt: skip
    sub_queries = {step["query"] for e in EXPECTED for step in e["steps"]} - {e["question"] for e in EXPECTED}
    assert not {question for (question,) in run.sql("SELECT question FROM traces")} & sub_queries


def test_each_conversation_has_its_two_turns_in_order(evaluated: Evaluated) -> None:
    run = evaluated.run
    threads = sorted({e["conversation_id"] for e in EXPECTED if e["conversation_id"]})
    assert len(threads) == 3
    for thread in threads:
        turns = run.sql(
            "SELECT turn_number, trace_id, question FROM conversation_turns "
            f"WHERE conversation_id = '{thread}' ORDER BY turn_number"
        )
        want = sorted((e for e in EXPECTED if e["conversation_id"] == thread), key=lambda e: e["turn"])
        assert [(n, q) for n, _, q in turns] == [(e["turn"], e["question"]) for e in want], thread
        assert [run.turns[t] for _, t, _ in turns] == [(e["scenario"], e["turn"]) for e in want]
        ((n_turns, trace_ids),) = run.sql(
            f"SELECT n_turns, trace_ids FROM conversations WHERE conversation_id = '{thread}'"
        )
        assert (n_turns, list(trace_ids)) == (2, [t for _, t, _ in turns])
    assert sorted(c for (c,) in run.sql("SELECT conversation_id FROM conversations")) == threads


def test_agent_scores_per_turn(evaluated: Evaluated) -> None:
    """retrieval_steps counts the turn's steps (0: it did not retrieve); tool_errors counts its failed tool calls
    (scenario 9's first exchange_rate call); without tool calls or reference calls, not applicable, saying which."""
    run = evaluated.run
    agent = "'retrieval_steps', 'tool_errors', 'tool_call_accuracy'"
    query = f"SELECT trace_id, metric, value, status, reason FROM scores WHERE metric IN ({agent})"
    rows = _by_turn(run, run.sql(query))
    for key, scores in rows.items():
        expected, got = _expected(key), {metric: tuple(rest) for metric, *rest in scores}
        assert got["retrieval_steps"] == (len(expected["steps"]), "ok", None), key
        if expected["tool_calls"]:
            errors = sum(call["error"] is not None for call in expected["tool_calls"])
            assert got["tool_errors"] == (errors, "ok", None), key
        else:
            assert got["tool_errors"] == (None, "not_applicable", "no_tool_calls"), key
        if not expected["reference_tool_calls"]:
            reason = "no_reference_tool_calls" if expected["tool_calls"] else "no_tool_calls"
            assert got["tool_call_accuracy"] == (None, "not_applicable", reason), key
    assert ("tool_errors", 1.0, "ok", None) in rows[("s9_tool_error_recovery", 1)]


def test_tool_call_accuracy_against_the_reference_calls(evaluated: Evaluated) -> None:
    """Scenario 1 made exactly the two calls its metadata names as reference: accuracy 1 (OpenInference's tool span
    logs only the query text: the arguments are the model's call of the same id). OpenLLMetry loses the reference
    calls, so there is nothing to compare with."""
    run = evaluated.run
    rows = _by_turn(run, run.sql("SELECT trace_id, value, status, reason FROM scores "
                                 "WHERE metric = 'tool_call_accuracy'"))  # fmt: skip
    ((value, status, reason),) = rows[("s1_react_multihop", 1)]
    if run.source in LOSES_REFERENCE_TOOL_CALLS:
        assert (status, reason) == ("not_applicable", "no_reference_tool_calls")
    else:
        assert (value, status, reason) == (1.0, "ok", None)


def test_context_relevance_per_step_on_its_own_query(evaluated: Evaluated) -> None:
    """One row per step against its own query, with the step's id; the rejected corrective-RAG set scores 0 and the
    accepted one more, and the turn (scored on what the generator received) scores as the accepted set."""
    run = evaluated.run
    rows = _by_turn(run, run.sql(
        "SELECT s.trace_id, s.step_index, s.step_id = p.step_id, s.against, s.value, s.status, s.judge_model "
        "FROM step_scores s JOIN steps p USING (trace_id, step_index) WHERE s.metric = 'context_relevance' "
        "ORDER BY 1, 2"))  # fmt: skip
    for key, steps in rows.items():
        n_steps = len(_expected(key)["steps"])
        assert [(i, same, against, status, model) for i, same, against, _, status, model in steps] == [
            (i, True, "step_query", "ok", JUDGE_MODEL) for i in range(n_steps)
        ], key
    crag = [value for *_, value, _, _ in rows[("s3_corrective_rag", 1)]]
    assert crag[0] == 0.0 and crag[1] > 0
    turn = run.sql("SELECT trace_id, value FROM scores WHERE metric = 'context_relevance'")
    assert {run.turns[t]: v for t, v in turn}[("s3_corrective_rag", 1)] == crag[1]


def test_agent_goal_accuracy_once_per_conversation(evaluated: Evaluated) -> None:
    run = evaluated.run
    rows = run.sql(
        "SELECT c.conversation_id, c.value, c.status, c.n_turns, c.first_trace_id, c.last_trace_id, c.judge_model, "
        "v.trace_ids FROM conversation_scores c JOIN conversations v USING (conversation_id) "
        "WHERE c.metric = 'agent_goal_accuracy' ORDER BY 1"
    )
    assert [r[0] for r in rows] == sorted({e["conversation_id"] for e in EXPECTED if e["conversation_id"]})
    for _, value, status, n_turns, first, last, model, trace_ids in rows:
        assert (value, status, n_turns, model) == (1.0, "ok", 2, JUDGE_MODEL)
        assert [first, last] == list(trace_ids)
    goals = [json.loads(b["messages"][-1]["content"]) for b in run.requests if _kind(b) == "agent_goal_accuracy_goal"]
    by_first_question = {goal["conversation"][0]["user"]: goal["conversation"] for goal in goals}
    assert len(goals) == 3 == len(by_first_question)
    for thread in {e["conversation_id"] for e in EXPECTED if e["conversation_id"]}:
        turns = sorted((e for e in EXPECTED if e["conversation_id"] == thread), key=lambda e: e["turn"])
        sent = by_first_question[turns[0]["question"]]
        assert [(t["user"], t["answer"]) for t in sent] == [(e["question"], e["answer"]) for e in turns]


def _kind(body: dict[str, Any]) -> str:
    name: str = body["response_format"]["json_schema"]["name"]
    return name


def _data(body: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(body["messages"][-1]["content"])
    return value


def test_judge_requests_batch_a_turns_steps_and_carry_earlier_turns(evaluated: Evaluated) -> None:
    run = evaluated.run
    by_step = [_data(b) for b in run.requests if _kind(b) == "context_relevance_relevant_statements_by_step"]
    two_hop = [d for d in by_step if any(s["query"] == "Polaris picker manufacturer" for s in d["steps"])]
    assert len(two_hop) == 1
    assert [s["query"] for s in two_hop[0]["steps"]] == ["Polaris picker manufacturer", "Nordlicht Robotics founded"]
    # One request per turn of several steps: scenarios 1, 2 and 3.
    assert len(by_step) == sum(len(e["steps"]) > 1 for e in EXPECTED) == 3

    single = [b for b in run.requests if _kind(b) == "context_relevance_relevant_statements"]
    for follow_up in (e for e in EXPECTED if e["turn"] == 2):
        opening = next(e for e in EXPECTED if (e["scenario"], e["turn"]) == (follow_up["scenario"], 1))
        (request,) = [b for b in single if _data(b)["question"] == follow_up["question"]]
        assert _data(request)["previous_turns"] == [
            {"role": "user", "content": opening["question"]}, {"role": "assistant", "content": opening["answer"]},
        ], follow_up["scenario"]  # fmt: skip
        assert f"({follow_up['language']})" in request["messages"][0]["content"]
    openings = [b for b in single if _data(b)["question"] in {e["question"] for e in EXPECTED if e["turn"] == 1}]
    assert openings and not any("previous_turns" in _data(b) for b in openings)
