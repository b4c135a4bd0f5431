"""The data a run's tasks hand each other, in one place so that no room imports another room's tasks for a type.

A day of traces is staged (``StagedPartition`` of ``BatchRef``, bad records as ``QuarantinedRecord``), each batch
is scored (``ScoredBatch``, with its agents' retrieval steps as ``StepScores``), the conversations of the day are
judged (``ConversationScores``), the batches are assembled into one partition's scores (``PartitionScores``) and
published under the run's identity (``RunInfo``). The monitor's tasks pass a ``DriftReport`` of ``DriftAlert``.
Cached task results are pickled instances of these, so the staging and scoring cache keys fingerprint this module.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from ragpulse.metrics import MetricResult
from ragpulse.tasks.core.storage import SourceFile

__all__ = [
    "TRACE_ROWS_SCHEMA",
    "BatchRef",
    "ConversationScores",
    "DriftAlert",
    "DriftReport",
    "PartitionScores",
    "QuarantinedRecord",
    "RunInfo",
    "ScoredBatch",
    "StagedPartition",
    "StagingCounts",
    "StepScores",
    "alert_dedup_key",
]

# A partition's kept traces cut to excerpts, row for row with its scores; the warehouse's traces table is these
# rows with the partition date and run id added.
TRACE_ROWS_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("contexts", pa.string()),  # JSON list of {"id", "text", "score"}
        ("metadata", pa.string()),  # JSON object, as staged
        ("source_file", pa.string()),
        ("source_line", pa.int64()),
        ("language", pa.string()),  # BCP 47, as staged: given, the run's default, or detected; null if unknown
        ("conversation_id", pa.string()),  # the session / thread the turn belongs to, as staged; null if none
    ]
)


@dataclass(frozen=True)
class BatchRef:
    """A staged batch: where it is and a hash of its content (the scoring cache key)."""

    url: str
    content_hash: str
    n_rows: int
    line_offset: int = 0
    """Added to the staged ``source_line`` by ``read_staged``: a byte-range slice of a file stages its lines
    numbered from the slice's start, and only the combined staging knows the lines before it."""


@dataclass(frozen=True)
class QuarantinedRecord:
    """A record that does not fit the trace format, kept with where it came from and why."""

    source_file: str
    line: int
    trace_id: str | None
    field: str
    reason: str
    raw: str


@dataclass(frozen=True)
class StagingCounts:
    """Where every record of a staged day went; staging refuses to return counts that do not add up:

    - records read (non-blank JSONL lines, Parquet rows) = ``records_quarantined`` (not parsed: bad bytes, bad
      JSON, over a limit, not a record of the format) + records parsed; a canonical parsed record is one trace read;
    - ``traces_read`` (span formats: distinct trace ids) = ``staged`` + ``traces_quarantined`` + ``other_days``;
    - quarantine entries = ``records_quarantined`` + ``spans_quarantined`` + ``traces_quarantined``.

    The span counts are None for the canonical format, which has no spans.
    """

    records_read: int = 0
    records_quarantined: int = 0
    traces_read: int = 0
    traces_quarantined: int = 0
    staged: int = 0
    other_days: int = 0
    """Traces read but left out because their event time is on another day (event-time partitioning)."""
    spans_quarantined: int | None = None
    """Bad spans quarantined out of records whose other spans were kept (OTLP lines)."""
    duplicate_spans: int | None = None
    """Span records seen again (overlapping export windows); the later copy was kept."""

    @property
    def quarantined(self) -> int:
        return self.records_quarantined + (self.spans_quarantined or 0) + self.traces_quarantined


@dataclass(frozen=True)
class StagedPartition:
    date: dt.date
    files: list[SourceFile]
    batches: list[BatchRef]
    quarantined: list[QuarantinedRecord] = field(default_factory=list)
    counts: StagingCounts | None = None
    """Set by staging; None for partitions built by hand (tests, benchmarks)."""

    @property
    def n_valid(self) -> int:
        return sum(batch.n_rows for batch in self.batches)

    @property
    def n_other_days(self) -> int:
        return self.counts.other_days if self.counts is not None else 0

    @property
    def n_duplicate_spans(self) -> int:
        return (self.counts.duplicate_spans or 0) if self.counts is not None else 0


@dataclass(frozen=True)
class StepScores:
    """Per-step results: one row per retrieval step of the traces, scored against ``against`` (``step_query``: the
    step's own query; ``question``: the user's question of its turn). Rows are in trace order, then step order."""

    trace_ids: NDArray[np.object_]
    step_index: NDArray[np.int64]
    step_ids: NDArray[np.object_]
    against: str
    results: dict[str, MetricResult]
    versions: dict[str, str]
    prompt_versions: dict[str, str] = field(default_factory=dict)
    trace_rows: NDArray[np.int64] | None = None
    """Each row's trace as its position among the traces these scores go with (a batch's, then a partition's kept
    traces): a trace id alone cannot tell which of two records with one id a step came from."""


