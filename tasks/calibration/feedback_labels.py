"""Human labels taken from the traces' own feedback (docs/calibration.md, "Labels from feedback").

``labels_from = "feedback:<name>=<metric>"`` (several separated by commas) says that what people said under
``<name>`` labels the judge metric ``<metric>``. The labels are the day's published ``user_feedback:<name>`` scores
(only users', reviewers' and the application's feedback, each turn's mean in [0, 1]; docs/metrics.md), so the
prediction-powered estimate runs on what a team already collects. A tool's own evaluations
(``tool_evaluation:<name>``) are never labels: asked for, they are refused with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ragpulse.metrics.errors import RagpulseError
from ragpulse.metrics.feedback import TOOL_EVALUATION, USER_FEEDBACK
from ragpulse.metrics.registry import MetricRequest
from ragpulse.tasks.calibration.labels import LABELS_SCHEMA, LabelSet
from ragpulse.tasks.core.exceptions import ConfigError

__all__ = ["FEEDBACK_LABEL_COLUMNS", "FeedbackLabels", "feedback_metrics", "labels_from_scores", "parse_labels_from"]

_PREFIX = "feedback:"
FEEDBACK_LABEL_COLUMNS = ["partition_date", "trace_id", "metric", "value", "status"]


@dataclass(frozen=True)
class FeedbackLabels:
    """Feedback ``name`` labels the judge metric ``metric``."""

    name: str
    metric: str

    @property
    def user_feedback(self) -> str:
        return f"{USER_FEEDBACK.name}:{self.name}"

    @property
    def tool_evaluation(self) -> str:
        return f"{TOOL_EVALUATION.name}:{self.name}"


def parse_labels_from(spec: str) -> list[FeedbackLabels]:
    """``feedback:<name>=<metric>[, ...]``; ConfigError names what does not fit."""
    mappings = []
    for part in (p.strip() for p in spec.split(",")):
        name, _, metric = part.removeprefix(_PREFIX).partition("=")
        if not part.startswith(_PREFIX) or not name.strip() or not metric.strip():
            raise ConfigError(f"labels_from {part!r}: expected feedback:<name>=<judge metric>, e.g. "
                              "feedback:correctness=answer_correctness")  # fmt: skip
        try:
            request = MetricRequest.parse(metric.strip())
        except RagpulseError as exc:
            raise ConfigError(f"labels_from {part!r}: {exc}") from None
        if not request.is_judge:
            raise ConfigError(f"labels_from {part!r}: {request.name} is not a judge metric; labels calibrate judges")
        mappings.append(FeedbackLabels(name.strip(), request.name))
    return mappings


def feedback_metrics(mappings: Sequence[FeedbackLabels]) -> list[str]:
    """The published metrics to read: each name's user feedback, and its tool evaluation (to refuse it by name)."""
    return [metric for m in mappings for metric in (m.user_feedback, m.tool_evaluation)]


def labels_from_scores(scores: pa.Table, mappings: Sequence[FeedbackLabels]) -> LabelSet:
    """The label set of ``scores`` (``FEEDBACK_LABEL_COLUMNS`` rows of :func:`feedback_metrics`): each ``ok``
    ``user_feedback:<name>`` score as a label of its judge metric. ConfigError when a name has only a tool's
    evaluations, which are no human labels."""
    ok = scores.filter(pc.equal(scores["status"], "ok"))
    published = set(ok["metric"].to_pylist())
    rows = []
    for mapping in mappings:
        if mapping.user_feedback not in published and mapping.tool_evaluation in published:
            raise ConfigError(
                f"feedback {mapping.name!r} is a tool's evaluation ({mapping.tool_evaluation}), not a human label: "
                f"calibrate {mapping.metric} on what users or reviewers said"
            )
        mine = ok.filter(pc.equal(ok["metric"], mapping.user_feedback)).to_pylist()
        rows += [
            {"partition_date": row["partition_date"], "trace_id": row["trace_id"], "metric": mapping.metric,
             "value": row["value"], "labeller": f"{_PREFIX}{mapping.name}", "labelled_at": None,
             "source_file": f"warehouse:{mapping.user_feedback}", "source_line": 0}
            for row in mine
        ]  # fmt: skip
    return LabelSet(pa.Table.from_pylist(rows, schema=LABELS_SCHEMA), files=0)
