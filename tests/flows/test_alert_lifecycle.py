"""The alert lifecycle the way an on-call engineer meets it: `ragpulse monitor` run day after day by the real CLI
against the session's Prefect server, a threshold rule breached from the first day (no baseline), the webhook told
once, reminded after `--alert-reminder-days`, and told when it resolves; the resolution also reaches a Prefect
Automation that notifies a second receiver. The ledger is checked in SQL."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from prefect.automations import Automation
from prefect.blocks.notifications import CustomWebhookNotificationBlock
from prefect.events.actions import SendNotification
from prefect.events.schemas.automations import EventTrigger, Posture

from ragpulse.tasks.monitoring.delivery import WEBHOOK_URL_ENV
from tests.doubles.trace_days import write_day
from tests.doubles.webhook_receiver import WebhookReceiver, receiving

START = dt.date(2026, 6, 1)
# hit_rate@5 per day: below the critical level for four days, then back above the warning level.
HIT_RATES = [0.2, 0.25, 0.2, 0.3, 0.95]
DAYS = [START + dt.timedelta(days=i) for i in range(len(HIT_RATES))]
RULE = "hit_rate@5 mean below 0.7/0.5 per all min 30"


def _write_day(root: Path, day: dt.date, hit_rate: float, rng: random.Random) -> None:
    """60 traces, half asked in Japanese, whose retriever finds the relevant passage with probability ``hit_rate``."""
    lines = []
    for i in range(60):
        relevant = f"doc-{day:%m%d}-{i}"
        found = rng.random() < hit_rate
        contexts = [{"id": relevant if found else f"other-{i}", "text": "青い"}, {"id": f"more-{i}", "text": "x"}]
        question = f"商品 {i} は何色ですか？" if i % 2 else f"what colour is item {i}?"
        lines.append(
            {"trace_id": f"{day}-{i}", "timestamp": f"{day}T10:{i:02d}:00Z", "question": question, "answer": "blue",
             "contexts": contexts, "relevant_context_ids": [relevant]}
        )  # fmt: skip
    write_day(root, day, lines)


def _monitor(day: dt.date, tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "monitor", "--date", str(day), "--source", str(tmp_path / "traces"),
         "--metrics", "hit_rate@5", "--threshold-rules", RULE, "--alert-reminder-days", "2",
         "--alert-webhook-format", "json", "--no-question-drift", "--no-topics-enabled",
         "--warehouse", f"duckdb:///{tmp_path / 'w.duckdb'}", "--work-dir", str(tmp_path / "work"), "--json"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)["alerts"]


def _automation(receiver: WebhookReceiver) -> Automation:
    """An Automation on resolutions of threshold alerts, notifying ``receiver`` through a custom webhook block."""
    block = CustomWebhookNotificationBlock(
        name="ragpulse lifecycle receiver",
        url=receiver.url,
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
        allow_private_urls=True,
    )
    block_id = block.save("ragpulse-lifecycle", overwrite=True)
    return Automation(
        name="ragpulse resolved thresholds",
        trigger=EventTrigger(
            expect={"ragpulse.threshold.resolved"},
            match={"prefect.resource.id": "ragpulse.metric.*"},
            posture=Posture.Reactive,
            threshold=1,
            within=0,
        ),
        actions=[
            SendNotification(
                block_document_id=block_id,
                subject="resolved: {{ event.resource['ragpulse.dedup-key'] }}",
                body="{{ event.resource.name }} on {{ event.resource['ragpulse.partition-date'] }}: "
                "{{ event.payload.detail }}",
            )
        ],
    ).create()


@pytest.mark.slow
def test_a_breach_from_the_first_day_opens_reminds_and_resolves(
    tmp_path: Path, webhook: WebhookReceiver, prefect_api: str
) -> None:
    rng = random.Random(5)
    for day, rate in zip(DAYS, HIT_RATES, strict=True):
        _write_day(tmp_path / "traces", day, rate, rng)
    env = {**os.environ, "PREFECT_API_URL": prefect_api, WEBHOOK_URL_ENV: webhook.url, "COLUMNS": "200"}
    key = f"hit_rate@5|all|{RULE}"
    with receiving() as notified:
        automation = _automation(notified)
        try:
            outcomes = [_monitor(day, tmp_path, env) for day in DAYS]
            rerun = _monitor(DAYS[-1], tmp_path, env)
            deadline = time.monotonic() + 60
            while not notified.messages and time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            automation.delete()

    # Day 0 opens (no baseline to drift from), day 1 is open, day 2 reminds (2 days on), day 3 is open (1 day
    # since the reminder), day 4 resolves; the re-run of day 4 sends nothing again.
    assert [o["sent"] for o in outcomes] == [[f"{d}|{key}"] if i in (0, 2, 4) else [] for i, d in enumerate(DAYS)]
    assert [o["still_open"] for o in outcomes] == [[], [f"{DAYS[1]}|{key}"], [], [f"{DAYS[3]}|{key}"], []]
    assert outcomes[2]["reminded"] == [f"{DAYS[2]}|{key}"] and outcomes[4]["resolved"] == [f"{DAYS[4]}|{key}"]
    assert rerun["sent"] == [] and rerun["already_sent"] == [f"{DAYS[4]}|{key}"]

    states = [
        (m["partition_date"], a["state"], a["verdict"], a["dedup_key"]) for m in webhook.messages for a in m["alerts"]
    ]
    notices = [("opened", "critical", 0), ("reminder", "critical", 2), ("resolved", "within", 4)]
    assert [s[:3] for s in states] == [(str(DAYS[i]), state, verdict) for state, verdict, i in notices]
    assert {s[3] for s in states} == {key}
    assert notified.messages == [
        {
            "subject": f"resolved: {key}",
            "body": f"hit_rate@5 on {DAYS[4]}: " + webhook.messages[-1]["alerts"][0]["detail"],
        }
    ]
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        ledger = con.execute(
            "SELECT channel, partition_date, state, verdict, rule FROM alerts WHERE status = 'sent' ORDER BY ALL"
        ).fetchall()
        rows = con.execute("SELECT partition_date, verdict FROM drift WHERE rule IS NOT NULL ORDER BY 1").fetchall()
    expected = [(DAYS[i], state, verdict) for state, verdict, i in notices]
    assert ledger == [(channel, *notice, RULE) for channel in ("event", "webhook") for notice in expected]
    assert rows == [(day, "critical") for day in DAYS[:-1]] + [(DAYS[-1], "within")]
