"""Run summaries: per-metric statistics of a partition's scores, what was quarantined and which checks failed, and
the run's outcome: a day that scored nothing is told apart from one that scored (no silent zero)."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ragpulse.metrics import REGISTRY, MetricResult, Status
from ragpulse.metrics.errors import RagpulseError
from ragpulse.metrics.judge import BUDGET_EXHAUSTED
from ragpulse.tasks.core.artifacts import shown_url
from ragpulse.tasks.core.types import PartitionScores, RunInfo
from ragpulse.tasks.reporting.staged_facts import StagedFacts

__all__ = ["GAPS", "UNUSABLE_OUTCOMES", "MetricSummary", "NothingScoredError", "RunSummary", "summarize"]

UNUSABLE_OUTCOMES = frozenset({"nothing_scored", "no_contexts"})
"""Outcomes of a day that was published but is not a success (exit code 4, the flow run Failed)."""

#: What a day's traces or the run's configuration lack that metrics need, in the order the warning names them.
GAPS = {
    "no_labels": "no relevance labels",
    "no_references": "no reference answers",
    "no_judge": "no judge configured",
    "no_contexts": "no contexts (no retrieval spans recognised)",
}
# The not-ok reasons that say a gap when no staged counts are at hand (metrics/_arrays.py, metrics/_prompting.py).
_GAP_REASONS = {"no_labels": "no_relevance_labels", "no_references": "no_reference", "no_contexts": "no_contexts"}


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
    against: str | None = None
    """A step metric's ``against`` (``step_query`` or ``question``): one summary each; None for the other units."""


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
    staged: StagedFacts | None = None
    """How many scored traces carry contexts, labels, references, steps, tool calls (None: not counted)."""
    gaps: list[str] = field(default_factory=list)
    """The ``GAPS`` that hold: no scored trace has labels / references / contexts, or no judge is configured."""
    would_apply: list[str] = field(default_factory=list)
    """Metrics this run did not compute that the day's traces would give scores (judge metrics once a judge is
    configured, agent metrics on traces with steps or tool calls)."""
    step_metrics: list[MetricSummary] = field(default_factory=list)
    """The step-level metrics over the kept traces' retrieval steps (``n`` counts steps), one per ``against``."""
    conversation_metrics: list[MetricSummary] = field(default_factory=list)
    """The conversation-level metrics over the day's conversations (``n`` counts conversations)."""

    @property
    def outcome(self) -> str:
        """``no_traces`` for a day whose records were all quarantined (its quarantine and run row are
        published, nothing was scored); ``nothing_scored`` for a day whose traces gave no ``ok`` score of any metric
        (all not applicable or failed: published all the same, but not a success); ``no_contexts`` for a day that
        scored something but none of whose traces has contexts (no retrieval recognised: a RAG day read wrong, also
        published but not a success); ``unchanged`` for a day whose identical rows were published before (nothing
        was published); else ``scored``."""
        if not self.n_traces:
            return "no_traces"
        if not any(m.n_ok for m in (*self.metrics, *self.step_metrics, *self.conversation_metrics)):
            return "nothing_scored"
        if "no_contexts" in self.gaps:
            return "no_contexts"
        return "unchanged" if self.unchanged_since else "scored"

    @property
    def scored_nothing_usable(self) -> bool:
        """Whether the day was published but is not a success: it scored nothing, or read no retrieval at all."""
        return self.outcome in UNUSABLE_OUTCOMES

    @property
    def over_budget(self) -> int:
        """Judge scores left ``budget_exhausted``: the judge budget did not allow their calls."""
        every = (*self.metrics, *self.step_metrics, *self.conversation_metrics)
        return sum(m.not_ok_reasons.get(BUDGET_EXHAUSTED, 0) for m in every)

    @property
    def warning(self) -> str | None:
        """Why the day scored nothing, or that no trace has contexts though something else scored, and what would
        apply; that the judge budget stopped the judging; None when none holds. One line, the same in the flow's log
        and on the command line."""
        budget = (
            f"the judge budget is spent: {self.over_budget} judge score(s) {BUDGET_EXHAUSTED} "
            f"({sum(int(u.get('budget_refused', 0)) for u in self.judge_usage.values())} call(s) not made); "
            "a run with more budget judges them"
            if self.over_budget
            else ""
        )
        if self.outcome == "nothing_scored":
            n_scores, n_metrics = sum(m.n for m in self.metrics), len(self.metrics)
            head = f"nothing scored: 0 ok scores of {n_scores} ({n_metrics} metric(s) x {self.n_traces} trace(s))"
            reasons: Counter[str] = Counter()
            for m in self.metrics:
                reasons.update(m.not_ok_reasons)
            if reasons:
                head += "; not ok: " + ", ".join(f"{reason} ({count})" for reason, count in reasons.most_common(4))
            if self.skipped_metrics:
                head += f"; skipped: {', '.join(self.skipped_metrics)}"
        elif self.outcome == "no_contexts":
            head = f"no trace of {self.n_traces} has contexts: ranking and context metrics cannot score"
        elif budget:
            return f"dt={self.partition_date}: {budget}."
        else:
            return None
        why = f"; why: {', '.join(GAPS[gap] for gap in self.gaps)}" if self.gaps else ""
        budget = f"; {budget}" if budget else ""
        return f"dt={self.partition_date}: {head}{why}{budget}{_applicable(self.would_apply, 'no_judge' in self.gaps)}."

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["partition_date"] = self.partition_date.isoformat()
        data["outcome"] = self.outcome
        data["warning"] = self.warning
        data["over_budget"] = self.over_budget
        return data


