"""Delivering drift alerts: the webhook message (Slack-compatible or ragpulse's JSON), its retried POST, Prefect
events, and the ``alerts`` ledger rows that record each delivery.

The webhook URL is a secret (Slack's carries its own token): it comes from ``RAGPULSE_ALERT_WEBHOOK_URL`` or a
Prefect Secret block, never from flow parameters, and never reaches logs, artifacts or tables.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from prefect.events import emit_event

from ragpulse.metrics.drift import severity
from ragpulse.tasks.core.artifacts import followable, md, md_link
from ragpulse.tasks.core.secrets import secret_text
from ragpulse.tasks.core.types import DriftAlert, DriftReport
from ragpulse.tasks.monitoring.config import AlertConfig
from ragpulse.tasks.monitoring.incidents import Incident, incidents_of

__all__ = [
    "EVENTS_NOT_EMITTED",
    "EVENT_PREFIX",
    "RESOLVED_EVENT",
    "THRESHOLD_EVENT_PREFIX",
    "WEBHOOK_URL_ENV",
    "AlertOutcome",
    "drift_markdown",
    "emit",
    "events_receivable",
    "ledger_rows",
    "markdown_number",
    "post",
    "webhook_payload",
    "webhook_url",
]

WEBHOOK_URL_ENV = "RAGPULSE_ALERT_WEBHOOK_URL"
EVENT_PREFIX = "ragpulse.drift"
THRESHOLD_EVENT_PREFIX = "ragpulse.threshold"
"""A threshold rule's events: ``ragpulse.threshold.critical`` and ``ragpulse.threshold.warning``."""
RESOLVED_EVENT = "resolved"
"""The last part of a resolution's event (``ragpulse.drift.resolved``); an opening and a reminder are named by the
verdict, and a reminder says so in its ``ragpulse.state`` label."""
_RETRIED_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
EVENTS_NOT_EMITTED = (
    "no Prefect server to receive drift events: PREFECT_API_URL is unset, and Prefect's temporary server stops with "
    "this command; they are emitted by the next run against a server"
)


@dataclass(frozen=True)
class AlertOutcome:
    """Alert keys by what their delivery did: ``skipped`` were not emitted as events (``EVENTS_NOT_EMITTED``)."""

    sent: list[str]
    already_sent: list[str]
    failed: list[str]
    skipped: list[str] = field(default_factory=list)
    reminded: list[str] = field(default_factory=list)
    """Among ``sent``: reminders of alerts still open."""
    resolved: list[str] = field(default_factory=list)
    """Among ``sent``: notices that an open alert resolved."""
    still_open: list[str] = field(default_factory=list)
    """Alerts open since an earlier partition and not sent again (no reminder due)."""

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "sent": self.sent, "already_sent": self.already_sent, "failed": self.failed, "skipped": self.skipped,
            "reminded": self.reminded, "resolved": self.resolved, "still_open": self.still_open,
        }  # fmt: skip


def webhook_url(settings: AlertConfig) -> str | None:
    """The webhook URL from the Prefect Secret block, else the environment; None: no webhook."""
    if settings.webhook_block:
        return secret_text(
            settings.webhook_block,
            used_for="alert webhook",
            holds="an http(s) URL",
            valid=lambda value: value.startswith(("http://", "https://")),
        )
    return os.environ.get(WEBHOOK_URL_ENV) or None


