"""The run-summary task: a partition's summary (``run_summary``) attached to the flow run as Prefect artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from ragpulse.tasks.core.artifacts import artifact_key, followable, md, md_link, worker_path
from ragpulse.tasks.core.types import PartitionScores, RunInfo
from ragpulse.tasks.reporting.run_summary import MetricSummary, RunSummary, summarize
from ragpulse.tasks.reporting.staged_facts import count_staged

__all__ = ["run_markdown", "summarize_run"]


def _fmt(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.3f}"


@task(name="summarize-run", cache_policy=NO_CACHE, persist_result=False)
def summarize_run(
    scores: PartitionScores,
    run: RunInfo,
    warehouse: str,
    n_batches_cached: int,
    validations: pa.Table,
    docs_dir: str | None = None,
    judge_usage: dict[str, dict[str, Any]] | None = None,
    unchanged_since: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> RunSummary:
    """Summarise the published partition (or, with ``unchanged_since``, the identical one that run published) and
    attach it to the flow run as table and markdown artifacts. What the scored traces carry is counted in their
    staged batches (``storage_options`` reach them), so that a day that scored nothing, or whose traces have no
    contexts, is logged as a warning naming why."""
    index = Path(docs_dir) / "scores_out" / "index.html" if docs_dir else None
    docs = index.parent.parent.as_uri() if index is not None and index.exists() else None
    staged = count_staged(scores.staged_batches, scores.trace_ids, storage_options) if len(scores.trace_ids) else None
    summary = summarize(
        scores, run, warehouse, n_batches_cached, validations, docs, judge_usage, unchanged_since, staged
    )  # fmt: skip
    day = summary.partition_date
    create_table_artifact(
        key=artifact_key("summary", day, warehouse),
        table=[
            {
                "metric": m.metric,
                "unit": unit if m.against is None else f"{unit} ({m.against})",
                "version": m.version,
                "n": m.n,
                "coverage": _fmt(m.coverage),
                "mean": _fmt(m.mean),
                "p10": _fmt(m.p10),
                "p50": _fmt(m.p50),
                "p90": _fmt(m.p90),
                "not ok": ", ".join(f"{k} ({v})" for k, v in m.not_ok_reasons.items()),
            }
            for unit, unit_metrics in _units(summary)
            for m in unit_metrics
        ],
        description=f"ragpulse scores for dt={day} (run {summary.run_id})",
    )
    create_markdown_artifact(
        key=artifact_key("run", day, warehouse),
        markdown=run_markdown(summary, validations),
        description="ragpulse run overview",
    )
    get_run_logger().info(
        "dt=%s: %d traces, %d quarantined, %d/%d batches cached",
        day,
        summary.n_traces,
        summary.n_quarantined,
        summary.n_batches_cached,
        summary.n_batches,
    )
    if summary.warning:
        get_run_logger().warning("%s", summary.warning)
    return summary


def run_markdown(summary: RunSummary, validations: pa.Table) -> str:
    """The run overview: counts, quarantine reasons, the judge, and every data-quality check. Each value read from
    traces, checks or settings goes through ``md``, and the data docs are a link only where a reader can open it."""
    quarantine_lines = "\n".join(f"| {md(reason)} | {count} |" for reason, count in summary.quarantine_reasons.items())
    validation_lines = "\n".join(
        f"| {md(v['suite'])} | {md(v['expectation'])} | {md(v['column_name'] or '')} "
        f"| {'pass' if v['success'] else 'FAIL'} "
        f"| {v['unexpected_count'] if v['unexpected_count'] is not None else ''} |"
        for v in validations.to_pylist()
    )
    return (
        f"# ragpulse dt={summary.partition_date.isoformat()}\n\n"
        f"- records read: {summary.n_records}\n"
        f"- traces scored: {summary.n_traces}\n"
        f"- quarantined: {summary.n_quarantined}\n"
        f"- batches: {summary.n_batches} ({summary.n_batches_cached} from cache)\n"
        + (
            f"- unchanged since run {md(summary.unchanged_since)}: its rows stand, nothing published\n"
            if summary.unchanged_since
            else ""
        )
        + f"- warehouse: {md(summary.warehouse)}\n"
        + f"- outcome: {summary.outcome}\n\n"
        + (f"**Warning:** {md(summary.warning)}\n\n" if summary.warning else "")
        + (f"| quarantine reason | records |\n|---|---|\n{quarantine_lines}\n\n" if quarantine_lines else "")
        + _metrics_section(summary)
        + _judge_section(summary)
        + "## Data-quality checks\n\n"
        + (_data_docs(summary.data_docs) if summary.data_docs else "")
        + f"| suite | expectation | column | result | unexpected |\n|---|---|---|---|---|\n{validation_lines}\n"
    )


def _units(summary: RunSummary) -> list[tuple[str, list[MetricSummary]]]:
    """The summary's metrics by the unit they score: turns (traces), retrieval steps, conversations."""
    return [("turn", summary.metrics), ("step", summary.step_metrics), ("conversation", summary.conversation_metrics)]


