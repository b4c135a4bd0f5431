"""Pure metric code: no Prefect, no I/O, no clocks; importable and testable on its own.

Every metric maps a :class:`TraceBatch` to a :class:`MetricResult` with one float per trace, or
NaN with a status and a reason where the metric does not apply.
"""

from ragpulse.metrics._spec import MetricResult, MetricSpec, Status
from ragpulse.metrics.batch import RelevanceLabels, Step, StepRows, ToolCall, TraceBatch
from ragpulse.metrics.errors import InvalidRecordError, RagpulseError, ShapeError, UnknownMetricError
from ragpulse.metrics.registry import (
    CONVERSATION_FAMILIES,
    DEFAULT_EMBEDDING_METRICS,
    DEFAULT_FEEDBACK_METRICS,
    DEFAULT_METRICS,
    EMBEDDING_SIGNALS,
    REGISTRY,
    STEP_FAMILIES,
    MetricDefinition,
    MetricRequest,
    compute,
    parse_metrics,
)

__all__ = [
    "CONVERSATION_FAMILIES",
    "DEFAULT_EMBEDDING_METRICS",
    "DEFAULT_FEEDBACK_METRICS",
    "DEFAULT_METRICS",
    "EMBEDDING_SIGNALS",
    "REGISTRY",
    "STEP_FAMILIES",
    "InvalidRecordError",
    "MetricDefinition",
    "MetricRequest",
    "MetricResult",
    "MetricSpec",
    "RagpulseError",
    "RelevanceLabels",
    "ShapeError",
    "Status",
    "Step",
    "StepRows",
    "ToolCall",
    "TraceBatch",
    "UnknownMetricError",
    "compute",
    "parse_metrics",
]