def markdown_number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def webhook_payload(alerts: Sequence[DriftAlert], settings: AlertConfig) -> dict[str, Any]:
    """One message for a partition's notices, grouped into incidents (``incidents_of``), Slack-compatible or as
    ragpulse's JSON document (which lists the alerts, and the incidents by their alerts' keys)."""
    day = alerts[0].partition_date.isoformat()
    if settings.webhook_format == "json":
        return {
            "source": "ragpulse",
            "kind": "drift",
            "partition_date": day,
            "report_url": settings.report_url,
            "alerts": [{**_alert_fields(a), "segment": a.segment, "state": a.state} for a in alerts],
            "incidents": [
                {
                    "key": incident.key,
                    "segment": incident.segment,
                    "family": incident.family,
                    "state": incident.state,
                    "verdict": incident.verdict,
                    "summary": incident.summary,
                    "alerts": [a.key for a in incident.alerts],
                }
                for incident in incidents_of(alerts)
            ],
        }
    incidents = incidents_of(alerts)
    lines = [line for incident in incidents for line in _slack_lines(incident)]
    kind = "drift " if all(a.rule is None for a in alerts) else ""
    title = f"ragpulse: {len(alerts)} {kind}alert(s) in {len(incidents)} incident(s) for dt={day}"
    link = _slack_report_link(settings.report_url) if settings.report_url else ""
    return {
        "text": title,
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": title}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:2900] + link}},
        ],
    }


def _slack_lines(incident: Incident) -> list[str]:
    """An incident's lines: its one alert, or a line naming the family and segment followed by each alert's."""
    if len(incident.alerts) == 1:
        return [_slack_line(incident.alerts[0])]
    head = f"• *{incident.family}* ({incident.segment}): {incident.summary}"
    return [head, *(f"    {_slack_line(alert).replace('•', '◦', 1)}" for alert in incident.alerts)]


def _slack_line(alert: DriftAlert) -> str:
    """One notice as a Slack line: a threshold rule's verdict with the rule, a drift verdict with the means; a
    reminder or a resolution says so first."""
    state = {"reminder": "still open: ", "resolved": "resolved, now "}.get(alert.state, "")
    if alert.rule is not None:
        return f"• *{alert.metric}* ({alert.segment}): {state}{alert.verdict}, {alert.detail} (rule: {alert.rule})"
    return (
        f"• *{alert.metric}* ({alert.segment}): {state}{alert.verdict.replace('_', ' ')}, mean "
        f"{markdown_number(alert.baseline_mean)} → {markdown_number(alert.current_mean)}. {alert.detail}"
    )


def _slack_report_link(url: str) -> str:
    """A Slack link to an http(s) report; any other location (a path, a ``file://`` URL) as text, since a link into
    some machine's disk opens nothing for the people reading the channel."""
    if followable(url):
        return f"\n<{url}|Open the report>"
    text = url.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")  # Slack's own escaping
    return f"\nReport: {text}"


def post(url: str, payload: dict[str, Any], settings: AlertConfig) -> tuple[int, str | None]:
    """POST with retries of timeouts, connection errors, 429 and 5xx; returns (attempts, error or None)."""
    error = None
    with httpx.Client(timeout=settings.timeout_seconds) as client:
        for attempt in range(1, settings.max_attempts + 1):
            try:
                response = client.post(url, json=payload)
            except httpx.TransportError as exc:
                error = f"{type(exc).__name__} reaching {_host(url)}"
            else:
                if response.is_success:
                    return attempt, None
                error = f"HTTP {response.status_code} from {_host(url)}"
                if response.status_code not in _RETRIED_STATUS:
                    return attempt, error
            if attempt < settings.max_attempts:
                time.sleep(settings.backoff_seconds * 2 ** (attempt - 1))
    return settings.max_attempts, error


def _host(url: str) -> str:
    """Only the host: the path of a webhook URL is its secret."""
    return urlsplit(url).hostname or "webhook"


def events_receivable() -> bool:
    """Whether an emitted event reaches a server that outlives this process. Without ``PREFECT_API_URL`` Prefect
    sends it to its temporary local server, which stops with the command, so no Automation ever acts on it."""
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())


