"""A cached staging whose batch files were removed (work dir cleaned, a bucket lifecycle rule) is staged again by
the next run, which publishes the same rows once."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import duckdb

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, ScoringConfig, SourceConfig
from ragpulse.tasks.demo.generate import generate_demo_traces

DAY = dt.date(2026, 4, 8)


def test_staged_batches_removed_behind_a_cached_staging_are_staged_again(tmp_path: Path) -> None:
    generate_demo_traces(tmp_path / "traces", start=DAY, days=1, traces_per_day=30, seed=3, malformed_per_day=0)
    warehouse = tmp_path / "w.duckdb"
    groups: dict[str, Any] = {
        "date": DAY,
        "source": SourceConfig(url=str(tmp_path / "traces")),
        "scoring": ScoringConfig(metrics=("document_mrr",), batch_size=10),
        "output": OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
    }

    def rows() -> tuple[int, int]:
        with duckdb.connect(str(warehouse), read_only=True) as con:
            ((present, distinct),) = con.execute(
                f"SELECT count(*), count(DISTINCT (trace_id, metric)) FROM scores WHERE partition_date = '{DAY}'"
            ).fetchall()
        return present, distinct

    first = evaluate_partition(**groups)
    assert rows() == (first.n_traces, first.n_traces)
    staged_names = sorted(p.name for p in (tmp_path / "work" / "staged").rglob("*.parquet"))
    assert staged_names
    shutil.rmtree(tmp_path / "work" / "staged")
    # A new metric has to read the staged files, which the cached staging still names.
    groups["scoring"] = ScoringConfig(metrics=("document_mrr", "precision@3"), batch_size=10)
    again = evaluate_partition(**groups)
    assert again.n_traces == first.n_traces
    assert again.n_batches_cached == 0  # precision@3 was scored from the restaged batches
    assert rows() == (2 * first.n_traces, 2 * first.n_traces)
    assert sorted(p.name for p in (tmp_path / "work" / "staged").rglob("*.parquet")) == staged_names
