"""Correlated alerts as one incident: one segment moving on several metrics of one family on one day is one problem
(a retriever that got worse moves every ranking metric of the app at once), so it is one notification listing them
(docs/monitoring.md, "Incidents"). No Prefect, no warehouse."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from ragpulse.metrics.drift import severity
from ragpulse.metrics.errors import RagpulseError
from ragpulse.metrics.registry import MetricRequest
from ragpulse.tasks.core.types import DriftAlert
from ragpulse.tasks.monitoring.config import STEP_METRIC_PREFIX

__all__ = ["FAMILIES", "INPUT_FAMILY", "Incident", "family_of", "incidents_of"]

FAMILIES = {
    "ranking": "retrieval",
    "retrieval": "retrieval",
    "answers": "answer",
    "judge": "judge",
    "embeddings": "embedding",
    "operations": "operational",
    "agent": "agent",
    "feedback": "feedback",
}
"""A metric's family by what it is computed from (``MetricDefinition.needs``)."""
INPUT_FAMILY = "input"
"""What comes in rather than its quality: input drift of the questions and topic shares."""


def family_of(metric: str) -> str:
    """The family a metric alerts in; a step's metric (``step.<metric>``) is in its metric's."""
    try:
        needs = MetricRequest.parse(metric.removeprefix(STEP_METRIC_PREFIX)).definition.needs
    except RagpulseError:  # drift's own series: input.question_embedding, topic.share
        return INPUT_FAMILY
    return FAMILIES[needs]


@dataclass(frozen=True)
class Incident:
    """The notices of one segment and family on one partition that say the same thing (opened, reminder or
    resolved), most severe first."""

    partition_date: dt.date
    segment: str
    family: str
    state: str
    alerts: tuple[DriftAlert, ...]

    @property
    def key(self) -> str:
        return f"{self.partition_date.isoformat()}|{self.segment}|{self.family}|{self.state}"

    @property
    def verdict(self) -> str:
        """The most severe verdict among its alerts."""
        return self.alerts[0].verdict

    @property
    def summary(self) -> str:
        """``<n> <family> metric(s) <state>: metric verdict, ...``, most severe first."""
        listed = ", ".join(f"{a.metric} {a.verdict}" for a in self.alerts)
        return f"{len(self.alerts)} {self.family} metric(s) {self.state}: {listed}"


def incidents_of(alerts: Iterable[DriftAlert]) -> list[Incident]:
    """``alerts`` grouped by (partition, segment, family, state), each incident's alerts and the incidents themselves
    most severe first (then by segment, family and metric, so the order never depends on the rows')."""
    groups: dict[tuple[dt.date, str, str, str], list[DriftAlert]] = {}
    for alert in alerts:
        key = (alert.partition_date, alert.segment, family_of(alert.metric), alert.state)
        groups.setdefault(key, []).append(alert)
    incidents = [
        Incident(day, segment, family, state, tuple(sorted(found, key=lambda a: (severity(a.verdict), a.key))))
        for (day, segment, family, state), found in groups.items()
    ]
    return sorted(incidents, key=lambda i: (severity(i.verdict), i.partition_date, i.segment, i.family, i.state))
