"""The alerting task: each drift alert sent once, on a webhook and as Prefect events, and a markdown artifact.

Once means once per (partition, metric, segment) and channel: the ``alerts`` table is the ledger, read before
sending and appended after, so re-running a partition sends nothing already sent, and a delivery that failed is
tried again by the next run. A webhook that keeps failing is reported (ledger row, warning, artifact) and never
fails the flow: the scores are already published by then. Events go only to a Prefect server that outlives the
command (``PREFECT_API_URL``): in ephemeral mode they are reported as not emitted and left out of the ledger, so a
later run against a server emits them. Delivery itself is in ``tasks/monitoring/delivery.py``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from ragpulse.metrics.drift import severity
from ragpulse.tasks.config import AlertConfig
from ragpulse.tasks.core.types import DriftReport
from ragpulse.tasks.monitoring.delivery import (
    EVENTS_NOT_EMITTED,
    WEBHOOK_URL_ENV,
    AlertOutcome,
    emit,
    events_receivable,
    ledger_rows,
    markdown_number,
    post,
    webhook_payload,
    webhook_url,
)
from ragpulse.tasks.reporting.artifacts import artifact_key, followable, md, md_link
from ragpulse.tasks.warehouse import ALERTS_SCHEMA, open_warehouse

__all__ = ["drift_markdown", "send_alerts"]


def _report_line(url: str) -> str:
    """The configured report: a link when it is http(s), else its location as text (a path opens nothing)."""
    return f"Report: {md_link(url, url) if followable(url) else md(url)}"


def drift_markdown(report: DriftReport, outcome: AlertOutcome, report_url: str | None = None) -> str:
    """Every verdict of the partition, most severe first (then metric, segment), with what was sent; each value
    escaped, the report a link only where a reader can open it."""
    rows = sorted(report.rows.to_pylist(), key=lambda r: (severity(r["verdict"]), r["metric"], r["segment"]))
    lines = [
        f"# Drift, dt={report.partition_date}",
        "",
        f"{len(report.alerts)} alert(s): {len(outcome.sent)} sent now, {len(outcome.already_sent)} sent before, "
        f"{len(outcome.failed)} failed to send.",
        *([f"{len(outcome.skipped)} not emitted as Prefect events: {EVENTS_NOT_EMITTED}."] if outcome.skipped else []),
        "",
        *([_report_line(report_url), ""] if report_url else []),
        "| metric | segment | verdict | baseline | current | delta | detail |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    lines += [
        f"| {md(r['metric'])} | {md(r['segment'])} | {md(r['verdict'])} | {markdown_number(r['baseline_mean'])} | "
        f"{markdown_number(r['current_mean'])} | {markdown_number(r['delta'])} | {md(r['detail'] or '')} |"
        for r in rows
    ]
    return "\n".join(lines)


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
    skipped: set[str] = set()
    delivering = channels
    if "event" in channels and not events_receivable():
        # Neither emitted nor recorded: the ledger then leaves them to the next run that has a server.
        skipped = {a.key for a in report.alerts if (a.key, "event") not in delivered}
        delivering = [channel for channel in channels if channel != "event"]
        if skipped:
            logger.warning("dt=%s: %d drift event(s) not emitted: %s", day, len(skipped), EVENTS_NOT_EMITTED)
    for channel in delivering:
        pending = [a for a in report.alerts if (a.key, channel) not in delivered]
        if not pending:
            continue
        if channel == "webhook":
            assert url is not None
            attempts, error = post(url, webhook_payload(pending, settings), settings)
            if error:
                logger.warning("dt=%s: webhook failed after %d attempt(s): %s", day, attempts, error)
            rows += ledger_rows(pending, channel, attempts, error, run_id)
            (failed if error else sent).update(a.key for a in pending)
        else:
            for alert in pending:
                ok = emit(alert)
                rows += ledger_rows([alert], channel, 1, None if ok else "events are not enabled", run_id)
                (sent if ok else failed).add(alert.key)
    if rows:
        warehouse.record_alerts(pa.Table.from_pylist(rows, schema=ALERTS_SCHEMA))
    if not channels and report.alerts:
        logger.warning(
            "dt=%s: %d drift alert(s) but no channel: set %s or a webhook block, or enable events",
            day, len(report.alerts), WEBHOOK_URL_ENV,
        )  # fmt: skip
    outcome = AlertOutcome(sorted(sent - failed), sorted(already), sorted(failed), sorted(skipped))
    create_markdown_artifact(
        key=artifact_key("drift", day, warehouse_url),
        markdown=drift_markdown(report, outcome, settings.report_url),
        description=f"Drift verdicts and alerts for dt={day}",
    )
    return outcome
