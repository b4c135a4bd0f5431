"""What the HTML report shows, read from the warehouse: per-metric means, failure rates and coverage per
partition (over all traces, and over the chosen drift segment's traces for its charts), the drift rows, the
latest partition's worst traces with their text, its calibration against human labels, and for agents its
retrieval steps (worst steps and turns per step metric) and conversations (failing ones per conversation metric),
and the topics of its questions (shares, per-topic means, new-topic candidates with example questions).

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
from ragpulse.tasks.warehouse._views import LOWER_IS_BETTER

__all__ = [
    "ConversationMetric",
    "Conversations",
    "FailingConversation",
    "MetricPoint",
    "ReportData",
    "StepMetric",
    "TopicCandidate",
    "TopicRow",
    "Topics",
    "TraceScore",
    "TurnSteps",
    "WorstStep",
    "WorstTrace",
    "aggregate",
    "conversation_summary",
    "read_report_data",
    "segment_scores",
    "step_metrics",
    "topic_summary",
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
class WorstStep:
    """A low-scoring retrieval step: the turn (``trace_id``) and hop (``step_index``, the source's ``step_id``) it
    is, its value, and from the ``steps`` table what it asked (None where that row is missing)."""

    trace_id: str
    step_index: int
    step_id: str | None
    value: float
    query: str | None = None
    name: str | None = None
    kind: str | None = None
    n_contexts: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class TurnSteps:
    """One turn's steps under one step metric, rolled up as the ``turn_steps`` view does: ``n_steps`` step score
    rows, the worst and the mean of the ok values (None when none is ok), and the turn's question."""

    trace_id: str
    n_steps: int
    n_ok: int
    n_failed: int
    worst_value: float | None
    mean_value: float | None
    question: str | None = None

    @property
    def any_failed(self) -> bool:
        return self.n_failed > 0


@dataclass(frozen=True)
class StepMetric:
    """A step-level metric of the latest partition, scored ``against`` the step's query or its turn's question:
    step counts, the mean of the ok values, and the worst steps and turns (lowest values, or highest where lower
    is better)."""

    metric: str
    against: str
    n_steps: int
    n_ok: int
    n_failed: int
    mean: float
    higher_is_better: bool
    n_turns: int
    worst_steps: list[WorstStep]
    worst_turns: list[TurnSteps]


@dataclass(frozen=True)
class FailingConversation:
    """A conversation whose score is 0 or whose scoring failed, with the turns the score covered."""

    conversation_id: str
    n_turns: int | None
    first_trace_id: str | None
    last_trace_id: str | None
    value: float | None
    status: str
    reason: str | None


@dataclass(frozen=True)
class ConversationMetric:
    """A conversation-level metric of the latest partition: rows, ok and failed, the mean of the ok values, and
    its failing conversations (``n_failing`` of them; ``failing`` lists at most the report's ``worst``)."""

    metric: str
    n: int
    n_ok: int
    n_failed: int
    mean: float
    n_failing: int
    failing: list[FailingConversation]


@dataclass(frozen=True)
class Conversations:
    """The latest partition's conversations: how many the traces' ``conversation_id`` names, their turns, how many
    conversations had each number of turns (``(turns, conversations)``, fewest turns first), and the scores."""

    n_conversations: int
    n_turns: int
    turns_histogram: list[tuple[int, int]]
    metrics: list[ConversationMetric]

    @property
    def mean_turns(self) -> float:
        return self.n_turns / self.n_conversations if self.n_conversations else math.nan

    @property
    def max_turns(self) -> int:
        return max((turns for turns, _ in self.turns_histogram), default=0)


@dataclass(frozen=True)
class TopicRow:
    """A topic on the latest partition: its share of the assigned-or-not questions, the baseline's share and the
    verdict where ``topic.share`` drift compared them, and the mean of its traces' ok scores per metric."""

    topic_id: int
    name: str
    n: int
    share: float
    baseline_share: float | None
    verdict: str | None
    means: dict[str, float]


@dataclass(frozen=True)
class TopicCandidate:
    """Questions of the latest partition far from every topic, clustered together: a new topic in the making."""

    candidate: int
    n: int
    examples: list[str]


@dataclass(frozen=True)
class Topics:
    n_questions: int
    n_unassigned: int
    fit_date: dt.date
    topics: list[TopicRow]
    candidates: list[TopicCandidate]
    metrics: list[str]


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
    steps: list[StepMetric] = field(default_factory=list)
    """The latest partition's step metrics; empty on a day without step scores (no section)."""
    conversations: Conversations | None = None
    """The latest partition's conversations; None on a day without any (no section)."""
    topics: Topics | None = None
    """The latest partition's topics; None on a day without trace topics (no section)."""

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


def _ok_values(table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """``value`` where the status is ok, else NULL: the warehouse's constraint holds it, this keeps means right."""
    return pc.if_else(pc.equal(table["status"], "ok"), table["value"], pa.scalar(None, pa.float64()))


def _counts(table: pa.Table) -> tuple[int, int, int, float]:
    """Rows, ok rows, failed rows and the mean of the ok values (NaN without any) of a score table."""
    ok = pc.sum(pc.equal(table["status"], "ok").cast(pa.int64())).as_py() or 0
    failed = pc.sum(pc.equal(table["status"], "failed").cast(pa.int64())).as_py() or 0
    mean = pc.mean(_ok_values(table)).as_py()
    return table.num_rows, ok, failed, math.nan if mean is None else mean


def step_metrics(step_scores: pa.Table, steps: pa.Table, traces: pa.Table, *, n: int) -> list[StepMetric]:
    """Per (metric, against) of one partition's ``step_scores``: counts, the mean of the ok values, the ``n`` worst
    ok steps with their query and the ``n`` turns with the worst step (as the ``turn_steps`` view rolls them up).

    Worst is the lowest value, the highest for the built-in lower-is-better metrics (``LOWER_IS_BETTER``); ties go
    by trace id and step index. ``steps`` (``trace_id``, ``step_index``, ``name``, ``kind``, ``query``,
    ``n_contexts``, ``error``) and ``traces`` (``trace_id``, ``question``) give the text; either may lack a row.
    """
    if not step_scores.num_rows:
        return []
    found = []
    n = max(n, 0)
    keys = step_scores.select(["metric", "against"]).group_by(["metric", "against"]).aggregate([]).to_pylist()
    for key in sorted(keys, key=lambda k: (k["metric"], k["against"])):  # against is never NULL (a CHECK)
        metric, against = key["metric"], key["against"]
        rows = step_scores.filter(
            pc.and_(pc.equal(step_scores["metric"], metric), pc.equal(step_scores["against"], against))
        )
        higher = metric not in LOWER_IS_BETTER
        order = "ascending" if higher else "descending"
        n_steps, n_ok, n_failed, mean = _counts(rows)
        ok = rows.filter(pc.equal(rows["status"], "ok"))
        worst = ok.sort_by([("value", order), ("trace_id", "ascending"), ("step_index", "ascending")]).slice(0, n)
        turns = (
            pa.table(
                {
                    "trace_id": rows["trace_id"],
                    "value": _ok_values(rows),
                    "ok": pc.equal(rows["status"], "ok").cast(pa.int64()),
                    "failed": pc.equal(rows["status"], "failed").cast(pa.int64()),
                }
            )
            .group_by("trace_id")
            .aggregate(
                [
                    ([], "count_all"),
                    ("ok", "sum"),
                    ("failed", "sum"),
                    ("value", "min" if higher else "max"),
                    ("value", "mean"),
                ]
            )
        )
        worst_column = "value_min" if higher else "value_max"
        worst_turns = turns.sort_by([(worst_column, order), ("trace_id", "ascending")]).slice(0, n)
        text = _rows_by(steps, worst["trace_id"], ("trace_id", "step_index"))
        questions = _rows_by(traces, worst_turns["trace_id"], ("trace_id",))
        found.append(
            StepMetric(
                metric=metric,
                against=against,
                n_steps=n_steps,
                n_ok=n_ok,
                n_failed=n_failed,
                mean=mean,
                higher_is_better=higher,
                n_turns=turns.num_rows,
                worst_steps=[
                    _worst_step(row, text.get((row["trace_id"], row["step_index"]), {})) for row in worst.to_pylist()
                ],
                worst_turns=[
                    TurnSteps(
                        trace_id=row["trace_id"],
                        n_steps=row["count_all"],
                        n_ok=row["ok_sum"],
                        n_failed=row["failed_sum"],
                        worst_value=row[worst_column],
                        mean_value=row["value_mean"],
                        question=questions.get((row["trace_id"],), {}).get("question"),
                    )
                    for row in worst_turns.to_pylist()
                ],
            )
        )
    return found


def _worst_step(score: dict[str, Any], step: dict[str, Any]) -> WorstStep:
    """A ranked step score with its ``steps`` row (empty where the warehouse has none)."""
    return WorstStep(
        trace_id=score["trace_id"],
        step_index=score["step_index"],
        step_id=score["step_id"],
        value=score["value"],
        query=step.get("query"),
        name=step.get("name"),
        kind=step.get("kind"),
        n_contexts=step.get("n_contexts"),
        error=step.get("error"),
    )


def _rows_by(
    table: pa.Table, trace_ids: pa.Array | pa.ChunkedArray, key: tuple[str, ...]
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The rows of ``table`` of ``trace_ids``, by ``key``'s values; empty when the table has none."""
    if not table.num_rows or not len(trace_ids):
        return {}
    rows = table.filter(pc.is_in(table["trace_id"], value_set=trace_ids)).to_pylist()
    return {tuple(row[name] for name in key): row for row in rows}


def conversation_summary(conversation_scores: pa.Table, traces: pa.Table, *, n: int) -> Conversations | None:
    """One partition's conversations: counted from the ``traces``' ``conversation_id`` (turns per conversation), and
    per metric of ``conversation_scores`` its mean and the conversations that failed it, at most ``n`` listed:
    value 0 first, then those whose scoring failed, each by conversation id. None when there are neither."""
    ids = traces["conversation_id"] if "conversation_id" in traces.column_names else pa.array([], pa.string())
    named = pc.drop_null(ids)
    if not len(named) and not conversation_scores.num_rows:
        return None
    turns = pa.table({"conversation_id": named}).group_by("conversation_id").aggregate([([], "count_all")])
    histogram = (
        turns.rename_columns(["conversation_id", "turns"]).group_by("turns").aggregate([([], "count_all")]).to_pylist()
    )
    metrics = []
    for metric in sorted(set(conversation_scores["metric"].to_pylist())):
        rows = conversation_scores.filter(pc.equal(conversation_scores["metric"], metric))
        n_rows, n_ok, n_failed, mean = _counts(rows)
        failing = [
            row
            for row in rows.to_pylist()
            if row["status"] == "failed" or (row["status"] == "ok" and row["value"] == 0)
        ]
        failing.sort(key=lambda row: (row["status"] != "ok", row["conversation_id"]))
        metrics.append(
            ConversationMetric(
                metric=metric,
                n=n_rows,
                n_ok=n_ok,
                n_failed=n_failed,
                mean=mean,
                n_failing=len(failing),
                failing=[
                    FailingConversation(
                        conversation_id=row["conversation_id"],
                        n_turns=row["n_turns"],
                        first_trace_id=row["first_trace_id"],
                        last_trace_id=row["last_trace_id"],
                        value=row["value"],
                        status=row["status"],
                        reason=row["reason"],
                    )
                    for row in failing[: max(n, 0)]
                ],
            )
        )
    return Conversations(
        n_conversations=turns.num_rows,
        n_turns=len(named),
        turns_histogram=sorted((row["turns"], row["count_all"]) for row in histogram),
        metrics=metrics,
    )


_TOPIC_METRICS = 4
_EXAMPLES = 3


def topic_summary(
    trace_topics: pa.Table, topics: pa.Table, scores: pa.Table, traces: pa.Table, drift: list[dict[str, Any]]
) -> Topics | None:
    """One partition's topics from its ``trace_topics`` rows, the newest fit's ``topics`` rows (names), its ok
    ``scores`` (the means of the ``_TOPIC_METRICS`` metrics with the most ok scores, per topic), its ``traces``
    (candidates' example questions, the first by trace id) and its ``topic.share`` drift rows. None without rows."""
    if not trace_topics.num_rows or not topics.num_rows:
        return None
    fit_date = pc.max(topics["partition_date"]).as_py()
    names = {r["topic_id"]: r["name"] for r in topics.to_pylist() if r["partition_date"] == fit_date}
    rows = trace_topics.to_pylist()
    total = len(rows)
    by_topic: dict[int, list[str]] = defaultdict(list)
    by_candidate: dict[int, list[str]] = defaultdict(list)
    for row in rows:
        if row["topic_id"] is not None:
            by_topic[row["topic_id"]].append(row["trace_id"])
        elif row["candidate"] is not None:
            by_candidate[row["candidate"]].append(row["trace_id"])
    ok = [r for r in scores.to_pylist() if r["status"] == "ok"]
    counted: dict[str, int] = defaultdict(int)
    for r in ok:
        counted[r["metric"]] += 1
    metrics = sorted(sorted(counted), key=lambda m: -counted[m])[:_TOPIC_METRICS]
    values: dict[tuple[str, str], float] = {(r["trace_id"], r["metric"]): r["value"] for r in ok}
    shares = {r["segment"]: r for r in drift if r["metric"] == "topic.share"}
    topic_rows = []
    for topic_id, members in sorted(by_topic.items(), key=lambda item: (-len(item[1]), item[0])):
        compared = shares.get(f"topic={topic_id}", {})
        means = {}
        for metric in metrics:
            found = [values[(t, metric)] for t in members if (t, metric) in values]
            means[metric] = sum(found) / len(found) if found else math.nan
        topic_rows.append(
            TopicRow(
                topic_id=topic_id,
                name=names.get(topic_id, ""),
                n=len(members),
                share=len(members) / total,
                baseline_share=compared.get("baseline_mean"),
                verdict=compared.get("verdict"),
                means=means,
            )
        )
    questions = {r["trace_id"]: r["question"] for r in traces.to_pylist()}
    candidates = [
        TopicCandidate(number, len(members), [questions.get(t) or "" for t in sorted(members)[:_EXAMPLES]])
        for number, members in sorted(by_candidate.items())
    ]
    unassigned = sum(1 for row in rows if row["topic_id"] is None)
    return Topics(total, unassigned, fit_date, topic_rows, candidates, metrics)


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
    the traces whose means the charts plot (then the window's trace ids and metadata are read as well). For agents,
    the latest partition's step scores, the steps of ranked ones, and its conversation scores are read too.
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
        "traces",
        start=latest,
        end=latest,
        columns=["trace_id", "question", "answer", "contexts", "metadata", "conversation_id"],
    )
    step_scores = warehouse.read(
        "step_scores",
        start=latest,
        end=latest,
        columns=["trace_id", "step_index", "step_id", "metric", "against", "value", "status"],
        metrics=metric_list,
    )
    # A day's steps are read only when it has step scores: single-shot traces have neither.
    steps = (
        warehouse.read(
            "steps",
            start=latest,
            end=latest,
            columns=["trace_id", "step_index", "name", "kind", "query", "n_contexts", "error"],
        )
        if step_scores.num_rows
        else pa.table({"trace_id": pa.array([], pa.string())})
    )
    conversation_scores = warehouse.read(
        "conversation_scores",
        start=latest,
        end=latest,
        columns=["conversation_id", "metric", "value", "status", "reason", "n_turns", "first_trace_id",
                 "last_trace_id"],
        metrics=metric_list,
    )  # fmt: skip
    trace_topics = warehouse.read("trace_topics", start=latest, end=latest)
    fitted = warehouse.read("topics", end=latest, columns=["partition_date", "topic_id", "name"])
    # The latest partition's calibration (docs/calibration.md): empty where `ragpulse calibrate` has not run.
    calibration = {
        key: warehouse.read(key, start=latest, end=latest, metrics=metric_list).to_pylist()
        for key in ("estimates", "calibrations")
    }
    return replace(
        data,
        worst=worst_traces(scores, traces, n=worst, metric=rank_metric),
        steps=step_metrics(step_scores, steps, traces, n=worst),
        conversations=conversation_summary(conversation_scores, traces, n=worst),
        topics=topic_summary(
            trace_topics, fitted, scores, traces, [r for r in data.drift if r["partition_date"] == latest]
        ),
        **calibration,
    )
