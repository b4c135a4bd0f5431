"""user_feedback:<name> and tool_evaluation:<name>: thumbs, stars, categories, sources kept apart, never a fake 0."""

from __future__ import annotations

import math

from ragpulse.metrics._spec import Status
from ragpulse.metrics.batch import Feedback, TraceBatch
from ragpulse.metrics.feedback import FeedbackReading
from ragpulse.metrics.registry import compute, parse_metrics


def _batch(feedback: list[list[Feedback] | None]) -> TraceBatch:
    n = len(feedback)
    return TraceBatch(
        trace_ids=[f"t{i}" for i in range(n)], context_ids=[[]] * n, context_texts=[[]] * n,
        relevant_ids=[None] * n, relevant_texts=[None] * n, answers=[None] * n, references=[[]] * n,
        feedback=feedback,
    )  # fmt: skip


def _scores(
    batch: TraceBatch, name: str, reading: FeedbackReading | None = None
) -> list[tuple[str, float | None, str | None]]:
    (result,) = compute(batch, parse_metrics([name]), feedback_reading=reading).values()
    return [
        (Status(s).label, None if math.isnan(v) else round(float(v), 6), r)
        for v, s, r in zip(result.values, result.status, result.reasons, strict=True)
    ]


def test_thumbs_stars_and_categories_become_values_in_0_1() -> None:
    batch = _batch([
        [Feedback("thumbs", 1.0, None, "api", "分かりやすい回答でした。"), Feedback("thumbs", 0.0, None, "user")],
        [Feedback("stars", 4.0, None, "user"), Feedback("correctness", None, "Incorrect", "annotation", "答案有误。")],
        [Feedback("correctness", None, "correct", "annotation"), Feedback("stars", 7.0, None, "user")],
        [Feedback("tone", None, "neutral", "annotation")],
        None,
    ])  # fmt: skip
    assert _scores(batch, "user_feedback:thumbs")[:2] == [("ok", 0.5, None), ("not_applicable", None, "no_feedback")]
    assert _scores(batch, "user_feedback:stars")[1:3] == [("ok", 0.75, None), ("not_applicable", None,
                                                                              "value_out_of_scale")]  # fmt: skip
    assert [s[:2] for s in _scores(batch, "user_feedback:correctness")[1:3]] == [("ok", 0.0), ("ok", 1.0)]
    assert _scores(batch, "user_feedback:tone")[3] == ("not_applicable", None, "unmapped_label:neutral")
    assert _scores(batch, "user_feedback:tone")[4] == ("not_applicable", None, "no_feedback")


def test_a_tools_evaluation_is_never_user_feedback_and_the_reverse() -> None:
    batch = _batch([
        [Feedback("helpfulness", 0.4, None, "evaluation", "回答只覆盖了问题的一半。")],
        [Feedback("helpfulness", 1.0, None, "annotation")],
    ])  # fmt: skip
    assert _scores(batch, "user_feedback:helpfulness") == [
        ("not_applicable", None, "evaluation_only"), ("ok", 1.0, None)
    ]  # fmt: skip
    assert _scores(batch, "tool_evaluation:helpfulness") == [
        ("ok", 0.4, None), ("not_applicable", None, "human_only")
    ]  # fmt: skip


def test_a_runs_own_labels_and_scales_extend_the_built_in_ones() -> None:
    batch = _batch([
        [Feedback("verdict", None, "Meh", "annotation"), Feedback("rating", 7.0, None, "user")],
        [Feedback("verdict", None, "correct", "annotation"), Feedback("rating", 1.0, None, "user")],
    ])  # fmt: skip
    reading = FeedbackReading.with_own({"meh": 0.5}, {"rating": [1.0, 10.0]})
    assert [s[:2] for s in _scores(batch, "user_feedback:verdict", reading)] == [("ok", 0.5), ("ok", 1.0)]
    assert [s[:2] for s in _scores(batch, "user_feedback:rating", reading)] == [("ok", 0.666667), ("ok", 0.0)]
    assert _scores(batch, "user_feedback:verdict")[0] == ("not_applicable", None, "unmapped_label:Meh")
