"""Mistakes a user makes on the command line: a misspelt segment, a PostgreSQL schema that does not exist, an
output path that cannot be written, ``--verbose`` after the command, a demo asked for other data. Each is one
``error:`` line with exit 2, never an empty result that looks real or a traceback."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.cli.startup import quiet_run_failures
from ragpulse.tasks.demo.generate import APPS, generate_demo_traces

runner = CliRunner()
DAY = dt.date(2026, 6, 1)
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(autouse=True)
def _restore_cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """As in test_app.py: the CLI's Prefect defaults and console filter do not outlive the test."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / ".prefect"))
    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "WARNING")
    yield
    quiet_run_failures(False)


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    (line,) = stderr.splitlines()
    assert line.startswith("error: "), line
    return line


@pytest.fixture(scope="module")
def segmented(tmp_path_factory: pytest.TempPathFactory, prefect_api: str) -> str:
    """A DuckDB warehouse with one day scored and its drift checked per app (``metadata.app=<app>`` segments)."""
    root = tmp_path_factory.mktemp("segmented")
    generate_demo_traces(root / "traces", start=DAY, days=1, traces_per_day=40, malformed_per_day=0)
    warehouse = f"duckdb:///{root}/w.duckdb"
    args = ["backfill", "--start", str(DAY), "--end", str(DAY), "--source", str(root / "traces"), "--warehouse",
            warehouse, "--work-dir", str(root / "work"), "--metrics", "answer_f1",
            "--segment-key", "metadata.app"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    quiet_run_failures(False)
    return warehouse


def _segments(warehouse: str) -> list[str]:
    with duckdb.connect(warehouse.removeprefix("duckdb:///"), read_only=True) as con:
        return [row[0] for row in con.execute("SELECT DISTINCT segment FROM drift ORDER BY 1").fetchall()]


def test_report_draws_a_segment_the_drift_table_has(segmented: str, tmp_path: Path) -> None:
    (segment, *_) = [s for s in _segments(segmented) if s != "all"]
    page = tmp_path / "r.html"
    result = runner.invoke(app, ["report", "--warehouse", segmented, "--out", str(page), "--segment", segment])
    assert result.exit_code == 0, result.output
    assert f"Charted segment</dt><dd>{segment}</dd>" in page.read_text()


@pytest.mark.parametrize(
    ("segment", "expected"),
    [
        ("metadata.ap=support", "unknown segment key 'metadata.ap' in --segment 'metadata.ap=support'"),
        ("metadata.app=nosuchapp", "no segment 'metadata.app=nosuchapp' in"),
        ("support", "--segment 'support': give all or <key>=<value>"),
    ],
    ids=["key", "value", "no-key"],
)
def test_report_refuses_a_misspelt_segment(segmented: str, tmp_path: Path, segment: str, expected: str) -> None:
    known = [s for s in _segments(segmented) if s != "all"]
    assert {s.split("=", 1)[1] for s in known} <= set(APPS) and known
    result = runner.invoke(app, ["report", "--warehouse", segmented, "--out", str(tmp_path / "r.html"), "--segment",
                                 segment])  # fmt: skip
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.stderr)
    assert expected in line
    # The line names what the warehouse does have: the key, or the key's segments.
    assert ("metadata.app" in line) and (segment != "metadata.app=nosuchapp" or known[0].split("=", 1)[1] in line)
    assert not (tmp_path / "r.html").exists()


@pytest.fixture
def missing_schema() -> str:
    name = "ragpulse_no_such_schema"
    with psycopg.connect("host=127.0.0.1 port=5432 dbname=test user=postgres", autocommit=True) as con:
        con.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    return name


@pytest.mark.parametrize("command", ["report", "label-sample"])
def test_a_postgresql_schema_that_does_not_exist_is_refused(missing_schema: str, tmp_path: Path, command: str) -> None:
    warehouse = f"{PG_URL}?schema={missing_schema}"
    out = tmp_path / ("r.html" if command == "report" else "s.csv")
    args = ["--warehouse", warehouse, "--out", str(out)]
    if command == "label-sample":
        args += ["--date", str(DAY), "--metrics", "answer_f1"]
    result = runner.invoke(app, [command, *args])
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.stderr)
    assert line == f"error: no warehouse at {warehouse}: schema {missing_schema!r} does not exist in database test"
    assert not out.exists()
    with psycopg.connect("host=127.0.0.1 port=5432 dbname=test user=postgres") as con:  # reading created nothing
        assert con.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (missing_schema,)).fetchone() is None


def test_label_sample_refuses_a_duckdb_file_that_does_not_exist(tmp_path: Path) -> None:
    warehouse = f"duckdb:///{tmp_path}/typo.duckdb"
    result = runner.invoke(app, ["label-sample", "--warehouse", warehouse, "--date", str(DAY), "--metrics",
                                 "answer_f1", "--out", str(tmp_path / "s.csv")])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert _one_error_line(result.stderr).startswith(f"error: no warehouse at {warehouse}: ")
    assert list(tmp_path.iterdir()) == []


