"""labels_from: what it accepts, and only people's feedback becomes labels."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ragpulse.tasks.calibration.feedback_labels import FeedbackLabels, labels_from_scores, parse_labels_from
from ragpulse.tasks.core.exceptions import ConfigError


def test_a_mapping_names_a_feedback_and_the_judge_metric_it_labels() -> None:
    assert parse_labels_from("feedback:correctness=answer_correctness, feedback:thumbs=llm_judge:helpful") == [
        FeedbackLabels("correctness", "answer_correctness"),
        FeedbackLabels("thumbs", "llm_judge:helpful"),
    ]
    for bad, said in [
        ("correctness=answer_correctness", "expected feedback:<name>=<judge metric>"),
        ("feedback:correctness", "expected feedback:<name>=<judge metric>"),
        ("feedback:correctness=answer_f1", "not a judge metric"),
        ("feedback:correctness=no_such_metric", "no_such_metric"),
    ]:
        with pytest.raises(ConfigError, match=said):
            parse_labels_from(bad)


def test_only_ok_user_feedback_becomes_labels() -> None:
    day = dt.date(2026, 11, 20)
    scores = pa.Table.from_pylist([
        {"partition_date": day, "trace_id": "a", "metric": "user_feedback:correctness", "value": 1.0, "status": "ok"},
        {"partition_date": day, "trace_id": "b", "metric": "user_feedback:correctness", "value": None,
         "status": "not_applicable"},
        {"partition_date": day, "trace_id": "c", "metric": "tool_evaluation:correctness", "value": 0.0, "status": "ok"},
    ])  # fmt: skip
    labels = labels_from_scores(scores, [FeedbackLabels("correctness", "answer_correctness")])
    assert [(r["trace_id"], r["metric"], r["value"]) for r in labels.rows.to_pylist()] == [
        ("a", "answer_correctness", 1.0)
    ]
    only_tool = scores.filter(pc.equal(scores["trace_id"], "c"))
    with pytest.raises(ConfigError, match="is a tool's evaluation"):
        labels_from_scores(only_tool, [FeedbackLabels("correctness", "answer_correctness")])
