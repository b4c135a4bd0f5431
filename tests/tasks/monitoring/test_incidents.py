"""Correlated alerts as incidents: one segment and family on one day, whatever the order the alerts came in."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest

from ragpulse.tasks.core.types import DriftAlert
from ragpulse.tasks.monitoring.config import AlertConfig
from ragpulse.tasks.monitoring.delivery import webhook_payload
from ragpulse.tasks.monitoring.incidents import family_of, incidents_of

DAY = dt.date(2026, 6, 2)


@pytest.mark.parametrize(
    ("metric", "family"),
    [
        ("document_mrr", "retrieval"), ("hit_rate@5", "retrieval"), ("empty_retrieval", "retrieval"),
        ("step.precision@5", "retrieval"), ("answer_f1", "answer"), ("refusal", "answer"),
        ("faithfulness", "judge"), ("aspect_critique:harmfulness", "judge"), ("latency_ms", "operational"),
        ("cost_usd", "operational"), ("error", "operational"), ("user_feedback:thumbs", "feedback"),
        ("tool_call_f1", "agent"), ("embedding_answer_support", "embedding"), ("topic.share", "input"),
        ("input.question_embedding", "input"),
    ],
)  # fmt: skip
def test_families(metric: str, family: str) -> None:
    assert family_of(metric) == family


def _alert(metric: str, segment: str, verdict: str = "degraded", state: str = "opened") -> DriftAlert:
    return DriftAlert(DAY, metric, segment, verdict, f"{metric} fell", 0.8, 0.5, -0.3, None, state=state)


def test_a_retrieval_regression_in_one_app_is_one_incident_per_segment() -> None:
    """The demo's planted regression: every ranking metric of one app, in its segment and in the whole day."""
    ranking = ["document_map", "document_mrr", "document_ndcg@10", "hit_rate@5", "precision@5"]
    alerts = [_alert(m, s, "degraded") for m in ranking for s in ("all", "metadata.app=sales")]
    alerts += [_alert("precision@5", "language=ja", "coverage_down"), _alert("faithfulness", "metadata.app=sales")]
    alerts += [_alert("answer_f1", "metadata.app=sales", "within", state="resolved")]
    incidents = incidents_of(reversed(alerts))
    assert [(i.segment, i.family, i.state, len(i.alerts)) for i in incidents] == [
        ("all", "retrieval", "opened", 5),
        ("metadata.app=sales", "judge", "opened", 1),
        ("metadata.app=sales", "retrieval", "opened", 5),
        ("language=ja", "retrieval", "opened", 1),  # coverage_down is less severe than degraded
        ("metadata.app=sales", "answer", "resolved", 1),
    ]
    sales = incidents[2]
    assert [a.metric for a in sales.alerts] == sorted(ranking)
    assert sales.key == f"{DAY}|metadata.app=sales|retrieval|opened"
    assert sales.summary.startswith("5 retrieval metric(s) opened: document_map degraded, document_mrr degraded")
    assert incidents == incidents_of(alerts)  # the order of the alerts does not matter


def test_one_webhook_message_lists_the_incidents() -> None:
    alerts = [_alert(m, "metadata.app=サポート") for m in ("document_mrr", "hit_rate@5", "precision@5")]
    document = webhook_payload(alerts, AlertConfig(webhook_format="json"))
    assert [a["key"] for a in document["alerts"]] == [a.key for a in alerts]
    (incident,) = document["incidents"]
    assert incident["family"] == "retrieval" and incident["segment"] == "metadata.app=サポート"
    assert incident["alerts"] == sorted(a.key for a in alerts)
    slack = webhook_payload([*alerts, replace(alerts[0], metric="latency_ms", verdict="critical")], AlertConfig())
    assert slack["text"].endswith("4 drift alert(s) in 2 incident(s) for dt=2026-06-02")
    lines = slack["blocks"][1]["text"]["text"].splitlines()
    assert lines[0].startswith("• *latency_ms* (metadata.app=サポート): critical")  # the most severe first
    assert lines[1].startswith("• *retrieval* (metadata.app=サポート): 3 retrieval metric(s) opened")
    assert [line.split("*")[1] for line in lines[2:]] == ["document_mrr", "hit_rate@5", "precision@5"]
