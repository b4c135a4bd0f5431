"""What the HTML report shows, read from the warehouse: per-metric means, failure rates and coverage per
partition (over all traces, and over the chosen drift segment's traces for its charts), the drift rows, the
latest partition's worst traces with their text, and its calibration against human labels.

Plain data only, so the page (render.py) is tested without a warehouse and this side without HTML; reading
is one function (``read_report_data``) over ``Warehouse.read``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ragpulse.tasks.core.storage import redact_url
from ragpulse.tasks.monitoring.comparison import ALL_SEGMENTS, segment_values
from ragpulse.tasks.warehouse import open_warehouse

__all__ = [
    "MetricPoint",
    "ReportData",
    "TraceScore",
    "WorstTrace",
    "aggregate",
    "read_report_data",
    "segment_scores",
    "worst_traces",
]


@dataclass(frozen=True)
class MetricPoint:
    """One metric on one partition: ``mean`` of its ok scores (NaN without any), out of ``n`` score rows."""

    partition_date: dt.date
    metric: str
    n: int
    n_ok: int
    n_failed: int
    mean: float

    @property
    def coverage(self) -> float:
        """Share of rows with a score (status ok)."""
        return self.n_ok / self.n if self.n else math.nan

    @property
    def failure_rate(self) -> float:
        """Share of rows whose scoring failed (status failed; not_applicable is not a failure)."""
        return self.n_failed / self.n if self.n else math.nan


@dataclass(frozen=True)
class TraceScore:
    metric: str
    value: float | None
    status: str
    reason: str | None


@dataclass(frozen=True)
class WorstTrace:
    """A low-scoring trace with its scores and, when the warehouse stored it, its text (else None/empty)."""

    trace_id: str
    rank_value: float
    scores: list[TraceScore]
    question: str | None = None
    answer: str | None = None
    contexts: str | None = None
    metadata: str | None = None


@dataclass(frozen=True)
class ReportData:
    """Everything the page shows, already read from the warehouse. ``drift`` holds drift-table rows as dicts;
    ``points`` cover all traces, ``segment_points`` the traces of ``segment`` (unused for ``all``)."""

    warehouse: str
    start: dt.date
    end: dt.date
    generated_at: dt.datetime
    points: list[MetricPoint]
    drift: list[dict[str, Any]] = field(default_factory=list)
    worst: list[WorstTrace] = field(default_factory=list)
    judge_models: list[str] = field(default_factory=list)
    segment: str = ALL_SEGMENTS
    rank_metric: str | None = None
    segment_points: list[MetricPoint] = field(default_factory=list)
    estimates: list[dict[str, Any]] = field(default_factory=list)
    calibrations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def latest(self) -> dt.date | None:
        return max((p.partition_date for p in self.points), default=None)

    @property
    def plotted(self) -> list[MetricPoint]:
        """What the charts draw: the means of the segment whose bands and markers they show, not all traces'."""
        return self.points if self.segment == ALL_SEGMENTS else self.segment_points


def aggregate(scores: pa.Table) -> list[MetricPoint]:
    """Per (partition, metric): rows, ok rows, failed rows and the mean of the ok values, sorted by both keys."""
    if not scores.num_rows:
        return []
    ok = pc.equal(scores["status"], "ok")
    table = pa.table(
        {
            "partition_date": scores["partition_date"],
            "metric": scores["metric"],
            # value is NULL unless ok by the warehouse's constraint; masking keeps the mean right regardless.
            "value": pc.if_else(ok, scores["value"], pa.scalar(None, pa.float64())),
            "ok": ok.cast(pa.int64()),
            "failed": pc.equal(scores["status"], "failed").cast(pa.int64()),
        }
    )
    grouped = table.group_by(["partition_date", "metric"]).aggregate(
        [("value", "mean"), ("ok", "sum"), ("failed", "sum"), ([], "count_all")]
    )
    points = [
        MetricPoint(
            partition_date=row["partition_date"],
            metric=row["metric"],
            n=row["count_all"],
            n_ok=row["ok_sum"],
            n_failed=row["failed_sum"],
            mean=math.nan if row["value_mean"] is None else row["value_mean"],
        )
        for row in grouped.to_pylist()
    ]
    return sorted(points, key=lambda p: (p.partition_date, p.metric))


def segment_scores(scores: pa.Table, traces: pa.Table, segment: str) -> pa.Table:
    """The rows of ``scores`` whose trace is in ``segment`` (``<key>=<value>``, as in the drift table), found as
    the drift check finds them: the value at ``key`` in the trace's metadata in the ``traces`` table, as text.

    ``scores`` and ``traces`` need ``partition_date`` and ``trace_id``; ``traces`` also ``metadata``. The key
    ends at the first ``=`` (the drift check's keys are metadata paths, its values any text).
    """
    key, sep, value = segment.partition("=")
    if not sep or not key:
        raise ValueError(f"segment must be {ALL_SEGMENTS!r} or '<key>=<value>' (metadata.app=support), got {segment!r}")
    members = pa.table(
        {
            "partition_date": traces["partition_date"],
            "trace_id": traces["trace_id"],
            "segment": segment_values(traces["metadata"], key),
        }
    )
    members = members.filter(pc.equal(members["segment"], value)).drop_columns(["segment"])
    return scores.join(members, ["partition_date", "trace_id"], join_type="inner")


