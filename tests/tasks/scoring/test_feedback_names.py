"""user_feedback:* and tool_evaluation:*: the day's names, people's and tools' apart; * only for those families."""

from __future__ import annotations

import pytest

from ragpulse.metrics.errors import ShapeError
from ragpulse.metrics.registry import parse_metrics
from ragpulse.tasks.scoring.feedback_names import asks_every_name, expand_feedback_metrics


def test_wildcards_become_the_days_names_of_their_sources() -> None:
    found = {
        "thumbs": {"api"},
        "helpfulness": {"evaluation"},
        "correctness": {"annotation", "evaluation"},
        "Nutzer Bewertung": {"user"},  # no metric name: left out with a warning
    }
    names = ["document_mrr", "user_feedback:*", "tool_evaluation:*", "user_feedback:thumbs"]
    assert asks_every_name(names) and not asks_every_name(["user_feedback:thumbs"])
    assert expand_feedback_metrics(names, found) == [
        "document_mrr",
        "user_feedback:thumbs",
        "user_feedback:correctness",
        "tool_evaluation:correctness",
        "tool_evaluation:helpfulness",
    ]
    assert expand_feedback_metrics(names, {}) == ["document_mrr", "user_feedback:thumbs"]


def test_only_the_feedback_families_take_every_name() -> None:
    assert [r.name for r in parse_metrics(["user_feedback:*"])] == ["user_feedback:*"]
    with pytest.raises(ShapeError, match=r"\* only for user_feedback and tool_evaluation"):
        parse_metrics(["llm_judge:*"])
