"""The smallest real publication of one day: ``n`` ok scores of one metric and its runs row, for the fault tests,
which count rows after a cut rather than check values."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from ragpulse.tasks.warehouse import QUARANTINE_SCHEMA, RUNS_SCHEMA, SCORES_SCHEMA, Publication

__all__ = ["scores_publication"]


def scores_publication(day: dt.date, run_id: str, n: int, *, now: dt.datetime) -> Publication:
    """Scores t0..t<n-1> of metric ``m`` by ``run_id``, no quarantine, and a runs row whose counts say ``n``."""
    scores = pa.table(
        {
            "partition_date": pa.array([day] * n, pa.date32()),
            "trace_id": [f"t{i}" for i in range(n)],
            "metric": ["m"] * n,
            "value": pa.array([i / max(n, 1) for i in range(n)], pa.float64()),
            "status": ["ok"] * n,
            "reason": pa.nulls(n, pa.string()),
            "metric_version": ["1.0.0"] * n,
            "run_id": [run_id] * n,
            "computed_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
            "judge_model": pa.nulls(n, pa.string()),
            "prompt_version": pa.nulls(n, pa.string()),
        },
        schema=SCORES_SCHEMA,
    )
    run: dict[str, Any] = dict.fromkeys((name for name in RUNS_SCHEMA.names if name.startswith("n_")), 0)
    run.update(dict.fromkeys(["n_files", "n_records", "n_traces", "n_batches", "n_scores"], n))
    run.update(run_id=run_id, partition_date=day, source="s3://logs", config_hash="h", config="{}", metrics="m")
    run.update(started_at=now, finished_at=now)
    runs = pa.Table.from_pylist([run], schema=RUNS_SCHEMA)
    return Publication(day, ["m"], scores, QUARANTINE_SCHEMA.empty_table(), runs)
