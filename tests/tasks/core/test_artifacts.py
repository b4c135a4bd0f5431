"""Artifact keys (per date, deployment and warehouse, valid for Prefect), markdown escaping and worker-local links.

Markdown is checked by rendering it as CommonMark with GFM tables (markdown-it-py, which rich brings along) and
reading the text back out of the HTML: an escape that fails shows as a lost ``<record>``, a split table cell, bold
text or a link.
"""

from __future__ import annotations

import datetime as dt
import re
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest
from markdown_it import MarkdownIt
from prefect import flow, get_client, task
from prefect.artifacts import create_markdown_artifact
from prefect.flow_engine import run_flow

from ragpulse.tasks.core.artifacts import (
    LOCAL_DEPLOYMENT,
    _ancestor_deployment,
    artifact_key,
    deployment_slug,
    followable,
    md,
    warehouse_tag,
)
from ragpulse.tasks.core.types import DriftReport
from ragpulse.tasks.monitoring.delivery import AlertOutcome, drift_markdown
from ragpulse.tasks.monitoring.tasks import send_alerts
from ragpulse.tasks.reporting.rejected import rejected_markdown
from ragpulse.tasks.reporting.run_summary import MetricSummary, RunSummary
from ragpulse.tasks.reporting.tasks import run_markdown
from ragpulse.tasks.warehouse import DRIFT_SCHEMA, VALIDATIONS_SCHEMA
from tests.artifacts import latest_markdown

DAY = dt.date(2026, 3, 1)
PREFECT_KEY = re.compile(r"^[a-z0-9-]+$")  # prefect.types.names: what an artifact key may hold
# Each breaks markdown in its own way: a tag, a cell separator, emphasis, a row break, code/link/strike/heading
# syntax, list markers, an entity and a backslash.
HOSTILE = [
    "<record>",
    "a | b",
    "*bold* and __strong__",
    "first line\nsecond line",
    "_x_ `y` [z](http://e.example) ~s~ # h",
    "- item",
    "1. first",
    "&amp; \\ back",
]


def shown(value: str) -> str:
    """How a value must read once rendered: as stored, line breaks as spaces."""
    return " ".join(value.splitlines())