# The heading of each unit's table in the run overview (the turn table keeps the heading it always had).
_UNIT_HEADINGS = {
    "turn": "Metrics",
    "step": "Retrieval step metrics (per step, by what it was scored against)",
    "conversation": "Conversation metrics (per conversation)",
}


def _metrics_section(summary: RunSummary) -> str:
    """Per metric: its coverage (the share of traces scored ok), mean over those, and the not-ok reasons; then, for
    agents, the same per step metric and ``against`` (over steps) and per conversation metric (over conversations).
    A unit without metrics has no table."""
    text = ""
    for unit, metrics in _units(summary):
        if not metrics:
            continue
        columns = ["metric", *(["against"] if unit == "step" else []), "ok", "coverage", "mean", "not ok"]
        rows = [
            [
                md(m.metric),
                *([md(m.against or "")] if unit == "step" else []),
                f"{m.n_ok} / {m.n}",
                _share(m.coverage),
                _fmt(m.mean),
                md(", ".join(f"{k} ({v})" for k, v in m.not_ok_reasons.items())),
            ]
            for m in metrics
        ]
        lines = [f"| {' | '.join(columns)} |", "|" + "---|" * len(columns), *(f"| {' | '.join(r)} |" for r in rows)]
        table = "\n".join(lines)
        text += f"## {_UNIT_HEADINGS[unit]}\n\n{table}\n\n"
    return text


def _share(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.0%}"


def _data_docs(url: str) -> str:
    """A link to the data docs where the reader can open them; else where they are: GX writes them on the worker."""
    if followable(url):
        return f"Great Expectations data docs: {md_link('open', url)}\n\n"
    return f"Great Expectations data docs were written on the worker at {md(worker_path(url))} (a path there).\n\n"


def _usd(cost: float | None) -> str:
    return "unpriced" if cost is None else f"{cost:.4f}"


def _judge_section(summary: RunSummary) -> str:
    """Markdown on the judge: skipped metrics and how to enable them, calls, tokens and estimated cost."""
    text = ""
    if summary.skipped_metrics:
        text += (
            f"**Skipped (no judge configured):** {md(', '.join(summary.skipped_metrics))}. Set `RAGPULSE_JUDGE_MODEL` "
            "(and `RAGPULSE_JUDGE_BASE_URL` for a server other than OpenAI, the key in `OPENAI_API_KEY` or a "
            "Prefect Secret block) to score them.\n\n"
        )
    if summary.judge_usage:
        rows = "\n".join(
            f"| {md(metric)} | {u['http_calls']} | {u['cache_hits']} | {u['prompt_tokens']} | {u['completion_tokens']} "
            f"| {u['failures']} | {_usd(u['estimated_cost_usd'])} |"
            for metric, u in summary.judge_usage.items()
        )
        text += (
            f"## Judge {md(summary.judge_model)}\n\n| metric | calls | cache hits | prompt tokens | completion tokens "
            f"| failures | est. cost (USD) |\n|---|---|---|---|---|---|---|\n{rows}\n\n"
        )
    return text
