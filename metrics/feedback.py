"""What users and reviewers said about a turn, and what a tool's own evaluators computed, as metrics.

``user_feedback:<name>``: the mean of the values of feedback ``<name>`` on the turn given by people or the
application's code (sources ``user``, ``annotation``, ``api``), each brought to [0, 1]: a thumbs or boolean as 1/0,
a number in [0, 1] as is, stars on a declared scale (``stars``: 1..5 -> (s - 1) / 4), a category through
:data:`LABEL_VALUES`. ``tool_evaluation:<name>``: the same reading of the ``evaluation`` source only (a tool's LLM
judge or code), published apart so that it is never mistaken for a person's label. Definitions, the mapping table and
versions: docs/metrics.md ("User feedback and tool evaluations").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragpulse.metrics._spec import MetricResult, MetricSpec
from ragpulse.metrics.batch import Feedback, TraceBatch

__all__ = [
    "EVERY_NAME",
    "FAMILIES",
    "HUMAN_SOURCES",
    "LABEL_VALUES",
    "SCALES",
    "TOOL_EVALUATION",
    "USER_FEEDBACK",
    "FeedbackReading",
    "feedback_value",
    "score_tool_evaluation",
    "score_user_feedback",
]

USER_FEEDBACK = MetricSpec(
    "user_feedback", "1.0.0", "mean of a named feedback given by users, reviewers or the app", takes_variant=True
)
TOOL_EVALUATION = MetricSpec(
    "tool_evaluation", "1.0.0", "mean of a named evaluation a tracing tool computed", takes_variant=True
)
FAMILIES = frozenset({USER_FEEDBACK.name, TOOL_EVALUATION.name})
EVERY_NAME = "*"
"""``user_feedback:*``: every feedback name a day holds (the defaults ask for it; the run expands it)."""
HUMAN_SOURCES = frozenset({"user", "annotation", "api"})
"""Sources that count as what people said: ``api`` is the application's own call (a user's click it forwards)."""

LABEL_VALUES: Mapping[str, float] = {
    **dict.fromkeys(("good", "correct", "positive", "relevant", "helpful", "yes", "true", "pass", "accept"), 1.0),
    **dict.fromkeys(("thumbs_up", "thumbsup", "up", "like", "faithful", "supported", "resolved"), 1.0),
    **dict.fromkeys(("bad", "incorrect", "negative", "irrelevant", "unhelpful", "no", "false", "fail"), 0.0),
    **dict.fromkeys(("reject", "thumbs_down", "thumbsdown", "down", "dislike", "unfaithful", "unsupported"), 0.0),
    **dict.fromkeys(("partially_correct", "partial", "neutral_positive", "mixed"), 0.5),
}
"""Categories read as values, compared case-insensitively with spaces and dashes as underscores. A label not here is
``not_applicable`` (``unmapped_label:<label>``), never guessed; a run's ``feedback_labels`` extend it."""

SCALES: Mapping[str, tuple[float, float]] = {"stars": (1.0, 5.0), "star_rating": (1.0, 5.0)}
"""Feedback names whose values are on a scale other than [0, 1]: (low, high), read as (v - low) / (high - low); a
run's ``feedback_scales`` extend it."""


@dataclass(frozen=True)
class FeedbackReading:
    """How a run reads feedback values: the label table and scales, the built-in ones with the run's own added or
    replacing them (``ScoringConfig.feedback_labels``, ``feedback_scales``)."""

    labels: Mapping[str, float] = field(default_factory=lambda: dict(LABEL_VALUES))
    scales: Mapping[str, tuple[float, float]] = field(default_factory=lambda: dict(SCALES))

    @classmethod
    def with_own(
        cls, labels: Mapping[str, float] | None = None, scales: Mapping[str, Sequence[float]] | None = None
    ) -> FeedbackReading:
        own_labels = {_label_key(label): float(value) for label, value in (labels or {}).items()}
        own_scales = {name: (float(low), float(high)) for name, (low, high) in (scales or {}).items()}
        return cls({**LABEL_VALUES, **own_labels}, {**SCALES, **own_scales})


def _label_key(label: str) -> str:
    return label.strip().lower().replace(" ", "_").replace("-", "_")


def feedback_value(
    entry: Feedback, labels: Mapping[str, float] = LABEL_VALUES, scales: Mapping[str, tuple[float, float]] = SCALES
) -> float | str:
    """The entry's value in [0, 1], or why there is none: ``unmapped_label:<label>``, ``value_out_of_scale``."""
    if entry.value is not None and math.isfinite(entry.value):
        low, high = scales.get(entry.name, (0.0, 1.0))
        if not low <= entry.value <= high:
            return "value_out_of_scale"
        return (entry.value - low) / (high - low)
    if entry.label is None:
        return "no_value"
    value = labels.get(_label_key(entry.label))
    return f"unmapped_label:{entry.label}" if value is None else value


def score_user_feedback(batch: TraceBatch, name: str, reading: FeedbackReading | None = None) -> MetricResult:
    """``user_feedback:<name>`` per turn; ``evaluation_only`` where only a tool's evaluator gave that name."""
    return _score(batch, name, HUMAN_SOURCES, reading or FeedbackReading(), other="evaluation_only")


def score_tool_evaluation(batch: TraceBatch, name: str, reading: FeedbackReading | None = None) -> MetricResult:
    """``tool_evaluation:<name>`` per turn; ``human_only`` where only people gave that name."""
    return _score(batch, name, frozenset({"evaluation"}), reading or FeedbackReading(), other="human_only")


def _score(
    batch: TraceBatch,
    name: str,
    sources: frozenset[str],
    reading: FeedbackReading,
    *,
    other: str,
) -> MetricResult:
    n = len(batch.trace_ids)
    values = np.full(n, np.nan)
    reasons = np.full(n, None, dtype=object)
    per_trace: Sequence[Sequence[Feedback] | None] = batch.feedback if batch.feedback is not None else [None] * n
    for i, entries in enumerate(per_trace):
        named = [entry for entry in entries or () if entry.name == name]
        counted = [entry for entry in named if entry.source in sources]
        if not counted:
            reasons[i] = other if named else "no_feedback"
            continue
        read = [feedback_value(entry, reading.labels, reading.scales) for entry in counted]
        numbers = [value for value in read if isinstance(value, float)]
        if numbers:
            values[i] = sum(numbers) / len(numbers)
        else:
            reasons[i] = next(value for value in read if isinstance(value, str))
    return MetricResult.from_values(values, reasons)
