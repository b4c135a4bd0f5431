"""``sample_rate = "auto"`` through the real CLI against the session's Prefect server, the real openai client and the
scripted judge server: a day with a large English and a small Japanese segment judges each to its target, sized first
without a baseline and then from the previous day's spread. The expected sizes are worked out here from the rule
docs/judge.md writes down, not by the implementation; the counts are read in SQL."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.doubles.judge_server import JudgeServer
from tests.doubles.trace_days import write_day

DAYS = [dt.date(2026, 8, 3), dt.date(2026, 8, 4)]
N_ENGLISH, N_JAPANESE = 300, 20
HALF_WIDTH, MINIMUM = 0.1, 30
Z95 = 1.959963984540054


def _write_day(root: Path, day: dt.date) -> None:
    lines = []
    for i in range(N_ENGLISH + N_JAPANESE):
        if i < N_ENGLISH:
            question, reference = f"Which warehouse ships order {i} on day {day.day}?", f"Order {i} ships from Osaka."
        else:
            question, reference = (
                f"{day.day}日の注文 {i} はどの倉庫から出荷されますか？",
                f"注文 {i} は大阪の倉庫から出荷されます。",
            )
        lines.append(
            {"trace_id": f"{day}-{i}", "timestamp": f"{day}T09:00:00Z", "question": question, "answer": reference,
             "reference": reference, "contexts": [{"id": f"doc-{i}", "text": reference}]}
        )  # fmt: skip
    write_day(root, day, lines)


def _claims(body: dict[str, Any]) -> dict[str, Any]:
    """Two claims, attributed by the prompt's hash: context_recall 0, 0.5 or 1, so each day's scores spread."""
    digest = hashlib.sha256(json.dumps(body["messages"]).encode()).digest()
    return {"claims": [{"claim": c, "reason": "r", "attributed": digest[k] % 2} for k, c in enumerate("ab")]}


def _expected(n_traces: int, sd: float) -> int:
    """docs/judge.md: n0 = ceil((1.96 sd / h)^2), corrected for the segment's size, at least min(30, N)."""
    n0 = math.ceil((Z95 * sd / HALF_WIDTH) ** 2)
    return min(n_traces, max(math.ceil(n0 / (1 + (n0 - 1) / n_traces)), MINIMUM))


def _judged(con: duckdb.DuckDBPyConnection, day: dt.date) -> dict[str, set[str]]:
    rows = con.execute(
        "SELECT t.language, list(s.trace_id) FROM scores s JOIN traces t USING (partition_date, trace_id) "
        "WHERE s.metric = 'context_recall' AND s.partition_date = ? AND coalesce(s.reason, '') <> 'not_sampled' "
        "GROUP BY 1",
        [day],
    ).fetchall()
    return {language: set(ids) for language, ids in rows}


def _evaluate(day: dt.date, tmp_path: Path, env: dict[str, str], *extra: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "evaluate", "--date", str(day), "--source", str(tmp_path / "traces"),
         "--metrics", "context_recall", "--sample", "auto", "--sample-half-width", str(HALF_WIDTH),
         "--sample-min-per-segment", str(MINIMUM), "--batch-size", "100",
         "--warehouse", f"duckdb:///{tmp_path / 'w.duckdb'}", "--work-dir", str(tmp_path / "work"), "--json", *extra],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_auto_sample_judges_a_large_and_a_small_language_to_their_target(
    tmp_path: Path, judge_server: JudgeServer, prefect_api: str
) -> None:
    for day in DAYS:
        _write_day(tmp_path / "traces", day)
    judge_server.responder = _claims
    env = {
        **os.environ, "PREFECT_API_URL": prefect_api, "RAGPULSE_JUDGE_MODEL": "judge-auto-sample",
        "RAGPULSE_JUDGE_BASE_URL": judge_server.base_url, "RAGPULSE_JUDGE_API_KEY": "sk-test-auto-0000",
    }  # fmt: skip
    warehouse = tmp_path / "w.duckdb"

    # Day 1 has no baseline: the largest spread a score in [0, 1] can have, 0.5.
    _evaluate(DAYS[0], tmp_path, env)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        first = _judged(con, DAYS[0])
        spread = dict(
            con.execute(
                "SELECT t.language, stddev_samp(s.value) FROM scores s JOIN traces t USING (partition_date, trace_id) "
                "WHERE s.metric = 'context_recall' AND s.status = 'ok' GROUP BY 1"
            ).fetchall()
        )
    assert {language: len(ids) for language, ids in first.items()} == {
        "en": _expected(N_ENGLISH, 0.5), "ja": N_JAPANESE,
    }  # fmt: skip
    assert 0.2 < spread["en"] < 0.5  # the judge's replies spread the scores: day 2's sizes come from this

    # Day 2 is sized from day 1's spread per language; a re-run judges the very same traces, all from the cache.
    _evaluate(DAYS[1], tmp_path, env)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        second = _judged(con, DAYS[1])
    calls = judge_server.calls
    _evaluate(DAYS[1], tmp_path, env, "--republish")
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert _judged(con, DAYS[1]) == second and judge_server.calls == calls
    assert {language: len(ids) for language, ids in second.items()} == {
        "en": _expected(N_ENGLISH, spread["en"]), "ja": _expected(N_JAPANESE, spread["ja"]),
    }  # fmt: skip
    assert len(second["en"]) < len(first["en"])
