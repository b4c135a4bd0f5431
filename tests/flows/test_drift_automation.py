"""docs/dashboards.md's Prefect Automation, run as written against the session's real Prefect server: a drift alert
that ragpulse emits as an event reaches a webhook receiver through the Automation and a notification block."""

from __future__ import annotations

import datetime as dt
import re
import time
from pathlib import Path

from prefect.automations import Automation
from prefect.blocks.notifications import CustomWebhookNotificationBlock

from ragpulse.tasks.core.types import DriftAlert
from ragpulse.tasks.monitoring.delivery import emit
from tests.doubles.webhook_receiver import WebhookReceiver

DOCS = Path(__file__).resolve().parents[2] / "docs" / "dashboards.md"
EXAMPLE = re.compile(r"<!-- example: drift-automation -->\s*```python\n(?P<code>.*?)```", re.DOTALL)
BLOCK_LINE = re.compile(r'^NOTIFICATION_BLOCK = "[^"]+"', re.MULTILINE)


def test_the_documented_automation_turns_a_drift_event_into_a_notification(webhook: WebhookReceiver) -> None:
    found = EXAMPLE.search(DOCS.read_text())
    assert found, "docs/dashboards.md lost its drift-automation example"
    CustomWebhookNotificationBlock(
        name="ragpulse test receiver",
        url=webhook.url,
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
        allow_private_urls=True,
    ).save("ragpulse-alerts", overwrite=True)
    # The one line a reader changes: which notification block.
    code, replaced = BLOCK_LINE.subn('NOTIFICATION_BLOCK = "custom-webhook/ragpulse-alerts"', found["code"])
    assert replaced == 1
    exec(compile(code, str(DOCS), "exec"), {})
    automation = Automation.read(name="ragpulse drift alerts")
    try:
        alert = DriftAlert(
            partition_date=dt.date(2026, 3, 5),
            metric="faithfulness",
            segment="metadata.app=検索",
            verdict="degraded",
            detail="mean 0.81 -> 0.64",
            baseline_mean=0.81,
            current_mean=0.64,
            delta=-0.17,
            judge_model="gpt-4o-mini",
        )
        assert emit(alert)
        deadline = time.monotonic() + 60
        while not webhook.messages and time.monotonic() < deadline:
            time.sleep(0.5)
        assert webhook.messages == [
            {
                "subject": "ragpulse: ragpulse.drift.degraded on faithfulness",
                "body": "faithfulness (metadata.app=検索) on 2026-03-05: mean 0.81 -> 0.64",
            }
        ]
    finally:
        automation.delete()
