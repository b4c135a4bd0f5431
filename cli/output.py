"""What the command line prints: run and drift tables, the backfill progress bar, one-line errors and the exit codes
a scheduler acts on, and help that shows flags as flags (and takes ``--verbose`` after the command too)."""

from __future__ import annotations

import datetime as dt
import enum
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.core import TyperCommand, TyperGroup, TyperOption

from ragpulse.metrics.errors import RagpulseError, UnknownMetricError
from ragpulse.tasks.core.exceptions import ConfigError, PartitionNotFoundError

if TYPE_CHECKING:
    from ragpulse.tasks.reporting.run_summary import RunSummary

__all__ = [
    "BackfillBar",
    "EvaluateBar",
    "ExitCode",
    "FlagsCommand",
    "FlagsGroup",
    "console",
    "fail",
    "fail_with",
    "out",
    "outcome_exit",
    "print_alerts",
    "print_drift",
    "print_language_scores",
    "print_summaries",
    "print_verdicts",
    "print_warnings",
    "progress",
    "verdict_summary",
]

console = Console(stderr=True)
# Summary tables are wider than the 80 columns rich assumes when stdout is not a terminal.
out = Console(width=None if Console().is_terminal else 160)

#: What a missing number shows: a NULL mean or delta is no measurement, never 0.
_DASH = "\N{EN DASH}"


class ExitCode(enum.IntEnum):
    """The exit status of every command, so a scheduler can tell a failure from a mistake from a quiet day
    (docs/operations.md, "Exit codes")."""

    OK = 0
    #: The work failed: data, validation, publish, a locked warehouse, a backfill with failed partitions.
    FAILED = 1
    #: Usage or configuration: bad options or settings, unknown metric, no source; typer's usage errors too.
    USAGE = 2
    #: Nothing to do: no traces for the date, or nothing left to evaluate in a backfill's range.
    NOTHING_TO_DO = 3
    #: Scored nothing: the day's traces were published but gave no ok score of any metric (a backfill: some day).
    NOTHING_SCORED = 4

    @classmethod
    def of(cls, error: RagpulseError) -> ExitCode:
        """The exit code of an error ragpulse raised on purpose."""
        if isinstance(error, ConfigError | UnknownMetricError):
            return cls.USAGE
        if isinstance(error, PartitionNotFoundError):
            return cls.NOTHING_TO_DO
        return cls.FAILED


def fail(message: str, code: ExitCode) -> typer.Exit:
    """A one-line error on stderr and the exit to raise. Never wrapped, so a log or a scheduler keeps it whole."""
    console.print(f"[bold red]error:[/bold red] {escape(' '.join(message.split()))}", soft_wrap=True)
    return typer.Exit(code=code)


def print_warnings(summaries: Sequence[RunSummary]) -> None:
    """Each day's warning on stderr (``--json`` too): it scored nothing, or none of its traces has contexts."""
    for summary in summaries:
        if summary.warning:
            console.print(f"[yellow]warning: {escape(summary.warning)}[/yellow]", soft_wrap=True)


def outcome_exit(summary: RunSummary) -> typer.Exit | None:
    """Warn as ``print_warnings`` does; for a day that scored nothing, exit 4; for a day whose records were all
    quarantined, a one-line notice on stderr and exit 3 (nothing scored, though the quarantine and run row were
    published); None for a day that was scored."""
    print_warnings([summary])
    if summary.scored_nothing_usable:
        return typer.Exit(code=ExitCode.NOTHING_SCORED)
    if summary.outcome != "no_traces":
        return None
    reasons = ", ".join(f"{reason} ({count})" for reason, count in list(summary.quarantine_reasons.items())[:3])
    console.print(
        f"[yellow]dt={summary.partition_date}: no valid traces: {summary.n_quarantined} record(s) quarantined"
        f"{f' ({escape(reasons)})' if reasons else ''}; the quarantine and the run row are published, nothing "
        "was scored.[/yellow]",
        soft_wrap=True,
    )
    return typer.Exit(code=ExitCode.NOTHING_TO_DO)


def fail_with(error: RagpulseError) -> typer.Exit:
    """``fail`` with the error's message and the code its kind maps to."""
    return fail(str(error), ExitCode.of(error))


def _flags_untyped(params: list[Any]) -> list[Any]:
    """Typer 0.29's rich help types every flag (``--json <bool>``) as if it took a value; a flag takes none."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class FlagsCommand(TyperCommand):
    """A command whose help shows flags as flags."""

    # ctx: click's Context, which typer 0.29 vendors in a private module.
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_untyped(super().get_params(ctx))


_VERBOSE = ("--verbose", "-v")


class FlagsGroup(TyperGroup):
    """The command group, whose help (``--verbose``, ``--version``, ``--help``) shows flags as flags, and which
    takes ``--verbose`` after the command as well: ``ragpulse evaluate ... -v`` is ``ragpulse -v evaluate ...``."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_untyped(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        end = args.index("--") if "--" in args else len(args)  # after "--", a "-v" is a value
        if any(arg in _VERBOSE for arg in args[:end]):
            args = ["--verbose", *(arg for arg in args[:end] if arg not in _VERBOSE), *args[end:]]
        return super().parse_args(ctx, args)


