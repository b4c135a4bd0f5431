"""The ``ragpulse`` command line. Prefect is imported lazily so that ``--help`` stays instant."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from ragpulse.tasks.reporting.summary import RunSummary

app = typer.Typer(help="ragpulse: monitor the quality of RAG systems from their traces.", no_args_is_help=True)
console = Console(stderr=True)
# Summary tables are wider than the 80 columns rich assumes when stdout is not a terminal.
out = Console(width=None if Console().is_terminal else 160)

_PREFECT_DEFAULTS = {
    # The ephemeral API server took 20-50 s to start on small machines; Prefect's default is 20 s.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's task-level logs.")] = False,
) -> None:
    for name, value in _PREFECT_DEFAULTS.items():
        os.environ.setdefault(name, value)
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def _announce_api() -> None:
    if not os.environ.get("PREFECT_API_URL"):
        console.print(
            "[dim]No PREFECT_API_URL set: starting Prefect's temporary local API server for this command "
            "(20-50 s on a small machine; it keeps no history). Point PREFECT_API_URL at a Prefect server "
            "for schedules and run history.[/dim]"
        )


def _fail(message: str) -> typer.Exit:
    console.print(f"[bold red]error:[/bold red] {message}")
    return typer.Exit(code=2)


def _date(value: str, option: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise _fail(f"{option} must be a date like 2026-11-28, got {value!r}") from None


MetricsOption = Annotated[
    str | None, typer.Option(help="Comma-separated metric names (see `ragpulse metrics`); default: all defaults.")
]
WarehouseOption = Annotated[str | None, typer.Option(help="Warehouse URL, e.g. duckdb:///ragpulse.duckdb.")]
ConfigOption = Annotated[Path | None, typer.Option(help="TOML config file (default ./ragpulse.toml if present).")]
SourceOption = Annotated[
    str | None, typer.Option(help="Root URL of the traces: dt= partitions or an export (path, file://, s3://, gs://).")
]
WorkDirOption = Annotated[str | None, typer.Option(help="Task cache and staged batches (path or URL).")]
JudgeModelOption = Annotated[
    str | None, typer.Option(help="Judge model for LLM metrics (else RAGPULSE_JUDGE_MODEL; none = skipped).")
]
JudgeUrlOption = Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint of the judge.")]
SampleOption = Annotated[float | None, typer.Option(help="Share of traces the judge scores, e.g. 0.1.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
FormatOption = Annotated[
    str | None,
    typer.Option(
        "--format", help="What the source holds: ragpulse (default), openinference, otel-genai, langfuse, langsmith."
    ),
]
PartitioningOption = Annotated[
    str | None, typer.Option(help="dt (dt=YYYY-MM-DD folders, default) or event-time (select the day by trace time).")
]
LateArrivalOption = Annotated[
    float | None, typer.Option(help="event-time: hours after the day that its traces may still arrive.")
]


@app.command()
def evaluate(
    date: Annotated[str, typer.Option(help="Partition date, YYYY-MM-DD.")],
    source: SourceOption = None,
    metrics: MetricsOption = None,
    warehouse: WarehouseOption = None,
    work_dir: WorkDirOption = None,
    batch_size: Annotated[int | None, typer.Option(help="Traces per scoring task.")] = None,
    task_runner: Annotated[str | None, typer.Option(help="thread (default) or dask.")] = None,
    dask_address: Annotated[str | None, typer.Option(help="Existing Dask scheduler for --task-runner dask.")] = None,
    max_workers: Annotated[int | None, typer.Option(help="Parallel scoring tasks (threads or Dask workers).")] = None,
    judge_model: JudgeModelOption = None,
    judge_base_url: JudgeUrlOption = None,
    judge_config: Annotated[str | None, typer.Option(help="TOML/JSON judge options (aspects, custom judges).")] = None,
    sample: SampleOption = None,
    trace_format: FormatOption = None,
    partitioning: PartitioningOption = None,
    late_arrival_hours: LateArrivalOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Score one date partition and publish its score tables."""
    from ragpulse.metrics.errors import RagpulseError
    from ragpulse.tasks.core.config import load_settings

    partition = _date(date, "--date")
    try:
        settings = load_settings(
            config,
            source=source,
            metrics=metrics,
            warehouse=warehouse,
            work_dir=work_dir,
            batch_size=batch_size,
            task_runner=task_runner,
            dask_address=dask_address,
            max_workers=max_workers,
            judge_config=judge_config,
            sample_rate=sample,
            trace_format=trace_format,
            partitioning=partitioning,
            late_arrival_hours=late_arrival_hours,
        )
        if settings.source is None:
            raise _fail("no trace source: pass --source, set RAGPULSE_SOURCE or `source` in ragpulse.toml")
        _announce_api()
        summary = _run_partition(settings, partition, judge_model=judge_model, judge_base_url=judge_base_url)
    except RagpulseError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        out.print_json(json.dumps(summary.to_dict(), default=str))
    else:
        _print_summaries([summary])


