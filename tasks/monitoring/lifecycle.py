"""Which notices a channel gets on a partition: an alert is sent when it opens, again only as a reminder after
``reminder_days``, and once more when it resolves (docs/monitoring.md, "Alert lifecycle").

An alert is the same across days while it stays open: its ``dedup_key`` (metric and segment, and the rule for a
threshold rule's). Whether it is open on a channel comes from the ``alerts`` ledger: the newest notice sent on that
channel for a partition before this one; open unless that notice resolved it. Partitions are taken in date order,
not in the order runs happened, so a re-run or a backfill of earlier days decides the same. No Prefect, no
warehouse: ``tasks/monitoring/tasks.py`` reads the ledger and delivers.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ragpulse.metrics.drift import Verdict
from ragpulse.tasks.core.types import DriftAlert, alert_dedup_key
from ragpulse.tasks.monitoring.comparison import alert_of

__all__ = [
    "OPENED",
    "REMINDER",
    "RESOLVED",
    "RESOLVING",
    "ChannelNotices",
    "LastNotice",
    "channel_notices",
    "last_notices",
]

OPENED, REMINDER, RESOLVED = "opened", "reminder", "resolved"
RESOLVING = frozenset({Verdict.STABLE, Verdict.WITHIN, Verdict.IMPROVED})
"""Verdicts that close an open alert: the metric was compared and is fine. ``insufficient_data`` and a missing row
say nothing either way, so the alert stays open."""


@dataclass(frozen=True)
class LastNotice:
    """The newest notice a channel had of an alert: the partition it was for, and what it said."""

    partition_date: dt.date
    state: str


@dataclass(frozen=True)
class ChannelNotices:
    """What one channel is told on a partition (``pending``), and the open alerts it is not told again today."""

    pending: list[DriftAlert]
    still_open: list[DriftAlert]


def last_notices(ledger: Iterable[Mapping[str, Any]], before: dt.date) -> dict[tuple[str, str], LastNotice]:
    """The newest notice sent per (channel, dedup key) for a partition before ``before``, from ``alerts`` ledger rows
    (a row written before schema v12 has no state: it opened its alert)."""
    newest: dict[tuple[str, str], LastNotice] = {}
    for row in ledger:
        if row["status"] != "sent" or row["partition_date"] >= before:
            continue
        key = (row["channel"], alert_dedup_key(row["metric"], row["segment"], row.get("rule")))
        notice = LastNotice(row["partition_date"], row.get("state") or OPENED)
        if key not in newest or notice.partition_date > newest[key].partition_date:
            newest[key] = notice
    return newest


def channel_notices(
    channel: str,
    alerts: Sequence[DriftAlert],
    rows: Sequence[Mapping[str, Any]],
    last: Mapping[tuple[str, str], LastNotice],
    reminder_days: int,
) -> ChannelNotices:
    """The notices ``channel`` gets for the partition of ``alerts`` (its alerting verdicts) and ``rows`` (all its
    drift rows): each alert not open on the channel as ``opened``; an open one as a ``reminder`` when the last notice
    is ``reminder_days`` or more days older than the partition (never with 0); and each alert open on the
    channel whose row today resolves it as ``resolved``, carrying today's verdict and numbers."""
    pending: list[DriftAlert] = []
    still_open: list[DriftAlert] = []
    alerting = {alert.dedup_key for alert in alerts}
    for alert in alerts:
        notice = last.get((channel, alert.dedup_key))
        if notice is None or notice.state == RESOLVED:
            pending.append(alert)
        elif reminder_days and (alert.partition_date - notice.partition_date).days >= reminder_days:
            pending.append(replace(alert, state=REMINDER))
        else:
            still_open.append(alert)
    for row in rows:
        resolved = alert_of(row, RESOLVED)
        notice = last.get((channel, resolved.dedup_key))
        if notice is None or notice.state == RESOLVED or resolved.dedup_key in alerting:
            continue
        if row["verdict"] in RESOLVING:
            pending.append(resolved)
    return ChannelNotices(pending, still_open)
