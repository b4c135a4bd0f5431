"""Assembling a partition's scores from its scored batches."""

from __future__ import annotations

import datetime as dt

import numpy as np

from ragpulse.metrics import MetricResult
from ragpulse.tasks.core.types import ScoredBatch, StagedPartition
from ragpulse.tasks.scoring.assemble import assemble_partition

DAY = dt.date(2026, 11, 1)


def test_assemble_quarantines_repeated_trace_ids_keeping_the_first() -> None:
    def batch(ids: list[str], lines: list[int]) -> ScoredBatch:
        n = len(ids)
        values = np.arange(n, dtype=np.float64) / 10
        return ScoredBatch(
            trace_ids=np.array(ids, dtype=object),
            source_files=np.array(["f.jsonl"] * n, dtype=object),
            source_lines=np.array(lines, dtype=np.int64),
            results={"m": MetricResult.from_values(values)},
            versions={"m": "1.0.0"},
        )

    staged = StagedPartition(DAY, [], [], [])
    scores = assemble_partition(staged, [batch(["a", "b"], [1, 2]), batch(["b", "c", "a"], [3, 4, 5])])
    assert list(scores.trace_ids) == ["a", "b", "c"]
    assert list(scores.values["m"]) == [0.0, 0.1, 0.1]
    reasons = sorted((q.trace_id, q.line, q.reason) for q in scores.quarantined)
    assert reasons == [
        ("a", 5, "duplicate trace_id within the partition, first seen at f.jsonl:1"),
        ("b", 3, "duplicate trace_id within the partition, first seen at f.jsonl:2"),
    ]
