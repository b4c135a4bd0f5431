"""docs/dashboards.md's Prefect Automation, run as written against the session's real Prefect server: a drift alert
that ragpulse emits as an event reaches a webhook receiver through the Automation and a notification block; and an
alert of a `ragpulse monitor` in Prefect's ephemeral mode, whose temporary server nothing outlives, is not marked
sent, so the next run against the server delivers it."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from prefect.automations import Automation
from prefect.blocks.notifications import CustomWebhookNotificationBlock

from ragpulse.flows.backfill import backfill
from ragpulse.flows.monitor import monitor
from ragpulse.tasks.config import DriftConfig, OutputConfig, ScoringConfig, SourceConfig, TopicsConfig
from ragpulse.tasks.core.types import DriftAlert
from ragpulse.tasks.monitoring.delivery import emit
from ragpulse.tasks.monitoring.incidents import incidents_of
from tests.doubles.webhook_receiver import WebhookReceiver

DOCS = Path(__file__).resolve().parents[2] / "docs" / "dashboards.md"
EXAMPLE = re.compile(r"<!-- example: drift-automation -->\s*```python\n(?P<code>.*?)```", re.DOTALL)
BLOCK_LINE = re.compile(r'^NOTIFICATION_BLOCK = "[^"]+"', re.MULTILINE)
DAYS = [dt.date(2026, 5, 1) + dt.timedelta(days=i) for i in range(4)]
DROP_DAY = DAYS[-1]


def _documented_automation(webhook: WebhookReceiver) -> Automation:
    """The docs' Automation, notifying ``webhook`` through a custom webhook block."""
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
    return Automation.read(name="ragpulse drift alerts")


def _notifications(webhook: WebhookReceiver, count: int = 1) -> list[Any]:
    deadline = time.monotonic() + 60
    while len(webhook.messages) < count and time.monotonic() < deadline:
        time.sleep(0.5)
    return webhook.messages


def test_the_documented_automation_turns_a_drift_event_into_a_notification(webhook: WebhookReceiver) -> None:
    automation = _documented_automation(webhook)
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
        assert emit(incidents_of([alert])[0])  # a one-alert incident, as send-alerts emits it
        assert _notifications(webhook) == [
            {
                "subject": "ragpulse: ragpulse.drift.degraded on faithfulness",
                "body": "faithfulness (metadata.app=検索) on 2026-03-05: mean 0.81 -> 0.64",
            }
        ]
    finally:
        automation.delete()


def _write_day(root: Path, day: dt.date, hit_rate: float, rng: random.Random) -> None:
    """60 traces whose retriever ranks the relevant document first with probability ``hit_rate``."""
    lines = []
    for i in range(60):
        relevant = f"doc-{day:%m%d}-{i}"
        first = relevant if rng.random() < hit_rate else f"other-{i}"
        contexts = [{"id": first, "text": "the answer is blue"}, {"id": f"more-{i}", "text": "unrelated"}]
        lines.append(
            {
                "trace_id": f"{day}-{i}",
                "timestamp": f"{day}T10:{i:02d}:00Z",
                "question": f"what colour is item {i}?",
                "answer": "blue",
                "contexts": contexts,
                "relevant_context_ids": [relevant],
            }
        )
    partition = root / f"dt={day}"
    partition.mkdir(parents=True)
    (partition / "traces.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.mark.slow
def test_an_ephemeral_monitor_does_not_mark_its_events_sent_and_the_next_run_delivers_them(
    tmp_path: Path, webhook: WebhookReceiver
) -> None:
    rng = random.Random(3)
    for day in DAYS:
        _write_day(tmp_path / "traces", day, 0.2 if day == DROP_DAY else 0.9, rng)
    database = tmp_path / "w.duckdb"
    groups = {
        "source": SourceConfig(url=str(tmp_path / "traces")),
        "scoring": ScoringConfig(metrics=("document_mrr",)),
        "output": OutputConfig(warehouse=f"duckdb:///{database}", work_dir=str(tmp_path / "work")),
        # The drop in document_mrr is the one alert here: the questions' drift and topics are tested on their own.
        "drift": DriftConfig(question_drift=False),
        "topics": TopicsConfig(enabled=False),
    }
    assert backfill(start=DAYS[0], end=DAYS[-2], **groups).completed == DAYS[:-1]
    # The drop day as the docs' first run does it: no PREFECT_API_URL, so Prefect's temporary server.
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_API_")}
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "monitor", "--date", str(DROP_DAY), "--source",
         str(tmp_path / "traces"), "--metrics", "document_mrr", "--no-question-drift", "--no-topics-enabled",
         "--warehouse", f"duckdb:///{database}",
         "--work-dir", str(tmp_path / "work")],
        env={**env, "PREFECT_HOME": str(tmp_path / "prefect-home"), "COLUMNS": "200"},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "event not emitted" in done.stdout and "PREFECT_API_URL is unset" in done.stdout, done.stdout
    with duckdb.connect(str(database), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM alerts").fetchone() == (0,)
        assert con.execute(f"SELECT verdict FROM drift WHERE partition_date = '{DROP_DAY}'").fetchall() == [
            ("degraded",)
        ]
    # The same day against the server, where the documented Automation waits for it.
    automation = _documented_automation(webhook)
    try:
        result = monitor(date=DROP_DAY, **groups)
        key = f"{DROP_DAY}|document_mrr|all"
        assert (result.alerts["sent"], result.alerts["already_sent"], result.alerts["skipped"]) == ([key], [], [])
        (message,) = _notifications(webhook)
        assert message["subject"] == "ragpulse: ragpulse.drift.degraded on document_mrr"
        assert message["body"].startswith(f"document_mrr (all) on {DROP_DAY}: mean ")
    finally:
        automation.delete()
    with duckdb.connect(str(database), read_only=True) as con:
        assert con.execute("SELECT channel, status, count(*) FROM alerts GROUP BY ALL").fetchall() == [
            ("event", "sent", 1)
        ]
