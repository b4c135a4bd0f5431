"""Topics in drift: each topic's share of the day's traffic against the baseline window (drift rows of metric
``topic.share``), and the topic of each trace as the segment of drift's ``segment_key = "topic"``."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ragpulse.metrics.drift import DriftThresholds, Verdict
from ragpulse.metrics.topics import share_test
from ragpulse.tasks.warehouse import DRIFT_SCHEMA, Warehouse

__all__ = ["SHARE_METRIC", "TOPIC_SEGMENT", "UNASSIGNED_SEGMENT", "share_rows", "topic_segments"]

SHARE_METRIC = "topic.share"
TOPIC_SEGMENT = "topic"
"""The ``segment_key`` that segments drift by each trace's topic (``trace_topics``)."""
UNASSIGNED_SEGMENT = "none"
"""The segment value of the questions no topic took: its share rising says users ask something new."""


def topic_segments(warehouse: Warehouse, start: dt.date, end: dt.date) -> pa.Table:
    """``partition_date, trace_id, segment`` with each trace's topic id as text (null when unassigned)."""
    rows = warehouse.read("trace_topics", start=start, end=end, columns=["partition_date", "trace_id", "topic_id"])
    return pa.table(
        {
            "partition_date": rows["partition_date"],
            "trace_id": rows["trace_id"],
            "segment": pc.cast(rows["topic_id"], pa.string()),
        }
    )


def _counts(rows: pa.Table) -> tuple[dict[str, int], int, int]:
    """Traces per topic (unassigned as ``none``), all traces, and the partitions they came from."""
    labels = pc.fill_null(pc.cast(rows["topic_id"], pa.string()), UNASSIGNED_SEGMENT).to_pylist()
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return counts, rows.num_rows, len(set(rows["partition_date"].to_pylist()))


def share_rows(
    warehouse: Warehouse,
    day: dt.date,
    window: Sequence[dt.date],
    thresholds: DriftThresholds,
    *,
    min_share_delta: float,
    run_id: str,
) -> pa.Table:
    """Drift rows of ``topic.share`` for ``day``: per topic of the day or the baseline (and ``none``), the share of
    traces then and now by the two-proportion test, significant below ``alpha`` divided by the number of topics
    compared (Bonferroni: the topics' shares are tested together and sum to one). A significant rise or fall of at
    least ``min_share_delta`` is ``shifted`` (it alerts: a topic gaining or losing traffic needs a look, but says
    nothing of quality), its detail saying which; too few traces or baseline partitions is ``insufficient_data``.
    Empty when the day or its baseline window has no trace topics (topics started today: nothing to compare yet)."""
    start = min(window) if window else day
    rows = warehouse.read("trace_topics", start=start, end=day, columns=["partition_date", "trace_id", "topic_id"])
    names = _topic_names(warehouse, day)
    on_day = pc.equal(rows["partition_date"], pa.scalar(day, pa.date32()))
    current, current_n, _ = _counts(rows.filter(on_day))
    if not current_n:
        return DRIFT_SCHEMA.empty_table()
    in_window = pc.is_in(rows["partition_date"], value_set=pa.array(list(window), pa.date32()))
    baseline_rows = rows.filter(in_window)
    baseline, baseline_n, partitions = _counts(baseline_rows)
    if not baseline_n:
        return DRIFT_SCHEMA.empty_table()
    dates = sorted(set(baseline_rows["partition_date"].to_pylist()))
    now = dt.datetime.now(dt.UTC)
    records: list[dict[str, Any]] = []
    labels = sorted(set(current) | set(baseline), key=lambda x: (x == UNASSIGNED_SEGMENT, len(x), x))
    # Bonferroni over the day's topics: one false alarm in 1/alpha days at most, however many topics there are.
    alpha = thresholds.alpha / len(labels)
    for label in labels:
        k0, k1 = baseline.get(label, 0), current.get(label, 0)
        name = "questions no topic took" if label == UNASSIGNED_SEGMENT else names.get(label, "a topic")
        record: dict[str, Any] = {
            "partition_date": day,
            "metric": SHARE_METRIC,
            "segment": f"{TOPIC_SEGMENT}={label}",
            "baseline_start": dates[0] if dates else None,
            "baseline_end": dates[-1] if dates else None,
            "baseline_partitions": partitions,
            "baseline_n": baseline_n,
            "current_n": current_n,
            "current_mean": k1 / current_n,
            "run_id": run_id,
            "computed_at": now,
        }
        test = share_test(k0, baseline_n, k1, current_n, confidence=thresholds.confidence)
        change = f"{test.baseline_share:.1%} -> {test.current_share:.1%} (p={test.p_value:.2g})"
        moved = f"{name}: share {change}"
        if partitions < thresholds.min_baseline_partitions or min(baseline_n, current_n) < thresholds.min_samples:
            verdict = Verdict.INSUFFICIENT_DATA
        elif test.p_value < alpha and abs(test.delta) >= min_share_delta:
            verdict = Verdict.SHIFTED
            moved = f"{name}: share {'rose' if test.delta > 0 else 'fell'} {change}"
        else:
            verdict = Verdict.STABLE
        records.append(
            {
                **record,
                "baseline_mean": test.baseline_share,
                "delta": test.delta,
                "ci_low": test.ci_low,
                "ci_high": test.ci_high,
                "p_value": test.p_value if math.isfinite(test.p_value) else None,
                "verdict": verdict.value,
                "detail": moved,
            }
        )
    return pa.Table.from_pylist(records, schema=DRIFT_SCHEMA)


def _topic_names(warehouse: Warehouse, day: dt.date) -> dict[str, str]:
    """Topic id (as text) to name, from the newest fit on or before ``day``."""
    topics = warehouse.read("topics", end=day, columns=["partition_date", "topic_id", "name"])
    if not topics.num_rows:
        return {}
    newest = pc.max(topics["partition_date"])
    latest = topics.filter(pc.equal(topics["partition_date"], newest))
    return {str(row["topic_id"]): row["name"] for row in latest.to_pylist()}
