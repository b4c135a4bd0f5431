"""The commands over what the runs published, which run no flow: ``report`` (the HTML report), ``dashboard`` (the
Grafana dashboard of a PostgreSQL warehouse), ``label-sample`` (traces for people to label) and ``migrate-lake``
(an old lake into Iceberg tables). Each imports what it reads inside, so that ``--help`` stays quick."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated

import typer

from ragpulse.cli.options import ConfigOption, JsonOption, parse_date
from ragpulse.cli.output import ExitCode, console, fail, fail_with, out
from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.config import OutputConfig, load_group

__all__ = ["dashboard", "label_sample", "migrate_lake", "report"]

#: Most values of a segment key that an error about ``--segment`` lists.
_LISTED_SEGMENTS = 20


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

    last = parse_date(end, "--end") if end else None
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

    day = parse_date(date, "--date")
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
