"""The HTML report: one self-contained page of score trends, baseline bands, drift markers, failure rates
and the latest partition's worst traces, for people rather than SQL.

Reading is one small function (``_gather``) over ``Warehouse.read``; everything else turns plain data into
HTML, so it is tested without a warehouse. The page makes no requests and runs no script: CSS is inline,
charts are SVG drawn here, every piece of stored text is escaped, and a Content-Security-Policy forbids
scripts and remote loads in case anything ever slips through. See docs/report.md.
"""

from __future__ import annotations

import datetime as dt
import html
import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ragpulse.metrics.drift import ALERTING, Verdict
from ragpulse.tasks.core.storage import redact_url
from ragpulse.tasks.warehouse import open_warehouse

__all__ = [
    "MetricPoint",
    "ReportData",
    "TraceScore",
    "WorstTrace",
    "aggregate",
    "build_report",
    "render_report",
    "worst_traces",
    "write_report",
]

# Verdicts of the drift table drawn as markers: a change for the worse (what alerts), and one for the better.
WORSE_VERDICTS = ALERTING
BETTER_VERDICTS = frozenset({Verdict.IMPROVED})


@dataclass(frozen=True)
class MetricPoint:
    """One metric on one partition: ``mean`` of its ok scores (NaN without any), out of ``n`` score rows."""

    partition_date: dt.date
    metric: str
    n: int
    n_ok: int
    n_failed: int
    mean: float

    @property
    def coverage(self) -> float:
        """Share of rows with a score (status ok)."""
        return self.n_ok / self.n if self.n else math.nan

    @property
    def failure_rate(self) -> float:
        """Share of rows whose scoring failed (status failed; not_applicable is not a failure)."""
        return self.n_failed / self.n if self.n else math.nan


@dataclass(frozen=True)
class TraceScore:
    metric: str
    value: float | None
    status: str
    reason: str | None


@dataclass(frozen=True)
class WorstTrace:
    """A low-scoring trace with its scores and, when the warehouse stored it, its text (else None/empty)."""

    trace_id: str
    rank_value: float
    scores: list[TraceScore]
    question: str | None = None
    answer: str | None = None
    contexts: str | None = None
    metadata: str | None = None


@dataclass(frozen=True)
class ReportData:
    """Everything the page shows, already read from the warehouse. ``drift`` holds drift-table rows as dicts."""

    warehouse: str
    start: dt.date
    end: dt.date
    generated_at: dt.datetime
    points: list[MetricPoint]
    drift: list[dict[str, Any]] = field(default_factory=list)
    worst: list[WorstTrace] = field(default_factory=list)
    judge_models: list[str] = field(default_factory=list)
    segment: str = "all"
    rank_metric: str | None = None

    @property
    def latest(self) -> dt.date | None:
        return max((p.partition_date for p in self.points), default=None)


# ---------------------------------------------------------------- data


def aggregate(scores: pa.Table) -> list[MetricPoint]:
    """Per (partition, metric): rows, ok rows, failed rows and the mean of the ok values, sorted by both keys."""
    if not scores.num_rows:
        return []
    ok = pc.equal(scores["status"], "ok")
    table = pa.table(
        {
            "partition_date": scores["partition_date"],
            "metric": scores["metric"],
            # value is NULL unless ok by the warehouse's constraint; masking keeps the mean right regardless.
            "value": pc.if_else(ok, scores["value"], pa.scalar(None, pa.float64())),
            "ok": ok.cast(pa.int64()),
            "failed": pc.equal(scores["status"], "failed").cast(pa.int64()),
        }
    )
    grouped = table.group_by(["partition_date", "metric"]).aggregate(
        [("value", "mean"), ("ok", "sum"), ("failed", "sum"), ([], "count_all")]
    )
    points = [
        MetricPoint(
            partition_date=row["partition_date"],
            metric=row["metric"],
            n=row["count_all"],
            n_ok=row["ok_sum"],
            n_failed=row["failed_sum"],
            mean=math.nan if row["value_mean"] is None else row["value_mean"],
        )
        for row in grouped.to_pylist()
    ]
    return sorted(points, key=lambda p: (p.partition_date, p.metric))


