"""Run summaries: per-metric statistics of a partition's scores, what was quarantined and which checks failed."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ragpulse.metrics import Status
from ragpulse.tasks.core.artifacts import shown_url
from ragpulse.tasks.core.types import PartitionScores, RunInfo

__all__ = ["MetricSummary", "RunSummary", "summarize"]


@dataclass(frozen=True)
class MetricSummary:
    """Distribution of one metric over a partition; statistics cover the traces with status ok."""

    metric: str
    version: str
    n: int
    n_ok: int
    coverage: float
    mean: float
    p10: float
    p50: float
    p90: float
    not_ok_reasons: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    partition_date: dt.date
    warehouse: str
    n_records: int
    n_traces: int
    n_quarantined: int
    n_batches: int
    n_batches_cached: int
    metrics: list[MetricSummary]
    quarantine_reasons: dict[str, int]
    failed_expectations: dict[str, int] = field(default_factory=dict)
    data_docs: str | None = None
    judge_model: str | None = None
    judge_usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped_metrics: list[str] = field(default_factory=list)
    n_other_days: int = 0
    """Traces read but left to another day's run (event-time partitioning): neither scored nor quarantined."""
    unchanged_since: str | None = None
    """The run whose identical publication of this day stands in the warehouse: this run published nothing."""

    @property
    def outcome(self) -> str:
        """``no_traces`` for a day whose records were all quarantined (its quarantine and run row are
        published, nothing was scored), ``unchanged`` for a day whose identical rows were published before (nothing
        was published), else ``scored``."""
        if not self.n_traces:
            return "no_traces"
        return "unchanged" if self.unchanged_since else "scored"

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["partition_date"] = self.partition_date.isoformat()
        data["outcome"] = self.outcome
        return data


def summarize(
    scores: PartitionScores,
    run: RunInfo,
    warehouse: str,
    n_batches_cached: int,
    validations: pa.Table | None = None,
    data_docs: str | None = None,
    judge_usage: dict[str, dict[str, Any]] | None = None,
    unchanged_since: str | None = None,
) -> RunSummary:
    """The summary of a partition's published scores: statistics over ok traces, not-ok reasons by count, and the
    warehouse URL without its password (the summary is returned, printed as JSON and put in artifacts)."""
    rows = []
    for metric, values in scores.values.items():
        ok = scores.status[metric] == Status.OK
        good = values[ok]
        p10, p50, p90 = np.quantile(good, [0.1, 0.5, 0.9]) if len(good) else (np.nan,) * 3
        reasons = Counter(str(r) for r in scores.reasons[metric][~ok])
        rows.append(
            MetricSummary(
                metric=metric,
                version=scores.versions[metric],
                n=len(values),
                n_ok=int(ok.sum()),
                coverage=float(ok.mean()) if len(values) else float("nan"),
                mean=float(good.mean()) if len(good) else float("nan"),
                p10=float(p10),
                p50=float(p50),
                p90=float(p90),
                not_ok_reasons=dict(reasons.most_common()),
            )
        )
    return RunSummary(
        run_id=run.run_id,
        partition_date=scores.date,
        warehouse=shown_url(warehouse),
        n_records=scores.records_read,
        n_traces=len(scores.trace_ids),
        n_quarantined=len(scores.quarantined),
        n_batches=scores.n_batches,
        n_batches_cached=n_batches_cached,
        metrics=rows,
        quarantine_reasons=dict(
            Counter(f"{q.field}: {_reason_kind(q.reason)}" for q in scores.quarantined).most_common()
        ),
        failed_expectations=_failed_expectations(validations),
        data_docs=data_docs,
        judge_model=scores.judge_model,
        judge_usage=judge_usage or {},
        skipped_metrics=list(run.config.get("judge", {}).get("skipped", [])),
        n_other_days=scores.staging.other_days if scores.staging is not None else 0,
        unchanged_since=unchanged_since,
    )


def _failed_expectations(validations: pa.Table | None) -> dict[str, int]:
    """Unsuccessful expectations (the input suite's report-only findings included) and their counts."""
    if validations is None:
        return {}
    return {
        f"{row['suite']}: {row['expectation']}({row['column_name'] or 'table'})": int(row["unexpected_count"] or 0)
        for row in validations.to_pylist()
        if not row["success"]
    }


# Where a reason's record-specific tail starts: the value seen, the first copy's location, a position, or a
# parser's detail after ": ". Commas elsewhere belong to the reason ("a document needs an id or a text, ...").
_REASON_DETAIL = re.compile(r", got |, first seen at | (at|after) (column|byte|line) \d|: ")


def _reason_kind(reason: str) -> str:
    """Group reasons by their kind, without the record-specific tail."""
    return _REASON_DETAIL.split(reason, maxsplit=1)[0]
