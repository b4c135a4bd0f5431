"""The context judges on an agent's retrieval steps (tasks/judge/step_judge.py), through the real client and the
scripted server: one request per turn for context_relevance, step by step for context_precision, the turn's sample,
a failed call failing the steps it covered, and a step row that is its turn's row never asked twice (Chinese)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ragpulse.metrics import MetricResult, Status, TraceBatch
from ragpulse.metrics.judge import JudgeContext, JudgeMetric, judge_batch
from ragpulse.metrics.registry import build_judge_metrics, parse_metrics
from ragpulse.tasks.core.types import StepScores
from ragpulse.tasks.judge.client import OpenAIJudge
from ragpulse.tasks.judge.config import JudgeConfig
from ragpulse.tasks.judge.credentials import JudgeSecrets
from ragpulse.tasks.judge.plan import expand_sample, sample_batch, scorer_prompt_versions
from ragpulse.tasks.judge.step_judge import judge_steps
from tests.doubles.judge_server import Fault, JudgeServer

QUESTION = "长城有多长？"
WALL = {"id": "w1", "text": "长城全长约两万一千公里。"}
RIVER = {"id": "r1", "text": "黄河是中国第二长的河流。"}
STEPS = [("长城 长度", [WALL]), ("长城 历史", [RIVER]), ("长城 公里", [WALL, RIVER])]


def _records() -> list[dict[str, Any]]:
    multi = {
        "trace_id": "multi", "question": QUESTION, "answer": "约两万一千公里。", "reference": "两万一千公里",
        "contexts": [WALL, RIVER], "language": "zh",
        "steps": [{"id": f"s{i}", "query": q, "contexts": docs} for i, (q, docs) in enumerate(STEPS)],
    }  # fmt: skip
    single = {
        **multi, "trace_id": "single", "contexts": [WALL],
        "steps": [{"id": "only", "query": QUESTION, "contexts": [WALL]}],
    }  # fmt: skip
    plain = {**multi, "trace_id": "plain", "question": "黄河有多长？", "steps": None}
    return [multi, single, plain]


def _data(body: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(body["messages"][-1]["content"])
    return value


def _kind(body: dict[str, Any]) -> str:
    name: str = body["response_format"]["json_schema"]["name"]
    return name


def _relevant(contexts: list[str]) -> list[str]:
    return [text for text in contexts if "长城" in text]


def scripted(body: dict[str, Any]) -> dict[str, Any]:
    kind, data = _kind(body), _data(body)
    if kind == "context_relevance_relevant_statements":
        return {"relevant_statements": _relevant(data["contexts"])}
    if kind == "context_relevance_relevant_statements_by_step":
        return {"steps": [{"relevant_statements": _relevant(step["contexts"])} for step in data["steps"]]}
    if kind.startswith("context_precision"):
        return {"verdicts": [{"reason": "r", "useful": int("长城" in text)} for text in data["contexts"]]}
    raise AssertionError(f"unexpected judge request {kind!r}")


def _judge(server: JudgeServer, cache: Path) -> OpenAIJudge:
    settings = JudgeConfig(
        base_url=server.base_url, model=f"judge-{uuid.uuid4().hex[:8]}", timeout_seconds=5.0, max_retries=0,
        cache_url=str(cache),
    )  # fmt: skip
    return OpenAIJudge(settings, secrets=JudgeSecrets(api_key="sk-test-steps"))


Usage = dict[str, dict[str, Any]]


def _run(
    server: JudgeServer, cache: Path, names: list[str], mask: list[bool], against: list[Any]
) -> tuple[dict[str, MetricResult], tuple[StepScores, ...], Usage]:
    """Turns first, then steps, as the judge task runs them; and the judge's usage."""
    traces = TraceBatch.from_records(_records())
    metrics: list[JudgeMetric] = build_judge_metrics(parse_metrics(names), {})
    sample = np.array(mask)

    async def go() -> tuple[dict[str, MetricResult], tuple[StepScores, ...], Usage]:
        client = _judge(server, cache)
        try:
            context = JudgeContext(judge=client)
            raw = await judge_batch(sample_batch(traces, sample), metrics, context)
            turns = {name: expand_sample(result, sample) for name, result in raw.items()}
            steps = await judge_steps(
                traces, sample, metrics, turns, context, against, scorer_prompt_versions(metrics, {})
            )
            return turns, steps, client.usage.snapshot()
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_the_steps_of_a_turn_cost_one_request_and_a_turns_own_step_none(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    judge_server.responder = scripted
    turns, steps, usage = _run(
        judge_server, tmp_path / "cache", ["context_relevance"], [True, True, True], ["step_query"]
    )
    (scores,) = steps
    assert list(scores.trace_ids) == ["multi", "multi", "multi", "single"]
    assert list(scores.trace_rows) == [0, 0, 0, 1] and list(scores.step_ids) == ["s0", "s1", "s2", "only"]
    assert list(scores.results["context_relevance"].values) == [1.0, 0.0, 1.0, 1.0]
    assert scores.prompt_versions["context_relevance"].startswith("context_relevance/")
    bodies = [r.body for r in judge_server.chat_requests()]
    by_step = [_data(b) for b in bodies if _kind(b).endswith("_by_step")]
    assert [[step["query"] for step in d["steps"]] for d in by_step] == [[q for q, _ in STEPS]]
    # Three turns, one request for the three steps, and none for the one step that asks what its turn asked.
    assert len(bodies) == 4
    # Not even the call cache was asked: the turn's outcome was taken as it was.
    assert usage["context_relevance"]["http_calls"] == 4 and usage["context_relevance"]["cache_hits"] == 0
    assert list(turns["context_relevance"].values) == [1.0, 1.0, 1.0]


def test_steps_row_by_row_against_the_question_with_the_turns_sample(judge_server: JudgeServer, tmp_path: Path) -> None:
    judge_server.responder = scripted
    _, steps, _ = _run(
        judge_server, tmp_path / "cache", ["context_precision", "context_relevance"], [True, False, True],
        ["step_query", "question"],
    )  # fmt: skip
    assert [s.against for s in steps] == ["step_query", "question"]
    for scores in steps:
        precision = scores.results["context_precision"]
        assert list(precision.status) == [Status.OK] * 3 + [Status.NOT_APPLICABLE]
        assert precision.reasons[3] == "not_sampled"
        assert list(precision.values[:3]) == [1.0, 0.0, 1.0]  # the wall is useful, the river not
    bodies = [_data(r.body) for r in judge_server.chat_requests() if _kind(r.body).endswith("_by_step")]
    # Against the question, the three steps are asked about the user's question.
    assert [[step["query"] for step in d["steps"]] for d in bodies] in (
        [[q for q, _ in STEPS], [QUESTION] * 3], [[QUESTION] * 3, [q for q, _ in STEPS]]
    )  # fmt: skip


def test_a_failed_turn_request_fails_each_of_its_steps_with_the_reason(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    judge_server.responder = scripted
    judge_server.fault_rule = lambda body: Fault.server_error() if _kind(body).endswith("_by_step") else None
    _, (scores,), _ = _run(judge_server, tmp_path / "cache", ["context_relevance"], [True, True, True], ["step_query"])
    result = scores.results["context_relevance"]
    assert list(result.status) == [Status.FAILED] * 3 + [Status.OK]
    assert np.isnan(result.values[:3]).all() and len(set(result.reasons[:3])) == 1 and result.reasons[0]


def test_no_step_is_asked_when_its_turn_is_not_sampled(judge_server: JudgeServer, tmp_path: Path) -> None:
    judge_server.responder = scripted
    _, (scores,), _ = _run(judge_server, tmp_path / "cache", ["context_relevance"], [False] * 3, ["step_query"])
    assert set(scores.results["context_relevance"].reasons) == {"not_sampled"}
    assert judge_server.chat_requests() == []