@dataclass(frozen=True)
class ConversationScores:
    """Per-conversation results of a partition: the turns of each conversation id found in the day's traces."""

    conversation_ids: NDArray[np.object_]
    n_turns: NDArray[np.int64]
    first_trace_ids: NDArray[np.object_]
    last_trace_ids: NDArray[np.object_]
    results: dict[str, MetricResult]
    versions: dict[str, str]
    prompt_versions: dict[str, str] = field(default_factory=dict)
    judge_model: str | None = None
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class ScoredBatch:
    """Per-trace results of one batch: index-aligned trace identities and one MetricResult per metric."""

    trace_ids: NDArray[np.object_]
    source_files: NDArray[np.object_]
    source_lines: NDArray[np.int64]
    results: dict[str, MetricResult]
    versions: dict[str, str]
    prompt_versions: dict[str, str] = field(default_factory=dict)
    judge_model: str | None = None
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    steps: tuple[StepScores, ...] = ()
    """The batch's retrieval steps scored by the step-level metrics, one entry per ``against``."""

    def merged(self, other: ScoredBatch) -> ScoredBatch:
        """The same traces with ``other``'s metrics added (judge results beside retrieval results)."""
        if not np.array_equal(self.trace_ids, other.trace_ids):
            raise ValueError("cannot merge scores of different batches")
        return replace(
            self,
            results={**self.results, **other.results},
            versions={**self.versions, **other.versions},
            prompt_versions={**self.prompt_versions, **other.prompt_versions},
            judge_model=self.judge_model or other.judge_model,
            usage={**self.usage, **other.usage},
            steps=self.steps + other.steps,
        )


@dataclass(frozen=True)
class RunInfo:
    """Who published and with which configuration (never secrets)."""

    run_id: str
    source: str
    config_hash: str
    config: dict[str, Any]
    started_at: dt.datetime


@dataclass(frozen=True)
class PartitionScores:
    """One partition's de-duplicated results, metric by metric, plus everything quarantined."""

    date: dt.date
    trace_ids: NDArray[np.object_]
    values: dict[str, NDArray[np.float64]]
    status: dict[str, NDArray[np.int8]]
    reasons: dict[str, NDArray[np.object_]]
    versions: dict[str, str]
    quarantined: list[QuarantinedRecord]
    n_records: int
    n_files: int
    n_batches: int
    prompt_versions: dict[str, str] = field(default_factory=dict)
    judge_model: str | None = None
    staged_batches: list[BatchRef] = field(default_factory=list)
    """The staged batches the scores come from: the kept traces' excerpts are read from them when published."""
    staging: StagingCounts | None = None
    """The staged partition's counts; the traces staged but not kept (repeated ids, failed the input suite)
    are the quarantine entries beyond ``staging.quarantined``."""
    steps: tuple[StepScores, ...] = ()
    """The kept traces' retrieval steps, scored per step (one entry per ``against``)."""
    conversations: ConversationScores | None = None
    """The day's conversations, scored by the conversation-level metrics; None when none was asked for."""

    @property
    def records_read(self) -> int:
        """Lines and rows read; ``n_records`` (valid traces + quarantined) for scores assembled without counts."""
        return self.staging.records_read if self.staging is not None else self.n_records


def alert_dedup_key(metric: str, segment: str, rule: str | None) -> str:
    """An alert across days, the same while it stays open: (metric, segment), and the rule for a threshold rule's.
    Receivers group and resolve by it (PagerDuty's dedup_key, an Automation's resource label), and the lifecycle
    finds an alert's earlier notices in the ledger by it."""
    same = f"{metric}|{segment}"
    return same if rule is None else f"{same}|{rule}"


@dataclass(frozen=True)
class DriftAlert:
    """A comparison whose verdict alerts: what a webhook, event or artifact reports."""

    partition_date: dt.date
    metric: str
    segment: str
    verdict: str
    detail: str
    baseline_mean: float | None
    current_mean: float | None
    delta: float | None
    judge_model: str | None
    rule: str | None = None
    """The threshold rule whose verdict this is (its text form); None for a comparison with the baseline."""
    observed: float | None = None
    """The statistic a threshold rule observed (a p95, a failure rate); None for drift."""
    state: str = "opened"
    """What a notice says of the alert: ``opened`` (new), ``reminder`` (still open after the reminder interval) or
    ``resolved`` (back within its levels, or stable again); ``verdict`` is then the day's, not the alarm's."""

    @property
    def dedup_key(self) -> str:
        """The alert across days (``alert_dedup_key``)."""
        return alert_dedup_key(self.metric, self.segment, self.rule)

    @property
    def key(self) -> str:
        """Identity of a notice in the ledger: one per (partition, alert), so a re-run of a partition sends nothing
        twice."""
        return f"{self.partition_date.isoformat()}|{self.dedup_key}"


@dataclass(frozen=True)
class DriftReport:
    partition_date: dt.date
    rows: pa.Table
    alerts: list[DriftAlert] = field(default_factory=list)

    def verdict_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(self.rows["verdict"].to_pylist()).items()))
