"""Judge metrics inside the flow: real HTTP to a scripted OpenAI-compatible server, through the real client."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.metrics import context_recall, faithfulness
from ragpulse.tasks.config import OutputConfig, QualityConfig, ScoringConfig, SourceConfig
from ragpulse.tasks.demo.generate import generate_demo_traces
from tests.doubles.judge_server import Fault, JudgeServer

DAY = dt.date(2026, 4, 6)
JUDGED = ["document_mrr", "faithfulness", "context_recall", "aspect_critique:coherence"]
SECRET = "sk-test-do-not-leak-4242"


def scripted(body: dict[str, Any]) -> dict[str, Any] | list[str]:
    """Fixed verdicts by request kind: faithfulness 1/2, context recall 2/3, coherence votes 1, 0, 1."""
    name = body.get("response_format", {}).get("json_schema", {}).get("name", "")
    if name.startswith("answer_statements"):
        return {"statements": ["The answer states one thing.", "The answer states another thing."]}
    if name.startswith("faithfulness"):
        return {
            "verdicts": [
                {"statement": "one", "reason": "in context 1", "supported": True},
                {"statement": "two", "reason": "not in the contexts", "supported": False},
            ]
        }
    if name.startswith("context_recall"):
        claims = [("a", 1), ("b", 1), ("c", 0)]
        return {"claims": [{"claim": c, "reason": "r", "attributed": a} for c, a in claims]}
    if name.startswith("aspect_critique"):
        return [json.dumps({"reason": "r", "verdict": v}) for v in (1, 0, 1)]
    raise AssertionError(f"unexpected judge request {name!r}")


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("judge-traces")
    generate_demo_traces(root, start=DAY, days=1, traces_per_day=40, seed=5, malformed_per_day=0)
    return root


@pytest.fixture
def judge_env(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> JudgeServer:
    judge_server.responder = scripted
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "judge-small")
    monkeypatch.setenv("RAGPULSE_JUDGE_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", SECRET)
    monkeypatch.setenv("RAGPULSE_JUDGE_BACKOFF_BASE_SECONDS", "0.01")
    monkeypatch.setenv("RAGPULSE_JUDGE_MAX_RETRIES", "2")
    monkeypatch.setenv("RAGPULSE_JUDGE_CACHE_URL", str(tmp_path / "judge-cache"))
    return judge_server


def _groups(traces: Path, warehouse: Path, work_dir: Path, metrics: list[str]) -> dict[str, Any]:
    """The day's source, ``metrics`` and the output groups; the judge itself comes from RAGPULSE_JUDGE_*."""
    return {
        "date": DAY,
        "source": SourceConfig(url=str(traces)),
        "scoring": ScoringConfig(metrics=tuple(metrics)),
        "output": OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(work_dir)),
    }


def _records(traces: Path) -> list[dict[str, Any]]:
    """Every trace of the day, from each kind of file the demo writes."""
    records = []
    for path in sorted((traces / f"dt={DAY}").iterdir()):
        if path.suffix == ".parquet":
            records += pq.read_table(path).to_pylist()
        else:
            text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
            records += [json.loads(line) for line in text.splitlines() if line.strip()]
    return records