def emit(incident: Incident) -> bool:
    """One event for an incident, named and labelled by its most severe alert (an Automation written for one alert
    reads a one-alert incident the same); the others' metrics are related resources, every alert is in the payload."""
    first = incident.alerts[0]
    prefix = THRESHOLD_EVENT_PREFIX if first.rule is not None else EVENT_PREFIX
    event = emit_event(
        event=f"{prefix}.{RESOLVED_EVENT if incident.state == 'resolved' else first.verdict}",
        resource={
            "prefect.resource.id": f"ragpulse.metric.{first.metric}",
            "prefect.resource.name": first.metric,
            "ragpulse.segment": first.segment,
            "ragpulse.partition-date": first.partition_date.isoformat(),
            "ragpulse.dedup-key": first.dedup_key,
            "ragpulse.state": incident.state,
            "ragpulse.incident-key": incident.key,
            "ragpulse.family": incident.family,
        },
        related=[
            {"prefect.resource.id": f"ragpulse.metric.{a.metric}", "prefect.resource.role": "metric"}
            for a in incident.alerts[1:]
        ],
        payload={
            **_alert_fields(first),
            "detail": first.detail if len(incident.alerts) == 1 else incident.summary,
            "incident": incident.key,
            "alerts": [_alert_fields(a) for a in incident.alerts],
        },
    )
    return event is not None


def _alert_fields(alert: DriftAlert) -> dict[str, Any]:
    return {
        "key": alert.key,
        "metric": alert.metric,
        "verdict": alert.verdict,
        "baseline_mean": alert.baseline_mean,
        "current_mean": alert.current_mean,
        "delta": alert.delta,
        "judge_model": alert.judge_model,
        "detail": alert.detail,
        "rule": alert.rule,
        "observed": alert.observed,
        "dedup_key": alert.dedup_key,
    }


def ledger_rows(
    alerts: Sequence[DriftAlert], channel: str, attempts: int, error: str | None, run_id: str
) -> list[dict[str, Any]]:
    now = dt.datetime.now(dt.UTC)
    return [
        {
            "alert_key": a.key,
            "partition_date": a.partition_date,
            "metric": a.metric,
            "segment": a.segment,
            "verdict": a.verdict,
            "channel": channel,
            "status": "failed" if error else "sent",
            "attempts": attempts,
            "error": error,
            "sent_at": now,
            "run_id": run_id,
            "rule": a.rule,
            "state": a.state,
        }
        for a in alerts
    ]


def _report_line(url: str) -> str:
    """The configured report: a link when it is http(s), else its location as text (a path opens nothing)."""
    return f"Report: {md_link(url, url) if followable(url) else md(url)}"


def _detail(row: dict[str, Any]) -> str:
    """A verdict's detail, naming the threshold rule behind it where there is one."""
    detail = row["detail"] or ""
    return f"{detail} (rule: {row['rule']})" if row.get("rule") else detail


def drift_markdown(report: DriftReport, outcome: AlertOutcome, report_url: str | None = None) -> str:
    """Every verdict of the partition, most severe first (then metric, segment), with what was sent; each value
    escaped, the report a link only where a reader can open it."""
    rows = sorted(report.rows.to_pylist(), key=lambda r: (severity(r["verdict"]), r["metric"], r["segment"]))
    lines = [
        f"# Drift, dt={report.partition_date}",
        "",
        f"{len(report.alerts)} alert(s); notices: {len(outcome.sent)} sent now ({len(outcome.reminded)} reminder(s), "
        f"{len(outcome.resolved)} resolved), {len(outcome.already_sent)} sent before, {len(outcome.failed)} failed "
        f"to send; {len(outcome.still_open)} alert(s) open since an earlier partition, no reminder due.",
        *([f"{len(outcome.skipped)} not emitted as Prefect events: {EVENTS_NOT_EMITTED}."] if outcome.skipped else []),
        "",
        *([_report_line(report_url), ""] if report_url else []),
        "| metric | segment | verdict | baseline | current | delta | detail |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    lines += [
        f"| {md(r['metric'])} | {md(r['segment'])} | {md(r['verdict'])} | {markdown_number(r['baseline_mean'])} | "
        f"{markdown_number(r['current_mean'])} | {markdown_number(r['delta'])} | {md(_detail(r))} |"
        for r in rows
    ]
    return "\n".join(lines)