def _run_partition(
    settings: Any, partition: dt.date, *, judge_model: str | None = None, judge_base_url: str | None = None
) -> RunSummary:
    from ragpulse.flows.evaluate import evaluate_partition
    from ragpulse.flows.runners import build_task_runner
    from ragpulse.tasks.quality.validate import TraceLimits

    runner = build_task_runner(
        settings.task_runner, max_workers=settings.max_workers, dask_address=settings.dask_address
    )
    limits = TraceLimits(
        max_question_chars=settings.max_question_chars,
        max_answer_chars=settings.max_answer_chars,
        max_contexts=settings.max_contexts,
        max_context_chars=settings.max_context_chars,
    )
    return evaluate_partition.with_options(task_runner=runner)(
        **_flow_parameters(settings, judge_model, judge_base_url),
        date=partition,
        input_suite=settings.input_suite,
        output_suite=settings.output_suite,
        limits=limits,
    )


SegmentOption = Annotated[
    str | None, typer.Option(help="Metadata key whose values get drift checks of their own, e.g. metadata.app.")
]
BaselineOption = Annotated[int, typer.Option(min=1, max=366, help="Previous partitions in the drift baseline.")]
MinDeltaOption = Annotated[float, typer.Option(min=0.0, max=1.0, help="Smallest mean change that alerts.")]


def _drift_settings(baseline_partitions: int, segment_key: str | None, min_delta: float) -> Any:
    from ragpulse.tasks.monitoring.drift import DriftSettings

    return DriftSettings(baseline_partitions=baseline_partitions, segment_key=segment_key, min_delta=min_delta)


def _flow_parameters(settings: Any, judge_model: str | None, judge_base_url: str | None) -> dict[str, Any]:
    """The evaluate-flow parameters that monitor and backfill pass on, from merged settings."""
    return {
        "source": settings.source,
        "metrics": list(settings.metrics),
        "warehouse": settings.warehouse,
        "work_dir": settings.work_dir,
        "batch_size": settings.batch_size,
        "storage_options": settings.storage_options or None,
        "max_failure_rate": settings.max_failure_rate,
        "judge_model": judge_model,
        "judge_base_url": judge_base_url,
        "judge_config": settings.judge_config,
        "sample_rate": settings.sample_rate,
        "trace_format": settings.trace_format,
        "format_options": settings.format_options or None,
        "partitioning": settings.partitioning,
        "late_arrival_hours": settings.late_arrival_hours,
    }


def _runner_parameters(settings: Any) -> dict[str, Any]:
    """Where a partition's scoring tasks run (settings task_runner, max_workers, dask_address)."""
    return {
        "task_runner": settings.task_runner,
        "max_workers": settings.max_workers,
        "dask_address": settings.dask_address,
    }


def _settings_with_source(config: Path | None, **overrides: Any) -> Any:
    from ragpulse.tasks.core.config import load_settings

    settings = load_settings(config, **overrides)
    if settings.source is None:
        raise _fail("no trace source: pass --source, set RAGPULSE_SOURCE or `source` in ragpulse.toml")
    return settings


