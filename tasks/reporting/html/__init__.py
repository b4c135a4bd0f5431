"""The self-contained HTML report: data read from the warehouse, rendered with Jinja2."""

from ragpulse.tasks.reporting.html.data import (
    MetricPoint,
    ReportData,
    TraceScore,
    WorstTrace,
    aggregate,
    read_report_data,
    worst_traces,
)
from ragpulse.tasks.reporting.html.render import build_report, render_report, write_report

__all__ = [
    "MetricPoint",
    "ReportData",
    "TraceScore",
    "WorstTrace",
    "aggregate",
    "build_report",
    "read_report_data",
    "render_report",
    "worst_traces",
    "write_report",
]