class _Rendered(HTMLParser):
    """Rendered markdown read back: its text, the text of each table cell and list item, every tag produced."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text = ""
        self.cells: list[str] = []
        self.items: list[str] = []
        self.tags: list[str] = []
        self._open: list[list[str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in ("td", "th", "li"):
            self._open.append([])

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th", "li"):
            text = "".join(self._open.pop()).strip()
            (self.items if tag == "li" else self.cells).append(text)

    def handle_data(self, data: str) -> None:
        self.text += data
        for parts in self._open:
            parts.append(data)


def render(markdown: str) -> _Rendered:
    parsed = _Rendered()
    parsed.feed(MarkdownIt("commonmark").enable("table").render(markdown))
    return parsed


# ---------------------------------------------------------------- keys


def test_keys_differ_per_warehouse_and_repeat_per_warehouse() -> None:
    duckdb_key = artifact_key("run", DAY, "duckdb:///srv/a.duckdb")
    postgres_key = artifact_key("run", DAY, "postgresql://rp@db:5432/scores?schema=prod")
    assert duckdb_key != postgres_key
    assert artifact_key("run", DAY, "duckdb:///srv/a.duckdb") == duckdb_key
    assert artifact_key("run", DAY, "postgresql://rp@db:5432/scores?schema=test") != postgres_key
    assert duckdb_key == f"ragpulse-run-2026-03-01-{LOCAL_DEPLOYMENT}-{warehouse_tag('duckdb:///srv/a.duckdb')}"
    for kind in ("run", "summary", "rejected", "drift"):
        assert artifact_key(kind, DAY, "w.duckdb").startswith(f"ragpulse-{kind}-2026-03-01-")
    assert all(PREFECT_KEY.match(key) for key in (duckdb_key, postgres_key))


def test_the_warehouse_tag_ignores_and_hides_the_password() -> None:
    tag = warehouse_tag("postgresql://rp@db:5432/scores")
    assert re.fullmatch(r"[0-9a-f]{8}", tag)
    assert warehouse_tag("postgresql://rp:first-secret@db:5432/scores") == tag
    assert warehouse_tag("postgresql://rp:rotated@db:5432/scores") == tag
    in_query = warehouse_tag("postgresql://rp@db:5432/scores?sslmode=require&password=a")
    assert warehouse_tag("postgresql://rp@db:5432/scores?sslmode=require&password=b") == in_query


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("monitor-daily", "monitor-daily"),
        ("Nightly Monitor (EU) / prod_2", "nightly-monitor-eu-prod-2"),
        ("Café--Überwachung", "cafe-uberwachung"),
    ],
)
def test_the_deployment_name_is_slugified(name: str, slug: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT__RUNTIME__DEPLOYMENT__NAME", name)  # prefect.runtime's documented override
    assert deployment_slug() == slug
    key = artifact_key("drift", DAY, "duckdb:///w.duckdb")
    assert key == f"ragpulse-drift-2026-03-01-{slug}-{warehouse_tag('duckdb:///w.duckdb')}"
    assert PREFECT_KEY.match(key)


def test_a_name_without_ascii_letters_still_gets_its_own_slug(monkeypatch: pytest.MonkeyPatch) -> None:
    slugs = set()
    for name in ("監視", "モニター"):
        monkeypatch.setenv("PREFECT__RUNTIME__DEPLOYMENT__NAME", name)
        slugs.add(deployment_slug())
    assert len(slugs) == 2 and all(re.fullmatch(r"[0-9a-f]{8}", s) for s in slugs)


def test_outside_any_run_the_deployment_is_local() -> None:
    assert deployment_slug() == LOCAL_DEPLOYMENT


# ---------------------------------------------------------------- keys on a real Prefect server


@flow(name="ragpulse-test-artifact-child")
def _child(warehouse_url: str) -> str:
    key = artifact_key("run", DAY, warehouse_url)
    create_markdown_artifact(key=key, markdown=f"# {md(warehouse_url)}")
    return key


@flow(name="ragpulse-test-artifact-parent")
def _parent(warehouse_url: str) -> str:
    return _child(warehouse_url)


@task(name="ragpulse-test-subflow-call")
def _subflow_call() -> None:
    """Stands for the task run Prefect records in a flow run for each subflow it calls."""


def test_a_subflow_of_a_deployment_run_keys_by_the_deployment(prefect_api: str) -> None:
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow(_parent)
        deployment_id = client.create_deployment(flow_id, name="Nightly Keys")
        flow_run = client.create_flow_run_from_deployment(deployment_id, parameters={"warehouse_url": "a.duckdb"})
    key = run_flow(_parent, flow_run=flow_run, parameters={"warehouse_url": "a.duckdb"})
    assert key == f"ragpulse-run-2026-03-01-nightly-keys-{warehouse_tag('a.duckdb')}"
    assert latest_markdown(str(key)) == "# a.duckdb"


def test_the_deployment_is_found_through_the_parent_runs(prefect_api: str) -> None:
    """What a subflow run records on the server: no deployment of its own, a parent task run in the deployment's
    run. (Newer Prefect also passes the deployment down in the run context; this is the walk without it.)"""
    with get_client(sync_client=True) as client:
        deployment_id = client.create_deployment(client.create_flow(_parent), name="Walked Up")
        root = client.create_flow_run_from_deployment(deployment_id)
        task_run = client.create_task_run(_subflow_call, root.id, dynamic_key="0")
        child = client.create_flow_run(_child, parent_task_run_id=task_run.id)
        grandchild_task = client.create_task_run(_subflow_call, child.id, dynamic_key="0")
        grandchild = client.create_flow_run(_child, parent_task_run_id=grandchild_task.id)
        lone = client.create_flow_run(_child)
    assert child.deployment_id is None
    assert _ancestor_deployment(str(grandchild.id)) == "Walked Up"
    assert _ancestor_deployment(str(lone.id)) is None


@flow(name="ragpulse-test-alerts")
def _alerts(warehouse_url: str, metric: str) -> None:
    send_alerts(warehouse_url, DriftReport(DAY, _drift_rows([{"metric": metric}])))


def test_runs_of_one_date_into_two_warehouses_keep_two_artifacts(prefect_api: str, tmp_path: Path) -> None:
    """The real drift artifact of one partition, for two warehouses: both stay, each the latest of its own key."""
    keys = {}
    for name in ("first", "second"):
        url = f"duckdb:///{tmp_path / name}.duckdb"
        _alerts(url, f"metric_{name}")
        keys[name] = f"ragpulse-drift-2026-03-01-{LOCAL_DEPLOYMENT}-{warehouse_tag(url)}"
    assert keys["first"] != keys["second"]
    assert "| metric\\_first |" in latest_markdown(keys["first"])
    assert "| metric\\_second |" in latest_markdown(keys["second"])
    _alerts(f"duckdb:///{tmp_path / 'first'}.duckdb", "metric_again")  # same warehouse, same key: replaced
    assert "| metric\\_again |" in latest_markdown(keys["first"])


# ---------------------------------------------------------------- escaping


@pytest.mark.parametrize("value", HOSTILE)
def test_md_makes_any_value_literal_text(value: str) -> None:
    cell = render(f"| h |\n|---|\n| {md(value)} |\n")
    assert cell.cells == ["h", shown(value)]
    assert set(cell.tags) == {"table", "thead", "tbody", "tr", "th", "td"}
    item = render(f"- {md(value)}\n")
    assert item.items == [shown(value)] and set(item.tags) == {"ul", "li"}


USAGE = {"http_calls": 1, "cache_hits": 0, "prompt_tokens": 5, "completion_tokens": 2, "failures": 0}


def _summary(value: str, data_docs: str | None = None) -> RunSummary:
    return RunSummary(
        run_id="run-1",
        partition_date=DAY,
        warehouse=f"duckdb:///{value}.duckdb",
        n_records=3,
        n_traces=2,
        n_quarantined=1,
        n_batches=1,
        n_batches_cached=0,
        metrics=[MetricSummary(value, "1.0.0", 2, 2, 1.0, 0.5, 0.1, 0.5, 0.9)],
        quarantine_reasons={f"question: {value}": 1},
        data_docs=data_docs,
        judge_model=value,
        judge_usage={value: {**USAGE, "estimated_cost_usd": None}},
        skipped_metrics=[value],
    )


def _validations(value: str) -> pa.Table:
    row = {name: None for name in VALIDATIONS_SCHEMA.names} | {
        "run_id": "run-1", "partition_date": DAY, "suite": value, "expectation": value, "column_name": value,
        "success": False, "unexpected_count": 4,
    }  # fmt: skip
    return pa.Table.from_pylist([row], VALIDATIONS_SCHEMA)


@pytest.mark.parametrize("value", HOSTILE)
def test_the_run_artifact_shows_every_value_as_stored(value: str) -> None:
    """Same elements as for a harmless value, and the value's text wherever the harmless one's is."""
    page = render(run_markdown(_summary(value), _validations(value)))
    plain = render(run_markdown(_summary("plain"), _validations("plain")))
    assert page.tags == plain.tags
    assert page.text.replace(shown(value), "plain") == plain.text
    assert page.cells.count(shown(value)) == 5  # the metrics table's and the judge usage's metric; the check's suite,
    # expectation, column
    assert f"question: {shown(value)}" in page.cells


def test_the_rejected_artifact_lists_failures_as_stored() -> None:
    page = render(rejected_markdown(DAY, "run-<1>", HOSTILE))
    assert page.items == [shown(value) for value in HOSTILE]
    assert page.tags == render(rejected_markdown(DAY, "run-1", ["plain"] * len(HOSTILE))).tags
    assert "Run run-<1> produced" in page.text


def _drift_rows(overrides: list[dict[str, object]]) -> pa.Table:
    base = {name: None for name in DRIFT_SCHEMA.names} | {
        "partition_date": DAY, "metric": "answer_f1", "segment": "all", "verdict": "stable", "detail": "",
        "baseline_mean": 0.7, "current_mean": 0.69, "delta": -0.01,
    }  # fmt: skip
    return pa.Table.from_pylist([base | row for row in overrides], DRIFT_SCHEMA)


def test_the_drift_artifact_escapes_and_lists_the_most_severe_first() -> None:
    verdicts = ["stable", "improved", "no_baseline", "coverage_down", "insufficient_data", "failure_rate_up"]
    rows: list[dict[str, object]] = [
        {"metric": "b", "verdict": v, "segment": f"metadata.app=s{i}"} for i, v in enumerate(verdicts)
    ]
    rows += [{"metric": "a", "verdict": "degraded", "segment": f"metadata.app={value}", "detail": value}
             for value in HOSTILE]  # fmt: skip
    report = DriftReport(DAY, _drift_rows(rows), [])
    page = render(drift_markdown(report, AlertOutcome([], [], []), "https://reports.example/latest.html"))
    table = page.cells[7:]  # after the header row
    body = [table[i : i + 7] for i in range(0, len(table), 7)]
    assert [r[2] for r in body] == ["degraded"] * len(HOSTILE) + [
        "failure_rate_up", "coverage_down", "improved", "stable", "insufficient_data", "no_baseline",
    ]  # fmt: skip
    assert [r[1] for r in body[: len(HOSTILE)]] == sorted(f"metadata.app={shown(v)}" for v in HOSTILE)
    assert sorted(r[6] for r in body[: len(HOSTILE)]) == sorted(shown(v) for v in HOSTILE)
    assert page.tags.count("a") == 1  # the report link, and nothing a value made


def test_only_links_a_reader_can_open_are_links(tmp_path: Path) -> None:
    docs = tmp_path / "run 1" / "data_docs"
    local = render(run_markdown(_summary("x", data_docs=docs.as_uri()), _validations("x")))
    assert "a" not in local.tags
    assert f"written on the worker at {docs}" in local.text and "file:" not in local.text
    remote = run_markdown(_summary("x", data_docs="https://docs.example/a b|c/"), _validations("x"))
    assert '<a href="https://docs.example/a%20b%7Cc/">open</a>' in MarkdownIt("commonmark").render(remote)
    report = DriftReport(DAY, _drift_rows([{}]))
    for url in ("file:///srv/report.html", "/srv/report.html"):
        page = render(drift_markdown(report, AlertOutcome([], [], []), url))
        assert "a" not in page.tags and f"Report: {url}" in page.text
    assert not followable("s3://bucket/docs/index.html") and followable("HTTPS://docs.example/")