@app.command()
def monitor(
    source: SourceOption = None,
    date: Annotated[str | None, typer.Option(help="Partition to evaluate; default yesterday in --timezone.")] = None,
    timezone: Annotated[str, typer.Option(help="IANA timezone that decides what 'yesterday' is.")] = "UTC",
    metrics: MetricsOption = None,
    warehouse: WarehouseOption = None,
    work_dir: WorkDirOption = None,
    judge_model: JudgeModelOption = None,
    judge_base_url: JudgeUrlOption = None,
    sample: SampleOption = None,
    segment_key: SegmentOption = None,
    baseline_partitions: BaselineOption = 7,
    min_delta: MinDeltaOption = 0.05,
    trace_format: FormatOption = None,
    partitioning: PartitioningOption = None,
    late_arrival_hours: LateArrivalOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Evaluate one partition now, then detect drift and send alerts (what the daily schedule runs)."""
    from ragpulse.flows.monitor import monitor as monitor_flow
    from ragpulse.metrics.errors import RagpulseError

    try:
        settings = _settings_with_source(
            config, source=source, metrics=metrics, warehouse=warehouse, work_dir=work_dir, sample_rate=sample,
            trace_format=trace_format, partitioning=partitioning, late_arrival_hours=late_arrival_hours,
        )  # fmt: skip
        day = _date(date, "--date") if date else None  # the flow picks yesterday in --timezone
        _announce_api()
        result = monitor_flow(
            **_flow_parameters(settings, judge_model, judge_base_url),
            **_runner_parameters(settings),
            date=day,
            drift=_drift_settings(baseline_partitions, segment_key, min_delta),
            timezone=timezone,
        )
    except RagpulseError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        out.print_json(json.dumps(result.to_dict(), default=str))
        return
    _print_summaries([result.summary])
    console.print(f"Drift verdicts: {result.verdicts or 'none'}; alerts: {result.alerts}")


@app.command()
def backfill(
    start: Annotated[str, typer.Option(help="First partition date, YYYY-MM-DD.")],
    end: Annotated[str, typer.Option(help="Last partition date, YYYY-MM-DD (inclusive).")],
    source: SourceOption = None,
    metrics: MetricsOption = None,
    warehouse: WarehouseOption = None,
    work_dir: WorkDirOption = None,
    batch_size: Annotated[int | None, typer.Option(help="Traces per scoring task.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=16, help="Partitions evaluated at once.")] = 2,
    force: Annotated[bool, typer.Option(help="Re-run partitions already published with this configuration.")] = False,
    judge_model: JudgeModelOption = None,
    judge_base_url: JudgeUrlOption = None,
    judge_config: Annotated[str | None, typer.Option(help="TOML/JSON judge options (aspects, custom judges).")] = None,
    sample: SampleOption = None,
    segment_key: SegmentOption = None,
    baseline_partitions: BaselineOption = 7,
    min_delta: MinDeltaOption = 0.05,
    alert: Annotated[bool, typer.Option(help="Send drift alerts for the backfilled partitions too.")] = False,
    trace_format: FormatOption = None,
    partitioning: PartitioningOption = None,
    late_arrival_hours: LateArrivalOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Evaluate every partition in a date range, skipping those already published with this configuration."""
    from ragpulse.metrics.errors import RagpulseError

    first, last = _date(start, "--start"), _date(end, "--end")
    if last < first:
        raise _fail(f"--end {last} is before --start {first}")
    try:
        settings = _settings_with_source(
            config, source=source, metrics=metrics, warehouse=warehouse, work_dir=work_dir, batch_size=batch_size,
            judge_config=judge_config, sample_rate=sample, trace_format=trace_format, partitioning=partitioning,
            late_arrival_hours=late_arrival_hours,
        )  # fmt: skip
        _announce_api()
        state = _run_backfill(
            settings, first, last, judge_model=judge_model, judge_base_url=judge_base_url, concurrency=concurrency,
            force=force, drift=_drift_settings(baseline_partitions, segment_key, min_delta), send_drift_alerts=alert,
        )  # fmt: skip
        result = state.result(raise_on_failure=False)
    except RagpulseError as exc:
        raise _fail(str(exc)) from None
    if not hasattr(result, "to_dict"):
        raise _fail(f"backfill failed: {state.message or result}")
    if as_json:
        out.print_json(json.dumps(result.to_dict(), default=str))
    else:
        if result.summaries:
            _print_summaries(result.summaries)
        console.print(
            f"{len(result.completed)} evaluated, {len(result.skipped)} skipped (already published with config "
            f"{result.config_hash}), {len(result.missing)} day(s) without traces; drift: {result.drift_verdicts}"
        )
    if result.failed:
        raise _fail("; ".join(f"dt={day}: {message}" for day, message in result.failed.items()))


def _run_backfill(
    settings: Any,
    first: dt.date,
    last: dt.date,
    *,
    judge_model: str | None = None,
    judge_base_url: str | None = None,
    **options: Any,
) -> Any:
    """Run the backfill flow in this process behind a progress bar; returns its final state."""
    from ragpulse.flows.backfill import backfill as backfill_flow
    from ragpulse.flows.backfill import progress_listener

    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    progress = Progress(*columns, TextColumn("{task.fields[note]}"), console=console)
    with progress, progress_listener(_BackfillBar(progress)):
        return backfill_flow(
            **_flow_parameters(settings, judge_model, judge_base_url), **_runner_parameters(settings), start=first,
            end=last, return_state=True, **options,
        )  # fmt: skip


class _BackfillBar:
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


@app.command()
def serve(
    source: SourceOption = None,
    cron: Annotated[str, typer.Option(help="When the monitor runs (cron, in --timezone).")] = "0 6 * * *",
    timezone: Annotated[str, typer.Option(help="IANA timezone of the schedule and of 'yesterday'.")] = "UTC",
    name: Annotated[str, typer.Option(help="Deployment name.")] = "monitor-daily",
    metrics: MetricsOption = None,
    warehouse: WarehouseOption = None,
    work_dir: WorkDirOption = None,
    judge_model: JudgeModelOption = None,
    judge_base_url: JudgeUrlOption = None,
    sample: SampleOption = None,
    segment_key: SegmentOption = None,
    baseline_partitions: BaselineOption = 7,
    min_delta: MinDeltaOption = 0.05,
    trace_format: FormatOption = None,
    partitioning: PartitioningOption = None,
    late_arrival_hours: LateArrivalOption = None,
    config: ConfigOption = None,
) -> None:
    """Run the daily monitor on a schedule from this process (no work pool needed) until stopped."""
    from ragpulse.metrics.errors import RagpulseError

    if not os.environ.get("PREFECT_API_URL"):
        raise _fail(
            "schedules need a Prefect server, and the temporary local one creates no scheduled runs: start one "
            "with `prefect server start` (or use Prefect Cloud) and set PREFECT_API_URL, e.g. "
            "http://127.0.0.1:4200/api"
        )
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron, timezone=timezone)
    except ValueError as exc:
        raise _fail(f"invalid schedule --cron {cron!r} --timezone {timezone!r}: {exc.errors()[0]['msg']}") from None
    try:
        settings = _settings_with_source(
            config, source=source, metrics=metrics, warehouse=warehouse, work_dir=work_dir, sample_rate=sample,
            trace_format=trace_format, partitioning=partitioning, late_arrival_hours=late_arrival_hours,
        )  # fmt: skip
    except RagpulseError as exc:
        raise _fail(str(exc)) from None
    from prefect.schedules import Cron

    from ragpulse.flows.monitor import monitor as monitor_flow

    parameters = {
        **_flow_parameters(settings, judge_model, judge_base_url),
        **_runner_parameters(settings),
        "drift": _drift_settings(baseline_partitions, segment_key, min_delta).model_dump(),
        "timezone": timezone,
    }
    console.print(
        f"Serving [bold]monitor/{name}[/bold] on '{cron}' ({timezone}); Ctrl-C or SIGTERM stops and pauses it."
    )
    try:
        monitor_flow.serve(name=name, schedules=[Cron(cron, timezone=timezone)], parameters=parameters)
    finally:
        _pause_deployment(f"monitor/{name}")


