"""An agent's day through the evaluate flow: retrieval steps scored per step, a follow-up turn judged with its
earlier turns, a conversation judged once, and the steps of traces the day drops left out. Real Prefect, real
DuckDB, the scripted judge over HTTP through the real openai client; the traces are Japanese."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, QualityConfig, ScoringConfig, SourceConfig
from tests.doubles.judge_server import JudgeServer

DAY = dt.date(2026, 11, 20)
METRICS = ("context_relevance", "document_mrr", "retrieval_steps", "agent_goal_accuracy")

FIRST_Q = "東京タワーの高さは何メートルですか？"
FIRST_A = "東京タワーの高さは333メートルです。"
TOWER = {"id": "d-height", "text": "東京タワーの高さは333メートルです。"}
FOLLOW_Q = "それはいつ完成しましたか？"
FOLLOW_A = "1958年に完成しました。"
QUERIES = ["東京タワー 完成年", "東京タワー 建設の歴史", "東京タワー 開業 1958年"]
STEP_DOCS = [
    [
        {"id": "d-built", "text": "東京タワーは1958年12月に完成した。"},
        {"id": "d-osaka", "text": "通天閣は大阪にある。"},
    ],
    [{"id": "d-sky", "text": "東京スカイツリーは2012年に開業した。"}],
    [
        {"id": "d-open", "text": "東京タワーは1958年12月23日に開業した。"},
        {"id": "d-built", "text": "東京タワーは1958年12月に完成した。"},
    ],
]


def _records() -> list[dict[str, Any]]:
    """The follow-up first in the file (turns are ordered by timestamp), then the opening turn, a repeat of its
    trace id and a turn the input suite refuses (question over the limit), both with steps of their own."""
    follow_up = {
        "trace_id": "t-follow", "timestamp": "2026-11-20T09:05:00Z", "question": FOLLOW_Q, "answer": FOLLOW_A,
        "contexts": [STEP_DOCS[0][0], STEP_DOCS[2][0]], "relevant_context_ids": ["d-built", "d-open"],
        "language": "ja", "conversation_id": "conv-1",
        "history": [{"role": "user", "content": FIRST_Q}, {"role": "assistant", "content": FIRST_A}],
        "steps": [{"id": f"s{i}", "kind": "tool", "name": "search", "query": q, "contexts": docs}
                  for i, (q, docs) in enumerate(zip(QUERIES, STEP_DOCS, strict=True))],
        "tool_calls": [{"name": "search", "arguments": {"query": q}, "step": i} for i, q in enumerate(QUERIES)],
    }  # fmt: skip
    opening = {
        "trace_id": "t-open", "timestamp": "2026-11-20T09:00:00Z", "question": FIRST_Q, "answer": FIRST_A,
        "contexts": [TOWER], "relevant_context_ids": ["d-height"], "language": "ja", "conversation_id": "conv-1",
        "history": [], "steps": [{"id": "s-open", "kind": "retriever", "query": FIRST_Q, "contexts": [TOWER]}],
    }  # fmt: skip
    repeated = {
        **opening,
        "question": "重複した記録です",
        "steps": [{"id": "dup-step", "query": "重複", "contexts": [TOWER]}],
    }
    refused = {
        **opening, "trace_id": "t-long", "timestamp": "2026-11-20T09:10:00Z", "question": "長" * 300,
        "steps": [{"id": "long-step", "query": "長い質問", "contexts": [TOWER]}],
    }  # fmt: skip
    return [follow_up, opening, repeated, refused]


def _data(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON data of a judge request (its user message)."""
    value: dict[str, Any] = json.loads(body["messages"][-1]["content"])
    return value


def _kind(body: dict[str, Any]) -> str:
    name: str = body["response_format"]["json_schema"]["name"]
    return name


def scripted(body: dict[str, Any]) -> dict[str, Any]:
    """Relevant: a step's or a turn's first document whenever it mentions 1958 or 333 (the second step's does
    not); the goal judge says the conversation reached its goal."""
    kind, data = _kind(body), _data(body)

    def relevant(contexts: list[str]) -> list[str]:
        return [text for text in contexts[:1] if "1958" in text or "333" in text]

    if kind == "context_relevance_relevant_statements":
        return {"relevant_statements": relevant(data["contexts"])}
    if kind == "context_relevance_relevant_statements_by_step":
        return {"steps": [{"relevant_statements": relevant(step["contexts"])} for step in data["steps"]]}
    if kind == "agent_goal_accuracy_goal":
        return {"user_goal": "東京タワーの高さと完成年を知る", "end_state": "高さと完成年を答えた"}
    if kind == "agent_goal_accuracy_verdict":
        return {"reason": "目標は達成された。", "verdict": 1}
    raise AssertionError(f"unexpected judge request {kind!r}")


@pytest.fixture
def judge_env(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> JudgeServer:
    judge_server.responder = scripted
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "judge-agent")
    monkeypatch.setenv("RAGPULSE_JUDGE_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", "sk-agent-test")
    monkeypatch.setenv("RAGPULSE_JUDGE_CACHE_URL", str(tmp_path / "judge-cache"))
    return judge_server


