"""Run summaries: per-metric statistics and the Prefect artifacts that show them."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from ragpulse.metrics import Status
from ragpulse.tasks.warehouse import Publication
from ragpulse.tasks.warehouse.publish import PartitionScores, RunInfo

__all__ = ["MetricSummary", "RunSummary", "report_rejected_scores", "summarize", "summarize_run"]


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

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["partition_date"] = self.partition_date.isoformat()
        return data


def summarize(
    scores: PartitionScores,
    run: RunInfo,
    warehouse: str,
    n_batches_cached: int,
    validations: pa.Table | None = None,
    data_docs: str | None = None,
    judge_usage: dict[str, dict[str, Any]] | None = None,
) -> RunSummary:
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
        warehouse=warehouse,
        n_records=scores.n_records,
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


def _reason_kind(reason: str) -> str:
    """Group reasons by their kind, without the record-specific tail (e.g. 'got str ...')."""
    return reason.split(",")[0].split(":")[0]


def _fmt(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.3f}"


@task(name="summarize-run", cache_policy=NO_CACHE, persist_result=False)
def summarize_run(
    scores: PartitionScores,
    run: RunInfo,
    warehouse: str,
    n_batches_cached: int,
    publication: Publication,
    docs_dir: str | None = None,
    judge_usage: dict[str, dict[str, Any]] | None = None,
) -> RunSummary:
    """Summarise the published partition and attach it to the flow run as table and markdown artifacts."""
    index = Path(docs_dir) / "scores_out" / "index.html" if docs_dir else None
    docs = index.parent.parent.as_uri() if index is not None and index.exists() else None
    summary = summarize(scores, run, warehouse, n_batches_cached, publication.validations, docs, judge_usage)
    date = summary.partition_date.isoformat()
    create_table_artifact(
        key=f"ragpulse-summary-{date}",
        table=[
            {
                "metric": m.metric,
                "version": m.version,
                "n": m.n,
                "coverage": _fmt(m.coverage),
                "mean": _fmt(m.mean),
                "p10": _fmt(m.p10),
                "p50": _fmt(m.p50),
                "p90": _fmt(m.p90),
                "not ok": ", ".join(f"{k} ({v})" for k, v in m.not_ok_reasons.items()),
            }
            for m in summary.metrics
        ],
        description=f"ragpulse scores for dt={date} (run {summary.run_id})",
    )
    quarantine_lines = "\n".join(f"| {reason} | {count} |" for reason, count in summary.quarantine_reasons.items())
    validation_rows = publication.validations.to_pylist()
    validation_lines = "\n".join(
        f"| {v['suite']} | {v['expectation']} | {v['column_name'] or ''} | {'pass' if v['success'] else 'FAIL'} "
        f"| {v['unexpected_count'] if v['unexpected_count'] is not None else ''} |"
        for v in validation_rows
    )
    create_markdown_artifact(
        key=f"ragpulse-run-{date}",
        markdown=(
            f"# ragpulse dt={date}\n\n"
            f"- records read: {summary.n_records}\n"
            f"- traces scored: {summary.n_traces}\n"
            f"- quarantined: {summary.n_quarantined}\n"
            f"- batches: {summary.n_batches} ({summary.n_batches_cached} from cache)\n"
            f"- warehouse: `{summary.warehouse}`\n\n"
            + (f"| quarantine reason | records |\n|---|---|\n{quarantine_lines}\n\n" if quarantine_lines else "")
            + _judge_section(summary)
            + "## Data-quality checks\n\n"
            + (f"Great Expectations data docs: {summary.data_docs}\n\n" if summary.data_docs else "")
            + f"| suite | expectation | column | result | unexpected |\n|---|---|---|---|---|\n{validation_lines}\n"
        ),
        description="ragpulse run overview",
    )
    get_run_logger().info(
        "dt=%s: %d traces, %d quarantined, %d/%d batches cached",
        date,
        summary.n_traces,
        summary.n_quarantined,
        summary.n_batches_cached,
        summary.n_batches,
    )
    return summary


def _usd(cost: float | None) -> str:
    return "unpriced" if cost is None else f"{cost:.4f}"


def _judge_section(summary: RunSummary) -> str:
    """Markdown on the judge: skipped metrics and how to enable them, calls, tokens and estimated cost."""
    text = ""
    if summary.skipped_metrics:
        text += (
            f"**Skipped (no judge configured):** {', '.join(summary.skipped_metrics)}. Set `RAGPULSE_JUDGE_MODEL` "
            "(and `RAGPULSE_JUDGE_BASE_URL` for a server other than OpenAI, the key in `OPENAI_API_KEY` or a "
            "Prefect Secret block) to score them.\n\n"
        )
    if summary.judge_usage:
        rows = "\n".join(
            f"| {metric} | {u['http_calls']} | {u['cache_hits']} | {u['prompt_tokens']} | {u['completion_tokens']} "
            f"| {u['failures']} | {_usd(u['estimated_cost_usd'])} |"
            for metric, u in summary.judge_usage.items()
        )
        text += (
            f"## Judge `{summary.judge_model}`\n\n| metric | calls | cache hits | prompt tokens | completion tokens "
            f"| failures | est. cost (USD) |\n|---|---|---|---|---|---|---|\n{rows}\n\n"
        )
    return text


def report_rejected_scores(date: dt.date, run_id: str, failures: list[str]) -> None:
    """Markdown artifact for a partition whose score table failed validation and was not published."""
    items = "\n".join(f"- `{failure}`" for failure in failures)
    create_markdown_artifact(
        key=f"ragpulse-rejected-{date.isoformat()}",
        markdown=(
            f"# ragpulse dt={date.isoformat()}: scores not published\n\n"
            f"Run `{run_id}` produced a score table that failed {len(failures)} expectation(s). Nothing was "
            "published; the partition keeps its previous rows. The results are in the `validations` table.\n\n"
            f"{items}\n"
        ),
        description="ragpulse output validation failed",
    )