class NothingScoredError(RagpulseError):
    """Raised by the evaluation flow after it published a day that scored nothing (outcome ``nothing_scored``), so
    that the flow run fails while its rows stay published; carries the day's summary."""

    def __init__(self, summary: RunSummary) -> None:
        self.summary = summary
        super().__init__(summary.warning or f"dt={summary.partition_date}: nothing scored")

    def __reduce__(self) -> tuple[type[NothingScoredError], tuple[RunSummary]]:
        return type(self), (self.summary,)  # pickled with the flow's failed state


# Metrics a day's traces would give scores without labels, in the order suggested, and what each needs.
_SUGGESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("context_relevance", ("with_contexts",)),
    ("faithfulness", ("with_contexts", "with_answers")),
    ("answer_relevancy", ("with_answers",)),
    ("context_recall", ("with_contexts", "with_references")),
    ("answer_f1", ("with_answers", "with_references")),
    ("document_ndcg@10", ("with_contexts", "with_labels")),
    ("retrieval_steps", ("with_steps",)),
    ("repeated_queries", ("with_steps",)),
    ("tool_errors", ("with_tool_calls",)),
)


def _would_apply(facts: StagedFacts | None, computed: set[str]) -> list[str]:
    """The registered metrics not computed by this run whose data some scored trace carries."""
    if facts is None:
        return []
    return [
        name
        for name, needs in _SUGGESTIONS
        if name.partition("@")[0] in REGISTRY
        and name not in computed
        and all(getattr(facts, need) for need in needs)  # None (no such column) or 0: does not apply
    ]


def _applicable(names: list[str], no_judge: bool) -> str:
    """The ``would apply`` part of the warning: judge metrics need a judge configured first, the others asking for."""
    judged = [n for n in names if no_judge and REGISTRY[n.partition("@")[0]].needs == "judge"]
    plain = [n for n in names if n not in judged]
    parts = [f"{', '.join(judged)} with a judge configured (RAGPULSE_JUDGE_MODEL)"] if judged else []
    parts += [f"{', '.join(plain)} if asked for (--metrics)"] if plain else []
    return f"; would apply: {'; '.join(parts)}" if parts else ""


def _gaps(metrics: list[MetricSummary], facts: StagedFacts | None, judge_configured: bool) -> list[str]:
    """The ``GAPS`` that hold: from the staged counts (no scored trace has it), or without them from a reason every
    score of some metric gives."""
    if facts is not None:
        found = {
            "no_labels": not facts.with_labels,
            "no_references": not facts.with_references,
            "no_contexts": not facts.with_contexts,
        }
    else:
        found = {
            gap: any(m.n and m.not_ok_reasons.get(reason) == m.n for m in metrics)
            for gap, reason in _GAP_REASONS.items()
        }
    found["no_judge"] = not judge_configured
    return [gap for gap in GAPS if found[gap]]


def summarize(
    scores: PartitionScores,
    run: RunInfo,
    warehouse: str,
    n_batches_cached: int,
    validations: pa.Table | None = None,
    data_docs: str | None = None,
    judge_usage: dict[str, dict[str, Any]] | None = None,
    unchanged_since: str | None = None,
    staged: StagedFacts | None = None,
) -> RunSummary:
    """The summary of a partition's published scores: statistics over ok traces, not-ok reasons by count, the
    warehouse URL without its password (the summary is returned, printed as JSON and put in artifacts), and from
    ``staged`` (the scored traces' counts) what the day lacks and which metrics would apply."""
    rows = [
        _metric_summary(
            metric, scores.versions[metric], MetricResult(values, scores.status[metric], scores.reasons[metric])
        )
        for metric, values in scores.values.items()
    ]
    conversations = scores.conversations
    judge = run.config.get("judge", {})
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
        skipped_metrics=list(judge.get("skipped", [])),
        n_other_days=scores.staging.other_days if scores.staging is not None else 0,
        unchanged_since=unchanged_since,
        staged=staged,
        gaps=_gaps(rows, staged, bool(judge.get("model"))) if len(scores.trace_ids) else [],
        would_apply=_would_apply(staged, {m.metric for m in rows}) if len(scores.trace_ids) else [],
        step_metrics=[
            _metric_summary(metric, unit.versions[metric], result, unit.against)
            for unit in scores.steps
            for metric, result in unit.results.items()
        ],
        conversation_metrics=[
            _metric_summary(metric, conversations.versions[metric], result)
            for metric, result in conversations.results.items()
        ]
        if conversations is not None
        else [],
    )


def _metric_summary(metric: str, version: str, result: MetricResult, against: str | None = None) -> MetricSummary:
    """The distribution of one metric's ok values over the units it scored (traces, steps or conversations)."""
    ok = result.status == Status.OK
    good = result.values[ok]
    p10, p50, p90 = np.quantile(good, [0.1, 0.5, 0.9]) if len(good) else (np.nan,) * 3
    reasons = Counter(str(r) for r in result.reasons[~ok])
    return MetricSummary(
        metric=metric,
        version=version,
        n=len(result.values),
        n_ok=int(ok.sum()),
        coverage=float(ok.mean()) if len(result.values) else float("nan"),
        mean=float(good.mean()) if len(good) else float("nan"),
        p10=float(p10),
        p50=float(p50),
        p90=float(p90),
        not_ok_reasons=dict(reasons.most_common()),
        against=against,
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