def _rows(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.mark.slow
def test_an_agents_day_is_scored_per_step_per_turn_and_per_conversation(tmp_path: Path, judge_env: JudgeServer) -> None:
    folder = tmp_path / "traces" / f"dt={DAY}"
    folder.mkdir(parents=True)
    lines = [json.dumps(record, ensure_ascii=False) for record in _records()]
    (folder / "agent.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    warehouse = tmp_path / "w.duckdb"
    summary = evaluate_partition(
        date=DAY,
        source=SourceConfig(url=str(tmp_path / "traces")),
        scoring=ScoringConfig(metrics=METRICS),
        quality=QualityConfig(max_question_chars=100),
        output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
    )

    # Each of the three steps is judged on its own query and documents, all three in one request.
    requests = [r.body for r in judge_env.chat_requests()]
    by_step = [_data(b) for b in requests if _kind(b) == "context_relevance_relevant_statements_by_step"]
    assert len(by_step) == 1
    assert [step["query"] for step in by_step[0]["steps"]] == QUERIES
    assert [step["contexts"] for step in by_step[0]["steps"]] == [[d["text"] for d in docs] for docs in STEP_DOCS]
    step_values = _rows(
        warehouse,
        "SELECT step_index, step_id, against, value, prompt_version FROM step_scores "
        "WHERE trace_id = 't-follow' AND metric = 'context_relevance' ORDER BY step_index",
    )
    assert [(i, sid, against, value) for i, sid, against, value, _ in step_values] == [
        (0, "s0", "step_query", 1.0), (1, "s1", "step_query", 0.0), (2, "s2", "step_query", 1.0),
    ]  # fmt: skip
    assert step_values[0][4] is not None  # judge rows say their prompt
    mrr = _rows(warehouse, "SELECT step_index, value FROM step_scores WHERE metric = 'document_mrr' "
                           "AND trace_id = 't-follow' ORDER BY step_index")  # fmt: skip
    assert mrr == [(0, 1.0), (1, 0.0), (2, 1.0)]

    # The follow-up turn's request carries the earlier turn; the opening turn's carries none.
    single = [_data(b) for b in requests if _kind(b) == "context_relevance_relevant_statements"]
    follow = [d for d in single if d["question"] == FOLLOW_Q]
    assert len(follow) == 1 and follow[0]["previous_turns"] == [
        {"role": "user", "content": FIRST_Q}, {"role": "assistant", "content": FIRST_A},
    ]  # fmt: skip
    # The opening turn's one step asks what the turn asks: one request serves both.
    opening = [d for d in single if d["question"] == FIRST_Q]
    assert len(opening) == 1 and "previous_turns" not in opening[0]
    assert _rows(warehouse, "SELECT value FROM step_scores WHERE trace_id = 't-open' AND metric = 'context_relevance'"
                 ) == [(1.0,)]  # fmt: skip
    assert _rows(warehouse, "SELECT value FROM scores WHERE trace_id = 't-open' AND metric = 'context_relevance'") == [
        (1.0,)
    ]

    # The repeated record and the refused turn keep no step scores (they were judged before the day dropped them).
    step_ids = {sid for (sid,) in _rows(warehouse, "SELECT DISTINCT step_id FROM step_scores")}
    assert step_ids == {"s0", "s1", "s2", "s-open"}
    assert any(d["question"] == "重複" for d in single)  # judged, then dropped with its trace

    # The conversation: judged once, its two kept turns in timestamp order, the refused one left out.
    goals = [_data(b) for b in requests if _kind(b) == "agent_goal_accuracy_goal"]
    assert len(goals) == 1
    turns = goals[0]["conversation"]
    assert [(t["user"], t["answer"]) for t in turns] == [(FIRST_Q, FIRST_A), (FOLLOW_Q, FOLLOW_A)]
    assert [c["arguments"] for c in turns[1]["tool_calls"]] == [{"query": q} for q in QUERIES]
    assert _rows(
        warehouse,
        "SELECT conversation_id, metric, value, status, n_turns, first_trace_id, last_trace_id, judge_model "
        "FROM conversation_scores",
    ) == [("conv-1", "agent_goal_accuracy", 1.0, "ok", 2, "t-open", "t-follow", "judge-agent")]

    # Every call counted: the server's requests are the run's, metric by metric.
    counts: dict[str, int] = {}
    for body in requests:
        metric = "agent_goal_accuracy" if _kind(body).startswith("agent_goal") else "context_relevance"
        counts[metric] = counts.get(metric, 0) + 1
    assert {m: summary.judge_usage[m]["http_calls"] for m in counts} == counts
    assert counts["agent_goal_accuracy"] == 2
    assert _rows(warehouse, "SELECT trace_id, value FROM scores WHERE metric = 'retrieval_steps' ORDER BY 1") == [
        ("t-follow", 3.0), ("t-open", 1.0),
    ]  # fmt: skip
