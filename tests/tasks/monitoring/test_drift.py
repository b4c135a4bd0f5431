"""Drift rows from score rows, segments, and the alert webhook's message and retries."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from ragpulse.tasks.config import AlertConfig, DriftConfig
from ragpulse.tasks.core.types import DriftAlert
from ragpulse.tasks.monitoring.comparison import alerts_of, drift_rows, segment_values
from ragpulse.tasks.monitoring.delivery import post, webhook_payload
from tests.doubles.webhook_receiver import SECRET_PATH, WebhookReceiver

DAYS = [dt.date(2026, 5, 1) + dt.timedelta(days=i) for i in range(8)]


def _rows(
    day: dt.date,
    metric: str,
    mean: float,
    n: int,
    rng: np.random.Generator,
    *,
    judge: str | None = None,
    prompt: str | None = None,
    failed: int = 0,
    segment: str | None = None,
) -> pd.DataFrame:
    values = np.clip(rng.normal(mean, 0.15, n), 0, 1)
    status = ["failed"] * failed + ["ok"] * (n - failed)
    return pd.DataFrame(
        {
            "partition_date": day,
            "trace_id": [f"{day}-{segment}-{i}" for i in range(n)],
            "metric": metric,
            "value": [None if s == "failed" else v for s, v in zip(status, values, strict=True)],
            "status": status,
            "metric_version": "1.0.0",
            "judge_model": judge,
            "prompt_version": prompt,
            "segment": segment,
        }
    )


def _history(build: dict[dt.date, list[pd.DataFrame]]) -> pa.Table:
    frame = pd.concat([frame for frames in build.values() for frame in frames], ignore_index=True)
    schema = pa.schema(
        [("partition_date", pa.date32()), ("trace_id", pa.string()), ("metric", pa.string()), ("value", pa.float64())]
        + [(name, pa.string()) for name in ("status", "metric_version", "judge_model", "prompt_version", "segment")]
    )
    return pa.Table.from_pandas(frame, schema=schema, preserve_index=False)


def test_a_drop_in_one_segment_is_found_in_that_segment() -> None:
    rng = np.random.default_rng(1)
    history = {
        day: [
            _rows(day, "document_mrr", 0.7, 200, rng, segment="support"),
            _rows(day, "document_mrr", 0.7 if day != DAYS[-1] else 0.45, 200, rng, segment="sales"),
        ]
        for day in DAYS
    }
    settings = DriftConfig(segment_key="metadata.app")
    rows = drift_rows(_history(history), DAYS[-1], DAYS[:-1], settings, "run-1").to_pylist()
    by_segment = {row["segment"]: row for row in rows}
    assert set(by_segment) == {"all", "metadata.app=support", "metadata.app=sales"}
    assert by_segment["metadata.app=sales"]["verdict"] == "degraded"
    assert by_segment["metadata.app=support"]["verdict"] == "stable"
    sales = by_segment["metadata.app=sales"]
    assert sales["baseline_partitions"] == 7 and sales["baseline_n"] == 1400 and sales["current_n"] == 200
    assert sales["baseline_start"] == DAYS[0] and sales["baseline_end"] == DAYS[-2]
    assert sales["ci_high"] < 0 and sales["run_id"] == "run-1"
    alerts = alerts_of(drift_rows(_history(history), DAYS[-1], DAYS[:-1], settings, "run-1"))
    assert {a.segment for a in alerts} >= {"metadata.app=sales"}
    assert all(a.key.startswith(f"{DAYS[-1]}|document_mrr|") for a in alerts)


def test_the_same_seed_gives_the_same_rows() -> None:
    rng = np.random.default_rng(2)
    history = _history({day: [_rows(day, "answer_f1", 0.6, 50, rng)] for day in DAYS})
    first = drift_rows(history, DAYS[-1], DAYS[:-1], DriftConfig(), "r").drop_columns(["computed_at"])
    second = drift_rows(history, DAYS[-1], DAYS[:-1], DriftConfig(), "r").drop_columns(["computed_at"])
    assert first.equals(second)


def test_scores_of_another_judge_are_not_the_baseline() -> None:
    rng = np.random.default_rng(3)
    history = {day: [_rows(day, "faithfulness", 0.9, 100, rng, judge="gpt-a", prompt="faithfulness/1")] for day in DAYS}
    history[DAYS[-1]] = [_rows(DAYS[-1], "faithfulness", 0.5, 100, rng, judge="gpt-b", prompt="faithfulness/1")]
    (row,) = drift_rows(_history(history), DAYS[-1], DAYS[:-1], DriftConfig(), "r").to_pylist()
    assert row["verdict"] == "no_baseline"
    assert (
        "another scorer" in row["detail"] and "judge gpt-a" in row["detail"] and "current: judge gpt-b" in row["detail"]
    )
    assert row["judge_model"] == "gpt-b" and row["baseline_n"] == 0

    # Part of the window made with the current judge: compared against that part only, and said so.
    for day in DAYS[4:-1]:
        history[day] = [_rows(day, "faithfulness", 0.9, 100, rng, judge="gpt-b", prompt="faithfulness/1")]
    (row,) = drift_rows(_history(history), DAYS[-1], DAYS[:-1], DriftConfig(), "r").to_pylist()
    assert row["verdict"] == "degraded" and row["baseline_partitions"] == 3
    assert "baseline excludes 4 partition(s) scored with judge gpt-a" in row["detail"]


def test_failures_and_direction() -> None:
    rng = np.random.default_rng(4)
    history = {day: [_rows(day, "aspect_critique:harmfulness", 0.1, 100, rng, failed=1)] for day in DAYS}
    history[DAYS[-1]] = [_rows(DAYS[-1], "aspect_critique:harmfulness", 0.4, 100, rng, failed=20)]
    (row,) = drift_rows(_history(history), DAYS[-1], DAYS[:-1], DriftConfig(), "r").to_pylist()
    assert row["verdict"] == "degraded"  # harmfulness going up is worse
    assert "failure rate 1.0% -> 20.0%" in row["detail"]
    assert row["current_failure_rate"] == pytest.approx(0.2)


def test_young_history_is_insufficient_not_an_alarm() -> None:
    rng = np.random.default_rng(5)
    history = _history({day: [_rows(day, "document_mrr", 0.9 if day < DAYS[2] else 0.1, 100, rng)] for day in DAYS[:3]})
    (row,) = drift_rows(history, DAYS[2], DAYS[:2], DriftConfig(), "r").to_pylist()
    assert row["verdict"] == "insufficient_data"
    (first,) = drift_rows(history, DAYS[0], [], DriftConfig(), "r").to_pylist()
    assert first["verdict"] == "no_baseline" and first["baseline_start"] is None


@pytest.mark.parametrize(
    ("metadata", "key", "expected"),
    [
        ('{"app": "support"}', "metadata.app", "support"),
        ('{"app": "support"}', "app", "support"),
        ('{"user": {"tier": 2}}', "metadata.user.tier", "2"),
        ('{"flag": true}', "flag", "true"),
        ('{"odd \\"key\\"": "x"}', 'odd "key"', "x"),
        ('{"user": {"tier": 2}}', "metadata.user", None),
        ('{"tags": ["a"]}', "tags", None),
        ('{"app": null}', "app", None),
        ('{"other": 1}', "app", None),
        ("not json", "app", None),
        (None, "app", None),
    ],
)
def test_segment_values(metadata: str | None, key: str, expected: str | None) -> None:
    values = segment_values(pa.array(["{}", metadata, '{"app": "x"}'], pa.string()), key)
    assert values.to_pylist()[1] == expected


def _alert(metric: str = "document_mrr") -> DriftAlert:
    return DriftAlert(DAYS[0], metric, "all", "degraded", "mean 0.700 -> 0.450", 0.7, 0.45, -0.25, None)


def test_webhook_payloads() -> None:
    slack = webhook_payload([_alert(), _alert("answer_f1")], AlertConfig(report_url="https://r.example/x.html"))
    # document_mrr is a retrieval metric, answer_f1 an answer metric: two incidents
    assert slack["text"] == f"ragpulse: 2 drift alert(s) in 2 incident(s) for dt={DAYS[0]}"
    section = slack["blocks"][1]["text"]["text"]
    assert "*document_mrr* (all): degraded, mean 0.700 → 0.450" in section and "Open the report" in section
    generic = webhook_payload([_alert()], AlertConfig(webhook_format="json"))
    assert generic["alerts"][0]["key"] == f"{DAYS[0]}|document_mrr|all"
    assert generic["alerts"][0]["delta"] == -0.25


def test_slack_links_only_an_http_report() -> None:
    """A report path or file:// URL is a location on some machine: shown as text, never as a dead link."""
    local = webhook_payload([_alert()], AlertConfig(report_url="file:///srv/r&d/report.html"))
    assert local["blocks"][1]["text"]["text"].endswith("\nReport: file:///srv/r&amp;d/report.html")
    remote = webhook_payload([_alert()], AlertConfig(report_url="https://r.example/x.html"))
    assert remote["blocks"][1]["text"]["text"].endswith("\n<https://r.example/x.html|Open the report>")


def test_webhook_retries_then_succeeds(webhook: WebhookReceiver) -> None:
    webhook.fail(503, 2)
    attempts, error = post(webhook.url, {"text": "x"}, AlertConfig(backoff_seconds=0))
    assert (attempts, error) == (3, None)
    assert webhook.messages == [{"text": "x"}]


def test_webhook_gives_up_without_leaking_its_url(webhook: WebhookReceiver) -> None:
    webhook.fail(503, 10)
    attempts, error = post(webhook.url, {"text": "x"}, AlertConfig(backoff_seconds=0, max_attempts=3))
    assert attempts == 3 and webhook.attempts == 3
    assert error == "HTTP 503 from 127.0.0.1" and SECRET_PATH not in error
    webhook.fail(400, 1)
    attempts, error = post(webhook.url, {"text": "x"}, AlertConfig(backoff_seconds=0))
    assert attempts == 1 and error == "HTTP 400 from 127.0.0.1"


def test_unreachable_webhook_is_an_error_not_an_exception() -> None:
    attempts, error = post("http://127.0.0.1:9/hook", {}, AlertConfig(backoff_seconds=0, max_attempts=2))
    assert attempts == 2 and error == "ConnectError reaching 127.0.0.1"
