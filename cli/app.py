"""The ``ragpulse`` commands. Prefect is imported lazily so that ``--help`` stays quick; the run configuration is
not, since the options are made from it.

Every command that runs a flow loads one RunConfig (options > ``RAGPULSE_*`` environment > TOML file > defaults)
and hands the flow its groups, so a setting reaches ``evaluate``, ``monitor``, ``backfill`` and ``serve`` alike.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import gc
import importlib
import json
import os
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from ragpulse.cli.options import ConfigOption, setting_options
from ragpulse.cli.output import (
    BackfillBar,
    ExitCode,
    FlagsCommand,
    FlagsGroup,
    console,
    fail,
    fail_with,
    no_traces_exit,
    out,
    print_alerts,
    print_drift,
    print_language_scores,
    print_summaries,
    print_verdicts,
    progress,
    quiet_run_failures,
    verdict_summary,
)
from ragpulse.flows.serving import DEFAULT_SERVE_NAME
from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.config import (
    GROUPS,
    PARTITION_GROUPS,
    SETTINGS,
    CalibrationConfig,
    DriftConfig,
    OutputConfig,
    RunConfig,
    ScoringConfig,
    SourceConfig,
    load_config,
    load_group,
)

if TYPE_CHECKING:
    from ragpulse.flows.backfill import BackfillResult

__all__ = [
    "JsonOption",
    "app",
    "backfill",
    "calibrate",
    "dashboard",
    "demo",
    "evaluate",
    "label_sample",
    "list_metrics",
    "list_settings",
    "main",
    "migrate_lake",
    "monitor",
    "report",
    "serve",
]


class _Collector:
    """Python's cyclic garbage collector in a process that the ``ragpulse`` program owns. A flow command imports
    Prefect, its server module, pandas and Great Expectations, about half a million long-lived objects, and the
    collector's full passes scanned them all eight times before the flow began (3.5 s of a one-day demo evaluate on
    a loaded machine) and again while the interpreter tore them down after the last ``atexit`` handler (2-3 s).
    Deferred, they are scanned once: collection is off while a flow command imports and warms up, then one full
    collection and ``gc.freeze()`` (later passes skip what was examined, as for objects that live until exit
    anyway), and the same at exit for what the run allocated. Whatever is garbage at those two points is collected
    and finalized as before; objects still alive at exit are freed by reference counting as before, but cycles
    among them are no longer scanned for (CPython never promised their finalizers at exit). Only ``_Program``
    calls, the console script and ``python -m``, own the process: typer's CliRunner and other in-process callers
    keep the collector as it was."""

    def __init__(self) -> None:
        self.owned = False
        self.deferred = False

    def own(self) -> None:
        if not self.owned:
            self.owned = True
            atexit.register(self.settle)  # registered before Prefect is imported, so it runs after its handlers

    def defer(self) -> None:
        if self.owned and gc.isenabled():
            gc.disable()
            self.deferred = True

    def settle(self) -> None:
        if self.owned:
            gc.collect()
            gc.freeze()
        self.resume()

    def resume(self) -> None:
        if self.deferred:
            self.deferred = False
            gc.enable()


_collector = _Collector()


class _Program(typer.Typer):
    """The typer app, which ``ragpulse`` and ``python -m ragpulse.cli`` call as the whole process."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _collector.own()
        try:
            return super().__call__(*args, **kwargs)
        finally:
            _collector.resume()  # a caller that catches SystemExit and goes on gets the collector back


app = _Program(
    help="ragpulse: monitor the quality of RAG systems from their traces.",
    epilog="Exit codes: 0 ok, 1 the work failed, 2 usage or configuration error, 3 nothing to do (no traces for "
    "the date, nothing left to evaluate in a backfill's range).",
    no_args_is_help=True,
    cls=FlagsGroup,
)

#: Most values of a segment key that an error about ``--segment`` lists.
_LISTED_SEGMENTS = 20

_PREFECT_DEFAULTS = {
    # The ephemeral API server took 20-50 s to start on small machines; Prefect's default is 20 s.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}

JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]


def _print_version(value: bool) -> None:
    """``--version``: answered before any command runs, so it never loads Prefect."""
    if value:
        from ragpulse import __version__

        typer.echo(f"ragpulse {__version__}")
        raise typer.Exit(ExitCode.OK)


