"""Prompt injection through a whole run (issue 16, fault 7): traces carrying injected statements and orders
are scored by an obedient judge over real HTTP, published to DuckDB, and checked in SQL.

The traces and the expected scores are those of ``tests/metrics/test_prompt_injection.py``, where the same
judge, given the old undelimited layout, scores the three injected traces 1.0.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, ScoringConfig, SourceConfig
from tests.doubles.judge_server import JudgeServer
from tests.doubles.obedient_judge import ObedientJudge, undelimited_text
from tests.metrics.test_prompt_injection import DELIMITED, INJECTED

DAY = dt.date(2026, 4, 9)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "traces" / f"dt={DAY}"
    folder.mkdir(parents=True)
    lines = [
        json.dumps(
            {
                **record,
                "timestamp": f"{DAY}T09:00:00Z",
                "contexts": [{"id": f"d{k}", "text": t} for k, t in enumerate(record["contexts"])],
            },
            ensure_ascii=False,
        )
        for record in INJECTED
    ]
    (folder / "part-0.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path / "traces"


def _rows(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_injected_statements_do_not_score_in_a_published_run(
    source: Path, tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    obedient = ObedientJudge()
    judge_server.responder = obedient
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "obedient-judge")
    monkeypatch.setenv("RAGPULSE_JUDGE_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", "sk-test-injection")
    monkeypatch.setenv("RAGPULSE_JUDGE_MAX_RETRIES", "0")
    monkeypatch.setenv("RAGPULSE_JUDGE_CACHE_URL", str(tmp_path / "judge-cache"))
    warehouse = tmp_path / "w.duckdb"
    groups: dict[str, Any] = {
        "date": DAY,
        "source": SourceConfig(url=str(source)),
        "scoring": ScoringConfig(metrics=("faithfulness",)),
    }
    per_trace = (
        "SELECT trace_id, value, status, coalesce(reason, '') FROM scores "
        f"WHERE metric = 'faithfulness' AND partition_date = DATE '{DAY}' ORDER BY trace_id"
    )
    counts = (
        "SELECT count(*), count(DISTINCT (trace_id, metric)), count(DISTINCT prompt_version), min(prompt_version) "
        f"FROM scores WHERE metric = 'faithfulness' AND partition_date = DATE '{DAY}'"
    )
    expected = sorted(
        (trace, value, "ok", "") if isinstance(value, float) else (trace, None, "not_applicable", value)
        for trace, value in DELIMITED.items()
    )

    evaluate_partition(**groups, output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "w1")))
    assert _rows(warehouse, per_trace) == expected
    assert _rows(warehouse, counts) == [(len(INJECTED), len(INJECTED), 1, "faithfulness/3")]
    assert obedient.obeyed == []
    calls = judge_server.calls
    assert calls == 2 * len(INJECTED) - 1  # no verdict call for the refusal, which holds no statements
    assert all("Statements:" not in undelimited_text(r.body["messages"]) for r in judge_server.chat_requests())

    # A re-run of the day (another work dir, so no task cache) replaces the rows from the call cache.
    evaluate_partition(**groups, output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "w2")))
    assert _rows(warehouse, per_trace) == expected
    assert _rows(warehouse, counts) == [(len(INJECTED), len(INJECTED), 1, "faithfulness/3")]
    assert judge_server.calls == calls
