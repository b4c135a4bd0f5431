"""The judge budget the way an operator meets it: `ragpulse monitor` by the real CLI, against the session's Prefect
server and the scripted judge server over HTTP, with a token budget the day cannot fit. The budget stops the calls
(counted at the server), the unjudged scores are `budget_exhausted`, the run says so and an alert is sent; a backfill
with a larger budget asks exactly the calls that were not made; the next day within budget resolves the alert. The
data outcome is checked in SQL."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, RunnerConfig, ScoringConfig, SourceConfig
from ragpulse.tasks.monitoring.budget_alerts import BUDGET_RULE
from ragpulse.tasks.monitoring.delivery import WEBHOOK_URL_ENV
from tests.doubles.judge_server import JudgeServer
from tests.doubles.trace_days import write_day
from tests.doubles.webhook_receiver import WebhookReceiver

DAYS = [dt.date(2026, 7, 1), dt.date(2026, 7, 2)]
N_TRACES = 24
CLAIMS = {"claims": [{"claim": "a", "reason": "r", "attributed": 1}, {"claim": "b", "reason": "r", "attributed": 0}]}
SMALL_BUDGET = 4000  # tokens: a few of the day's calls


def _write_day(root: Path, day: dt.date) -> None:
    """``N_TRACES`` traces with references, one in three in Japanese and one in three in Chinese."""
    lines = []
    for i in range(N_TRACES):
        question, answer, reference = [
            (f"What colour is item {i} of day {day.day}?", "Blue.", f"Item {i} is blue."),
            (f"{day.day}日の商品 {i} は何色ですか？", "青です。", f"商品 {i} は青です。"),
            (f"{day.day}日的商品 {i} 是什么颜色？", "蓝色。", f"商品 {i} 是蓝色的。"),
        ][i % 3]
        lines.append(
            {"trace_id": f"{day}-{i}", "timestamp": f"{day}T10:{i:02d}:00Z", "question": question, "answer": answer,
             "reference": reference, "contexts": [{"id": f"doc-{i}", "text": reference}]}
        )  # fmt: skip
    write_day(root, day, lines)


def _ragpulse(command: str, *args: str, tmp_path: Path, env: dict[str, str], budget: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", command, *args, "--source", str(tmp_path / "traces"),
         "--metrics", "context_recall", "--batch-size", "8", "--judge-run-budget-tokens", str(budget),
         "--alert-webhook-format", "json", "--no-question-drift", "--no-topics-enabled",
         "--warehouse", f"duckdb:///{tmp_path / 'w.duckdb'}", "--work-dir", str(tmp_path / "work"), "--json"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return {"result": json.loads(done.stdout), "stderr": done.stderr}


def _sql(tmp_path: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def _reservation(body: dict[str, Any]) -> int:
    """What the client reserves for a call (docs/judge.md): four ASCII characters a token, one token for any other
    character, and the completion budget."""
    text = "".join(m["content"] for m in body["messages"]) + json.dumps(body.get("response_format", ""))
    ascii_chars = sum(c.isascii() for c in text)
    return math.ceil(ascii_chars / 4) + len(text) - ascii_chars + 64


def _asked(judge: JudgeServer, since: int = 0) -> list[str]:
    return [json.dumps(r.body["messages"], sort_keys=True) for r in judge.chat_requests()[since:]]


@pytest.mark.slow
def test_a_budget_stops_the_calls_alerts_and_a_larger_one_completes_them(
    tmp_path: Path, judge_server: JudgeServer, webhook: WebhookReceiver, prefect_api: str
) -> None:
    for day in DAYS:
        _write_day(tmp_path / "traces", day)
    judge_server.responder = lambda body: CLAIMS
    env = {
        **os.environ, "PREFECT_API_URL": prefect_api, WEBHOOK_URL_ENV: webhook.url, "COLUMNS": "200",
        "RAGPULSE_JUDGE_MODEL": "judge-budget", "RAGPULSE_JUDGE_BASE_URL": judge_server.base_url,
        "RAGPULSE_JUDGE_API_KEY": "sk-test-budget-0000", "RAGPULSE_JUDGE_COMPLETION_TOKEN_BUDGET": "64",
        "RAGPULSE_JUDGE_MAX_CONCURRENCY": "1",
    }  # fmt: skip
    scores_of_day = f"FROM scores WHERE metric = 'context_recall' AND partition_date = '{DAYS[0]}'"

    # Day 1 cannot fit: the calls stop at the budget, in flight together included.
    first = _ragpulse("monitor", "--date", str(DAYS[0]), tmp_path=tmp_path, env=env, budget=SMALL_BUDGET)
    made = _asked(judge_server)
    summary = first["result"]["run"]
    assert 0 < len(made) < N_TRACES
    assert summary["over_budget"] == N_TRACES - len(made)
    assert "the judge budget is spent" in summary["warning"] and "the judge budget is spent" in first["stderr"]
    ((usage_json,),) = _sql(tmp_path, f"SELECT judge_usage FROM runs WHERE partition_date = '{DAYS[0]}'")
    usage = json.loads(usage_json)["context_recall"]
    assert usage["http_calls"] == len(made) and usage["budget_refused"] >= 1
    assert usage["prompt_tokens"] + usage["completion_tokens"] <= SMALL_BUDGET
    # One call at a time: the call refused was one the rest of the budget could not hold (its prompt's estimate, as
    # the client makes it, plus 64 completion tokens).
    assert SMALL_BUDGET - (usage["prompt_tokens"] + usage["completion_tokens"]) < max(
        _reservation(r.body) for r in judge_server.chat_requests()
    )
    statuses = dict(_sql(tmp_path, f"SELECT coalesce(reason, status), count(*) {scores_of_day} GROUP BY 1"))
    assert statuses == {"ok": len(made), "budget_exhausted": N_TRACES - len(made)}
    opened = [a for m in webhook.messages for a in m["alerts"] if a["rule"] == BUDGET_RULE]
    assert [(a["state"], a["verdict"], a["metric"]) for a in opened] == [("opened", "warning", "context_recall")]

    # A backfill of the day with a larger budget: the day is not counted as done, and only the unmade calls go out.
    backfill = _ragpulse(
        "backfill", "--start", str(DAYS[0]), "--end", str(DAYS[0]), tmp_path=tmp_path, env=env, budget=10**6
    )
    assert backfill["result"]["completed"] == [str(DAYS[0])]
    asked_again = _asked(judge_server, since=len(made))
    assert len(asked_again) == N_TRACES - len(made) and not set(asked_again) & set(made)
    statuses = dict(_sql(tmp_path, f"SELECT coalesce(reason, status), count(*) {scores_of_day} GROUP BY 1"))
    assert statuses == {"ok": N_TRACES}
    assert _sql(tmp_path, f"SELECT count(DISTINCT trace_id) = count(*) {scores_of_day}") == [(True,)]

    # The next day fits its budget: the budget's alert resolves on every channel.
    _ragpulse("monitor", "--date", str(DAYS[1]), tmp_path=tmp_path, env=env, budget=10**6)
    notices = [
        (m["partition_date"], a["state"]) for m in webhook.messages for a in m["alerts"] if a["rule"] == BUDGET_RULE
    ]
    assert notices == [(str(DAYS[0]), "opened"), (str(DAYS[1]), "resolved")]
    ledger = _sql(
        tmp_path, f"SELECT channel, partition_date, state FROM alerts WHERE rule = '{BUDGET_RULE}' AND status = 'sent' "
        "ORDER BY ALL",
    )  # fmt: skip
    assert ledger == [
        (c, d, s) for c in ("event", "webhook") for d, s in zip(DAYS, ("opened", "resolved"), strict=True)
    ]

    # What re-running both days would cost comes from these runs: 24 traces a day, one call per judged trace.
    plan = _ragpulse(
        "backfill", "--start", str(DAYS[0]), "--end", str(DAYS[1]), "--force", "--dry-run", tmp_path=tmp_path, env=env,
        budget=1,
    )["result"]  # fmt: skip
    cost = plan["judge_cost"]
    assert plan["partitions"] == [str(day) for day in DAYS]
    assert (cost["basis"], cost["traces_per_day"], cost["judged_share"]) == ("history", N_TRACES, 1.0)
    assert cost["calls"] == 2 * N_TRACES and cost["tokens"] > 0 and cost["usd"] is None  # judge-budget: unpriced


@pytest.mark.slow
def test_on_dask_each_judge_task_spends_no_more_than_its_allowance(
    tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dask workers cannot reach the run's budget: each judge task gets a share by its traces, and together they
    stay within the budget."""
    _write_day(tmp_path / "traces", DAYS[0])
    judge_server.responder = lambda body: CLAIMS
    for name, value in {
        "MODEL": "judge-budget-dask", "BASE_URL": judge_server.base_url, "API_KEY": "sk-test-budget-0000",
        "COMPLETION_TOKEN_BUDGET": "64", "RUN_BUDGET_TOKENS": str(SMALL_BUDGET),
    }.items():  # fmt: skip
        monkeypatch.setenv(f"RAGPULSE_JUDGE_{name}", value)
    summary = evaluate_partition(
        date=DAYS[0],
        source=SourceConfig(url=str(tmp_path / "traces")),
        scoring=ScoringConfig(metrics=("context_recall",), batch_size=8),
        output=OutputConfig(warehouse=f"duckdb:///{tmp_path / 'w.duckdb'}", work_dir=str(tmp_path / "work")),
        runner=RunnerConfig(kind="dask", max_workers=2),
    )
    usage = summary.judge_usage["context_recall"]
    assert usage["prompt_tokens"] + usage["completion_tokens"] <= SMALL_BUDGET
    assert usage["http_calls"] == judge_server.calls and 0 < judge_server.calls < N_TRACES
    assert summary.over_budget == N_TRACES - judge_server.calls
    # Three batches of 8 traces with an allowance of a third of the budget each; the scores say what each did.
    statuses = _sql(
        tmp_path, "SELECT count(*) FILTER (status = 'ok'), count(*) FILTER (reason = 'budget_exhausted') FROM scores"
    )
    assert statuses == [(judge_server.calls, N_TRACES - judge_server.calls)]
