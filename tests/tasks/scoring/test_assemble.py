"""Assembling a partition's scores from its scored batches."""

from __future__ import annotations

import datetime as dt

import numpy as np

from ragpulse.metrics import MetricResult
from ragpulse.tasks.core.types import QuarantinedRecord, ScoredBatch, StagedPartition, StepScores
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


def test_an_excluded_record_is_matched_by_file_and_line_and_its_repeat_is_kept_in_its_place() -> None:
    """Two files share line numbers: excluding a.jsonl:1 leaves b.jsonl:1. A trace id whose first record was excluded
    is kept at its next record, and only a later repeat of it is quarantined, pointing at the record kept."""
    batch = ScoredBatch(
        trace_ids=np.array(["x", "y", "x", "z", "x"], dtype=object),
        source_files=np.array(["a.jsonl", "b.jsonl", "b.jsonl", "a.jsonl", "a.jsonl"], dtype=object),
        source_lines=np.array([1, 1, 2, 2, 3], dtype=np.int64),
        results={"m": MetricResult.from_values(np.array([0.0, 0.1, 0.2, 0.3, 0.4]))},
        versions={"m": "1.0.0"},
    )
    excluded = [QuarantinedRecord("a.jsonl", 1, "x", "question", "too long", "")]
    scores = assemble_partition(StagedPartition(DAY, [], [], []), [batch], excluded)
    assert list(scores.trace_ids) == ["y", "x", "z"]
    assert list(scores.values["m"]) == [0.1, 0.2, 0.3]
    repeats = [(q.source_file, q.line, q.reason) for q in scores.quarantined if q.field == "trace_id"]
    assert repeats == [("a.jsonl", 3, "duplicate trace_id within the partition, first seen at b.jsonl:2")]


def test_the_steps_of_a_trace_the_partition_drops_are_dropped_with_it() -> None:
    """A repeated trace id keeps its first record's steps, an excluded record loses its steps, and the retrieval and
    judge entries of one ``against`` become one; each kept step points at its trace among the kept ones."""

    def steps(ids: list[str], rows: list[int], index: list[int], metric: str, values: list[float]) -> StepScores:
        return StepScores(
            trace_ids=np.array(ids, dtype=object), step_index=np.array(index, dtype=np.int64),
            step_ids=np.array([f"{t}-{i}" for t, i in zip(ids, index, strict=True)], dtype=object),
            against="step_query", results={metric: MetricResult.from_values(np.array(values))},
            versions={metric: "1"}, trace_rows=np.array(rows, dtype=np.int64),
        )  # fmt: skip

    def batch(ids: list[str], lines: list[int], *units: StepScores) -> ScoredBatch:
        return ScoredBatch(
            trace_ids=np.array(ids, dtype=object), source_files=np.array(["f.jsonl"] * len(ids), dtype=object),
            source_lines=np.array(lines, dtype=np.int64),
            results={"m": MetricResult.from_values(np.zeros(len(ids)))}, versions={"m": "1"}, steps=units,
        )  # fmt: skip

    first = batch(
        ["東京", "大阪"], [1, 2],
        steps(["東京", "東京", "大阪"], [0, 0, 1], [0, 1, 0], "document_mrr", [0.1, 0.2, 0.3]),
        steps(["東京", "東京", "大阪"], [0, 0, 1], [0, 1, 0], "context_relevance", [1.0, 0.0, 1.0]),
    )  # fmt: skip
    # The second batch repeats 東京 (its own steps) and holds 京都, which the input suite excluded, and 札幌.
    second = batch(
        ["東京", "京都", "札幌"], [3, 4, 5],
        steps(["東京", "京都", "札幌", "札幌"], [0, 1, 2, 2], [0, 0, 0, 1], "document_mrr", [0.4, 0.5, 0.6, 0.7]),
        steps(["東京", "京都", "札幌", "札幌"], [0, 1, 2, 2], [0, 0, 0, 1], "context_relevance", [0.0, 0.0, 1.0, 1.0]),
    )  # fmt: skip
    excluded = [QuarantinedRecord("f.jsonl", 4, "京都", "question", "too long", "")]
    scores = assemble_partition(StagedPartition(DAY, [], [], []), [first, second], excluded)
    assert list(scores.trace_ids) == ["東京", "大阪", "札幌"]
    (unit,) = scores.steps
    assert list(unit.trace_ids) == ["東京", "東京", "大阪", "札幌", "札幌"]
    assert list(unit.step_ids) == ["東京-0", "東京-1", "大阪-0", "札幌-0", "札幌-1"]
    assert list(unit.trace_rows) == [0, 0, 1, 2, 2]
    assert list(unit.results["document_mrr"].values) == [0.1, 0.2, 0.3, 0.6, 0.7]
    assert list(unit.results["context_relevance"].values) == [1.0, 0.0, 1.0, 1.0, 1.0]
    assert unit.versions == {"document_mrr": "1", "context_relevance": "1"}