def progress() -> Progress:
    """The progress display of a backfill or an evaluated day: description, bar, done of total, elapsed, note."""
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, TextColumn("{task.fields[note]}"), console=console)


class BackfillBar:
    """A rich progress bar fed by the backfill flow's progress events."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._job = progress.add_task("planning", total=None, note="")
        self._running: set[dt.date] = set()
        self._failed = self._unscored = 0

    def planned(self, to_run: int, skipped: int) -> None:
        self._progress.update(self._job, description="backfill", total=to_run, note=f"{skipped} already published")

    def partition(self, day: dt.date, event: str) -> None:
        if event == "started":
            self._running.add(day)
        else:
            self._running.discard(day)
            self._failed += event == "failed"
            self._unscored += event == "nothing_scored"
            self._progress.advance(self._job)
        running = ", ".join(sorted(d.isoformat() for d in self._running))
        failed = f"[red]{self._failed} failed[/red] " if self._failed else ""
        unscored = f"[yellow]{self._unscored} scored nothing[/yellow] " if self._unscored else ""
        self._progress.update(self._job, note=f"{failed}{unscored}{running}")


class EvaluateBar:
    """Rich progress lines fed by the evaluate flow's events, one per stage as it starts: slices staged (with the
    traces staged so far), batches scored (with those from the cache), rows published. A stage's clock stops when
    it is done."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._stages: dict[str, TaskID] = {}

    def _show(self, stage: str, done: int, total: int | None, note: str) -> None:
        if stage not in self._stages:
            self._stages[stage] = self._progress.add_task(stage, total=total, note="")
        job = self._stages[stage]
        self._progress.update(job, completed=done, total=total, note=note)
        if total is not None and done >= total:
            self._progress.stop_task(job)

    def staging(self, day: dt.date, slices: int, of: int, traces: int) -> None:
        self._show("slices staged", slices, of, f"{traces} traces")

    def scoring(self, day: dt.date, batches: int, of: int, cached: int) -> None:
        self._show("batches scored", batches, of, f"{cached} from the cache" if cached else "")

    def publishing(self, day: dt.date) -> None:
        self._show("rows published", 0, None, "assembling and validating the scores")

    def published(self, day: dt.date, rows: Mapping[str, int]) -> None:
        total = sum(rows.values())
        tables = ", ".join(f"{table} {n}" for table, n in rows.items()) or "none: unchanged since published"
        self._show("rows published", total, total, tables)


def _number(value: float | None, spec: str = ".3f") -> str:
    """A mean or delta as text; a dash when it is NULL or NaN (no baseline, no scores), never a made-up 0."""
    return _DASH if value is None or math.isnan(value) else format(value, spec)


def print_drift(warehouse_url: str, day: dt.date) -> None:
    """The day's findings that alert (drift and threshold rules), as the incidents the monitor would send."""
    from ragpulse.metrics.drift import ALERTING
    from ragpulse.tasks.monitoring.comparison import alert_of
    from ragpulse.tasks.monitoring.incidents import incidents_of
    from ragpulse.tasks.warehouse import open_warehouse

    rows = open_warehouse(warehouse_url).read("drift", start=day, end=day).to_pylist()
    alerting = [r for r in rows if r["verdict"] in ALERTING]
    if not rows:
        return
    if not alerting:
        console.print(f"Drift on dt={day}: nothing alerting ({len(rows)} comparisons).")
        return
    incidents = incidents_of(alert_of(r) for r in alerting)
    table = Table(title=f"alerts for dt={day}: {len(alerting)} in {len(incidents)} incident(s), most severe first")
    for column in ("segment", "family", "metric", "verdict", "baseline", "current", "delta"):
        table.add_column(column)
    for incident in incidents:
        for i, a in enumerate(incident.alerts):
            current = a.observed if a.rule is not None else a.current_mean
            table.add_row(
                incident.segment if i == 0 else "", incident.family if i == 0 else "", a.metric, a.verdict,
                _number(a.baseline_mean), _number(current), _number(a.delta, "+.3f"),
                end_section=i == len(incident.alerts) - 1,
            )  # fmt: skip
    out.print(table)


