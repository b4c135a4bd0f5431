"""The alert lifecycle over a run of days, decided from ledger rows as the warehouse stores them: an alert opens once,
is reminded after ``reminder_days``, resolves when its row says the metric is fine again, and opens anew after."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ragpulse.tasks.monitoring.comparison import alert_of
from ragpulse.tasks.monitoring.lifecycle import channel_notices, last_notices

DAY = dt.date(2026, 6, 1)
RULE = "faithfulness mean below 0.8/0.6 per language min 30"


def _row(day: dt.date, verdict: str, *, segment: str = "language=ja", rule: str | None = RULE) -> dict[str, Any]:
    return {
        "partition_date": day, "metric": "faithfulness", "segment": segment, "verdict": verdict,
        "detail": f"mean on {day}", "baseline_mean": None, "current_mean": 0.5, "delta": None, "judge_model": "j",
        "rule": rule, "observed": 0.5,
    }  # fmt: skip


def _run(days: list[tuple[dt.date, str]], reminder_days: int) -> list[tuple[dt.date, str, str]]:
    """Each day's verdict through the lifecycle on one channel, its notices recorded in a ledger as send-alerts does;
    returns (day, state, verdict) per notice sent."""
    ledger: list[dict[str, Any]] = []
    told = []
    for day, verdict in days:
        rows = [_row(day, verdict)]
        alerts = [alert_of(row) for row in rows if verdict in ("critical", "warning")]
        notices = channel_notices("webhook", alerts, rows, last_notices(ledger, before=day), reminder_days)
        for notice in notices.pending:
            told.append((day, notice.state, notice.verdict))
            ledger.append(
                {"alert_key": notice.key, "partition_date": day, "metric": notice.metric, "segment": notice.segment,
                 "rule": notice.rule, "channel": "webhook", "status": "sent", "state": notice.state}
            )  # fmt: skip
    return told


def _days(*verdicts: str) -> list[tuple[dt.date, str]]:
    return [(DAY + dt.timedelta(days=i), verdict) for i, verdict in enumerate(verdicts)]


def test_an_alert_opens_once_reminds_resolves_and_opens_again() -> None:
    days = _days("critical", "critical", "warning", "critical", "insufficient_data", "within", "within", "critical")
    assert _run(days, reminder_days=3) == [
        (DAY, "opened", "critical"),
        # days 1 and 2 are open, no reminder due; a change from critical to warning is the same alert
        (DAY + dt.timedelta(days=3), "reminder", "critical"),
        # too little data says nothing either way: still open
        (DAY + dt.timedelta(days=5), "resolved", "within"),
        (DAY + dt.timedelta(days=7), "opened", "critical"),
    ]


def test_no_reminder_with_zero_days() -> None:
    assert _run(_days(*["critical"] * 10, "within"), reminder_days=0) == [
        (DAY, "opened", "critical"),
        (DAY + dt.timedelta(days=10), "resolved", "within"),
    ]


def test_days_are_taken_in_partition_order_not_run_order() -> None:
    """A re-run of an earlier day (a backfill) decides from the notices before that day only."""
    ledger = [
        {"alert_key": "k1", "partition_date": DAY, "metric": "faithfulness", "segment": "language=ja", "rule": RULE,
         "channel": "webhook", "status": "sent", "state": "opened"},
        {"alert_key": "k3", "partition_date": DAY + dt.timedelta(days=2), "metric": "faithfulness",
         "segment": "language=ja", "rule": RULE, "channel": "webhook", "status": "sent", "state": "resolved"},
        # a failed delivery is no notice, and a row from before v12 (no state) opened its alert
        {"alert_key": "k0", "partition_date": DAY - dt.timedelta(days=1), "metric": "faithfulness", "segment": "all",
         "rule": None, "channel": "webhook", "status": "failed", "state": "opened"},
        {"alert_key": "kx", "partition_date": DAY - dt.timedelta(days=3), "metric": "recall@5", "segment": "all",
         "rule": None, "channel": "webhook", "status": "sent", "state": None},
    ]  # fmt: skip
    second = DAY + dt.timedelta(days=1)
    last = last_notices(ledger, before=second)
    assert set(last) == {("webhook", f"faithfulness|language=ja|{RULE}"), ("webhook", "recall@5|all")}
    rows = [_row(second, "critical")]
    notices = channel_notices("webhook", [alert_of(rows[0])], rows, last, reminder_days=7)
    assert notices.pending == [] and [a.key for a in notices.still_open] == [
        f"{second}|faithfulness|language=ja|{RULE}"
    ]
    # Another channel has its own lifecycle: nothing was sent there, so the alert opens on it.
    other = channel_notices("event", [alert_of(rows[0])], rows, last, reminder_days=7)
    assert [a.state for a in other.pending] == ["opened"]


def test_a_drift_alert_and_a_rule_on_the_same_segment_are_two_alerts() -> None:
    drift, rule = _row(DAY, "degraded", rule=None), _row(DAY, "critical")
    alerts = [alert_of(drift), alert_of(rule)]
    assert len({a.dedup_key for a in alerts}) == 2 and len({a.key for a in alerts}) == 2
    assert alerts[0].dedup_key == "faithfulness|language=ja"
