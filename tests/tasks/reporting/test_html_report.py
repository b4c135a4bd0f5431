"""The HTML report: aggregation, ranking, the baseline band, escaping, edge cases, and the page in a real browser."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import subprocess
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from importlib.resources import files
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from jinja2 import UndefinedError

from ragpulse.tasks.reporting.html import (
    MetricPoint,
    ReportData,
    aggregate,
    build_report,
    render_report,
    worst_traces,
    write_report,
)
from ragpulse.tasks.reporting.html.data import segment_scores
from ragpulse.tasks.reporting.html.render import _ENV, _band, _context
from ragpulse.tasks.warehouse import open_warehouse

CHROMIUM = Path("/usr/bin/chromium")
# Read at import: the autouse clean_environ fixture drops RAGPULSE_* variables before each test runs.
REQUIRE_BROWSER = os.environ.get("RAGPULSE_REQUIRE_BROWSER") == "1"

SCRIPT = "<script>alert(1)</script>"
# Markup, both quotes, a raw and an already-escaped ampersand, and CJK text: it must come back exactly as stored.
HOSTILE = "<script>alert('x')</script>\" onmouseover=\"alert(1)\" ' onfocus='alert(2)' & &amp; 日本語の質問 中文问题"
DATES = [dt.date(2026, 11, d) for d in (1, 2, 3, 5, 6, 7)]  # 4 Nov missing: the x axis keeps the gap
METRICS = ["answer_f1", "document_mrr", "faithfulness"]
NOW = dt.datetime(2026, 11, 8, 6, 0, tzinfo=dt.UTC)


# ---------------------------------------------------------------- a small DOM


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: str = ""

    def find_all(self, tag: str, **attrs: str) -> list[Node]:
        """Descendants with ``tag`` whose attributes match; ``class_`` matches one class among several."""
        found = []
        for child in self.children:
            if child.tag == tag and all(
                value in child.attrs.get("class", "").split() if name == "class_" else child.attrs.get(name) == value
                for name, value in attrs.items()
            ):
                found.append(child)
            found.extend(child.find_all(tag, **attrs))
        return found

    def all_text(self) -> str:
        return self.text + "".join(child.all_text() for child in self.children)


class _TreeBuilder(HTMLParser):
    VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].children.append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {name: value or "" for name, value in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(Node("#text", {}, text=data))


def parse(page: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(page)
    builder.close()
    return builder.root


# ---------------------------------------------------------------- synthetic warehouse contents


def _value(date_index: int, metric_index: int, trace: int) -> float:
    """Deterministic scores in [0, 1]; answer_f1 drops on the last partition."""
    base = 0.55 + 0.1 * metric_index + 0.02 * ((trace * 7 + date_index * 3) % 10)
    if metric_index == 0 and date_index == len(DATES) - 1:
        base -= 0.3
    return round(min(base, 1.0), 4)


def scores_table(dates: list[dt.date] = DATES, n_traces: int = 10) -> pa.Table:
    """Score rows in the scores schema: faithfulness failed for trace 9, not applicable for trace 8."""
    rows = []
    for di, date in enumerate(dates):
        for mi, metric in enumerate(METRICS):
            for t in range(n_traces):
                status = "ok"
                if metric == "faithfulness" and t == 9:
                    status = "failed"
                elif metric == "faithfulness" and t == 8:
                    status = "not_applicable"
                value = _value(di, mi, t) if status == "ok" else None
                if t == 0 and di == len(dates) - 1 and status == "ok":
                    value = 0.01  # the trace with the script in its question is the worst
                rows.append(
                    {
                        "partition_date": date,
                        "trace_id": f"t-{di}-{t}",
                        "metric": metric,
                        "value": value,
                        "status": status,
                        "reason": {"failed": "rate_limited_after_6_retries", "not_applicable": "no_answer"}.get(status),
                        "metric_version": "1.0.0",
                        "run_id": f"run-{date}",
                        "computed_at": NOW,
                        "judge_model": "judge-test" if metric == "faithfulness" else None,
                        "prompt_version": "1" if metric == "faithfulness" else None,
                    }
                )
    return pa.Table.from_pylist(rows)


def traces_table(date: dt.date, di: int, n_traces: int = 10, apps: tuple[str, ...] = ("bot",)) -> pa.Table:
    """Trace rows; trace ``t`` belongs to app ``apps[t % len(apps)]`` (its ``metadata.app``)."""
    rows = [
        {
            "partition_date": date,
            "trace_id": f"t-{di}-{t}",
            "question": SCRIPT if t == 0 else f"question {t} about <b>bold</b> & more",
            "answer": f'answer {t} "quoted" </details><img src=x onerror=alert(2)>',
            "contexts": json.dumps([{"id": f"doc-{t}", "text": f"context {t} </script>", "score": 0.5}]),
            "metadata": json.dumps({"app": apps[t % len(apps)]}),
            "run_id": f"run-{date}",
            "timestamp": NOW,
            "source_file": f"dt={date}/part-0.jsonl",
            "source_line": t + 1,
            "language": "ja" if t % 2 else "en",
            "conversation_id": None,  # schema v10: single-shot traces belong to no conversation
        }
        for t in range(n_traces)
    ]
    return pa.Table.from_pylist(rows)


def synthetic_drift_rows() -> list[dict[str, object]]:
    """answer_f1 degraded on the last partition, document_mrr improved on the 5th, bands from the 4th on."""
    rows: list[dict[str, object]] = []
    for di, date in enumerate(DATES[3:], start=3):
        for metric in METRICS:
            verdict = "stable"
            current, baseline = 0.66, 0.66
            if metric == "answer_f1" and date == DATES[-1]:
                verdict, current = "degraded", 0.36
            if metric == "document_mrr" and di == 4:
                verdict = "improved"
            delta = current - baseline
            rows.append(
                {
                    "partition_date": date,
                    "metric": metric,
                    "segment": "all",
                    "judge_model": None,
                    "prompt_version": None,
                    "baseline_start": DATES[0],
                    "baseline_end": DATES[di - 1],
                    "baseline_partitions": di,
                    "baseline_n": 10 * di,
                    "current_n": 10,
                    "baseline_mean": baseline,
                    "current_mean": current,
                    "delta": delta,
                    "ci_low": delta - 0.05,
                    "ci_high": delta + 0.07,
                    "p_value": 0.001 if verdict != "stable" else 0.6,
                    "baseline_failure_rate": 0.0,
                    "current_failure_rate": 0.0,
                    "baseline_coverage": 1.0,
                    "current_coverage": 1.0,
                    "verdict": verdict,
                    "detail": f"{metric} <em>detail</em>",
                    "run_id": f"drift-{date}",
                    "computed_at": NOW,
                }
            )
    rows.append({**rows[-1], "segment": "metadata.app=bot", "verdict": "insufficient_data"})
    return rows


def report_data(n_worst: int = 5) -> ReportData:
    scores = scores_table()
    latest = scores.filter(pc.equal(scores["partition_date"], DATES[-1]))
    return ReportData(
        warehouse="duckdb:///scores.duckdb",
        start=DATES[-1] - dt.timedelta(days=29),
        end=DATES[-1],
        generated_at=NOW,
        points=aggregate(scores),
        drift=synthetic_drift_rows(),
        worst=worst_traces(latest, traces_table(DATES[-1], len(DATES) - 1), n=n_worst),
        judge_models=["judge-test"],
    )


def publish_warehouse(url: str, drift: list[dict[str, object]] | None = None, apps: tuple[str, ...] = ("bot",)) -> None:
    """Publish the synthetic partitions, their traces (of ``apps``) and drift rows through the warehouse API."""
    from ragpulse.tasks.warehouse import (
        DRIFT_SCHEMA,
        QUARANTINE_SCHEMA,
        RUNS_SCHEMA,
        SCORES_SCHEMA,
        TRACES_SCHEMA,
        Publication,
    )

    warehouse = open_warehouse(url)
    scores = scores_table()
    drift_table = pa.Table.from_pylist(synthetic_drift_rows() if drift is None else drift, DRIFT_SCHEMA)
    for di, date in enumerate(DATES):
        run = (
            {name: None for name in RUNS_SCHEMA.names}
            | {
                "run_id": f"run-{date}",
                "partition_date": date,
                "source": "file:///traces",
                "config_hash": "c0ffee",
                "config": "{}",
                "metrics": ",".join(METRICS),
                "started_at": NOW,
                "finished_at": NOW,
                "judge_model": "judge-test",
            }
            | {name: 10 for name in RUNS_SCHEMA.names if name.startswith("n_")}
        )
        warehouse.publish(
            Publication(
                partition_date=date,
                metrics=METRICS,
                scores=scores.filter(pc.equal(scores["partition_date"], date)).cast(SCORES_SCHEMA),
                quarantine=QUARANTINE_SCHEMA.empty_table(),
                run=pa.Table.from_pylist([run], RUNS_SCHEMA),
                traces=traces_table(date, di, apps=apps).select(TRACES_SCHEMA.names).cast(TRACES_SCHEMA),
            )
        )
        day_drift = drift_table.filter(pc.equal(drift_table["partition_date"], date))
        if day_drift.num_rows:
            warehouse.publish_drift(date, day_drift)


# ---------------------------------------------------------------- unit tests


def test_aggregate_counts_rows_and_averages_only_ok_values() -> None:
    day = dt.date(2026, 1, 1)
    scores = pa.Table.from_pylist(
        [
            {"partition_date": day, "metric": "m", "value": 0.2, "status": "ok"},
            {"partition_date": day, "metric": "m", "value": 0.6, "status": "ok"},
            {"partition_date": day, "metric": "m", "value": None, "status": "failed"},
            {"partition_date": day, "metric": "m", "value": None, "status": "not_applicable"},
            {"partition_date": day, "metric": "all_failed", "value": None, "status": "failed"},
        ],
        schema=pa.schema(
            [("partition_date", pa.date32()), ("metric", pa.string()), ("value", pa.float64()), ("status", pa.string())]
        ),
    )
    all_failed, m = aggregate(scores)
    assert (m.n, m.n_ok, m.n_failed) == (4, 2, 1)
    assert m.mean == pytest.approx(0.4)
    assert (m.coverage, m.failure_rate) == (0.5, 0.25)
    assert all_failed.metric == "all_failed" and math.isnan(all_failed.mean) and all_failed.failure_rate == 1.0
    assert aggregate(scores.slice(0, 0)) == []


def test_worst_traces_rank_by_mean_of_ok_scores_or_by_one_metric() -> None:
    scores = scores_table(DATES[-1:], n_traces=4)
    traces = traces_table(DATES[-1], 0, n_traces=3)  # t-0-3 has no stored text
    ranked = worst_traces(scores, traces, n=10)
    assert ranked[0].trace_id == "t-0-0"
    assert [t.rank_value for t in ranked] == sorted(t.rank_value for t in ranked)
    assert {s.metric for s in ranked[0].scores} == set(METRICS)
    missing = next(t for t in ranked if t.trace_id == "t-0-3")
    assert missing.question is None and missing.answer is None
    by_mrr = worst_traces(scores, traces, n=2, metric="document_mrr")
    mrr = {r["trace_id"]: r["value"] for r in scores.to_pylist() if r["metric"] == "document_mrr"}
    assert [t.rank_value for t in by_mrr] == sorted(mrr.values())[:2]
    assert worst_traces(scores, traces, n=0) == []


def test_band_holds_the_current_mean_exactly_when_the_interval_holds_zero() -> None:
    # An asymmetric (bootstrap) interval of the difference: delta -0.10 in [-0.16, -0.01].
    row = {"baseline_mean": 0.70, "delta": -0.10, "ci_low": -0.16, "ci_high": -0.01}
    band = _band(row)
    assert band is not None
    assert (band.baseline, band.low, band.high) == pytest.approx((0.70, 0.61, 0.76))
    current = row["baseline_mean"] + row["delta"]
    assert not band.low <= current <= band.high  # 0 is outside the CI: the mean is outside the band
    assert _band({**row, "ci_low": math.nan}) is None
    assert _band({**row, "baseline_mean": None}) is None


def test_user_text_is_escaped_and_the_page_has_no_script() -> None:
    page = render_report(report_data())
    assert "<script" not in page.lower()
    assert "<img" not in page and "<b>bold" not in page and "<em>detail" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    dom = parse(page)
    assert not dom.find_all("script") and not dom.find_all("img")
    question = dom.find_all("div", class_="question")[0]
    assert question.all_text() == SCRIPT
    # Nothing is fetched: no src attributes, no links leaving the page, and a policy forbidding both.
    assert "default-src 'none'" in page
    assert all(a.attrs["href"].startswith("#") for a in dom.find_all("a"))


def test_one_partition_no_drift_and_a_metric_without_ok_scores() -> None:
    scores = scores_table(DATES[:1], n_traces=3)
    failed = [
        {**r, "value": None, "status": "failed"} if r["metric"] == "faithfulness" else r for r in scores.to_pylist()
    ]
    data = ReportData("x.duckdb", DATES[0], DATES[0], NOW, aggregate(pa.Table.from_pylist(failed, scores.schema)))
    dom = parse(render_report(data))
    charts = {svg.attrs["data-metric"]: svg for svg in dom.find_all("svg", role="img")}
    assert sorted(charts) == METRICS
    assert len(charts["answer_f1"].find_all("circle", class_="point")) == 1
    assert not charts["answer_f1"].find_all("rect", class_="band")
    assert not charts["faithfulness"].find_all("polyline")
    assert "no ok scores" in charts["faithfulness"].all_text()
    assert "No drift rows" in dom.find_all("section", id="drift")[0].all_text()


def test_no_scores_gives_a_clear_page() -> None:
    page = render_report(ReportData("duckdb:///empty.duckdb", DATES[0], DATES[-1], NOW, []))
    dom = parse(page)
    assert "No scores yet" in dom.find_all("section", id="empty")[0].all_text()
    assert not dom.find_all("svg")


def test_metric_points_without_rows_are_nan() -> None:
    empty = MetricPoint(DATES[0], "m", 0, 0, 0, math.nan)
    assert math.isnan(empty.coverage) and math.isnan(empty.failure_rate)


def hostile_data(text: str) -> ReportData:
    """A report whose metric, drift segment and detail, question, answer and context all carry ``text``."""
    metric, segment = f"faith {text}", f"metadata.app={text}"
    scores = pa.Table.from_pylist(
        [
            {"partition_date": d, "trace_id": f"t-{t}", "metric": metric, "value": 0.4 + 0.1 * t, "status": "ok"}
            for d in DATES
            for t in range(3)
        ]
    )
    traces = pa.Table.from_pylist(
        [
            {
                "trace_id": f"t-{t}",
                "question": text,
                "answer": text,
                "contexts": json.dumps([{"id": text, "text": text, "score": 0.5}], ensure_ascii=False),
                "metadata": text,
            }
            for t in range(3)
        ]
    )
    drift = [
        {**r, "metric": metric, "segment": segment, "detail": text, "judge_model": text}
        for r in synthetic_drift_rows()
        if r["metric"] == "answer_f1" and r["segment"] == "all"
    ]
    return ReportData(
        warehouse=text,
        start=DATES[0],
        end=DATES[-1],
        generated_at=NOW,
        points=aggregate(scores),
        drift=drift,
        worst=worst_traces(scores.filter(pc.equal(scores["partition_date"], DATES[-1])), traces, n=3),
        judge_models=[text],
        segment=segment,
    )


def shape(node: Node) -> list[tuple[str, list[str]]]:
    """Every element in document order with its attribute names: what injected markup would change."""
    return [
        item
        for child in node.children
        if child.tag != "#text"
        for item in [(child.tag, sorted(child.attrs)), *shape(child)]
    ]


def test_hostile_text_in_every_field_is_escaped_and_comes_back_as_stored() -> None:
    page = render_report(hostile_data(HOSTILE))
    dom = parse(page)
    # Same elements and attributes as for harmless text: nothing the text holds became markup.
    assert shape(dom) == shape(parse(render_report(hostile_data("plain"))))
    assert "<script" not in page.lower() and 'onmouseover="' not in page and "onfocus='" not in page
    assert not any(name.startswith("on") for _, names in shape(dom) for name in names)
    assert "日本語の質問 中文问题" in page  # stored as UTF-8 text, not mangled or turned into references

    metric, segment = f"faith {HOSTILE}", f"metadata.app={HOSTILE}"
    (figure,) = dom.find_all("figure", class_="chart")
    assert figure.attrs["data-metric"] == metric
    assert figure.find_all("figcaption")[0].all_text() == metric
    (svg,) = figure.find_all("svg", role="img")
    assert svg.attrs["data-metric"] == metric
    assert svg.find_all("title")[0].all_text().startswith(f"{metric}: ")
    (marker,) = svg.find_all("g", class_="drift-marker")
    assert marker.find_all("title")[0].all_text().endswith(f". {HOSTILE}")
    (overview,) = dom.find_all("section", id="overview")[0].find_all("tr", **{"data-metric": metric})
    assert overview.find_all("td")[0].all_text() == metric
    assert dom.find_all("section", id="trends")[0].find_all("h2")[0].all_text() == f"Trends (drift segment: {segment})"
    drift = dom.find_all("section", id="drift")[0]
    (row,) = drift.find_all("tr", **{"data-segment": segment})
    assert [td.all_text() for td in row.find_all("td")][:2] == [metric, segment]
    assert row.find_all("td")[-1].all_text() == HOSTILE
    trace = dom.find_all("details", class_="trace")[0]
    assert trace.find_all("div", class_="question")[0].all_text() == HOSTILE
    assert trace.find_all("div", class_="answer")[0].all_text() == HOSTILE
    (context,) = trace.find_all("ol", class_="contexts")[0].find_all("li")
    assert context.find_all("code")[0].all_text() == HOSTILE
    assert context.find_all("div", class_="text")[0].all_text() == HOSTILE
    assert trace.find_all("tbody")[0].find_all("td")[0].all_text() == metric
    header = dom.find_all("header")[0]
    assert [dd.all_text() for dd in header.find_all("dd")][::3] == [HOSTILE, HOSTILE]  # warehouse, judge models


@pytest.mark.parametrize("name", sorted(_context(report_data())))
def test_every_template_variable_is_required(name: str) -> None:
    """StrictUndefined: a variable the page uses but is not given fails the render instead of printing nothing."""
    context = _context(report_data())
    del context[name]
    with pytest.raises(UndefinedError, match=f"'{name}' is undefined"):
        _ENV.get_template("report.html.j2").render(context)


def test_a_missing_attribute_fails_the_render() -> None:
    @dataclass(frozen=True)
    class Unreasoned:
        """A trace score without its reason."""

        metric: str = "answer_f1"
        value: float = 0.1
        status: str = "ok"

    data = report_data()
    worst = [replace(data.worst[0], scores=[Unreasoned()]), *data.worst[1:]]  # type: ignore[list-item]
    with pytest.raises(UndefinedError, match="has no attribute 'reason'"):
        render_report(replace(data, worst=worst))


def test_write_report_creates_the_folders_and_returns_the_path(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "report.html"
    assert write_report(f"duckdb:///{tmp_path / 'none.duckdb'}", out, end=DATES[-1]) == out
    assert "No scores yet" in parse(out.read_text(encoding="utf-8")).find_all("section", id="empty")[0].all_text()


def test_the_templates_are_flat_files_as_the_package_data_glob_ships_them() -> None:
    """pyproject ships ``templates/*``: a template in a subfolder would be missing from a wheel."""
    templates = list((files("ragpulse.tasks.reporting.html") / "templates").iterdir())
    assert any(t.name == "report.html.j2" for t in templates)
    assert all(t.is_file() for t in templates)


# ---------------------------------------------------------------- the page in a real browser


def _chromium() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    if REQUIRE_BROWSER:
        pytest.fail(f"RAGPULSE_REQUIRE_BROWSER=1 but {CHROMIUM} is missing; apt-get install chromium")
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium); set RAGPULSE_REQUIRE_BROWSER=1 to fail")


def dump_dom(page: Path, profile: Path, *extra: str) -> str:
    """The DOM after Chromium loaded ``page``, headless, offline and with a throwaway profile."""
    result = subprocess.run(
        [
            str(_chromium()),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *extra,
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout


@pytest.mark.slow
def test_report_over_a_warehouse_renders_in_chromium(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'ragpulse.duckdb'}"
    publish_warehouse(url)
    page = write_report(url, tmp_path / "out" / "report.html", worst=5)
    dom = parse(dump_dom(page, tmp_path / "profile"))

    charts = {svg.attrs["data-metric"]: svg for svg in dom.find_all("svg", role="img")}
    assert sorted(charts) == METRICS
    for metric, svg in charts.items():
        points = [p for line in svg.find_all("polyline", class_="trend") for p in line.attrs["points"].split()]
        assert len(points) == len(DATES), metric
        assert len(svg.find_all("circle", class_="point")) == len(DATES), metric
        assert len(svg.find_all("rect", class_="band")) == 3, metric  # drift rows from the 4th partition on
        assert svg.find_all("title")[0].all_text().startswith(metric)
    (degraded,) = charts["answer_f1"].find_all("g", class_="drift-marker")
    assert (degraded.attrs["data-date"], degraded.attrs["data-verdict"]) == (str(DATES[-1]), "degraded")
    assert "worse" in degraded.attrs["class"].split()
    (improved,) = charts["document_mrr"].find_all("g", class_="drift-marker")
    assert (improved.attrs["data-date"], improved.attrs["data-verdict"]) == (str(DATES[4]), "improved")
    assert not charts["faithfulness"].find_all("g", class_="drift-marker")

    worst = dom.find_all("section", id="worst")[0]
    rows = worst.find_all("details", class_="trace")
    assert len(rows) == 5
    assert rows[0].attrs["data-trace-id"] == "t-5-0"
    assert rows[0].find_all("div", class_="question")[0].all_text() == SCRIPT
    assert len(rows[0].find_all("ol", class_="contexts")[0].find_all("li")) == 1
    assert {tr.find_all("td")[0].all_text() for tr in rows[0].find_all("tbody")[0].find_all("tr")} == set(METRICS)

    drift = dom.find_all("section", id="drift")[0]
    assert {tr.attrs["data-segment"] for tr in drift.find_all("tr") if "data-segment" in tr.attrs} == {
        "all",
        "metadata.app=bot",
    }
    failures = dom.find_all("section", id="failures")[0]
    latest_row = failures.find_all("tr", **{"data-date": str(DATES[-1])})[0]
    assert "10.0%" in latest_row.all_text()  # faithfulness: 1 failed of 10
    assert not dom.find_all("script") and not dom.find_all("img")


def test_report_data_keeps_segment_for_charts() -> None:
    """Charts draw the chosen segment's drift rows; the drift table lists all segments."""
    data = replace(report_data(), segment="metadata.app=bot")
    dom = parse(render_report(data))
    assert not dom.find_all("g", class_="drift-marker")
    assert len(dom.find_all("rect", class_="band")) == 1


def test_build_report_reads_the_window_and_metrics_asked_for(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'ragpulse.duckdb'}"
    publish_warehouse(url)
    dom = parse(build_report(url, days=3, metrics=["answer_f1", "faithfulness"], rank_metric="answer_f1", worst=2))
    charts = {svg.attrs["data-metric"]: svg for svg in dom.find_all("svg", role="img")}
    assert sorted(charts) == ["answer_f1", "faithfulness"]
    assert [c.attrs["data-date"] for c in charts["answer_f1"].find_all("circle", class_="point")] == [
        str(d) for d in DATES[-3:]
    ]
    assert "judge-test" in dom.find_all("header")[0].all_text()
    assert [d.attrs["data-trace-id"] for d in dom.find_all("details", class_="trace")] == ["t-5-0", "t-5-5"]
    earlier = parse(build_report(url, days=2, end=DATES[1]))
    assert len(earlier.find_all("circle", class_="point")) == 2 * len(METRICS)


def test_an_empty_warehouse_gives_a_clear_page_and_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "none.duckdb"
    page = build_report(f"duckdb:///{db}", end=DATES[-1])
    assert "No scores yet" in parse(page).find_all("section", id="empty")[0].all_text()
    assert not db.exists()


def test_the_warehouse_password_is_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    class Empty:
        def read(self, table: str, **_: object) -> pa.Table:
            return pa.table({"partition_date": pa.array([], pa.date32())})

    monkeypatch.setattr("ragpulse.tasks.reporting.html.data.open_warehouse", lambda url: Empty())
    page = build_report("postgresql://rp:s3cret@db:5432/ragpulse", end=DATES[-1])
    assert "s3cret" not in page
    assert "postgresql://rp:***@db:5432/ragpulse" in page


def test_a_missing_browser_skips_unless_required(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(globals(), "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setitem(globals(), "REQUIRE_BROWSER", False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        _chromium()
    monkeypatch.setitem(globals(), "REQUIRE_BROWSER", True)
    with pytest.raises(pytest.fail.Exception, match="RAGPULSE_REQUIRE_BROWSER=1"):
        _chromium()


# ---------------------------------------------------------------- what needs attention, and segments

APPS = ("docs-search", "support")
DOCS, SUPPORT = "metadata.app=docs-search", "metadata.app=support"
# The latest partition's verdicts: every alert is in a segment, none in "all".
LATEST_VERDICTS = {
    ("answer_f1", "all"): "stable",
    ("answer_f1", DOCS): "failure_rate_up",
    ("answer_f1", SUPPORT): "degraded",
    ("document_mrr", "all"): "stable",
    ("document_mrr", DOCS): "no_baseline",
    ("document_mrr", SUPPORT): "improved",
    ("faithfulness", "all"): "insufficient_data",
    ("faithfulness", DOCS): "coverage_down",
    ("faithfulness", SUPPORT): "stable",
}


def segmented_drift_rows() -> list[dict[str, object]]:
    """A drift row per metric and segment from the 4th partition on, all stable before the latest."""
    template = synthetic_drift_rows()[0]
    return [
        {
            **template,
            "partition_date": date,
            "metric": metric,
            "segment": segment,
            "verdict": verdict if date == DATES[-1] else "stable",
            "detail": f"{metric} in {segment}",
        }
        for date in DATES[3:]
        for (metric, segment), verdict in LATEST_VERDICTS.items()
    ]


@pytest.fixture
def segmented(tmp_path: Path) -> tuple[str, Path]:
    """A DuckDB warehouse whose traces alternate between two apps, with per-app drift rows."""
    path = tmp_path / "ragpulse.duckdb"
    publish_warehouse(f"duckdb:///{path}", segmented_drift_rows(), APPS)
    return f"duckdb:///{path}", path


def _rows_of(section: Node) -> list[tuple[str, str, str]]:
    """(metric, segment, verdict) of each drift row of ``section``, in page order."""
    rows = [tr for tr in section.find_all("tr") if "data-metric" in tr.attrs]
    return [(tr.attrs["data-metric"], tr.attrs["data-segment"], tr.find_all("span")[0].all_text()) for tr in rows]


@pytest.mark.parametrize("segment", ["all", DOCS])
def test_the_latest_alerts_of_every_segment_come_first(segmented: tuple[str, Path], segment: str) -> None:
    dom = parse(build_report(segmented[0], segment=segment))
    first = next(child for child in dom.find_all("main")[0].children if child.tag != "#text")
    assert first.tag == "section" and first.attrs["id"] == "attention"
    assert _rows_of(first) == [
        ("answer_f1", SUPPORT, "degraded"),
        ("answer_f1", DOCS, "failure_rate_up"),
        ("faithfulness", DOCS, "coverage_down"),
    ]
    assert dom.find_all("nav")[0].find_all("a")[0].attrs["href"] == "#attention"
    # Incidents first: a segment and a family each, most severe first.
    rows = [tr for tr in first.find_all("tr") if "data-segment" in tr.attrs]
    incidents = [(tr.attrs["data-family"], tr.attrs["data-segment"], tr.attrs["data-verdict"]) for tr in rows[:3]]
    assert incidents == [("answer", SUPPORT, "degraded"), ("answer", DOCS, "failure_rate_up"),
                         ("judge", DOCS, "coverage_down")]  # fmt: skip
    assert all("data-metric" in tr.attrs for tr in rows[3:])


def test_the_drift_table_lists_the_most_severe_first(segmented: tuple[str, Path]) -> None:
    drift = parse(build_report(segmented[0])).find_all("section", id="drift")[0]
    assert _rows_of(drift) == [
        ("answer_f1", SUPPORT, "degraded"),
        ("answer_f1", DOCS, "failure_rate_up"),
        ("faithfulness", DOCS, "coverage_down"),
        ("document_mrr", SUPPORT, "improved"),
        ("answer_f1", "all", "stable"),
        ("document_mrr", "all", "stable"),
        ("faithfulness", SUPPORT, "stable"),
        ("faithfulness", "all", "insufficient_data"),
        ("document_mrr", DOCS, "no_baseline"),
    ]


def test_a_latest_partition_without_alerts_says_so(segmented: tuple[str, Path]) -> None:
    attention = parse(build_report(segmented[0], end=DATES[-2])).find_all("section", id="attention")[0]
    assert not attention.find_all("tr") and "No drift alert" in attention.all_text()


def test_with_a_segment_the_charts_plot_that_segments_means(segmented: tuple[str, Path]) -> None:
    url, path = segmented
    dom = parse(build_report(url, segment=SUPPORT))
    charts = {svg.attrs["data-metric"]: svg for svg in dom.find_all("svg", role="img")}
    plotted = {
        (dot.attrs["data-date"], metric): dot.attrs["data-mean"]
        for metric, svg in charts.items()
        for dot in svg.find_all("circle", class_="point")
    }
    with duckdb.connect(str(path), read_only=True) as con:
        means = con.sql(
            """
            SELECT s.partition_date, s.metric, avg(s.value)
            FROM scores s JOIN traces t USING (partition_date, trace_id)
            WHERE s.status = 'ok' AND json_extract_string(t.metadata, '$.app') = 'support'
            GROUP BY ALL
            """
        ).fetchall()
    assert plotted == {(str(day), metric): f"{mean:.6g}" for day, metric, mean in means}
    everyone = {(str(p.partition_date), p.metric): f"{p.mean:.6g}" for p in aggregate(scores_table())}
    assert sum(plotted[key] != everyone[key] for key in plotted) >= len(plotted) // 2  # not all traces' means
    for svg in charts.values():
        line = [point.split(",")[1] for polyline in svg.find_all("polyline", class_="trend")
                for point in polyline.attrs["points"].split()]  # fmt: skip
        assert line == [dot.attrs["cy"] for dot in svg.find_all("circle", class_="point")]
        assert len(svg.find_all("rect", class_="band")) == 3  # the segment's drift rows, 4th partition on
    markers = [(metric, g.attrs["data-verdict"]) for metric, svg in charts.items() for g in svg.find_all("g")]
    assert sorted(markers) == [("answer_f1", "degraded"), ("document_mrr", "improved")]
    assert dom.find_all("header")[0].find_all("dd")[-1].all_text() == SUPPORT


def test_a_segment_is_all_or_a_key_and_value() -> None:
    empty = pa.table({"partition_date": pa.array([], pa.date32()), "trace_id": pa.array([], pa.string())})
    with pytest.raises(ValueError, match="'<key>=<value>'"):
        segment_scores(empty, empty.append_column("metadata", pa.array([], pa.string())), "support")