def worst_traces(scores: pa.Table, traces: pa.Table, *, n: int, metric: str | None = None) -> list[WorstTrace]:
    """The ``n`` traces of one partition with the lowest mean ok score (or lowest ``metric``), lowest first.

    Ties go by trace id so the page is stable; traces without an ok score are not ranked. ``traces`` may
    lack some or all of them (it is not stored for every partition): their text is then None.
    """
    ok = scores.filter(pc.equal(scores["status"], "ok"))
    if metric is not None:
        ok = ok.filter(pc.equal(ok["metric"], metric))
    if not ok.num_rows or n <= 0:
        return []
    ranked = (
        ok.group_by("trace_id")
        .aggregate([("value", "mean")])
        .sort_by([("value_mean", "ascending"), ("trace_id", "ascending")])
        .slice(0, n)
    )
    ids = ranked["trace_id"]
    per_trace: dict[str, list[TraceScore]] = defaultdict(list)
    for row in scores.filter(pc.is_in(scores["trace_id"], value_set=ids)).sort_by("metric").to_pylist():
        per_trace[row["trace_id"]].append(TraceScore(row["metric"], row["value"], row["status"], row.get("reason")))
    text = (
        {row["trace_id"]: row for row in traces.filter(pc.is_in(traces["trace_id"], value_set=ids)).to_pylist()}
        if traces.num_rows
        else {}
    )
    return [
        WorstTrace(
            trace_id=trace_id,
            rank_value=value,
            scores=per_trace[trace_id],
            question=text.get(trace_id, {}).get("question"),
            answer=text.get(trace_id, {}).get("answer"),
            contexts=text.get(trace_id, {}).get("contexts"),
            metadata=text.get(trace_id, {}).get("metadata"),
        )
        for trace_id, value in zip(ids.to_pylist(), ranked["value_mean"].to_pylist(), strict=True)
    ]


def _gather(
    warehouse_url: str,
    *,
    days: int,
    end: dt.date | None,
    metrics: Sequence[str] | None,
    worst: int,
    rank_metric: str | None,
    segment: str,
) -> ReportData:
    """Read what the page needs: the window's scores (4 narrow columns), runs and drift, and the text and
    scores of the latest partition's traces."""
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    warehouse = open_warehouse(warehouse_url)
    runs = warehouse.read("runs", columns=["partition_date", "judge_model"]).to_pylist()
    if end is None:
        end = max((r["partition_date"] for r in runs), default=dt.datetime.now(dt.UTC).date())
    start = end - dt.timedelta(days=days - 1)
    metric_list = list(metrics) if metrics else None
    data = ReportData(
        warehouse=redact_url(warehouse_url),
        start=start,
        end=end,
        generated_at=dt.datetime.now(dt.UTC),
        points=aggregate(
            warehouse.read(
                "scores",
                start=start,
                end=end,
                columns=["partition_date", "metric", "value", "status"],
                metrics=metric_list,
            )
        ),
        drift=warehouse.read("drift", start=start, end=end, metrics=metric_list).to_pylist(),
        judge_models=sorted(
            {r["judge_model"] for r in runs if r["judge_model"] and start <= r["partition_date"] <= end}
        ),
        segment=segment,
        rank_metric=rank_metric,
    )
    latest = data.latest
    if latest is None:
        return data
    scores = warehouse.read(
        "scores",
        start=latest,
        end=latest,
        columns=["trace_id", "metric", "value", "status", "reason"],
        metrics=metric_list,
    )
    traces = warehouse.read(
        "traces", start=latest, end=latest, columns=["trace_id", "question", "answer", "contexts", "metadata"]
    )
    return replace(data, worst=worst_traces(scores, traces, n=worst, metric=rank_metric))


