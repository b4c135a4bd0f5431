"""Backfill, monitor, drift and alerts end to end: a synthetic history with a quality drop on one day."""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ragpulse.flows.backfill import backfill, progress_listener
from ragpulse.flows.monitor import monitor
from ragpulse.tasks.config import AlertConfig, DriftConfig, OutputConfig, ScoringConfig, SourceConfig
from ragpulse.tasks.core.artifacts import md, warehouse_tag
from ragpulse.tasks.monitoring.delivery import WEBHOOK_URL_ENV
from tests.artifacts import latest_markdown
from tests.doubles.webhook_receiver import SECRET_PATH, WebhookReceiver

START = dt.date(2026, 4, 1)
DAYS = [START + dt.timedelta(days=i) for i in range(7)]
DROP_DAY = DAYS[-1]
METRICS = ["document_mrr", "document_recall_single_hit", "answer_f1"]
PER_DAY = 240
DRIFT = DriftConfig(segment_key="metadata.app")
ALERTS = AlertConfig(webhook_format="json", backoff_seconds=0, max_attempts=3)


def _groups(source: Path, warehouse: str, work_dir: str, metrics: Sequence[str] = METRICS) -> dict[str, Any]:
    """The source, scoring (``metrics`` in batches of 100) and output groups every run here shares."""
    return {
        "source": SourceConfig(url=str(source)),
        "scoring": ScoringConfig(metrics=tuple(metrics), batch_size=100),
        "output": OutputConfig(warehouse=warehouse, work_dir=work_dir),
    }


def _write_day(root: Path, day: dt.date, rng: random.Random, *, sales_hit_rate: float) -> None:
    """Traces of two apps, sales asked in Japanese; retrieval finds the relevant document at some rank with the
    app's hit rate."""
    lines = []
    for i in range(PER_DAY):
        app = "sales" if i % 2 else "support"
        relevant = f"doc-{day:%m%d}-{i}"
        contexts = [{"id": f"other-{i}-{k}", "text": f"unrelated passage {k}", "score": 0.5} for k in range(5)]
        if rng.random() < (sales_hit_rate if app == "sales" else 0.8):
            contexts[rng.randrange(3)] = {"id": relevant, "text": "the answer is blue", "score": 0.9}
        answer = "blue" if rng.random() < 0.7 else "green"
        lines.append(
            {
                "trace_id": f"{day}-{i}",
                "timestamp": f"{day}T{i % 24:02d}:{i % 60:02d}:00Z",
                "question": f"商品 {i} は何色ですか？" if app == "sales" else f"what colour is item {i}?",
                "answer": answer,
                "contexts": contexts,
                "reference": "blue",
                "relevant_context_ids": {relevant: 1},
                "metadata": {"app": app},
            }
        )
    partition = root / f"dt={day.isoformat()}"
    partition.mkdir(parents=True, exist_ok=True)
    (partition / "traces.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history")
    rng = random.Random(11)
    for day in DAYS:
        _write_day(root, day, rng, sales_hit_rate=0.3 if day == DROP_DAY else 0.8)
    return root


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def planned(self, to_run: int, skipped: int) -> None:
        self.events.append(("planned", (to_run, skipped)))

    def partition(self, day: dt.date, event: str) -> None:
        self.events.append((event, day))