def print_language_scores(warehouse_url: str, start: dt.date, end: dt.date) -> None:
    """Mean score per trace language over ``start``..``end``, for the metrics that read text: what the demo's
    Japanese and Chinese apps score next to the English ones."""
    from ragpulse.tasks.core.duckdb_limits import connect_duckdb
    from ragpulse.tasks.warehouse import open_warehouse

    warehouse = open_warehouse(warehouse_url)
    scores = warehouse.read("scores", start=start, end=end, columns=["partition_date", "trace_id", "metric", "value"])
    traces = warehouse.read("traces", start=start, end=end, columns=["partition_date", "trace_id", "language"])
    with connect_duckdb() as con:
        con.register("scores", scores)
        con.register("traces", traces)
        rows = con.sql(
            """
            SELECT coalesce(t.language, '?') AS language, count(DISTINCT s.trace_id) AS traces,
                   avg(s.value) FILTER (WHERE s.metric = 'answer_f1') AS f1,
                   avg(s.value) FILTER (WHERE s.metric = 'answer_exact_match_normalized') AS em,
                   avg(s.value) FILTER (WHERE s.metric = 'document_mrr') AS mrr
            FROM scores s JOIN traces t USING (partition_date, trace_id)
            GROUP BY 1 ORDER BY traces DESC, language
            """
        ).fetchall()
    if not rows:
        return
    table = Table(title="mean score per trace language (? = not identified)")
    for column in ("language", "traces", "answer_f1", "answer_exact_match_normalized", "document_mrr"):
        table.add_column(column, justify="left" if column == "language" else "right")
    for language, n, f1, em, mrr in rows:
        table.add_row(language, str(n), _number(f1, ".2f"), _number(em, ".2f"), _number(mrr, ".2f"))
    out.print(table)


def verdict_summary(verdicts: Mapping[str, int]) -> str:
    """Drift verdict counts in a sentence: ``4 stable, 2 insufficient_data``."""
    return ", ".join(f"{count} {verdict}" for verdict, count in sorted(verdicts.items())) or "no comparisons"


def print_verdicts(day: dt.date, verdicts: Mapping[str, int]) -> None:
    """How many drift comparisons of the day reached each verdict, most severe first (alerting ones on top)."""
    from ragpulse.metrics.drift import severity

    if not verdicts:
        console.print(f"Drift on dt={day}: no comparisons (no published scores to compare).")
        return
    table = Table(title=f"drift verdicts for dt={day}")
    table.add_column("verdict")
    table.add_column("comparisons", justify="right")
    for verdict, count in sorted(verdicts.items(), key=lambda item: (severity(item[0]), item[0])):
        table.add_row(verdict, str(count))
    out.print(table)


def print_alerts(alerts: Mapping[str, Sequence[str]]) -> None:
    """Each alert of the day and its delivery: sent now, sent by an earlier run, failed, or its event not emitted
    (no Prefect server to receive it)."""
    outcomes = ("sent", "already_sent", "failed", "skipped")
    deliveries = [(key, outcome) for outcome in outcomes for key in alerts.get(outcome, [])]
    if not deliveries:
        return
    table = Table(title="alerts")
    for column in ("metric", "segment", "delivery"):
        table.add_column(column)
    for key, outcome in deliveries:
        _, metric, segment = key.split("|", 2)  # an alert's key: partition|metric|segment
        table.add_row(metric, segment, "event not emitted" if outcome == "skipped" else outcome.replace("_", " "))
    out.print(table)
    if alerts.get("skipped"):
        from ragpulse.tasks.monitoring.delivery import EVENTS_NOT_EMITTED  # loads Prefect's events: only here

        out.print(f"Drift events not emitted: {EVENTS_NOT_EMITTED}.")


def print_summaries(summaries: list[RunSummary]) -> None:
    runs = Table(title="runs")
    for column in ("partition", "records", "traces", "quarantined", "batches (cached)", "outcome"):
        runs.add_column(column, justify="left" if column == "outcome" else "right")
    for s in summaries:
        runs.add_row(
            s.partition_date.isoformat(),
            str(s.n_records),
            str(s.n_traces),
            str(s.n_quarantined),
            f"{s.n_batches} ({s.n_batches_cached})",
            f"[bold yellow]{s.outcome}[/bold yellow]" if s.scored_nothing_usable else s.outcome,
        )
    out.print(runs)
    means = Table(title="mean score per metric and partition")
    means.add_column("metric", no_wrap=True)
    for s in summaries:
        means.add_column(s.partition_date.strftime("%m-%d"), justify="right")
    # The share of traces scored ok, of the last day shown (a backfill's is its last partition).
    latest = f" {summaries[-1].partition_date:%m-%d}" if len(summaries) > 1 else ""
    means.add_column(f"coverage{latest}", justify="right")
    # By name: a day without valid traces has no metric rows, and a backfill's days may differ.
    by_day = [{m.metric: m for m in s.metrics} for s in summaries]
    for name in dict.fromkeys(m.metric for s in summaries for m in s.metrics):
        found = [day.get(name) for day in by_day]
        cells = ["-" if m is None or m.n_ok == 0 else f"{m.mean:.2f}" for m in found]
        last = found[-1]
        means.add_row(name, *cells, "-" if last is None or not last.n else f"{last.coverage:.0%}")
    if means.row_count:
        out.print(means)
    for s in summaries:
        if s.unchanged_since:
            console.print(
                f"dt={s.partition_date}: unchanged since run {escape(s.unchanged_since)}, whose rows stand; nothing "
                "was published (--republish publishes anyway)."
            )
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
