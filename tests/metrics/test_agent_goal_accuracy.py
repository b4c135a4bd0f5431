"""metrics/agent_goal_accuracy.py: ragas' AgentGoalAccuracyWithoutReference, one score per conversation."""

from __future__ import annotations

import asyncio
import json
import math

import numpy as np
import pytest

from ragpulse.metrics import MetricRequest, Status, ToolCall
from ragpulse.metrics._prompting import DATA_RULE, language_rule
from ragpulse.metrics.agent_goal_accuracy import (
    COMPARE_INSTRUCTIONS,
    GOAL_INSTRUCTIONS,
    AgentGoalAccuracy,
    Conversation,
    ConversationTurn,
    create,
    judge_conversations,
    parse_goal,
)
from ragpulse.metrics.judge import PARSE_ERROR, JudgeCallError, JudgeContext, Outcome, VerdictParseError
from tests.doubles.fake_judge import FakeJudge, reply

GOAL = ("agent_goal_accuracy", "goal")
VERDICT = ("agent_goal_accuracy", "verdict")

BOOKING = Conversation(
    "thread-1",
    (
        ConversationTurn(
            "今晚八点帮我订一家附近最好的中餐馆。",
            "找到了金龙和翡翠宫，您想订哪一家？",
            (ToolCall("restaurant_search", {"cuisine": "中餐", "time": "20:00"}),),
            "zh",
        ),
        ConversationTurn(
            "订金龙吧。",
            "已为您预订金龙今晚八点的座位。",
            (
                ToolCall("restaurant_book", '{"name": "金龙", "time": "20:00"}', error="timeout"),
                ToolCall("restaurant_book", {"name": "金龙", "time": "20:00"}),
            ),
            "zh-CN",
        ),
    ),
)


def _score(conversation: Conversation, judge: FakeJudge) -> Outcome:
    return asyncio.run(AgentGoalAccuracy().score(conversation, JudgeContext(judge)))


@pytest.mark.parametrize("verdict", [1, 0])
def test_goal_then_verdict(verdict: int) -> None:
    judge = FakeJudge(
        {
            GOAL: [reply(user_goal="今晚八点在附近最好的中餐馆订位。", end_state="已预订金龙今晚八点的座位。")],
            VERDICT: [reply(reason="结果与目标一致。", verdict=verdict)],
        }
    )
    assert _score(BOOKING, judge) == Outcome.ok(float(verdict))
    goal, compare = judge.requests
    assert (goal.prompt_version, compare.prompt_version) == ("agent_goal_accuracy/1", "agent_goal_accuracy/1")
    # The conversation's language is the one most turns are in ("zh" and "zh-CN" are two tags, the first wins).
    goal_rule = language_rule("zh", "the user_goal and the end_state", fallback="the user's messages")
    assert goal.messages[0] == ("system", f"{GOAL_INSTRUCTIONS}\n{DATA_RULE}\n{goal_rule}")
    assert json.loads(goal.messages[1][1]) == {
        "conversation": [
            {
                "user": "今晚八点帮我订一家附近最好的中餐馆。",
                "tool_calls": [{"name": "restaurant_search", "arguments": {"cuisine": "中餐", "time": "20:00"}}],
                "answer": "找到了金龙和翡翠宫，您想订哪一家？",
            },
            {
                "user": "订金龙吧。",
                "tool_calls": [
                    {"name": "restaurant_book", "arguments": {"name": "金龙", "time": "20:00"}, "error": "timeout"},
                    {"name": "restaurant_book", "arguments": {"name": "金龙", "time": "20:00"}},
                ],
                "answer": "已为您预订金龙今晚八点的座位。",
            },
        ]
    }
    compare_rule = language_rule("zh", "the reason", fallback="the desired_outcome")
    assert compare.messages[0] == ("system", f"{COMPARE_INSTRUCTIONS}\n{DATA_RULE}\n{compare_rule}")
    assert json.loads(compare.messages[1][1]) == {
        "desired_outcome": "今晚八点在附近最好的中餐馆订位。",
        "arrived_outcome": "已预订金龙今晚八点的座位。",
    }


def test_a_japanese_conversation_is_asked_in_japanese() -> None:
    conversation = Conversation(
        "c-ja",
        (
            ConversationTurn(
                "明日の京都の天気は？", "明日の京都は晴れです。", (ToolCall("weather", {"city": "京都"}),), "ja"
            ),
            ConversationTurn("傘は要る？", "いいえ、要りません。", (), None),
        ),
    )
    judge = FakeJudge(
        {
            GOAL: [reply(user_goal="明日の京都の天気と傘の要否を知る。", end_state="晴れで傘は不要と伝えた。")],
            VERDICT: [reply(reason="目標は達成された。", verdict=1)],
        }
    )
    assert _score(conversation, judge) == Outcome.ok(1.0)
    assert all("Language: Japanese (ja)." in r.messages[0][1] for r in judge.requests)


@pytest.mark.parametrize(
    ("turns", "reason"),
    [
        ((), "no_question"),
        ((ConversationTurn("  ", "はい"),), "no_question"),
        ((ConversationTurn("你好", None), ConversationTurn("在吗？", " ")), "no_answer"),
    ],
)
def test_not_applicable(turns: tuple[ConversationTurn, ...], reason: str) -> None:
    judge = FakeJudge()
    outcome = _score(Conversation("c", turns), judge)
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, reason) and math.isnan(outcome.value)
    assert judge.requests == []


def test_failures_are_failed_scores_never_zero() -> None:
    failed = FakeJudge({GOAL: [JudgeCallError("judge_rate_limited")]})
    assert _score(BOOKING, failed) == Outcome.failed("judge_rate_limited")
    bad = reply(user_goal="订位", end_state="")
    unusable = FakeJudge({GOAL: [bad], ("agent_goal_accuracy", "goal:repair"): [bad]})
    assert _score(BOOKING, unusable) == Outcome.failed(PARSE_ERROR)
    verdict_two = reply(reason="r", verdict=2)
    wrong_verdict = FakeJudge(
        {
            GOAL: [reply(user_goal="订位", end_state="已订位")],
            VERDICT: [verdict_two],
            ("agent_goal_accuracy", "verdict:repair"): [reply(reason="r", verdict="1")],
        }
    )
    assert _score(BOOKING, wrong_verdict) == Outcome.failed(PARSE_ERROR)


def test_parse_goal_names_the_field() -> None:
    with pytest.raises(VerdictParseError, match="record 'c1', field 'end_state': end_state is missing"):
        parse_goal(reply(user_goal="订位"), "c1")


def test_judge_conversations_and_registry() -> None:
    request = MetricRequest.parse("agent_goal_accuracy")
    assert request.is_conversation and request.is_judge and request.version == "1.0.0"
    metric = create(request, {})
    assert (metric.name, metric.prompt_version, metric.uses_llm) == (
        "agent_goal_accuracy",
        "agent_goal_accuracy/1",
        True,
    )
    judge = FakeJudge(
        {
            GOAL: [reply(user_goal="订位", end_state="已订位")],
            VERDICT: [reply(reason="一致", verdict=1)],
        }
    )
    empty = Conversation("c-empty", ())
    results = asyncio.run(judge_conversations([empty, BOOKING], [metric], JudgeContext(judge)))
    result = results["agent_goal_accuracy"]
    assert np.isnan(result.values[0]) and result.values[1] == 1.0
    assert result.status.tolist() == [Status.NOT_APPLICABLE, Status.OK]
    assert result.reasons.tolist() == ["no_question", None]
