"""Judge failures heal on the next run (issue 16, fault 1), through the real flow, the real openai client, the
scripted judge server and DuckDB: a run publishes failed NaNs (or refuses to publish above max_failure_rate), the
server recovers, and the re-run asks exactly the failed calls again and replaces the rows. ``--rescore all`` asks
every call again, with the same configuration hash."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, QualityConfig, ScoringConfig, SourceConfig
from ragpulse.tasks.demo.generate import generate_demo_traces
from ragpulse.tasks.quality.tasks import OutputValidationError
from tests.doubles.judge_server import Fault, JudgeServer, RecordedRequest

DAY = dt.date(2026, 4, 7)
METRICS = ("document_mrr", "context_recall")
BATCH_SIZE = 10
CLAIMS = {"claims": [{"claim": "a", "reason": "r", "attributed": 1}, {"claim": "b", "reason": "r", "attributed": 0}]}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("heal-traces")
    generate_demo_traces(root, start=DAY, days=1, traces_per_day=40, seed=11, malformed_per_day=0)
    return root


@pytest.fixture
def judge(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> JudgeServer:
    judge_server.responder = lambda body: CLAIMS
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "judge-heal")
    monkeypatch.setenv("RAGPULSE_JUDGE_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", "sk-test-heal-0000")
    monkeypatch.setenv("RAGPULSE_JUDGE_BACKOFF_BASE_SECONDS", "0.01")
    monkeypatch.setenv("RAGPULSE_JUDGE_MAX_RETRIES", "1")
    monkeypatch.setenv("RAGPULSE_JUDGE_TIMEOUT_SECONDS", "2")
    return judge_server


def _records(traces: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted((traces / f"dt={DAY}").iterdir()):
        if path.suffix == ".parquet":
            records += pq.read_table(path).to_pylist()
        else:
            text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
            records += [json.loads(line) for line in text.splitlines() if line.strip()]
    return records


def _needles(traces: Path, count: int) -> list[tuple[str, set[str]]]:
    """``count`` plain-ASCII questions of traces context_recall judges, each with the ids of its traces."""
    judged = [r for r in _records(traces) if r.get("reference") and r.get("contexts")]
    questions = sorted({r["question"] for r in judged if r["question"].isascii() and '"' not in r["question"]})
    assert len(questions) >= count
    return [(q, {r["trace_id"] for r in judged if r["question"] == q}) for q in questions[:count]]


def _mentions(body: dict[str, Any], needle: str) -> bool:
    return any(needle in str(m.get("content") or "") for m in body["messages"])


def _is_repair(request: RecordedRequest) -> bool:
    return any(m["role"] == "assistant" for m in request.body["messages"])


def _asked(requests: list[RecordedRequest]) -> list[str]:
    """The distinct calls (not repairs, not retries) among ``requests``, as their messages."""
    return sorted({json.dumps(r.body["messages"]) for r in requests if not _is_repair(r)})


def _groups(traces: Path, tmp_path: Path, **quality: Any) -> dict[str, Any]:
    return {
        "date": DAY,
        "source": SourceConfig(url=str(traces)),
        "scoring": ScoringConfig(metrics=METRICS, batch_size=BATCH_SIZE),
        "quality": QualityConfig(**quality),
        "output": OutputConfig(warehouse=f"duckdb:///{tmp_path / 'w.duckdb'}", work_dir=str(tmp_path / "work")),
    }


def _sql(tmp_path: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def _counts(tmp_path: Path) -> tuple[int, int, int, int]:
    """Rows present, distinct (trace, metric) rows, failed context_recall rows, ok context_recall rows."""
    ((present, distinct, failed, ok),) = _sql(
        tmp_path,
        f"SELECT count(*), count(DISTINCT (trace_id, metric)), "
        f"count(*) FILTER (metric = 'context_recall' AND status = 'failed'), "
        f"count(*) FILTER (metric = 'context_recall' AND status = 'ok') FROM scores WHERE partition_date = '{DAY}'",
    )
    return present, distinct, failed, ok


def _cached_judge_batches(tmp_path: Path) -> int:
    """Judge batches with a task cache record: what a later process would be served."""
    return sum(1 for p in (tmp_path / "work" / "results").iterdir() if p.name.startswith("judge-batch-"))


def test_failed_calls_are_published_as_nan_and_the_rerun_asks_exactly_them(
    traces: Path, tmp_path: Path, judge: JudgeServer
) -> None:
    (erroring, errored), (misshapen, misshaped), (slow, slowed) = _needles(traces, 3)
    judge.responder = lambda body: {"score": "high"} if _mentions(body, misshapen) else CLAIMS

    def fault(body: dict[str, Any]) -> Fault | None:
        if _mentions(body, erroring):
            return Fault.server_error(503)
        return Fault.hang_up(10) if _mentions(body, slow) else None

    judge.fault_rule = fault
    first = evaluate_partition(**_groups(traces, tmp_path, max_failure_rate=0.5))
    n_traces = first.n_traces
    expected_rows = n_traces * len(METRICS)
    failed_reasons = dict(
        _sql(tmp_path, "SELECT reason, list(trace_id ORDER BY trace_id) FROM scores WHERE status = 'failed' GROUP BY 1")
    )
    assert {reason: set(ids) for reason, ids in failed_reasons.items()} == {
        "server_error_after_1_retries": errored,
        "judge_parse_error": misshaped,
        "timeout_after_1_retries": slowed,
    }
    n_failed = len(errored | misshaped | slowed)
    present, distinct, failed, ok_before = _counts(tmp_path)
    assert (present, distinct, failed) == (expected_rows, expected_rows, n_failed)
    failing = [r for r in judge.chat_requests() if any(_mentions(r.body, q) for q in (erroring, misshapen, slow))]
    to_reask = _asked(failing)
    assert len(to_reask) >= 3
    n_batches, healthy_batches = first.n_batches, _cached_judge_batches(tmp_path)
    assert 0 < healthy_batches < n_batches  # the batches with failures left no cache record

    # The server recovers; the same run again re-asks only the failed calls (the rest is in the call cache).
    judge.fault_rule = None
    judge.responder = lambda body: CLAIMS
    sent = judge.calls
    second = evaluate_partition(**_groups(traces, tmp_path, max_failure_rate=0.5))
    reasked = judge.chat_requests()[sent:]
    assert _asked(reasked) == to_reask and len(reasked) == len(to_reask)
    assert sum(u["http_calls"] for u in second.judge_usage.values()) == len(to_reask)
    present, distinct, failed, ok_after = _counts(tmp_path)
    assert (present, distinct, failed, ok_after) == (expected_rows, expected_rows, 0, ok_before + n_failed)
    assert _sql(tmp_path, "SELECT count(DISTINCT run_id) FROM scores") == [(1,)]
    assert _cached_judge_batches(tmp_path) == n_batches
    assert second.n_batches_cached == healthy_batches  # the healthy batches came from the task cache
    cache = "".join(p.read_text() for p in (tmp_path / "work" / "judge-cache").rglob("*.json"))
    assert "high" not in cache  # the wrong-schema reply never reached the call cache


def test_above_the_failure_rate_nothing_is_published_and_the_rerun_heals(
    traces: Path, tmp_path: Path, judge: JudgeServer
) -> None:
    (erroring, errored), *_ = _needles(traces, 1)
    judge.fault_rule = lambda body: Fault.server_error() if _mentions(body, erroring) else None
    with pytest.raises(OutputValidationError):
        evaluate_partition(**_groups(traces, tmp_path, max_failure_rate=0.0))
    # The refusal is recorded (validations), the day's scores are not.
    assert _sql(tmp_path, f"SELECT count(*) FROM scores WHERE partition_date = '{DAY}'") == [(0,)]
    assert _sql(tmp_path, f"SELECT count(*) > 0 FROM validations WHERE partition_date = '{DAY}'") == [(True,)]
    to_reask = _asked([r for r in judge.chat_requests() if _mentions(r.body, erroring)])

    judge.fault_rule = None
    sent = judge.calls
    summary = evaluate_partition(**_groups(traces, tmp_path, max_failure_rate=0.0))
    assert _asked(judge.chat_requests()[sent:]) == to_reask and judge.calls - sent == len(to_reask)
    expected_rows = summary.n_traces * len(METRICS)
    present, distinct, failed, _ = _counts(tmp_path)
    assert (present, distinct, failed) == (expected_rows, expected_rows, 0)
    assert {trace for (trace,) in _sql(tmp_path, "SELECT trace_id FROM scores WHERE status = 'ok'")} >= errored


def test_rescore_all_reasks_every_call_with_the_same_configuration(
    traces: Path, tmp_path: Path, judge: JudgeServer
) -> None:
    cli = CliRunner()
    args = [
        "evaluate", "--date", DAY.isoformat(), "--source", str(traces), "--metrics", ",".join(METRICS),
        "--batch-size", str(BATCH_SIZE), "--warehouse", f"duckdb:///{tmp_path / 'w.duckdb'}",
        "--work-dir", str(tmp_path / "work"), "--max-failure-rate", "0.5",
    ]  # fmt: skip
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    everything = _asked(judge.chat_requests())
    expected_rows, _, _, _ = _counts(tmp_path)

    # The model behind the name changed: --rescore all asks every call again, although all is cached.
    judge.responder = lambda body: {"claims": [{"claim": "a", "reason": "r", "attributed": 1}]}
    (poisoned, affected), *_ = _needles(traces, 1)
    judge.fault_rule = lambda body: Fault.server_error() if _mentions(body, poisoned) else None
    sent = judge.calls
    result = cli.invoke(app, [*args, "--rescore", "all"])
    assert result.exit_code == 0, result.output
    assert _asked(judge.chat_requests()[sent:]) == everything
    failed_calls = _asked([r for r in judge.chat_requests()[sent:] if _mentions(r.body, poisoned)])
    present, distinct, failed, _ = _counts(tmp_path)
    assert (present, distinct, failed) == (expected_rows, expected_rows, len(affected))
    assert _sql(tmp_path, "SELECT DISTINCT value FROM scores WHERE metric = 'context_recall' AND status = 'ok'") == [
        (1.0,)
    ]
    hashes = _sql(tmp_path, "SELECT count(*), count(DISTINCT config_hash) FROM runs")
    assert hashes == [(2, 1)]

    # A rescored batch with a failure is not served from the task cache (its old record was expired), nor are the
    # failed calls from the call cache (their old entries were dropped): the next default run re-asks just those.
    judge.fault_rule = None
    sent = judge.calls
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    reasked = judge.chat_requests()[sent:]
    assert failed_calls and _asked(reasked) == failed_calls and len(reasked) == len(failed_calls)
    present, distinct, failed, _ = _counts(tmp_path)
    assert (present, distinct, failed) == (expected_rows, expected_rows, 0)