def test_dashboard_creates_the_folder_of_out(tmp_path: Path) -> None:
    out = tmp_path / "dashboards" / "ragpulse.json"
    result = runner.invoke(app, ["dashboard", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["uid"] == "ragpulse-quality"


@pytest.mark.parametrize("command", ["dashboard", "report", "label-sample"])
def test_an_out_path_that_cannot_be_written_is_one_line(segmented: str, tmp_path: Path, command: str) -> None:
    """A regular file where the output's folder should be: unwritable for every user, root included."""
    (tmp_path / "taken").write_text("a file, not a folder")
    out = tmp_path / "taken" / ("out.csv" if command == "label-sample" else "out.html")
    args = {
        "dashboard": [],
        "report": ["--warehouse", segmented],
        "label-sample": ["--warehouse", segmented, "--date", str(DAY), "--metrics", "answer_f1"],
    }[command]
    result = runner.invoke(app, [command, *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.stderr)
    assert line.startswith(f"error: cannot write --out {out}: "), line


@pytest.mark.parametrize("place", ["before", "after"])
def test_verbose_goes_before_or_after_the_command(monkeypatch: pytest.MonkeyPatch, place: str) -> None:
    """``-v`` after the command is the same flag as before it: Prefect's console logs are left on."""
    monkeypatch.setenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "unset below, restored after the test")
    monkeypatch.delenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL")
    command = ["evaluate", "--date", str(DAY)]
    result = runner.invoke(app, ["--verbose", *command] if place == "before" else [*command, "-v"])
    assert result.exit_code == 2, result.output  # no source: refused before anything runs
    assert "no trace source" in _one_error_line(result.stderr)
    assert "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL" not in os.environ


def test_without_verbose_prefect_console_logs_are_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "unset below, restored after the test")
    monkeypatch.delenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL")
    result = runner.invoke(app, ["evaluate", "--date", str(DAY)])
    assert result.exit_code == 2, result.output
    assert os.environ["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] == "WARNING"


def test_metrics_says_semantic_similarity_needs_embeddings_not_a_judge() -> None:
    result = runner.invoke(app, ["metrics", "--json"])
    assert result.exit_code == 0, result.output
    needs = {row["family"]: row["needs"] for row in json.loads(result.stdout)}
    assert needs["answer_semantic_similarity"] == "embeddings"
    assert needs["faithfulness"] == "judge"


def test_demo_run_again_with_other_settings_regenerates_and_says_so(prefect_api: str, tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    first = runner.invoke(app, ["demo", "--directory", str(directory), "--days", "2", "--traces-per-day", "20",
                                "--metrics", "answer_f1"])  # fmt: skip
    assert first.exit_code == 0, first.output
    quiet_run_failures(False)
    again = runner.invoke(app, ["demo", "--directory", str(directory), "--days", "1", "--traces-per-day", "30",
                                "--metrics", "answer_f1"])  # fmt: skip
    assert again.exit_code == 0, again.output
    said = " ".join(again.stderr.split())
    assert "made with --days 2 --traces-per-day 20" in said and "regenerating 1 days x 30" in said
    with duckdb.connect(str(directory / "ragpulse.duckdb"), read_only=True) as con:
        per_day = con.execute("SELECT partition_date, count(DISTINCT trace_id) FROM scores GROUP BY 1").fetchall()
    assert [count for _, count in per_day] == [30]
    assert len(list((directory / "traces").iterdir())) == 1


def test_a_segment_key_that_no_trace_has_is_named_with_the_keys_there_are(
    segmented: str, tmp_path: Path, prefect_api: str
) -> None:
    """``--segment-key metadata.ap`` (for ``metadata.app``) matches no trace: drift can compare only the whole day,
    and the run says so with the keys the traces do have, instead of a segment-less result that looks complete."""
    published = Path(segmented.removeprefix("duckdb:///"))
    warehouse = tmp_path / "w.duckdb"
    warehouse.write_bytes(published.read_bytes())
    args = ["monitor", "--date", str(DAY), "--source", str(published.parent / "traces"), "--warehouse",
            f"duckdb:///{warehouse}", "--work-dir", str(tmp_path / "work"), "--metrics", "answer_f1",
            "--segment-key", "metadata.ap"]  # fmt: skip
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "ragpulse.cli", *args], env=env, capture_output=True,
                            text=True, timeout=600, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    shown = " ".join((result.stdout + result.stderr).split())
    assert "no trace has a value for segment key 'metadata.ap'" in shown, shown
    assert "metadata.app" in shown.split("segment key 'metadata.ap'", 1)[1], shown
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT DISTINCT segment FROM drift WHERE partition_date = ?", [DAY]).fetchall() == [
            ("all",)
        ]
