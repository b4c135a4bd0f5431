"""``--dry-run``: the configuration checked, the partitions listed and the judge priced, nothing run or published."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app

runner = CliRunner()


def _source(root: Path, days: list[str]) -> Path:
    for day in days:
        partition = root / f"dt={day}"
        partition.mkdir(parents=True)
        line = {
            "trace_id": f"{day}-1",
            "question": "東京は日本の首都ですか？",
            "answer": "はい。",
            "contexts": ["東京は首都。"],
        }
        (partition / "traces.jsonl").write_text(json.dumps(line, ensure_ascii=False) + "\n")
    return root


def test_a_dry_run_prices_the_judge_and_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("RAGPULSE_JUDGE_BASE_URL", "http://127.0.0.1:9")
    source = _source(tmp_path / "traces", ["2026-10-01", "2026-10-02", "2026-10-03"])
    warehouse = tmp_path / "w.duckdb"
    common = ["--source", str(source), "--warehouse", f"duckdb:///{warehouse}", "--work-dir", str(tmp_path / "work"),
              "--metrics", "faithfulness,recall@5", "--dry-run"]  # fmt: skip
    shown = runner.invoke(app, ["evaluate", "--date", "2026-10-02", *common])
    assert shown.exit_code == 0, shown.output
    assert "dry run: 1 partition(s) to evaluate" in shown.output
    assert "expected judge cost (gpt-4o-mini, 1 day(s) x 1,000 traces" in shown.output and "$" in shown.output

    listed = runner.invoke(app, ["backfill", "--start", "2026-10-01", "--end", "2026-10-05", *common, "--json"])
    assert listed.exit_code == 0, listed.output
    plan = json.loads(listed.output)
    assert plan["partitions"] == ["2026-10-01", "2026-10-02", "2026-10-03"]
    # 3 days x 1,000 assumed traces x 1 call (faithfulness; recall@5 calls nothing), priced by the built-in list.
    assert plan["judge_cost"]["calls"] == 3_000 and plan["judge_cost"]["usd"] > 0
    assert not warehouse.exists() and not (tmp_path / "work").exists()  # nothing staged, scored or published