def _rows(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_judge_metrics_are_scored_cached_and_never_leak_the_key(
    traces: Path, tmp_path: Path, judge_env: JudgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = tmp_path / "w.duckdb"
    summary = evaluate_partition(**_groups(traces, warehouse, tmp_path / "work-1", JUDGED))

    values = dict(_rows(warehouse, "SELECT metric, list(DISTINCT value) FROM scores WHERE status = 'ok' GROUP BY 1"))
    assert values["faithfulness"] == [0.5]
    assert [round(v, 12) for v in values["context_recall"]] == [round(2 / 3, 12)]
    assert values["aspect_critique:coherence"] == [1.0]
    not_ok = dict(_rows(warehouse, "SELECT reason, count(*) FROM scores WHERE status <> 'ok' GROUP BY 1"))
    assert set(not_ok) <= {
        "no_answer",
        "no_reference",
        "no_contexts",
        "no_relevance_labels",
        "no_relevant_context_labelled",
    }
    calls = judge_env.calls
    assert calls > 0 and summary.judge_model == "judge-small"
    assert summary.judge_usage["faithfulness"]["http_calls"] > 0
    stamped = _rows(warehouse, "SELECT metric, judge_model, prompt_version FROM scores GROUP BY ALL ORDER BY 1")
    assert stamped == [
        ("aspect_critique:coherence", "judge-small", stamped[0][2]),
        ("context_recall", "judge-small", context_recall.PROMPT_VERSION),
        ("document_mrr", None, None),
        ("faithfulness", "judge-small", faithfulness.PROMPT_VERSION),
    ]
    run_usage = _rows(warehouse, "SELECT judge_model, judge_usage FROM runs")
    assert run_usage[0][0] == "judge-small" and json.loads(run_usage[0][1])["faithfulness"]["http_calls"] > 0

    # A fresh work dir misses the task cache, but every call is answered by the shared call cache.
    again = evaluate_partition(**_groups(traces, warehouse, tmp_path / "work-2", JUDGED))
    assert judge_env.calls == calls
    assert sum(u["http_calls"] for u in again.judge_usage.values()) == 0
    assert _rows(warehouse, "SELECT count(DISTINCT run_id) FROM scores") == [(1,)]

    tables = json.dumps(_rows(warehouse, "SELECT * FROM runs"), default=str)
    tables += json.dumps(_rows(warehouse, "SELECT * FROM scores"), default=str)
    cache_files = "".join(p.read_text() for p in (tmp_path / "judge-cache").rglob("*.json"))
    assert SECRET not in tables and SECRET not in caplog.text and SECRET not in cache_files
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in judge_env.chat_requests())


def test_a_failing_call_is_nan_with_a_reason_and_the_rest_completes(
    traces: Path, tmp_path: Path, judge_env: JudgeServer
) -> None:
    judged = [r for r in _records(traces) if r.get("answer") and r.get("contexts")]
    question = judged[0]["question"]
    affected = {r["trace_id"] for r in judged if r["question"] == question}
    needle = json.dumps(question)[1:-1]
    judge_env.fault_rule = lambda body: Fault.rate_limited(retry_after="0") if needle in json.dumps(body) else None
    warehouse = tmp_path / "w.duckdb"
    evaluate_partition(
        quality=QualityConfig(max_failure_rate=0.5), **_groups(traces, warehouse, tmp_path / "work", ["faithfulness"])
    )
    failed = _rows(warehouse, "SELECT trace_id, value, reason FROM scores WHERE status = 'failed'")
    assert {trace for trace, _, _ in failed} == affected
    assert {(value, reason) for _, value, reason in failed} == {(None, "rate_limited_after_2_retries")}
    assert _rows(warehouse, "SELECT count(*) FROM scores WHERE status = 'ok'")[0][0] == len(judged) - len(affected)


def test_without_a_judge_the_llm_metrics_are_skipped_and_said_so(traces: Path, tmp_path: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    summary = evaluate_partition(**_groups(traces, warehouse, tmp_path, JUDGED))
    assert summary.skipped_metrics == ["faithfulness", "context_recall", "aspect_critique:coherence"]
    assert _rows(warehouse, "SELECT DISTINCT metric FROM scores") == [("document_mrr",)]


def test_semantic_similarity_needs_no_judge(traces: Path, tmp_path: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    summary = evaluate_partition(**_groups(traces, warehouse, tmp_path, ["answer_semantic_similarity", "answer_f1"]))
    assert summary.skipped_metrics == []
    rows = _rows(
        warehouse,
        "SELECT s.value, f.value FROM scores s JOIN scores f USING (trace_id) "
        "WHERE s.metric = 'answer_semantic_similarity' AND f.metric = 'answer_f1' AND s.status = 'ok'",
    )
    assert rows and all(0.0 <= sim <= 1.0 for sim, _ in rows)
    # An answer matching the reference (up to SQuAD normalisation) is near 1; a wrong one far below.
    exact = [sim for sim, f1 in rows if f1 == 1.0]
    wrong = [sim for sim, f1 in rows if f1 == 0.0]
    assert exact and wrong and min(exact) > 0.95 and sum(wrong) / len(wrong) < min(exact)
