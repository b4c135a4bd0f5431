"""The conversation metric in the judge plan: accepted as a metric name, judged once per day with a judge, skipped
without one, and never run by the turn judge."""

from __future__ import annotations

from ragpulse.metrics import agent_goal_accuracy
from ragpulse.tasks.config import ScoringConfig
from ragpulse.tasks.judge.plan import plan_judging

NAMES = ["agent_goal_accuracy", "context_relevance", "retrieval_steps"]


def test_a_conversation_metric_is_planned_beside_the_turn_metrics() -> None:
    assert ScoringConfig(metrics=tuple(NAMES)).metrics == tuple(NAMES)
    plan = plan_judging(NAMES, "judge-x", {})
    assert plan.conversations == ["agent_goal_accuracy"]
    assert plan.judged == ["context_relevance"] and plan.plain == ["retrieval_steps"]
    assert plan.names == ["retrieval_steps", "context_relevance"]  # what the scores table holds per trace
    assert plan.prompt_versions["agent_goal_accuracy"] == agent_goal_accuracy.PROMPT_VERSION
    assert plan.judge_model == "judge-x"


def test_without_a_judge_the_conversation_metric_is_skipped() -> None:
    plan = plan_judging(["agent_goal_accuracy", "document_mrr"], None, {})
    assert plan.conversations == [] and plan.skipped == ["agent_goal_accuracy"] and plan.judge_model is None
    assert plan_judging(["agent_goal_accuracy"], "judge-x", {}).judge_model == "judge-x"