def worst_traces(scores: pa.Table, traces: pa.Table, *, n: int, metric: str | None = None) -> list[WorstTrace]:
    """The ``n`` traces of one partition with the lowest mean ok score (or lowest ``metric``), lowest first.

    Ties go by trace id so the page is stable; traces without an ok score are not ranked. ``traces`` may
    lack some or all of them (it is not stored for every partition): their text is then None.
    """
    ok = scores.filter(pc.equal(scores["status"], "ok"))
    if metric is not None:
        ok = ok.filter(pc.equal(ok["metric"], metric))
    if not ok.num_rows or n <= 0:
        return []
    ranked = (
        ok.group_by("trace_id")
        .aggregate([("value", "mean")])
        .sort_by([("value_mean", "ascending"), ("trace_id", "ascending")])
        .slice(0, n)
    )
    ids = ranked["trace_id"]
    per_trace: dict[str, list[TraceScore]] = defaultdict(list)
    for row in scores.filter(pc.is_in(scores["trace_id"], value_set=ids)).sort_by("metric").to_pylist():
        per_trace[row["trace_id"]].append(TraceScore(row["metric"], row["value"], row["status"], row.get("reason")))
    text = (
        {row["trace_id"]: row for row in traces.filter(pc.is_in(traces["trace_id"], value_set=ids)).to_pylist()}
        if traces.num_rows
        else {}
    )
    return [
        WorstTrace(
            trace_id=trace_id,
            rank_value=value,
            scores=per_trace[trace_id],
            question=text.get(trace_id, {}).get("question"),
            answer=text.get(trace_id, {}).get("answer"),
            contexts=text.get(trace_id, {}).get("contexts"),
            metadata=text.get(trace_id, {}).get("metadata"),
        )
        for trace_id, value in zip(ids.to_pylist(), ranked["value_mean"].to_pylist(), strict=True)
    ]


def read_report_data(
    warehouse_url: str,
    *,
    days: int = 30,
    end: dt.date | None = None,
    metrics: Sequence[str] | None = None,
    worst: int = 20,
    rank_metric: str | None = None,
    segment: str = ALL_SEGMENTS,
) -> ReportData:
    """What the page needs for the ``days`` partitions up to ``end`` (default: the latest published partition).

    Reads only the window's scores (4 narrow columns), runs and drift, and the text and scores of the latest
    partition's traces. ``metrics`` limits it to those metrics; the ``worst`` traces of the latest partition
    are ranked by the mean of their ok scores or by ``rank_metric``; ``segment`` picks the drift rows charted and
    the traces whose means the charts plot (then the window's trace ids and metadata are read as well).
    """
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    warehouse = open_warehouse(warehouse_url)
    runs = warehouse.read("runs", columns=["partition_date", "judge_model"]).to_pylist()
    if end is None:
        end = max((r["partition_date"] for r in runs), default=dt.datetime.now(dt.UTC).date())
    start = end - dt.timedelta(days=days - 1)
    metric_list = list(metrics) if metrics else None
    segmented = segment != ALL_SEGMENTS
    columns = ["partition_date", "metric", "value", "status", *(["trace_id"] if segmented else [])]
    window = warehouse.read("scores", start=start, end=end, columns=columns, metrics=metric_list)
    segment_points: list[MetricPoint] = []
    if segmented:
        traces = warehouse.read("traces", start=start, end=end, columns=["partition_date", "trace_id", "metadata"])
        segment_points = aggregate(segment_scores(window, traces, segment))
    data = ReportData(
        warehouse=redact_url(warehouse_url),
        start=start,
        end=end,
        generated_at=dt.datetime.now(dt.UTC),
        points=aggregate(window),
        drift=warehouse.read("drift", start=start, end=end, metrics=metric_list).to_pylist(),
        judge_models=sorted(
            {r["judge_model"] for r in runs if r["judge_model"] and start <= r["partition_date"] <= end}
        ),
        segment=segment,
        rank_metric=rank_metric,
        segment_points=segment_points,
    )
    latest = data.latest
    if latest is None:
        return data
    scores = warehouse.read(
        "scores",
        start=latest,
        end=latest,
        columns=["trace_id", "metric", "value", "status", "reason"],
        metrics=metric_list,
    )
    traces = warehouse.read(
        "traces", start=latest, end=latest, columns=["trace_id", "question", "answer", "contexts", "metadata"]
    )
    # The latest partition's calibration (docs/calibration.md): empty where `ragpulse calibrate` has not run.
    calibration = {
        key: warehouse.read(key, start=latest, end=latest, metrics=metric_list).to_pylist()
        for key in ("estimates", "calibrations")
    }
    return replace(data, worst=worst_traces(scores, traces, n=worst, metric=rank_metric), **calibration)
