"""What the command line prints: run and drift tables, the backfill progress bar, one-line errors."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from ragpulse.tasks.reporting.run_summary import RunSummary

__all__ = ["BackfillBar", "console", "fail", "out", "print_drift", "print_summaries", "progress"]

console = Console(stderr=True)
# Summary tables are wider than the 80 columns rich assumes when stdout is not a terminal.
out = Console(width=None if Console().is_terminal else 160)


def fail(message: str) -> typer.Exit:
    """A one-line error on stderr and the exit to raise."""
    console.print(f"[bold red]error:[/bold red] {message}")
    return typer.Exit(code=2)


def progress() -> Progress:
    """The backfill's progress display."""
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, TextColumn("{task.fields[note]}"), console=console)


class BackfillBar:
    """A rich progress bar fed by the backfill flow's progress events."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._job = progress.add_task("planning", total=None, note="")
        self._running: set[dt.date] = set()
        self._failed = 0

    def planned(self, to_run: int, skipped: int) -> None:
        self._progress.update(self._job, description="backfill", total=to_run, note=f"{skipped} already published")

    def partition(self, day: dt.date, event: str) -> None:
        if event == "started":
            self._running.add(day)
        else:
            self._running.discard(day)
            self._failed += event == "failed"
            self._progress.advance(self._job)
        running = ", ".join(sorted(d.isoformat() for d in self._running))
        failed = f"[red]{self._failed} failed[/red] " if self._failed else ""
        self._progress.update(self._job, note=f"{failed}{running}")


def print_drift(warehouse_url: str, day: dt.date) -> None:
    """The day's drift findings that alert, as the monitor would send them."""
    from ragpulse.metrics.drift import ALERTING
    from ragpulse.tasks.warehouse import open_warehouse

    rows = open_warehouse(warehouse_url).read("drift", start=day, end=day).to_pylist()
    alerting = [r for r in rows if r["verdict"] in ALERTING]
    if not rows:
        return
    if not alerting:
        console.print(f"Drift on dt={day}: nothing alerting ({len(rows)} comparisons).")
        return
    table = Table(title=f"drift alerts for dt={day} (vs the previous partitions)")
    for column in ("metric", "segment", "verdict", "baseline", "current", "delta"):
        table.add_column(column)
    for r in sorted(alerting, key=lambda r: (r["metric"], r["segment"])):
        table.add_row(
            r["metric"], r["segment"], r["verdict"], f"{r['baseline_mean'] or 0:.3f}", f"{r['current_mean'] or 0:.3f}",
            f"{r['delta'] or 0:+.3f}",
        )  # fmt: skip
    out.print(table)


def print_summaries(summaries: list[RunSummary]) -> None:
    runs = Table(title="runs")
    for column in ("partition", "records", "traces", "quarantined", "batches (cached)"):
        runs.add_column(column, justify="right")
    for s in summaries:
        runs.add_row(
            s.partition_date.isoformat(),
            str(s.n_records),
            str(s.n_traces),
            str(s.n_quarantined),
            f"{s.n_batches} ({s.n_batches_cached})",
        )
    out.print(runs)
    means = Table(title="mean score per metric and partition")
    means.add_column("metric", no_wrap=True)
    for s in summaries:
        means.add_column(s.partition_date.strftime("%m-%d"), justify="right")
    means.add_column("coverage", justify="right")
    for index, metric in enumerate(summaries[0].metrics if summaries else []):
        cells = ["-" if s.metrics[index].n_ok == 0 else f"{s.metrics[index].mean:.2f}" for s in summaries]
        means.add_row(metric.metric, *cells, f"{summaries[-1].metrics[index].coverage:.0%}")
    out.print(means)
    skipped = sorted({name for s in summaries for name in s.skipped_metrics})
    if skipped:
        console.print(
            f"[yellow]Skipped (no judge configured): {', '.join(skipped)}.[/yellow] Set RAGPULSE_JUDGE_MODEL (and "
            "RAGPULSE_JUDGE_BASE_URL for a server other than OpenAI; the key in OPENAI_API_KEY) or pass --judge-model."
        )
    usage = [u for s in summaries for u in s.judge_usage.values()]
    if usage:
        cost = [u["estimated_cost_usd"] for u in usage]
        priced = "unpriced" if any(c is None for c in cost) else f"~${sum(cost):.4f}"
        console.print(
            f"Judge: {sum(u['http_calls'] for u in usage)} calls, {sum(u['cache_hits'] for u in usage)} cache hits, "
            f"{sum(u['prompt_tokens'] for u in usage)} prompt tokens, cost {priced}."
        )