def build_report(
    warehouse_url: str,
    *,
    days: int = 30,
    end: dt.date | None = None,
    metrics: Sequence[str] | None = None,
    worst: int = 20,
    rank_metric: str | None = None,
    segment: str = "all",
) -> str:
    """The report page for the ``days`` partitions up to ``end`` (default: the latest published partition).

    ``metrics`` limits it to those metrics; ``worst`` traces of the latest partition are listed, ranked by the
    mean of their ok scores or by ``rank_metric``; ``segment`` picks the drift rows drawn on the charts.
    """
    return render_report(
        _gather(
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
    """Write ``build_report(warehouse_url, **options)`` to ``out_path`` (parents created) and return the path."""
    path = Path(out_path)
    page = build_report(warehouse_url, **options)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


# ---------------------------------------------------------------- rendering


def _e(value: object) -> str:
    """Escape anything for HTML text and attribute values (quotes included)."""
    return html.escape(str(value), quote=True)


def _missing(value: float | None) -> bool:
    return value is None or math.isnan(value)


# What a missing number or date shows as.
_DASH = "&ndash;"


def _num(value: float | None, digits: int = 3) -> str:
    return _DASH if _missing(value) else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return _DASH if _missing(value) else f"{100 * value:.1f}%"  # type: ignore[operator]


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


def _drift_by_point(drift: Iterable[dict[str, Any]], segment: str) -> dict[tuple[dt.date, str], dict[str, Any]]:
    """One drift row per (partition, metric) of ``segment``: with several judge models or prompt versions
    the one that covered most traces."""
    chosen: dict[tuple[dt.date, str], dict[str, Any]] = {}
    for row in drift:
        if row.get("segment") != segment:
            continue
        key = (row["partition_date"], row["metric"])
        if key not in chosen or (row.get("current_n") or 0) > (chosen[key].get("current_n") or 0):
            chosen[key] = row
    return chosen


_CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #d9dde5; --accent: #2458b3; --bad: #c0392b;
  --good: #1e8449; --band: #2458b3; --warn-bg: #fdecea; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  margin: 0 auto; max-width: 1320px; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 0 0 8px; } h2 { font-size: 18px; margin: 32px 0 8px;
  border-bottom: 1px solid var(--line); padding-bottom: 4px; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
dl.meta dt { color: var(--muted); } dl.meta dd { margin: 0; }
nav a { margin-right: 12px; color: var(--accent); }
.note { color: var(--muted); } .empty { font-size: 16px; padding: 24px; background: #f5f6f8; }
table { border-collapse: collapse; margin: 8px 0; } .scroll { overflow-x: auto; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f5f6f8; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.warn { background: var(--warn-bg); }
.verdict { font-weight: 600; } .verdict.worse { color: var(--bad); } .verdict.better { color: var(--good); }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); gap: 16px; }
figure.chart { margin: 0; border: 1px solid var(--line); padding: 8px; }
figure.chart figcaption { font-weight: 600; }
svg { max-width: 100%; height: auto; }
svg text { font: 11px system-ui, sans-serif; fill: var(--muted); }
svg .axis { stroke: #8a93a3; } svg .grid { stroke: #eceef2; }
svg .trend { fill: none; stroke: var(--accent); stroke-width: 2; }
svg .point { fill: var(--accent); }
svg .band { fill: var(--band); fill-opacity: 0.13; } svg .baseline { stroke: var(--band); stroke-dasharray: 4 3; }
svg .drift-marker.worse { fill: var(--bad); } svg .drift-marker.better { fill: var(--good); }
.legend span { margin-right: 18px; white-space: nowrap; } .legend svg { vertical-align: middle; }
details.trace { border: 1px solid var(--line); margin: 6px 0; padding: 4px 8px; }
details.trace summary { cursor: pointer; }
details.trace h4 { margin: 10px 0 2px; font-size: 13px; }
details.trace .text { white-space: pre-wrap; background: #f8f9fb; padding: 6px 8px; margin: 4px 0; }
details.trace ol.contexts li { margin-bottom: 6px; }
"""

_W, _H = 640, 250
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 16, 24, 46


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
) -> str:
    """One metric's trend as SVG: the ok-score mean per partition, baseline bands and drift markers."""
    bands = {d: b for d in dates if (row := drift.get((d, metric))) and (b := _band(row))}
    means = [p.mean for p in points.values() if not _missing(p.mean)]
    y_low, y_high = _domain(means + [v for b in bands.values() for v in (b.low, b.high, b.baseline)])
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    span = (dates[-1] - dates[0]).days

    def x(d: dt.date) -> float:
        return _LEFT + (plot_w / 2 if span == 0 else (d - dates[0]).days / span * plot_w)

    def y(v: float) -> float:
        return _TOP + (y_high - min(max(v, y_low), y_high)) / (y_high - y_low) * plot_h

    title = f"{metric}: mean of ok scores per partition, {dates[0]} to {dates[-1]}"
    desc = (
        f"{len(means)} of {len(dates)} partitions have ok scores; {len(bands)} have a baseline band; "
        f"{sum(1 for d in dates if drift.get((d, metric), {}).get('verdict') in WORSE_VERDICTS)} drift warnings."
    )
    parts = [
        f'<svg role="img" aria-labelledby="chart-{index}-title chart-{index}-desc" viewBox="0 0 {_W} {_H}" '
        f'width="{_W}" height="{_H}" data-metric="{_e(metric)}">',
        f'<title id="chart-{index}-title">{_e(title)}</title><desc id="chart-{index}-desc">{_e(desc)}</desc>',
    ]
    for i in range(5):  # y grid and tick labels
        v = y_low + (y_high - y_low) * i / 4
        parts.append(
            f'<line class="grid" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
            f'<text x="{_LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>'
        )
    step = max(1, math.ceil(len(dates) / 10))
    for d in dates[::step]:
        parts.append(f'<text x="{x(d):.1f}" y="{_H - _BOTTOM + 16}" text-anchor="middle">{d:%m-%d}</text>')
    parts.append(
        f'<line class="axis" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{_H - _BOTTOM}" y2="{_H - _BOTTOM}"/>'
        f'<line class="axis" x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{_H - _BOTTOM}"/>'
        f'<text class="axis-label" x="{_LEFT + plot_w / 2}" y="{_H - 8}" text-anchor="middle">partition date</text>'
        f'<text class="axis-label" transform="translate(14 {_TOP + plot_h / 2}) rotate(-90)" '
        f'text-anchor="middle">mean of ok scores</text>'
    )
    # Bands are steps: each partition's baseline covers half the way to its neighbours.
    xs = [x(d) for d in dates]
    default_half = min((b - a for a, b in itertools.pairwise(xs)), default=40.0) / 2
    for i, d in enumerate(dates):
        band = bands.get(d)
        if band is None:
            continue
        left = max(_LEFT, (xs[i - 1] + xs[i]) / 2 if i else xs[i] - default_half)
        right = min(_W - _RIGHT, (xs[i] + xs[i + 1]) / 2 if i + 1 < len(xs) else xs[i] + default_half)
        parts.append(
            f'<rect class="band" data-date="{d}" x="{left:.1f}" y="{y(band.high):.1f}" width="{right - left:.1f}" '
            f'height="{max(y(band.low) - y(band.high), 1):.1f}"><title>{_e(d)} baseline {_num(band.baseline)}, '
            f"band {_num(band.low)} to {_num(band.high)}</title></rect>"
            f'<line class="baseline" x1="{left:.1f}" x2="{right:.1f}" y1="{y(band.baseline):.1f}" '
            f'y2="{y(band.baseline):.1f}"/>'
        )
    # One polyline per run of partitions with a mean: a partition without ok scores breaks the line.
    for has_mean, run in itertools.groupby(dates, key=lambda d: d in points and not _missing(points[d].mean)):
        if has_mean:
            coords = " ".join(f"{x(d):.1f},{y(points[d].mean):.1f}" for d in run)
            parts.append(f'<polyline class="trend" points="{coords}"/>')
    for d in dates:
        p = points.get(d)
        if p is None or _missing(p.mean):
            continue
        parts.append(
            f'<circle class="point" data-date="{d}" data-mean="{p.mean:.6g}" cx="{x(d):.1f}" cy="{y(p.mean):.1f}" '
            f'r="3.5"><title>{_e(d)}: mean {_num(p.mean)} (n={p.n}, coverage {_pct(p.coverage)}, '
            f"failed {_pct(p.failure_rate)})</title></circle>"
        )
    for d in dates:
        row = drift.get((d, metric))
        if row is None or row.get("verdict") not in WORSE_VERDICTS | BETTER_VERDICTS:
            continue
        verdict = row["verdict"]
        p = points.get(d)
        top = _TOP + 4 if p is None or _missing(p.mean) else y(p.mean)
        kind = "worse" if verdict in WORSE_VERDICTS else "better"
        # Worse points down, better up, so the shape carries the meaning without colour.
        tip = (
            f"M{x(d):.1f},{top - 6:.1f} l-6,-10 h12 z"
            if kind == "worse"
            else f"M{x(d):.1f},{top - 16:.1f} l-6,10 h12 z"
        )
        parts.append(
            f'<g class="drift-marker {kind}" data-date="{d}" data-verdict="{_e(verdict)}"><title>{_e(d)}: '
            f"{_e(verdict)}; delta {_num(row.get('delta'))} [{_num(row.get('ci_low'))}, {_num(row.get('ci_high'))}]"
            f', p={_num(row.get("p_value"), 4)}. {_e(row.get("detail") or "")}</title><path d="{tip}"/></g>'
        )
    if not means:
        parts.append(
            f'<text class="no-data" x="{_LEFT + plot_w / 2}" y="{_TOP + plot_h / 2}" text-anchor="middle">'
            "no ok scores in this range</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _legend() -> str:
    return (
        '<p class="legend" aria-label="legend">'
        '<span><svg width="28" height="12" aria-hidden="true"><line x1="0" x2="28" y1="6" y2="6" '
        'style="stroke:#2458b3;stroke-width:2"/><circle cx="14" cy="6" r="3.5" style="fill:#2458b3"/></svg> '
        "mean of ok scores</span>"
        '<span><svg width="28" height="12" aria-hidden="true"><rect width="28" height="12" '
        'style="fill:#2458b3;fill-opacity:.13"/><line x1="0" x2="28" y1="6" y2="6" '
        'style="stroke:#2458b3;stroke-dasharray:4 3"/></svg> baseline mean and noise band</span>'
        '<span><svg width="14" height="12" aria-hidden="true"><path d="M1,1 h12 l-6,10 z" style="fill:#c0392b"/>'
        "</svg> degraded, failure rate up or coverage down</span>"
        '<span><svg width="14" height="12" aria-hidden="true"><path d="M1,11 h12 l-6,-10 z" style="fill:#1e8449"/>'
        "</svg> improved</span></p>"
        '<p class="note">The band is where the partition\'s mean would be within noise of its baseline: the drift '
        "check's confidence interval of the difference, placed around the baseline mean. Hover a point, band or "
        "marker for its numbers.</p>"
    )


def _verdict(verdict: str | None) -> str:
    kind = "worse" if verdict in WORSE_VERDICTS else "better" if verdict in BETTER_VERDICTS else ""
    return f'<span class="verdict {kind}">{_e(verdict) if verdict else _DASH}</span>'


def _overview(data: ReportData, latest: dt.date, drift: dict[tuple[dt.date, str], dict[str, Any]]) -> str:
    rows = "".join(
        f'<tr data-metric="{_e(p.metric)}"><td>{_e(p.metric)}</td><td class="num">{_num(p.mean)}</td>'
        f'<td class="num">{p.n}</td><td class="num">{_pct(p.coverage)}</td>'
        f'<td class="num{" warn" if p.n_failed else ""}">{_pct(p.failure_rate)}</td>'
        f"<td>{_verdict(drift.get((latest, p.metric), {}).get('verdict'))}</td></tr>"
        for p in data.points
        if p.partition_date == latest
    )
    return (
        f'<section id="overview"><h2>Latest partition: {_e(latest)}</h2><div class="scroll"><table>'
        f"<thead><tr><th>metric</th><th>mean (ok)</th><th>scores</th><th>coverage</th><th>failed</th>"
        f"<th>drift ({_e(data.segment)})</th></tr></thead><tbody>{rows}</tbody></table></div></section>"
    )


def _failures(dates: list[dt.date], metrics: list[str], points: dict[tuple[dt.date, str], MetricPoint]) -> str:
    head = "".join(f"<th>{_e(m)}</th>" for m in metrics)
    body = []
    for d in reversed(dates):
        cells = []
        for m in metrics:
            p = points.get((d, m))
            if p is None:
                cells.append(f'<td class="num">{_DASH}</td>')
                continue
            cells.append(
                f'<td class="num{" warn" if p.n_failed else ""}" title="{p.n} scores, {p.n_ok} ok, {p.n_failed} '
                f'failed">{_pct(p.failure_rate)}<br><small>cov {_pct(p.coverage)}</small></td>'
            )
        body.append(f'<tr data-date="{d}"><th>{_e(d)}</th>{"".join(cells)}</tr>')
    return (
        '<section id="failures"><h2>Failure rate and coverage per partition</h2>'
        '<p class="note">Failure rate: share of score rows whose scoring failed (e.g. the judge gave up). '
        "Coverage: share with a score (status ok); not-applicable rows lower coverage, not the failure rate.</p>"
        f'<div class="scroll"><table><thead><tr><th>partition</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div></section>"
    )


def _drift_table(rows: list[dict[str, Any]], latest: dt.date) -> str:
    rows = sorted(
        (r for r in rows if r["partition_date"] == latest),
        key=lambda r: (r["metric"], r.get("segment") != "all", r.get("segment") or "", r.get("judge_model") or ""),
    )
    if not rows:
        return (
            f'<section id="drift"><h2>Drift on {_e(latest)}</h2><p class="note">No drift rows for this '
            "partition (the drift check has not run on it).</p></section>"
        )
    body = "".join(
        f'<tr data-metric="{_e(r["metric"])}" data-segment="{_e(r.get("segment"))}"><td>{_e(r["metric"])}</td>'
        f"<td>{_e(r.get('segment') or '')}</td>"
        f"<td>{_e(r.get('judge_model') or '')} {_e(r.get('prompt_version') or '')}</td>"
        f"<td>{_verdict(r['verdict'])}</td>"
        f'<td class="num">{_num(r.get("baseline_mean"))}</td>'
        f"<td>{_e(r.get('baseline_start') or '?')} to {_e(r.get('baseline_end') or '?')} "
        f"({_e(r.get('baseline_partitions') or 0)} partitions, n={_e(r.get('baseline_n') or 0)})</td>"
        f'<td class="num">{_num(r.get("current_mean"))} (n={_e(r.get("current_n") or 0)})</td>'
        f'<td class="num">{_num(r.get("delta"))} [{_num(r.get("ci_low"))}, {_num(r.get("ci_high"))}]</td>'
        f'<td class="num">{_num(r.get("p_value"), 4)}</td>'
        f'<td class="num">{_pct(r.get("baseline_failure_rate"))} → {_pct(r.get("current_failure_rate"))}</td>'
        f'<td class="num">{_pct(r.get("baseline_coverage"))} → {_pct(r.get("current_coverage"))}</td>'
        f"<td>{_e(r.get('detail') or '')}</td></tr>"
        for r in rows
    )
    return (
        f'<section id="drift"><h2>Drift on {_e(latest)}</h2><div class="scroll"><table><thead><tr><th>metric</th>'
        "<th>segment</th><th>judge / prompt</th><th>verdict</th><th>baseline mean</th><th>baseline window</th>"
        "<th>current mean</th><th>delta [CI]</th><th>p</th><th>failure rate</th><th>coverage</th><th>detail</th>"
        f"</tr></thead><tbody>{body}</tbody></table></div></section>"
    )


def _contexts(raw: str | None) -> str:
    """The stored contexts (JSON list of {id, text, score}) as a list; anything else is shown as text."""
    if not raw:
        return '<p class="note">no contexts</p>'
    try:
        items = json.loads(raw)
    except ValueError:
        items = None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return f'<div class="text">{_e(raw)}</div>'
    return (
        '<ol class="contexts">'
        + "".join(
            f"<li><code>{_e(i.get('id', ''))}</code> retrieval score {_e(i.get('score', '?'))}"
            f'<div class="text">{_e(i.get("text", ""))}</div></li>'
            for i in items
        )
        + "</ol>"
    )


def _worst(data: ReportData, latest: dt.date) -> str:
    ranking = f"lowest {data.rank_metric}" if data.rank_metric else "lowest mean of their ok scores"
    if not data.worst:
        return (
            f'<section id="worst"><h2>Worst traces on {_e(latest)}</h2><p class="note">No ok scores to rank.</p>'
            "</section>"
        )
    items = []
    for rank, t in enumerate(data.worst, 1):
        scores = "".join(
            f'<tr><td>{_e(s.metric)}</td><td class="num">{_num(s.value)}</td><td>{_e(s.status)}</td>'
            f"<td>{_e(s.reason or '')}</td></tr>"
            for s in t.scores
        )
        question = t.question if t.question is not None else ""
        summary = question if len(question) <= 140 else question[:139] + "…"
        body = (
            '<p class="note">The trace text is not stored for this partition.</p>'
            if t.question is None and t.answer is None
            else f'<h4>Question</h4><div class="text question">{_e(question)}</div>'
            f'<h4>Answer</h4><div class="text answer">{_e(t.answer or "")}</div>'
            f"<h4>Contexts</h4>{_contexts(t.contexts)}"
            + (f'<h4>Metadata</h4><div class="text">{_e(t.metadata)}</div>' if t.metadata else "")
        )
        items.append(
            f'<details class="trace" data-trace-id="{_e(t.trace_id)}"><summary>#{rank} <code>{_e(t.trace_id)}</code>'
            f" — {_num(t.rank_value)} — {_e(summary)}</summary>{body}<h4>Scores</h4><table><thead><tr>"
            f"<th>metric</th><th>value</th><th>status</th><th>reason</th></tr></thead><tbody>{scores}</tbody>"
            "</table></details>"
        )
    return (
        f'<section id="worst"><h2>Worst traces on {_e(latest)}</h2><p class="note">The {len(data.worst)} traces '
        f"with the {_e(ranking)}, lowest first (values as stored: for lower-is-better metrics such as the "
        "harmfulness aspect, rank by another metric). Open one for its question, answer, contexts and scores.</p>"
        f"{''.join(items)}</section>"
    )


def render_report(data: ReportData) -> str:
    """The page for ``data``: header, latest-partition overview, trend charts, failure rates, drift, worst traces."""
    dates = sorted({p.partition_date for p in data.points})
    metrics = sorted({p.metric for p in data.points})
    by_key = {(p.partition_date, p.metric): p for p in data.points}
    drift = _drift_by_point(data.drift, data.segment)
    header = (
        '<header><h1>ragpulse report</h1><dl class="meta">'
        f"<dt>Warehouse</dt><dd><code>{_e(data.warehouse)}</code></dd>"
        f"<dt>Partitions</dt><dd>{_e(data.start)} to {_e(data.end)} ({len(dates)} with scores)</dd>"
        f"<dt>Generated</dt><dd>{_e(data.generated_at.isoformat(timespec='seconds'))}</dd>"
        f"<dt>Judge models</dt><dd>{_e(', '.join(data.judge_models) or 'none')}</dd></dl>"
    )
    if not dates:
        main = (
            '<section id="empty"><p class="empty">No scores yet between '
            f"{_e(data.start)} and {_e(data.end)}. Run <code>ragpulse evaluate</code> for a partition, "
            "then build the report again.</p></section>"
        )
    else:
        latest = dates[-1]
        header += (
            '<nav><a href="#overview">latest</a><a href="#trends">trends</a><a href="#failures">failure rates</a>'
            '<a href="#drift">drift</a><a href="#worst">worst traces</a></nav>'
        )
        charts = "".join(
            f'<figure class="chart" data-metric="{_e(m)}"><figcaption>{_e(m)}</figcaption>'
            f"{_chart(i, m, dates, {d: by_key[(d, m)] for d in dates if (d, m) in by_key}, drift)}</figure>"
            for i, m in enumerate(metrics)
        )
        main = (
            _overview(data, latest, drift)
            + f'<section id="trends"><h2>Trends (drift segment: {_e(data.segment)})</h2>{_legend()}'
            f'<div class="charts">{charts}</div></section>'
            + _failures(dates, metrics, by_key)
            + _drift_table(data.drift, latest)
            + _worst(data, latest)
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # No scripts, no remote anything: stored text can never run or phone home, even if escaping failed.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>ragpulse report {_e(data.start)} to {_e(data.end)}</title><style>{_CSS}</style></head>"
        f"<body>{header}</header><main>{main}</main></body></html>\n"
    )