@pytest.fixture(scope="module")
def baseline_warehouse(history: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The six days before the drop, backfilled two at a time: (warehouse file, work dir)."""
    base = tmp_path_factory.mktemp("baseline")
    warehouse, work = base / "w.duckdb", base / "work"
    recorder = _Recorder()
    with progress_listener(recorder):
        state = backfill(
            start=DAYS[0], end=DAYS[-2], concurrency=2, drift=DRIFT, return_state=True,
            **_groups(history, f"duckdb:///{warehouse}", str(work)),
        )  # fmt: skip
    assert state.is_completed(), state.message
    result = state.result()
    assert result.completed == DAYS[:-1] and result.skipped == [] and result.failed == {}
    assert recorder.events[0] == ("planned", (6, 0))
    assert sorted(day for event, day in recorder.events if event == "completed") == DAYS[:-1]
    return warehouse, work


SCORE_METRICS = "WHERE metric NOT IN ('topic.share', 'input.question_embedding')"


def _query(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()


def _copy(baseline: tuple[Path, Path], tmp_path: Path) -> tuple[str, str]:
    warehouse = tmp_path / "w.duckdb"
    shutil.copy(baseline[0], warehouse)
    return f"duckdb:///{warehouse}", str(baseline[1])


def test_noise_before_the_drop_never_alerts(baseline_warehouse: tuple[Path, Path]) -> None:
    rows = _query(
        baseline_warehouse[0], "SELECT partition_date, verdict, count(*) FROM drift GROUP BY ALL ORDER BY ALL"
    )
    verdicts = {verdict for _, verdict, _ in rows}
    assert verdicts <= {"no_baseline", "insufficient_data", "stable", "improved"}
    first_compared = min(day for day, verdict, _ in rows if verdict == "stable")
    assert first_compared == DAYS[3]  # three baseline partitions are needed
    # Every score metric is compared overall and for both apps, every day (beside the questions' input drift and,
    # once topics are fit, each topic's share of the day).
    assert _query(
        baseline_warehouse[0], f"SELECT DISTINCT count(*) FROM drift {SCORE_METRICS} GROUP BY partition_date"
    ) == [(9,)]


def test_backfill_skips_what_is_published_with_the_same_configuration(
    history: Path, baseline_warehouse: tuple[Path, Path], tmp_path: Path
) -> None:
    warehouse, work = _copy(baseline_warehouse, tmp_path)
    common = dict(start=DAYS[0], end=DAYS[-2])
    again = backfill(**common, **_groups(history, warehouse, work))
    assert again.completed == [] and again.skipped == DAYS[:-1]
    # A run interrupted before its publish left no runs row: only that partition runs again, from the cache.
    with duckdb.connect(warehouse.removeprefix("duckdb:///")) as con:
        con.execute(f"DELETE FROM runs WHERE partition_date = '{DAYS[2]}'")
    resumed = backfill(**common, **_groups(history, warehouse, work))
    assert resumed.completed == [DAYS[2]] and resumed.skipped == [d for d in DAYS[:-1] if d != DAYS[2]]
    (summary,) = resumed.summaries
    assert summary.n_batches_cached == summary.n_batches
    # --force re-runs every partition, from the task cache.
    forced = backfill(force=True, concurrency=3, **common, **_groups(history, warehouse, work))
    assert forced.completed == DAYS[:-1]
    assert all(summary.n_batches_cached == summary.n_batches for summary in forced.summaries)
    # Another metric set is another configuration: every partition runs again.
    fewer = backfill(**common, **_groups(history, warehouse, work, METRICS[:2]))
    assert fewer.completed == DAYS[:-1] and fewer.config_hash != again.config_hash


def test_the_drop_is_detected_on_its_day_and_alerted_once(
    history: Path, baseline_warehouse: tuple[Path, Path], tmp_path: Path, webhook: WebhookReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    warehouse, work = _copy(baseline_warehouse, tmp_path)
    monkeypatch.setenv(WEBHOOK_URL_ENV, webhook.url)
    kwargs = dict(date=DROP_DAY, drift=DRIFT, alerts=ALERTS, **_groups(history, warehouse, work))
    first = monitor(**kwargs)

    degraded = _query(
        Path(warehouse.removeprefix("duckdb:///")),
        f"SELECT metric, segment FROM drift WHERE partition_date = '{DROP_DAY}' AND verdict = 'degraded' ORDER BY ALL",
    )
    assert ("document_mrr", "metadata.app=sales") in degraded
    assert ("document_recall_single_hit", "metadata.app=sales") in degraded
    assert not [row for row in degraded if row[1] == "metadata.app=support"]
    assert {metric for metric, _ in degraded} <= {"document_mrr", "document_recall_single_hit"}
    assert len(webhook.messages) == 1
    message = webhook.messages[0]
    assert message["partition_date"] == DROP_DAY.isoformat()
    assert sorted((a["metric"], a["segment"]) for a in message["alerts"]) == degraded
    # One incident per segment: the retriever's drop moved both retrieval metrics of the sales app together.
    incidents = {(i["segment"], i["family"]): sorted(i["alerts"]) for i in message["incidents"]}
    assert incidents == {
        (segment, "retrieval"): sorted(f"{DROP_DAY}|{m}|{s}" for m, s in degraded if s == segment)
        for segment in {s for _, s in degraded}
    }
    assert sorted(first.alerts["sent"]) == sorted(f"{DROP_DAY}|{m}|{s}" for m, s in degraded)

    second = monitor(**kwargs)
    assert len(webhook.messages) == 1
    assert second.alerts["sent"] == [] and sorted(second.alerts["already_sent"]) == sorted(first.alerts["sent"])
    path = Path(warehouse.removeprefix("duckdb:///"))
    assert _query(path, f"SELECT count(*) FROM drift {SCORE_METRICS} AND partition_date = '{DROP_DAY}'") == [(9,)]
    shares = _query(path, f"SELECT count(*) FROM drift WHERE metric = 'topic.share' AND partition_date = '{DROP_DAY}'")
    assert shares[0][0] >= 2  # the demo's questions fall into topics, compared with the baseline's
    ledger = _query(path, "SELECT channel, status, count(*) FROM alerts GROUP BY ALL ORDER BY ALL")
    assert ledger == [("event", "sent", len(degraded)), ("webhook", "sent", len(degraded))]
    drift_md = latest_markdown(f"ragpulse-drift-{DROP_DAY}-local-{warehouse_tag(warehouse)}")
    assert "degraded" in drift_md and SECRET_PATH not in drift_md


def test_drift_segmented_by_language_finds_the_drop_in_japanese(
    history: Path, baseline_warehouse: tuple[Path, Path], tmp_path: Path
) -> None:
    """The sales app's questions are Japanese: with segment_key = language the drop shows on language=ja, read
    from the traces' language column that staging identified."""
    warehouse, work = _copy(baseline_warehouse, tmp_path)
    # A threshold rule by the same key takes the segments drift read.
    drift = DriftConfig(segment_key="language", threshold_rules="document_mrr mean 0.1 per language")
    monitor(date=DROP_DAY, drift=drift, **_groups(history, warehouse, work))
    path = Path(warehouse.removeprefix("duckdb:///"))
    languages = _query(path, f"SELECT language, count(*) FROM traces WHERE partition_date = '{DROP_DAY}' GROUP BY 1")
    assert sorted(languages) == [("en", PER_DAY // 2), ("ja", PER_DAY // 2)]
    verdicts = dict(
        _query(
            path,
            f"SELECT segment, verdict FROM drift WHERE partition_date = '{DROP_DAY}' AND metric = 'document_mrr' "
            "AND rule IS NULL",
        )
    )
    assert verdicts["language=ja"] == "degraded" and verdicts["language=en"] == "stable"
    rules = _query(
        path,
        f"SELECT segment, current_n FROM drift WHERE partition_date = '{DROP_DAY}' AND rule IS NOT NULL ORDER BY 1",
    )
    ok = dict(
        _query(
            path,
            "SELECT 'language=' || t.language, count(*) FROM scores s JOIN traces t USING (partition_date, trace_id) "
            f"WHERE s.partition_date = '{DROP_DAY}' AND s.metric = 'document_mrr' AND s.status = 'ok' GROUP BY 1",
        )
    )
    assert rules == sorted(ok.items()) and len(rules) == 2


def test_a_threshold_breached_on_the_first_day_alerts_once_without_a_baseline(
    history: Path, tmp_path: Path, webhook: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drop day as a fresh warehouse's first day: drift has no baseline to compare with, but a threshold rule
    per language finds the Japanese segment (the sales app's questions) past its critical level, alerts once on
    the webhook and as an event, and a second run sends nothing again."""
    warehouse = f"duckdb:///{tmp_path / 'w.duckdb'}"
    path = tmp_path / "w.duckdb"
    monkeypatch.setenv(WEBHOOK_URL_ENV, webhook.url)
    rules = DriftConfig(
        segment_key="metadata.app",
        threshold_rules="document_recall_single_hit mean below 0.7/0.5 per language; document_mrr failure_rate 0.01",
    )
    kwargs = dict(date=DROP_DAY, drift=rules, alerts=ALERTS, **_groups(history, warehouse, str(tmp_path / "work")))
    first = monitor(**kwargs)

    rows = _query(
        path,
        f"SELECT segment, rule, verdict, observed, current_n FROM drift WHERE partition_date = '{DROP_DAY}' "
        "AND rule IS NOT NULL ORDER BY ALL",
    )
    by_segment = {(segment, rule.split()[1]): (verdict, observed, n) for segment, rule, verdict, observed, n in rows}
    assert set(by_segment) == {("language=en", "mean"), ("language=ja", "mean"), ("all", "failure_rate")}
    ja_hits, en_hits = (
        _query(
            path,
            "SELECT avg(s.value) FROM scores s JOIN traces t USING (partition_date, trace_id) "
            f"WHERE s.metric = 'document_recall_single_hit' AND t.language = '{code}'",
        )[0][0]
        for code in ("ja", "en")
    )
    assert by_segment["language=ja", "mean"] == ("critical", pytest.approx(ja_hits), PER_DAY // 2)
    assert ja_hits < 0.5 < 0.7 < en_hits  # the history's hit rates: sales 0.3 on this day, support 0.8
    assert by_segment["language=en", "mean"][0] == "within"
    assert by_segment["all", "failure_rate"][:2] == ("within", 0.0)
    baseline = _query(path, "SELECT DISTINCT verdict FROM drift WHERE rule IS NULL AND metric = 'document_mrr'")
    assert baseline == [("no_baseline",)]

    critical_key = f"{DROP_DAY}|document_recall_single_hit|language=ja|{rules.threshold_rules[0]}"
    assert first.alerts["sent"] == [critical_key]
    assert len(webhook.messages) == 1 and len(webhook.messages[0]["alerts"]) == 1
    sent = webhook.messages[0]["alerts"][0]
    assert sent["verdict"] == "critical" and sent["rule"] == str(rules.threshold_rules[0])
    assert sent["observed"] == pytest.approx(ja_hits)
    ledger = _query(path, "SELECT channel, status, verdict, rule FROM alerts ORDER BY channel")
    assert ledger == [(channel, "sent", "critical", str(rules.threshold_rules[0])) for channel in ("event", "webhook")]
    latest = _query(path, "SELECT verdict, observed FROM latest_alerts WHERE channel = 'webhook'")
    assert latest == [("critical", pytest.approx(ja_hits))]  # the view joins the alert to its own rule's row

    second = monitor(**kwargs)
    assert len(webhook.messages) == 1 and second.alerts["already_sent"] == [critical_key]
    drift_md = latest_markdown(f"ragpulse-drift-{DROP_DAY}-local-{warehouse_tag(warehouse)}")
    assert "| critical |" in drift_md and md(f"(rule: {rules.threshold_rules[0]})") in drift_md


def test_a_failing_webhook_is_retried_reported_and_sent_by_the_next_run(
    history: Path, baseline_warehouse: tuple[Path, Path], tmp_path: Path, webhook: WebhookReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    warehouse, work = _copy(baseline_warehouse, tmp_path)
    path = Path(warehouse.removeprefix("duckdb:///"))
    monkeypatch.setenv(WEBHOOK_URL_ENV, webhook.url)
    webhook.fail(503, 100)
    kwargs = dict(date=DROP_DAY, drift=DRIFT, alerts=ALERTS, **_groups(history, warehouse, work))
    result = monitor(**kwargs)

    assert webhook.attempts == ALERTS.max_attempts and webhook.messages == []
    assert result.alerts["failed"] and result.summary.n_traces == PER_DAY
    assert _query(path, f"SELECT count(*) FROM scores WHERE partition_date = '{DROP_DAY}'") == [(PER_DAY * 3,)]
    failures = _query(path, "SELECT DISTINCT status, attempts, error FROM alerts WHERE channel = 'webhook'")
    assert failures == [("failed", 3, "HTTP 503 from 127.0.0.1")]
    assert not _query(path, f"SELECT * FROM alerts WHERE error LIKE '%{SECRET_PATH}%'")

    webhook.fail(503, 0)
    retry = monitor(**kwargs)
    assert len(webhook.messages) == 1
    assert sorted(retry.alerts["sent"]) == sorted(result.alerts["failed"])
    events = _query(path, "SELECT count(*) FROM alerts WHERE channel = 'event'")
    assert events == [(len(result.alerts["failed"]),)]  # events went out the first time; not again


def test_the_webhook_url_can_come_from_a_secret_block(webhook: WebhookReceiver) -> None:
    from prefect.blocks.system import Secret

    from ragpulse.tasks.core.exceptions import ConfigError
    from ragpulse.tasks.monitoring.delivery import webhook_url

    Secret(value=webhook.url).save("ragpulse-test-webhook", overwrite=True)
    Secret(value="not a url").save("ragpulse-test-not-a-url", overwrite=True)
    assert webhook_url(AlertConfig(webhook_block="ragpulse-test-webhook")) == webhook.url
    with pytest.raises(ConfigError, match="'ragpulse-test-not-a-url' must hold an http"):
        webhook_url(AlertConfig(webhook_block="ragpulse-test-not-a-url"))
    with pytest.raises(ConfigError, match="no Prefect Secret block named 'absent' \\(alert webhook\\)"):
        webhook_url(AlertConfig(webhook_block="absent"))


def test_yesterday_is_taken_in_the_schedules_timezone_from_the_scheduled_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ragpulse.flows import monitor as monitor_module

    scheduled = dt.datetime(2026, 3, 2, 23, 30, tzinfo=dt.UTC)  # already 3 March in Berlin
    monkeypatch.setattr(monitor_module.flow_run, "get_scheduled_start_time", lambda: scheduled)
    assert monitor_module.partition_to_monitor("UTC") == dt.date(2026, 3, 1)
    assert monitor_module.partition_to_monitor("Europe/Berlin") == dt.date(2026, 3, 2)
    assert monitor_module.partition_to_monitor("Europe/Berlin", lag_days=2) == dt.date(2026, 3, 1)