def _pause_deployment(full_name: str) -> None:
    """Pause a served deployment when its process stops, however it stops: Prefect's own pause on shutdown is
    skipped when a signal arrives before its runner has started, and (Prefect 3.9) on SIGTERM."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.pause_deployment(client.read_deployment_by_name(full_name).id)
        except ObjectNotFound:
            return
    console.print(f"Paused {full_name}: no runs are scheduled until it is served again.")


@app.command()
def report(
    warehouse: WarehouseOption = None,
    out_path: Annotated[Path, typer.Option("--out", help="HTML file to write.")] = Path("ragpulse-report.html"),
    days: Annotated[int, typer.Option(min=1, max=3660, help="Partitions of the last N days.")] = 30,
    end: Annotated[str | None, typer.Option(help="Last day shown; default the newest published partition.")] = None,
    metrics: Annotated[str | None, typer.Option(help="Comma-separated metrics to show; default all.")] = None,
    worst: Annotated[int, typer.Option(min=0, max=1000, help="Worst traces of the latest partition listed.")] = 20,
    rank_metric: Annotated[
        str | None, typer.Option(help="Rank the worst traces by this metric (default: mean of their scores).")
    ] = None,
    segment: Annotated[str, typer.Option(help="Drift segment whose bands and markers are drawn.")] = "all",
    config: ConfigOption = None,
) -> None:
    """Write a self-contained HTML report: trends with baseline bands and drift markers, failure rates, worst traces."""
    from ragpulse.metrics.errors import RagpulseError
    from ragpulse.tasks.core.config import load_settings
    from ragpulse.tasks.reporting.html.report import write_report

    try:
        settings = load_settings(config, warehouse=warehouse)
        chosen = [name.strip() for name in metrics.split(",") if name.strip()] if metrics else None
        path = write_report(
            settings.warehouse, out_path, days=days, end=_date(end, "--end") if end else None, metrics=chosen,
            worst=worst, rank_metric=rank_metric, segment=segment,
        )  # fmt: skip
    except RagpulseError as exc:
        raise _fail(str(exc)) from None
    console.print(f"Report written to [bold]{path}[/bold]")


@app.command()
def demo(
    directory: Annotated[Path, typer.Option(help="Where demo traces, cache and warehouse go.")] = Path("ragpulse-demo"),
    days: Annotated[int, typer.Option(min=1, max=60, help="Days of traces to generate if absent.")] = 7,
    traces_per_day: Annotated[int, typer.Option(min=10, max=100_000)] = 300,
    metrics: MetricsOption = None,
) -> None:
    """Generate a week of realistic traces (if absent), score every day, publish to DuckDB."""
    from ragpulse.metrics.errors import RagpulseError
    from ragpulse.tasks.core.config import load_settings
    from ragpulse.tasks.core.storage import partition_dates
    from ragpulse.tasks.demo.generate import generate_demo_traces

    if not os.environ.get("PREFECT_API_URL"):
        # The ephemeral API keeps its database under PREFECT_HOME; one inside the demo folder cannot
        # collide with a database another Prefect version migrated (seen: alembic "No such revision").
        os.environ.setdefault("PREFECT_HOME", str((directory / ".prefect").resolve()))
    traces = directory / "traces"
    dates = partition_dates(str(traces))
    if not dates:
        start = dt.date.today() - dt.timedelta(days=days)
        console.print(f"Writing {days} days x {traces_per_day} demo traces to {traces}/ ...")
        dates = generate_demo_traces(traces, start=start, days=days, traces_per_day=traces_per_day)
    else:
        console.print(f"Using the {len(dates)} partitions already in {traces}/")
    warehouse_path = (directory / "ragpulse.duckdb").resolve()
    try:
        settings = load_settings(
            None,
            source=str(traces),
            metrics=metrics,
            warehouse=f"duckdb:///{warehouse_path}",
            work_dir=str(directory / ".work"),
        )
        _announce_api()
        # force: a second demo shows the cache at work instead of skipping every published day.
        drift = _drift_settings(7, "metadata.app", 0.05)
        state = _run_backfill(settings, dates[0], dates[-1], concurrency=2, force=True, drift=drift)
        result = state.result(raise_on_failure=False)
        if not hasattr(result, "to_dict"):
            raise _fail(f"the demo failed: {state.message or result}")
        report_path = None
        if result.summaries:
            from ragpulse.tasks.reporting.html.report import write_report

            report_path = write_report(settings.warehouse, directory / "report.html")
    except RagpulseError as exc:
        raise _fail(str(exc)) from None
    _print_summaries(result.summaries)
    _print_drift(settings.warehouse, dates[-1])
    console.print(f"\nScores are in [bold]{warehouse_path}[/bold] (tables scores, runs, drift...). Try:")
    console.print(
        f"  python -c \"import duckdb; print(duckdb.connect('{warehouse_path}', read_only=True).sql("
        "'select metric, partition_date, round(avg(value), 3) from scores group by all order by all'))\"",
        soft_wrap=True,
        highlight=False,
    )
    if report_path is not None:
        console.print(f"Report: [bold]{report_path}[/bold] (open it in a browser)")


def _print_drift(warehouse_url: str, day: dt.date) -> None:
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


def _print_summaries(summaries: list[RunSummary]) -> None:
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


@app.command("metrics")
def list_metrics() -> None:
    """List the metrics, their versions and definitions."""
    from ragpulse.metrics import DEFAULT_METRICS, REGISTRY
    from ragpulse.metrics.registry import spec_name

    table = Table(title="metrics (defaults marked *)")
    for column in ("name", "version", "definition"):
        table.add_column(column)
    defaults = {name.split("@")[0] for name in DEFAULT_METRICS}
    for definition in REGISTRY.values():
        spec = definition.spec
        marker = "*" if spec.name in defaults else ""
        table.add_row(spec_name(spec) + marker, spec.version, spec.summary)
    out.print(table)


if __name__ == "__main__":
    app()
