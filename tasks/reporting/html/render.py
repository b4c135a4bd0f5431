"""The HTML report page: one self-contained page of score trends, baseline bands, drift markers, failure rates
and the latest partition's worst traces, for people rather than SQL.

The markup lives in Jinja2 templates (``templates/``) with autoescaping on, so every value read from the
warehouse is escaped where it is printed, and StrictUndefined, so a misspelt or missing value fails the build
instead of silently printing nothing. Python keeps what is computed, not written: chart geometry (coordinates,
domains, bands) and the grouping of rows, handed to the templates as plain data. The page makes no requests and
runs no script: CSS is inline, charts are inline SVG, and a Content-Security-Policy forbids scripts and remote
loads in case anything ever slips through. See docs/report.md.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from ragpulse.metrics.drift import ALERTING, Verdict, severity
from ragpulse.tasks.core.storage import local_write_errors
from ragpulse.tasks.monitoring.comparison import ALL_SEGMENTS, alert_of
from ragpulse.tasks.monitoring.incidents import incidents_of
from ragpulse.tasks.reporting.html.data import MetricPoint, ReportData, WorstTrace, read_report_data

__all__ = ["build_report", "render_report", "write_report"]

# Verdicts of the drift table drawn as markers: a change for the worse (a quality alert), and one for the better.
# A shift of the questions alerts but is neither: drawn plain.
_WORSE = ALERTING - {Verdict.SHIFTED}
_BETTER = frozenset({Verdict.IMPROVED})

# What a missing number shows as.
_DASH = "\N{EN DASH}"

_TEMPLATE = "report.html.j2"


def build_report(
    warehouse_url: str,
    *,
    days: int = 30,
    end: dt.date | None = None,
    metrics: Sequence[str] | None = None,
    worst: int = 20,
    rank_metric: str | None = None,
    segment: str = ALL_SEGMENTS,
) -> str:
    """The report page for the ``days`` partitions up to ``end`` (default: the latest published partition).

    ``metrics`` limits it to those metrics; ``worst`` traces of the latest partition are listed, ranked by the
    mean of their ok scores or by ``rank_metric``; ``segment`` picks the traces and the drift rows the charts draw.
    """
    return render_report(
        read_report_data(
            warehouse_url,
            days=days,
            end=end,
            metrics=metrics,
            worst=worst,
            rank_metric=rank_metric,
            segment=segment,
        )
    )


def write_report(warehouse_url: str, out_path: str | Path, **options: Any) -> Path:
    """Write ``build_report(warehouse_url, **options)`` to ``out_path`` (parents created) and return the path;
    ConfigError (``cannot write --out ...``) where it cannot be written."""
    path = Path(out_path)
    page = build_report(warehouse_url, **options)
    with local_write_errors(str(path)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    return path


def render_report(data: ReportData) -> str:
    """The page for ``data``: header, what needs attention (the latest partition's alerts, every segment), the
    latest-partition overview, trend charts, failure rates, drift, the judge's calibration, worst traces."""
    return _ENV.get_template(_TEMPLATE).render(_context(data))


# ---------------------------------------------------------------- what the templates are given


def _context(data: ReportData) -> dict[str, Any]:
    """The template's variables: ``data`` itself plus what is derived from it (all of them, even for an empty
    page, so StrictUndefined only ever catches a template that asks for something that does not exist)."""
    dates = sorted({p.partition_date for p in data.points})
    metrics = sorted({p.metric for p in data.points})
    by_key = {(p.partition_date, p.metric): p for p in data.points}
    plotted = {(p.partition_date, p.metric): p for p in data.plotted}
    drift = _drift_by_point(data.drift, data.segment)
    latest = dates[-1] if dates else None
    latest_drift = sorted((r for r in data.drift if r["partition_date"] == latest), key=_severity_order)
    alerting = [r for r in latest_drift if r["verdict"] in ALERTING]
    calibrations = {(r["metric"], r["judge_model"], r["prompt_version"]): r for r in data.calibrations}
    return {
        "data": data,
        "dates": dates,
        "latest": latest,
        "frame": _FRAME,
        "overview": [
            (p, drift.get((latest, p.metric), {}).get("verdict")) for p in data.points if p.partition_date == latest
        ],
        "alerts": alerting,
        "incidents": incidents_of(alert_of(r) for r in alerting),
        "charts": [
            _chart(i, m, dates, {d: plotted[(d, m)] for d in dates if (d, m) in plotted}, drift)
            for i, m in enumerate(metrics)
        ],
        "failures": {
            "metrics": metrics,
            "rows": [(d, [by_key.get((d, m)) for m in metrics]) for d in reversed(dates)],
        },
        "drift_rows": latest_drift,
        "worst": [_trace(rank, t) for rank, t in enumerate(data.worst, 1)],
        "calibration": [
            (row, calibrations.get((row["metric"], row["judge_model"], row["prompt_version"])))
            for row in sorted(data.estimates, key=lambda r: (r["metric"], str(r["judge_model"])))
        ],
    }


def _severity_order(row: dict[str, Any]) -> tuple[int, str, bool, str, str]:
    """Drift rows most severe first (``metrics.drift.severity``), then by metric, ``all`` before its segments."""
    segment = row.get("segment") or ""
    return severity(row["verdict"]), row["metric"], segment != ALL_SEGMENTS, segment, row.get("judge_model") or ""


def _missing(value: float | None) -> bool:
    return value is None or math.isnan(value)


def _num(value: float | None, digits: int = 3) -> str:
    return _DASH if _missing(value) else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return _DASH if _missing(value) else f"{100 * value:.1f}%"  # type: ignore[operator]


def _coord(value: float) -> str:
    """An SVG coordinate: a tenth of a pixel is finer than any screen shows."""
    return f"{value:.1f}"


def _svg_points(points: Iterable[tuple[float, float]]) -> str:
    """A polyline's ``points`` attribute."""
    return " ".join(f"{_coord(x)},{_coord(y)}" for x, y in points)


def _kind(verdict: str | None) -> str:
    """The CSS class of a verdict: worse (alerting), better, or none."""
    return "worse" if verdict in _WORSE else "better" if verdict in _BETTER else ""


def _drift_by_point(drift: Iterable[dict[str, Any]], segment: str) -> dict[tuple[dt.date, str], dict[str, Any]]:
    """One comparison with the baseline per (partition, metric) of ``segment``: with several judge models or prompt
    versions the one that covered most traces."""
    chosen: dict[tuple[dt.date, str], dict[str, Any]] = {}
    for row in drift:
        if row.get("segment") != segment or row.get("rule"):  # a threshold rule's row has no baseline to draw
            continue
        key = (row["partition_date"], row["metric"])
        if key not in chosen or (row.get("current_n") or 0) > (chosen[key].get("current_n") or 0):
            chosen[key] = row
    return chosen


@dataclass(frozen=True)
class _Trace:
    """A worst trace as listed: its rank, a one-line summary, and its contexts parsed when they are a JSON list
    of objects (None: show the stored text as it is)."""

    rank: int
    trace: WorstTrace
    summary: str
    contexts: list[dict[str, Any]] | None


def _trace(rank: int, trace: WorstTrace) -> _Trace:
    question = trace.question or ""
    summary = question if len(question) <= 140 else question[:139] + "…"
    return _Trace(rank, trace, summary, _context_items(trace.contexts))


def _context_items(raw: str | None) -> list[dict[str, Any]] | None:
    """The stored contexts (JSON list of {id, text, score}) as items; None for anything else."""
    if not raw:
        return None
    try:
        items = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return None
    return items


# ---------------------------------------------------------------- chart geometry


@dataclass(frozen=True)
class _Frame:
    """The chart's canvas and plot area in SVG units: the plot spans ``left..right`` and ``top..bottom``."""

    width: int = 640
    height: int = 250
    left: int = 52
    right: int = 624  # a 16-unit margin on the right
    top: int = 24
    bottom: int = 204  # 46 units below the plot for the date labels and axis label

    @property
    def plot_width(self) -> int:
        return self.right - self.left

    @property
    def plot_height(self) -> int:
        return self.bottom - self.top

    @property
    def center_x(self) -> float:
        return self.left + self.plot_width / 2

    @property
    def center_y(self) -> float:
        return self.top + self.plot_height / 2

    @property
    def y_tick_x(self) -> int:
        """Where the y tick labels end (they are right-aligned)."""
        return self.left - 6

    @property
    def x_tick_y(self) -> int:
        return self.bottom + 16

    @property
    def x_label_y(self) -> int:
        return self.height - 8


_FRAME = _Frame()


@dataclass(frozen=True)
class _Band:
    """Baseline of one (partition, metric): ``low``..``high`` is where the current mean is within noise."""

    baseline: float
    low: float
    high: float


def _band(row: dict[str, Any]) -> _Band | None:
    """The noise band around the baseline mean, from the CI of the difference (current - baseline).

    The CI ``[ci_low, ci_high]`` contains 0 exactly when the current mean lies in
    ``[baseline - (ci_high - delta), baseline + (delta - ci_low)]``; for a symmetric CI that is
    baseline ± the CI's half-width. None when the row has no baseline or no CI.
    """
    values = [row.get(key, math.nan) for key in ("baseline_mean", "delta", "ci_low", "ci_high")]
    if any(_missing(v) for v in values):
        return None
    baseline, delta, ci_low, ci_high = values
    return _Band(baseline, baseline - (ci_high - delta), baseline + (delta - ci_low))


@dataclass(frozen=True)
class _Tick:
    """An axis tick: where its grid line (``at``) and its label (``label_at``) go, and the label."""

    at: float
    label_at: float
    label: str


@dataclass(frozen=True)
class _BandBox:
    """A partition's baseline band as drawn: a rectangle from ``left`` to ``right`` with the baseline across."""

    date: dt.date
    band: _Band
    left: float
    right: float
    top: float
    height: float
    baseline_y: float


@dataclass(frozen=True)
class _Dot:
    point: MetricPoint
    x: float
    y: float


@dataclass(frozen=True)
class _Marker:
    """A drift marker: ``path`` is its triangle, ``row`` the drift row it stands for."""

    date: dt.date
    kind: str
    path: str
    row: dict[str, Any]


@dataclass(frozen=True)
class _Chart:
    """One metric's trend chart, laid out: everything the SVG template needs, in SVG units."""

    index: int
    metric: str
    first: dt.date
    last: dt.date
    n_partitions: int
    n_means: int
    n_warnings: int
    y_ticks: list[_Tick]
    x_ticks: list[_Tick]
    bands: list[_BandBox]
    lines: list[list[tuple[float, float]]]
    dots: list[_Dot]
    markers: list[_Marker]


def _domain(values: list[float]) -> tuple[float, float]:
    """The y range: [0, 1] for scores in it (most metrics), else the data's range padded by 5%."""
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if low >= 0.0 and high <= 1.0:
        return 0.0, 1.0
    pad = (high - low) * 0.05 or 0.5
    return low - pad, high + pad


def _chart(
    index: int,
    metric: str,
    dates: list[dt.date],
    points: dict[dt.date, MetricPoint],
    drift: dict[tuple[dt.date, str], dict[str, Any]],
) -> _Chart:
    """Lay out one metric's trend: the ok-score mean per partition, baseline bands and drift markers."""
    f = _FRAME
    bands = {d: b for d in dates if (row := drift.get((d, metric))) and (b := _band(row))}
    means = [p.mean for p in points.values() if not _missing(p.mean)]
    y_low, y_high = _domain(means + [v for b in bands.values() for v in (b.low, b.high, b.baseline)])
    span = (dates[-1] - dates[0]).days

    def x(d: dt.date) -> float:
        return f.left + (f.plot_width / 2 if span == 0 else (d - dates[0]).days / span * f.plot_width)

    def y(v: float) -> float:
        return f.top + (y_high - min(max(v, y_low), y_high)) / (y_high - y_low) * f.plot_height

    y_ticks = []
    for i in range(5):
        v = y_low + (y_high - y_low) * i / 4
        y_ticks.append(_Tick(y(v), y(v) + 4, f"{v:.2f}"))
    step = max(1, math.ceil(len(dates) / 10))
    x_ticks = [_Tick(x(d), f.x_tick_y, f"{d:%m-%d}") for d in dates[::step]]

    # Bands are steps: each partition's baseline covers half the way to its neighbours.
    xs = [x(d) for d in dates]
    default_half = min((b - a for a, b in itertools.pairwise(xs)), default=40.0) / 2
    boxes = []
    for i, d in enumerate(dates):
        band = bands.get(d)
        if band is None:
            continue
        left = max(f.left, (xs[i - 1] + xs[i]) / 2 if i else xs[i] - default_half)
        right = min(f.right, (xs[i] + xs[i + 1]) / 2 if i + 1 < len(xs) else xs[i] + default_half)
        boxes.append(_BandBox(d, band, left, right, y(band.high), max(y(band.low) - y(band.high), 1), y(band.baseline)))

    # One polyline per run of partitions with a mean: a partition without ok scores breaks the line.
    lines = [
        [(x(d), y(points[d].mean)) for d in run]
        for has_mean, run in itertools.groupby(dates, key=lambda d: d in points and not _missing(points[d].mean))
        if has_mean
    ]
    dots = [_Dot(p, x(d), y(p.mean)) for d in dates if (p := points.get(d)) is not None and not _missing(p.mean)]

    markers = []
    for d in dates:
        row = drift.get((d, metric))
        if row is None or row.get("verdict") not in _WORSE | _BETTER:
            continue
        p = points.get(d)
        top = f.top + 4 if p is None or _missing(p.mean) else y(p.mean)
        kind = _kind(row["verdict"])
        # Worse points down, better up, so the shape carries the meaning without colour.
        path = (
            f"M{_coord(x(d))},{_coord(top - 6)} l-6,-10 h12 z"
            if kind == "worse"
            else f"M{_coord(x(d))},{_coord(top - 16)} l-6,10 h12 z"
        )
        markers.append(_Marker(d, kind, path, row))

    return _Chart(
        index=index,
        metric=metric,
        first=dates[0],
        last=dates[-1],
        n_partitions=len(dates),
        n_means=len(means),
        n_warnings=sum(1 for d in dates if drift.get((d, metric), {}).get("verdict") in _WORSE),
        y_ticks=y_ticks,
        x_ticks=x_ticks,
        bands=boxes,
        lines=lines,
        dots=dots,
        markers=markers,
    )


# ---------------------------------------------------------------- the environment


def _environment() -> Environment:
    """Autoescaping for every template (they are all HTML or SVG), strict about undefined names, and the
    formatting the templates share."""
    env = Environment(
        loader=PackageLoader("ragpulse.tasks.reporting.html", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(num=_num, pct=_pct, coord=_coord, svg_points=_svg_points, verdict_kind=_kind)
    env.globals["dash"] = _DASH
    return env


_ENV = _environment()
