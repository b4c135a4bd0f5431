"""The self-contained HTML report: data read from the warehouse, rendered with Jinja2."""

from ragpulse.tasks.reporting.html.data import (
    ConversationMetric,
    Conversations,
    FailingConversation,
    MetricPoint,
    ReportData,
    StepMetric,
    TraceScore,
    TurnSteps,
    WorstStep,
    WorstTrace,
    aggregate,
    conversation_summary,
    read_report_data,
    step_metrics,
    worst_traces,
)
from ragpulse.tasks.reporting.html.render import build_report, render_report, write_report

__all__ = [
    "ConversationMetric",
    "Conversations",
    "FailingConversation",
    "MetricPoint",
    "ReportData",
    "StepMetric",
    "TraceScore",
    "TurnSteps",
    "WorstStep",
    "WorstTrace",
    "aggregate",
    "build_report",
    "conversation_summary",
    "read_report_data",
    "render_report",
    "step_metrics",
    "worst_traces",
    "write_report",
]
