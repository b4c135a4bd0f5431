"""Drift alerts: a webhook message, Prefect events and a markdown artifact, each alert sent once.

Once means once per (partition, metric, segment) and channel: the ``alerts`` table is the ledger, read before
sending and appended after, so re-running a partition sends nothing already sent, and a delivery that failed is
tried again by the next run. A webhook that keeps failing is reported (ledger row, warning, artifact) and never
fails the flow: the scores are already published by then.

The webhook URL is a secret (Slack's carries its own token): it comes from ``RAGPULSE_ALERT_WEBHOOK_URL`` or a
Prefect Secret block, never from flow parameters, and never reaches logs, artifacts or tables.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import pyarrow as pa
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.events import emit_event

from ragpulse.tasks.config import AlertConfig
from ragpulse.tasks.core.secrets import secret_text
from ragpulse.tasks.core.types import DriftAlert, DriftReport
from ragpulse.tasks.warehouse import ALERTS_SCHEMA, open_warehouse

__all__ = ["EVENT_PREFIX", "WEBHOOK_URL_ENV", "AlertOutcome", "send_alerts", "webhook_payload", "webhook_url"]

WEBHOOK_URL_ENV = "RAGPULSE_ALERT_WEBHOOK_URL"
EVENT_PREFIX = "ragpulse.drift"
_RETRIED_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class AlertOutcome:
    sent: list[str]
    already_sent: list[str]
    failed: list[str]

    def to_dict(self) -> dict[str, list[str]]:
        return {"sent": self.sent, "already_sent": self.already_sent, "failed": self.failed}


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


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def webhook_payload(alerts: Sequence[DriftAlert], settings: AlertConfig) -> dict[str, Any]:
    """One message for a partition's new alerts, Slack-compatible or as ragpulse's JSON document."""
    day = alerts[0].partition_date.isoformat()
    if settings.webhook_format == "json":
        return {
            "source": "ragpulse",
            "kind": "drift",
            "partition_date": day,
            "report_url": settings.report_url,
            "alerts": [
                {
                    "key": a.key,
                    "metric": a.metric,
                    "segment": a.segment,
                    "verdict": a.verdict,
                    "baseline_mean": a.baseline_mean,
                    "current_mean": a.current_mean,
                    "delta": a.delta,
                    "judge_model": a.judge_model,
                    "detail": a.detail,
                }
                for a in alerts
            ],
        }
    lines = [
        f"• *{a.metric}* ({a.segment}): {a.verdict.replace('_', ' ')}, mean {_number(a.baseline_mean)} → "
        f"{_number(a.current_mean)}. {a.detail}"
        for a in alerts
    ]
    title = f"ragpulse: {len(alerts)} drift alert(s) for dt={day}"
    link = f"\n<{settings.report_url}|Open the report>" if settings.report_url else ""
    return {
        "text": title,
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": title}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:2900] + link}},
        ],
    }


def _post(url: str, payload: dict[str, Any], settings: AlertConfig) -> tuple[int, str | None]:
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


def _emit(alert: DriftAlert) -> bool:
    event = emit_event(
        event=f"{EVENT_PREFIX}.{alert.verdict}",
        resource={
            "prefect.resource.id": f"ragpulse.metric.{alert.metric}",
            "prefect.resource.name": alert.metric,
            "ragpulse.segment": alert.segment,
            "ragpulse.partition-date": alert.partition_date.isoformat(),
        },
        payload={
            "key": alert.key,
            "verdict": alert.verdict,
            "baseline_mean": alert.baseline_mean,
            "current_mean": alert.current_mean,
            "delta": alert.delta,
            "judge_model": alert.judge_model,
            "detail": alert.detail,
        },
    )
    return event is not None


def _ledger_rows(
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
        }
        for a in alerts
    ]


def _artifact(report: DriftReport, outcome: AlertOutcome) -> None:
    rows = sorted(report.rows.to_pylist(), key=lambda r: (r["verdict"] == "stable", r["metric"], r["segment"]))
    lines = [
        f"# Drift, dt={report.partition_date}",
        "",
        f"{len(report.alerts)} alert(s): {len(outcome.sent)} sent now, {len(outcome.already_sent)} sent before, "
        f"{len(outcome.failed)} failed to send.",
        "",
        "| metric | segment | verdict | baseline | current | delta | detail |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    lines += [
        f"| {r['metric']} | {r['segment']} | {r['verdict']} | {_number(r['baseline_mean'])} | "
        f"{_number(r['current_mean'])} | {_number(r['delta'])} | {(r['detail'] or '').replace('|', '/')} |"
        for r in rows
    ]
    create_markdown_artifact(
        key=f"ragpulse-drift-{report.partition_date.isoformat()}",
        markdown="\n".join(lines),
        description=f"Drift verdicts and alerts for dt={report.partition_date}",
    )


@task(name="send-alerts", cache_policy=NO_CACHE, persist_result=False)
def send_alerts(
    warehouse_url: str, report: DriftReport, settings: AlertConfig | None = None, run_id: str = ""
) -> AlertOutcome:
    """Send the report's alerts not yet sent on each channel, record every outcome, write the artifact."""
    settings = settings or AlertConfig()
    logger = get_run_logger()
    warehouse = open_warehouse(warehouse_url)
    day = report.partition_date
    ledger = warehouse.read("alerts", start=day, end=day, columns=["alert_key", "channel", "status"]).to_pylist()
    delivered = {(row["alert_key"], row["channel"]) for row in ledger if row["status"] == "sent"}
    url = webhook_url(settings)
    channels = [name for name, on in (("webhook", url is not None), ("event", settings.emit_events)) if on]
    rows: list[dict[str, Any]] = []
    sent: set[str] = set()
    failed: set[str] = set()
    already: set[str] = {a.key for a in report.alerts if channels and all((a.key, c) in delivered for c in channels)}
    for channel in channels:
        pending = [a for a in report.alerts if (a.key, channel) not in delivered]
        if not pending:
            continue
        if channel == "webhook":
            assert url is not None
            attempts, error = _post(url, webhook_payload(pending, settings), settings)
            if error:
                logger.warning("dt=%s: webhook failed after %d attempt(s): %s", day, attempts, error)
            rows += _ledger_rows(pending, channel, attempts, error, run_id)
            (failed if error else sent).update(a.key for a in pending)
        else:
            for alert in pending:
                ok = _emit(alert)
                rows += _ledger_rows([alert], channel, 1, None if ok else "events are not enabled", run_id)
                (sent if ok else failed).add(alert.key)
    if rows:
        warehouse.record_alerts(pa.Table.from_pylist(rows, schema=ALERTS_SCHEMA))
    if not channels and report.alerts:
        logger.warning(
            "dt=%s: %d drift alert(s) but no channel: set %s or a webhook block, or enable events",
            day, len(report.alerts), WEBHOOK_URL_ENV,
        )  # fmt: skip
    outcome = AlertOutcome(sorted(sent - failed), sorted(already), sorted(failed))
    _artifact(report, outcome)
    return outcome