@app.callback()
def main(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show Prefect's task-level logs (before or after the command).")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    for name, value in _PREFECT_DEFAULTS.items():
        os.environ.setdefault(name, value)
    if not verbose:
        # Quiet in the terminal only: the flow and task runs' INFO logs still go to the Prefect server, whose UI
        # otherwise says the run "didn't generate logs". (PREFECT_LOGGING_LEVEL would silence both.)
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")


def _announce_api() -> None:
    if not os.environ.get("PREFECT_API_URL"):
        console.print(
            "[dim]No PREFECT_API_URL set: starting Prefect's temporary local API server for this command "
            "(20-50 s on a small machine; it keeps no history). Point PREFECT_API_URL at a Prefect server "
            "for schedules and run history.[/dim]"
        )


def _warm_up(run_config: RunConfig, flow_module: str) -> None:
    """Overlap the fixed costs that a flow run in this process would otherwise pay one after the other: the start
    of Prefect's ephemeral API server (a subprocess that boots for seconds while this process waits), the import of
    the flow's module, the Great Expectations import (about 2 CPU-s, paid by the input suite's task) and the
    collection ``_Collector`` deferred to this point. The server is started as Prefect's client starts it, as the
    process-wide instance that the flow then finds running (and that stops at exit as before), and the rest runs
    while the subprocess boots. With an API URL there is no server to overlap, and with Dask the suites run in the
    workers' processes."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        importlib.import_module(flow_module)
        _collector.settle()
        return
    # Imported here, not in the thread: the two threads below then import nothing in common.
    from prefect.server.api.server import SubprocessASGIServer

    failed: list[Exception] = []

    def start() -> None:
        try:
            SubprocessASGIServer().start()
        except Exception as exc:  # raised below, where the flow's own start would have raised it
            failed.append(exc)

    starter = threading.Thread(target=start, name="ragpulse-api-start")
    starter.start()
    try:
        importlib.import_module(flow_module)
        if run_config.runner.kind == "thread":
            # An import error is left for the suite's task to raise, as it did before.
            with contextlib.suppress(Exception):
                import great_expectations  # noqa: F401
        _collector.settle()
    finally:
        starter.join()
    if failed:
        raise failed[0]


def _date(value: str, option: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise fail(f"{option} must be a date like 2026-11-28, got {value!r}", ExitCode.USAGE) from None


def _config(config_file: Path | None, settings: dict[str, Any]) -> RunConfig:
    """The run configuration, or a one-line error naming the setting."""

    try:
        return load_config(config_file, **settings)
    except RagpulseError as exc:
        raise fail_with(exc) from None


def _preflight(run_config: RunConfig, *, alerts: bool = False) -> None:
    """What a flow would otherwise find wrong only once its run had started (``check_config``, which each flow
    runs again first thing, for deployment runs), and the task runner. Caught here, a mistake is one line and
    exit 2, and leaves no failed run behind."""
    from ragpulse.flows.runners import build_task_runner
    from ragpulse.tasks.planning.run import check_config

    try:
        check_config(run_config, alerts=alerts)
        build_task_runner(run_config.runner)
    except RagpulseError as exc:
        raise fail_with(exc) from None


def _terminal_logs(ctx: typer.Context) -> None:
    """Unless --verbose, Prefect's own report of a failed run stays off the terminal, since the command prints
    the failure in one line; the server still receives every log."""
    quiet_run_failures(not ctx.find_root().params["verbose"])


@app.command(cls=FlagsCommand)
@setting_options(*PARTITION_GROUPS)
def evaluate(
    ctx: typer.Context,
    date: Annotated[str, typer.Option(help="Partition date, YYYY-MM-DD.")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
    *,
    settings: dict[str, Any],
) -> None:
    """Score one date partition and publish its score tables."""
    _collector.defer()
    partition = _date(date, "--date")
    run_config = _config(config, settings)
    _preflight(run_config)
    _announce_api()
    _terminal_logs(ctx)
    _warm_up(run_config, "ragpulse.flows.evaluate")
    from ragpulse.flows.evaluate import evaluate_partition

    try:
        summary = evaluate_partition(date=partition, **run_config.groups(*PARTITION_GROUPS))
    except RagpulseError as exc:
        raise fail_with(exc) from None
    if as_json:
        out.print_json(json.dumps(summary.to_dict(), default=str))
    else:
        print_summaries([summary])
    if (nothing_scored := no_traces_exit(summary)) is not None:
        raise nothing_scored


@app.command(cls=FlagsCommand)
@setting_options(*GROUPS)
def monitor(
    ctx: typer.Context,
    date: Annotated[str | None, typer.Option(help="Partition to evaluate; default yesterday in --timezone.")] = None,
    timezone: Annotated[str, typer.Option(help="IANA timezone that decides what 'yesterday' is.")] = "UTC",
    lag_days: Annotated[int, typer.Option(min=0, max=366, help="Days before today that are evaluated.")] = 1,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    *,
    settings: dict[str, Any],
) -> None:
    """Evaluate one partition now, then detect drift and send alerts (what the daily schedule runs)."""
    _collector.defer()
    run_config = _config(config, settings)
    day = _date(date, "--date") if date else None  # the flow picks yesterday in --timezone
    _preflight(run_config, alerts=True)
    _announce_api()
    _terminal_logs(ctx)
    _warm_up(run_config, "ragpulse.flows.monitor")
    from ragpulse.flows.monitor import monitor as monitor_flow
    from ragpulse.metrics.drift import ALERTING

    try:
        result = monitor_flow(date=day, timezone=timezone, lag_days=lag_days, **run_config.groups())
    except RagpulseError as exc:
        raise fail_with(exc) from None
    if as_json:
        out.print_json(json.dumps(result.to_dict(), default=str))
    else:
        print_summaries([result.summary])
        print_verdicts(result.summary.partition_date, result.verdicts)
        if ALERTING & result.verdicts.keys():
            print_drift(run_config.output.warehouse, result.summary.partition_date)
        print_alerts(result.alerts)
    if (nothing_scored := no_traces_exit(result.summary)) is not None:
        raise nothing_scored


@app.command(cls=FlagsCommand)
@setting_options(*GROUPS)
def backfill(
    ctx: typer.Context,
    start: Annotated[str, typer.Option(help="First partition date, YYYY-MM-DD.")],
    end: Annotated[str, typer.Option(help="Last partition date, YYYY-MM-DD (inclusive).")],
    concurrency: Annotated[int, typer.Option(min=1, max=16, help="Partitions evaluated at once.")] = 2,
    force: Annotated[bool, typer.Option(help="Re-run partitions already published with this configuration.")] = False,
    alert: Annotated[bool, typer.Option(help="Send drift alerts for the backfilled partitions too.")] = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    *,
    settings: dict[str, Any],
) -> None:
    """Evaluate every partition in a date range, skipping those already published with this configuration.

    Exits 3 when there was nothing to evaluate: every partition already published, or none in the range.
    """
    _collector.defer()
    first, last = _date(start, "--start"), _date(end, "--end")
    if last < first:
        raise fail(f"--end {last} is before --start {first}", ExitCode.USAGE)
    run_config = _config(config, settings)
    _preflight(run_config, alerts=alert)
    _announce_api()
    _terminal_logs(ctx)
    result = _run_backfill(run_config, first, last, concurrency=concurrency, force=force, send_drift_alerts=alert)
    if as_json:
        out.print_json(json.dumps(result.to_dict(), default=str))
    else:
        if result.summaries:
            print_summaries(result.summaries)
        alerts = f"; {result.alerts_sent} alert(s) sent" if alert else ""
        if result.alerts_not_emitted:
            alerts += f", {result.alerts_not_emitted} not emitted as Prefect events (no PREFECT_API_URL)"
        unscored = sum(s.outcome == "no_traces" for s in result.summaries)
        console.print(
            f"{len(result.completed)} evaluated ({unscored} with every record quarantined), {len(result.skipped)} "
            f"skipped (already published with config {result.config_hash}), {len(result.missing)} day(s) without "
            "traces; drift: "
            f"{verdict_summary(result.drift_verdicts)}{alerts}"
        )
    if result.failed:
        raise fail("; ".join(f"dt={day}: {message}" for day, message in result.failed.items()), ExitCode.FAILED)
    if not result.completed:
        raise typer.Exit(ExitCode.NOTHING_TO_DO)


def _run_backfill(run_config: RunConfig, first: dt.date, last: dt.date, **options: Any) -> BackfillResult:
    """Run the backfill flow in this process behind a progress bar; its result, or a one-line error."""
    _warm_up(run_config, "ragpulse.flows.backfill")
    from ragpulse.flows.backfill import BackfillResult, progress_listener
    from ragpulse.flows.backfill import backfill as backfill_flow

    display = progress()
    try:
        with display, progress_listener(BackfillBar(display)):
            state = backfill_flow(start=first, end=last, return_state=True, **run_config.groups(), **options)
        result = state.result(raise_on_failure=False)
    except RagpulseError as exc:
        raise fail_with(exc) from None
    if isinstance(result, RagpulseError):  # the flow itself failed, e.g. planning could not read the warehouse
        raise fail_with(result)
    if not isinstance(result, BackfillResult):
        raise fail(f"backfill failed: {state.message or result}", ExitCode.FAILED)
    return result


@app.command(cls=FlagsCommand)
@setting_options(*GROUPS)
def serve(
    cron: Annotated[str, typer.Option(help="When the monitor runs (cron, in --timezone).")] = "0 6 * * *",
    timezone: Annotated[str, typer.Option(help="IANA timezone of the schedule and of 'yesterday'.")] = "UTC",
    name: Annotated[
        str, typer.Option(help="Deployment name; one that `prefect deploy` registered is refused.")
    ] = DEFAULT_SERVE_NAME,
    config: ConfigOption = None,
    *,
    settings: dict[str, Any],
) -> None:
    """Run the daily monitor on a schedule from this process (no work pool needed) until stopped."""
    if not os.environ.get("PREFECT_API_URL"):
        raise fail(
            "schedules need a Prefect server, and the temporary local one creates no scheduled runs: start one "
            "with `prefect server start` (or use Prefect Cloud) and set PREFECT_API_URL, e.g. "
            "http://127.0.0.1:4200/api",
            ExitCode.USAGE,
        )
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron, timezone=timezone)
    except ValueError as exc:
        raise fail(
            f"invalid schedule --cron {cron!r} --timezone {timezone!r}: {exc.errors()[0]['msg']}", ExitCode.USAGE
        ) from None
    run_config = _config(config, settings)
    _preflight(run_config, alerts=True)
    from ragpulse.flows.serving import serve_monitor

    def announce(full_name: str) -> None:
        console.print(
            f"Serving [bold]{full_name}[/bold] on '{cron}' ({timezone}); Ctrl-C or SIGTERM stops and pauses it."
        )

    try:
        serve_monitor(
            run_config, name=name, cron=cron, timezone=timezone, on_serving=announce, on_paused=_announce_pause
        )
    except RagpulseError as exc:
        raise fail_with(exc) from None


def _announce_pause(full_name: str) -> None:
    console.print(f"Paused {full_name}: no runs are scheduled until it is served again.")


@app.command(cls=FlagsCommand)
def report(
    warehouse: Annotated[str | None, typer.Option(help="Warehouse URL (env RAGPULSE_WAREHOUSE).")] = None,
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
    from ragpulse.tasks.reporting.html import write_report

    last = _date(end, "--end") if end else None
    chosen = [name.strip() for name in metrics.split(",") if name.strip()] if metrics else None
    try:
        output = load_group(OutputConfig, config, warehouse=warehouse)
        _check_report(output.warehouse, chosen, rank_metric, segment)
        path = write_report(
            output.warehouse, out_path, days=days, end=last, metrics=chosen, worst=worst, rank_metric=rank_metric,
            segment=segment,
        )  # fmt: skip
    except RagpulseError as exc:
        raise fail_with(exc) from None
    console.print(f"Report written to [bold]{path}[/bold]")


def _check_report(warehouse_url: str, metrics: list[str] | None, rank_metric: str | None, segment: str) -> None:
    """Refuse (exit 2) what would otherwise give an empty report that looks like a real one: a warehouse that is
    not there (a mistyped path or schema), a metric it has never published, a segment its drift table lacks."""
    from ragpulse.tasks.core.storage import redact_url
    from ragpulse.tasks.monitoring.comparison import ALL_SEGMENTS
    from ragpulse.tasks.warehouse import open_published

    shown = redact_url(warehouse_url)
    store = open_published(warehouse_url)
    asked = [*(metrics or []), *([rank_metric] if rank_metric else [])]
    if asked:
        runs = store.read("runs", columns=["metrics"]).to_pylist()
        known = sorted({name for row in runs for name in (row["metrics"] or "").split(",") if name})
        unknown = [name for name in dict.fromkeys(asked) if name not in known]
        if unknown:
            has = ", ".join(known) if known else "none (nothing published yet)"
            raise fail(
                f"unknown metric(s) {', '.join(map(repr, unknown))} in {shown}; the warehouse has: {has}",
                ExitCode.USAGE,
            )
    if segment != ALL_SEGMENTS:
        _check_segment(segment, store.read("drift", columns=["segment"])["segment"].unique().to_pylist(), shown)


def _check_segment(segment: str, labels: list[str | None], shown: str) -> None:
    """``segment`` is a label of the drift table (``<key>=<value>``): a misspelt key or value charts nothing."""
    from ragpulse.tasks.monitoring.comparison import ALL_SEGMENTS

    by_key: dict[str, list[str]] = {}
    for label in sorted(label for label in labels if label and label != ALL_SEGMENTS):
        key, _, value = label.partition("=")
        by_key.setdefault(key, []).append(value)
    keys = ", ".join(by_key) or "none (the drift check ran without --segment-key)"
    key, sep, value = segment.partition("=")
    if not sep or not key:
        raise fail(f"--segment {segment!r}: give all or <key>=<value>; segment keys in {shown}: {keys}", ExitCode.USAGE)
    if key not in by_key:
        raise fail(f"unknown segment key {key!r} in --segment {segment!r}; segment keys in {shown}: {keys}",
                   ExitCode.USAGE)  # fmt: skip
    if value not in by_key[key]:
        values = by_key[key]
        listed = ", ".join(values[:_LISTED_SEGMENTS]) + (", ..." if len(values) > _LISTED_SEGMENTS else "")
        raise fail(f"no segment {segment!r} in {shown}; its {key} segments: {listed}", ExitCode.USAGE)


@app.command(cls=FlagsCommand)
def demo(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Option(help="Where demo traces, cache and warehouse go.")] = Path("ragpulse-demo"),
    days: Annotated[int, typer.Option(min=1, max=60, help="Days of traces to generate if absent.")] = 7,
    traces_per_day: Annotated[int, typer.Option(min=10, max=100_000)] = 300,
    metrics: Annotated[str | None, typer.Option(help="Comma-separated metric names; default: the defaults.")] = None,
) -> None:
    """Generate a week of realistic traces (if absent, or made with other --days/--traces-per-day), score every
    day, publish to DuckDB."""
    _collector.defer()
    from ragpulse.tasks.core.storage import partition_dates
    from ragpulse.tasks.demo.generate import DemoSettings, generate_demo_traces

    if not os.environ.get("PREFECT_API_URL"):
        # The ephemeral API keeps its database under PREFECT_HOME; one inside the demo folder cannot
        # collide with a database another Prefect version migrated (seen: alembic "No such revision").
        os.environ.setdefault("PREFECT_HOME", str((directory / ".prefect").resolve()))
    traces = directory / "traces"
    warehouse_path = (directory / "ragpulse.duckdb").resolve()
    dates = partition_dates(str(traces))
    wanted, made = DemoSettings(days, traces_per_day), DemoSettings.recorded(directory)
    if dates and made is None:
        raise fail(
            f"{traces} holds traces that `ragpulse demo` did not record making; give another --directory, or delete "
            "that folder for a new demo",
            ExitCode.USAGE,
        )
    if dates and made == wanted:
        console.print(f"Using the {len(dates)} partitions already in {traces}/")
    else:
        if made is not None and made != wanted:
            # Other data was asked for: the old days' traces and scores would otherwise mix with the new ones.
            console.print(
                f"The demo in {directory} was made with --days {made.days} --traces-per-day {made.traces_per_day}; "
                f"regenerating {days} days x {traces_per_day} demo traces (and its warehouse) ..."
            )
            shutil.rmtree(traces, ignore_errors=True)
            for stale in (warehouse_path, warehouse_path.with_name(f"{warehouse_path.name}.wal")):
                stale.unlink(missing_ok=True)
        else:
            console.print(f"Writing {days} days x {traces_per_day} demo traces to {traces}/ ...")
        start = dt.date.today() - dt.timedelta(days=days)
        dates = generate_demo_traces(traces, start=start, days=days, traces_per_day=traces_per_day)
        wanted.record(directory)
    try:
        # The demo stands alone: no environment or ragpulse.toml of the shell it runs in changes it.
        run_config = RunConfig(
            source=SourceConfig(url=str(traces)),
            scoring=ScoringConfig(metrics=metrics) if metrics else ScoringConfig(),
            output=OutputConfig(warehouse=f"duckdb:///{warehouse_path}", work_dir=str(directory / ".work")),
            drift=DriftConfig(segment_key="metadata.app"),
        )
    except ValueError as exc:
        raise fail(f"invalid demo settings: {exc.errors()[0]['msg']}", ExitCode.USAGE) from None  # type: ignore[attr-defined]
    _announce_api()
    _terminal_logs(ctx)
    # force: a second demo shows the cache at work instead of skipping every published day.
    result = _run_backfill(run_config, dates[0], dates[-1], concurrency=2, force=True)
    report_path = None
    if result.summaries:
        from ragpulse.tasks.reporting.html import write_report

        try:
            report_path = write_report(run_config.output.warehouse, directory / "report.html")
        except RagpulseError as exc:
            raise fail_with(exc) from None
    print_summaries(result.summaries)
    print_language_scores(run_config.output.warehouse, dates[0], dates[-1])
    print_drift(run_config.output.warehouse, dates[-1])
    console.print(f"\nScores are in [bold]{warehouse_path}[/bold] (tables scores, runs, drift...). Try:")
    console.print(
        f"  python -c \"import duckdb; print(duckdb.connect('{warehouse_path}', read_only=True).sql("
        "'select metric, partition_date, round(avg(value), 3) from scores group by all order by all'))\"",
        soft_wrap=True,
        highlight=False,
    )
    if report_path is not None:
        console.print(f"Report: [bold]{report_path}[/bold] (open it in a browser)")


@app.command(cls=FlagsCommand)
def dashboard(
    out_path: Annotated[Path | None, typer.Option("--out", help="JSON file to write; default standard output.")] = None,
    schema: Annotated[str, typer.Option(help="PostgreSQL schema of the warehouse (its URL's ?schema=).")] = "ragpulse",
    table_prefix: Annotated[str, typer.Option(help="Prefix of the warehouse's table names, if it has one.")] = "",
    datasource_uid: Annotated[
        str | None, typer.Option(help="uid of Grafana's PostgreSQL data source; default the one infra/grafana makes.")
    ] = None,
) -> None:
    """Write the Grafana dashboard of a PostgreSQL warehouse (docs/dashboards.md)."""
    from ragpulse.tasks.core.storage import local_write_errors
    from ragpulse.tasks.reporting.grafana import dashboard_json
    from ragpulse.tasks.warehouse import TableNames

    try:
        tables = TableNames.with_prefix(table_prefix) if table_prefix else TableNames()
        document = dashboard_json(tables, schema=schema or None, datasource_uid=datasource_uid)
    except RagpulseError as exc:
        raise fail_with(exc) from None
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if out_path is None:
        out.print(text, end="", markup=False, highlight=False, soft_wrap=True)
        return
    try:
        with local_write_errors(str(out_path)):
            out_path.parent.mkdir(parents=True, exist_ok=True)  # as the report does: a new folder is no mistake
            out_path.write_text(text, encoding="utf-8")
    except RagpulseError as exc:
        raise fail_with(exc) from None
    console.print(f"Dashboard: [bold]{out_path}[/bold] (import it in Grafana, or provision it: docs/dashboards.md)")


@app.command(cls=FlagsCommand)
def calibrate(
    ctx: typer.Context,
    labels: Annotated[str | None, typer.Option(help="Labels file or folder (env RAGPULSE_LABELS).")] = None,
    date: Annotated[str | None, typer.Option(help="One partition, YYYY-MM-DD.")] = None,
    start: Annotated[str | None, typer.Option(help="First partition of a range.")] = None,
    end: Annotated[str | None, typer.Option(help="Last partition of a range.")] = None,
    warehouse: Annotated[str | None, typer.Option(help="Warehouse URL (env RAGPULSE_WAREHOUSE).")] = None,
    window_days: Annotated[
        int | None, typer.Option(min=1, max=366, help="Days of labels a partition uses, itself last (default 1).")
    ] = None,
    confidence: Annotated[float | None, typer.Option(help="Confidence of the intervals (default 0.95).")] = None,
    min_labels: Annotated[int | None, typer.Option(help="Fewest labelled traces for an estimate (default 30).")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Calibrate the judge against human labels and publish prediction-powered estimates (docs/calibration.md)."""
    _collector.defer()
    if date is not None and (start is not None or end is not None):
        raise fail("give --date, or --start and --end, not both", ExitCode.USAGE)
    if date is None and (start is None or end is None):
        raise fail("give --date, or --start and --end", ExitCode.USAGE)
    first = _date(date or start or "", "--date" if date else "--start")
    last = _date(date or end or "", "--date" if date else "--end")
    if last < first:
        raise fail(f"--end {last} is before --start {first}", ExitCode.USAGE)
    try:
        output = load_group(OutputConfig, config, warehouse=warehouse)
        settings = load_group(
            CalibrationConfig, config, labels=labels, label_window_days=window_days,
            calibration_confidence=confidence, calibration_min_labels=min_labels,
        )  # fmt: skip
        if not settings.labels:
            raise fail("no labels: give --labels, RAGPULSE_LABELS or `labels` in ragpulse.toml", ExitCode.USAGE)
    except RagpulseError as exc:
        raise fail_with(exc) from None
    _announce_api()
    _terminal_logs(ctx)
    from ragpulse.flows.calibrate import calibrate as calibrate_flow

    try:
        result = calibrate_flow(start=first, end=last, calibration=settings, output=output)
    except RagpulseError as exc:
        raise fail_with(exc) from None
    if as_json:
        out.print_json(json.dumps(result.to_dict(), default=str))
    else:
        console.print(
            f"{result.labels} label(s) read, {len(result.rejected)} rejected, {result.unlabelled} not labelled yet"
        )
        for day, found in result.estimates.items():
            for name, value in found.items():
                shown = f"{value:.3f}" if isinstance(value, float) else value
                console.print(f"dt={day} {name}: {shown}", highlight=False)
    if not result.labels:
        raise fail(f"no labels in {settings.labels}", ExitCode.NOTHING_TO_DO)


@app.command("label-sample", cls=FlagsCommand)
def label_sample(
    date: Annotated[str, typer.Option(help="Partition to sample, YYYY-MM-DD.")],
    metrics: Annotated[str, typer.Option(help="Comma-separated metrics to label, e.g. faithfulness.")],
    out_path: Annotated[str, typer.Option("--out", help="The file to write: .csv or .jsonl (s3:// or local).")],
    n: Annotated[int, typer.Option("--n", min=1, max=100_000, help="Traces to draw.")] = 200,
    stratify: Annotated[
        str | None, typer.Option(help="Strata in proportion to their sizes: language, or a key like metadata.app.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the draw: the same seed, the same sample.")] = 0,
    warehouse: Annotated[str | None, typer.Option(help="Warehouse URL (env RAGPULSE_WAREHOUSE).")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Draw a random, optionally stratified sample of a partition's traces for people to label (docs/calibration.md)."""
    from ragpulse.tasks.calibration.label_sample import draw_label_sample

    day = _date(date, "--date")
    chosen = [name.strip() for name in metrics.split(",") if name.strip()]
    try:
        output = load_group(OutputConfig, config, warehouse=warehouse)
        sample = draw_label_sample(output.warehouse, day, chosen, n, out_path, stratify=stratify, seed=seed)
    except RagpulseError as exc:
        raise fail_with(exc) from None
    if as_json:
        out.print_json(json.dumps({"out": sample.url, "drawn": sample.drawn, "eligible": sample.eligible,
                                   "rows": sample.rows}))  # fmt: skip
        return
    for name, count in sample.drawn.items():
        console.print(f"{name}: {count} of {sample.eligible[name]} traces", highlight=False)
    console.print(f"Wrote {sample.rows} row(s) to label to [bold]{sample.url}[/bold]: fill in value (and labeller)")


@app.command("migrate-lake", cls=FlagsCommand)
def migrate_lake(
    source: Annotated[str, typer.Option("--from", help="The lake in the manifest layout (s3://... or a folder).")],
    target: Annotated[
        str | None, typer.Option("--to", help="The Iceberg lake URL (docs/warehouses.md); default the same root.")
    ] = None,
    table_prefix: Annotated[str, typer.Option(help="Prefix of the lake's table names, if it has one.")] = "",
    as_json: JsonOption = False,
) -> None:
    """Move a Parquet lake of the manifest layout (ragpulse before Iceberg) into Iceberg tables, once."""
    from ragpulse.tasks.core.storage import redact_url
    from ragpulse.tasks.warehouse import TableNames, resolve_warehouse_url
    from ragpulse.tasks.warehouse.lake_migration import migrate_lake as migrate

    def progress(day: dt.date, counts: dict[str, int]) -> None:
        if not as_json:
            console.print(f"dt={day}: " + ", ".join(f"{key} {n}" for key, n in counts.items() if n), highlight=False)

    try:
        tables = TableNames.with_prefix(table_prefix) if table_prefix else TableNames()
        done = migrate(resolve_warehouse_url(source), resolve_warehouse_url(target or source), tables=tables,
                       progress=progress)  # fmt: skip
    except RagpulseError as exc:
        raise fail_with(exc) from None
    if as_json:
        result = {"dates": [d.isoformat() for d in done.dates], "rows": done.rows, "to": redact_url(target or source)}
        out.print(json.dumps(result), markup=False, highlight=False, soft_wrap=True)
    if not done.dates:
        raise fail(f"no dates to migrate in {redact_url(source)}", ExitCode.NOTHING_TO_DO)
    if not as_json:
        console.print(
            f"Migrated {len(done.dates)} date(s) into {redact_url(target or source)}; the manifest layout's folders "
            "can be deleted once readers use the Iceberg tables (docs/warehouses.md)."
        )


@app.command("metrics", cls=FlagsCommand)
def list_metrics(as_json: JsonOption = False) -> None:
    """List the metrics: their versions, definitions, what they need and which run by default."""
    from ragpulse.metrics import DEFAULT_METRICS, REGISTRY
    from ragpulse.metrics.registry import spec_name

    rows = []
    for definition in REGISTRY.values():
        spec = definition.spec
        defaults = [name for name in DEFAULT_METRICS if name.split("@")[0] == spec.name]
        rows.append(
            {"name": spec_name(spec), "family": spec.name, "version": spec.version, "summary": spec.summary,
             "needs": definition.needs, "default": bool(defaults), "defaults": defaults, "lower": spec.lower,
             "upper": spec.upper, "higher_is_better": spec.higher_is_better, "takes_k": spec.takes_k,
             "requires_k": spec.requires_k, "takes_variant": spec.takes_variant}
        )  # fmt: skip
    if as_json:
        out.print_json(json.dumps(rows))
        return
    table = Table(title="metrics (defaults marked *)")
    for column in ("name", "version", "needs", "definition"):
        table.add_column(column)
    for row in rows:
        table.add_row(f"{row['name']}{'*' if row['default'] else ''}", row["version"], row["needs"], row["summary"])
    out.print(table)


@app.command("settings", cls=FlagsCommand)
def list_settings(as_json: JsonOption = False) -> None:
    """List every setting: its group, option, environment variable, TOML key and default."""

    rows = []
    for setting in SETTINGS.values():
        field = setting.info
        default = None if field.is_required() else field.get_default(call_default_factory=True)
        rows.append(
            {"setting": setting.flat, "group": setting.group, "field": setting.field, "option": setting.option,
             "env": setting.env, "default": default, "description": field.description}
        )  # fmt: skip
    if as_json:
        out.print_json(json.dumps(rows, default=list))
        return
    table = Table(title="settings (option > environment > ragpulse.toml > default)")
    for column in ("setting", "group", "env", "default", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["setting"], row["group"], row["env"], repr(row["default"]), row["description"] or "")
    out.print(table)
