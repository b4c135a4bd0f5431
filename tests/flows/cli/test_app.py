"""The ragpulse command line: clear errors without tracebacks, configuration sources, the demo."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from ragpulse.flows.cli import app
from ragpulse.metrics import REGISTRY

runner = CliRunner()


@pytest.fixture(autouse=True)
def _restore_cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The CLI sets Prefect defaults in os.environ; pin them so each test restores the environment."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / ".prefect"))
    for name, value in {
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }.items():
        monkeypatch.setenv(name, value)


def test_metrics_lists_every_family() -> None:
    result = runner.invoke(app, ["metrics"])
    assert result.exit_code == 0
    for name, definition in REGISTRY.items():
        assert name in result.stdout
        assert definition.spec.version in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--date", "2026-11-01", "--source", "x", "--metrics", "ndcg"],
            "unknown metric 'ndcg'; known metrics: answer",
        ),
        (["--date", "2026-11-01", "--source", "x", "--metrics", "precision"], "expected a cutoff, e.g. precision@5"),
        (["--date", "2026-11-01", "--source", "x", "--batch-size", "0"], "batch_size: Input should be greater"),
        (["--date", "2026-11-01", "--source", "x", "--task-runner", "spark"], "task_runner: Input should be 'thread'"),
        (["--date", "01/11/2026", "--source", "x"], "--date must be a date like"),
        (["--date", "2026-11-01", "--source", "x", "--sample", "1.5"], "sample_rate: Input should be less than"),
        (["--date", "2026-11-01", "--source", "x", "--metrics", "aspect_critique"], "expected a variant"),
        (["--date", "2026-11-01"], "no trace source: pass --source"),
    ],
)
def test_bad_options_are_clear_errors(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["evaluate", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_config_file_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragpulse.tasks.config import load_config

    config = tmp_path / "ragpulse.toml"
    config.write_text('[ragpulse]\nsource = "s3://logs"\nbatch_size = 100\nmetrics = ["document_mrr"]\n')
    monkeypatch.setenv("RAGPULSE_BATCH_SIZE", "200")
    loaded = load_config(config, metrics="precision@3, recall@3")
    assert (loaded.source.url, loaded.scoring.batch_size, loaded.scoring.metrics) == (
        "s3://logs", 200, ("precision@3", "recall@3"),
    )  # fmt: skip

    monkeypatch.delenv("RAGPULSE_BATCH_SIZE")
    # With a source: a file without one stops at "no trace source" before its values are validated.
    config.write_text("[ragpulse]\nsource = \"s3://logs\"\nbatch_size = 'many'\n")
    result = runner.invoke(app, ["evaluate", "--date", "2026-11-01", "--config", str(config)])
    assert result.exit_code == 2
    assert "batch_size" in result.output and str(config) in " ".join(result.output.split())

    config.write_text("[ragpulse\n")
    result = runner.invoke(app, ["evaluate", "--date", "2026-11-01", "--config", str(config)])
    assert result.exit_code == 2 and "not valid TOML" in result.output


def test_storage_options_must_not_carry_credentials() -> None:
    from ragpulse.tasks.config import load_config
    from ragpulse.tasks.core.errors import ConfigError

    with pytest.raises(ConfigError, match="must not carry credentials \\(secret\\)"):
        load_config(None, source="s3://logs", storage_options={"endpoint_url": "http://minio", "secret": "s3cr3t"})


def test_missing_partition_exits_with_nearby_dates(tmp_path: Path) -> None:
    (tmp_path / "traces" / "dt=2026-11-02").mkdir(parents=True)
    (tmp_path / "traces" / "dt=2026-11-02" / "a.jsonl").write_text("")
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--date",
            "2026-11-05",
            "--source",
            str(tmp_path / "traces"),
            "--warehouse",
            f"duckdb:///{tmp_path}/w.duckdb",
            "--work-dir",
            str(tmp_path / "work"),
        ],
    )
    assert result.exit_code == 2, result.output
    assert "no trace files for dt=2026-11-05" in result.output and "2026-11-02" in result.output


def test_demo_generates_scores_and_reuses_partitions(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    result = runner.invoke(app, ["demo", "--directory", str(directory), "--days", "2", "--traces-per-day", "40"])
    assert result.exit_code == 0, result.output
    assert "Scores are in" in result.output
    with duckdb.connect(str(directory / "ragpulse.duckdb"), read_only=True) as con:
        per_day = con.execute("SELECT partition_date, count(DISTINCT trace_id) FROM scores GROUP BY 1").fetchall()
    assert [count for _, count in per_day] == [40, 40]

    again = runner.invoke(app, ["demo", "--directory", str(directory), "--days", "2", "--traces-per-day", "40"])
    assert again.exit_code == 0, again.output
    assert "Using the 2 partitions already in" in " ".join(again.output.split())
    assert "1 (1)" in again.output  # every day's single batch came from the cache


def _demo_traces(root: Path, days: int = 2) -> list[dt.date]:
    from ragpulse.tasks.demo.generate import generate_demo_traces

    return generate_demo_traces(root, start=dt.date(2026, 6, 1), days=days, traces_per_day=40)


def test_backfill_monitor_and_report(tmp_path: Path) -> None:
    dates = _demo_traces(tmp_path / "traces", days=3)
    common = ["--source", str(tmp_path / "traces"), "--warehouse", f"duckdb:///{tmp_path}/w.duckdb"]
    common += ["--work-dir", str(tmp_path / "work"), "--metrics", "document_mrr,answer_f1"]
    args = ["backfill", "--start", str(dates[0]), "--end", str(dates[1]), "--json", *common]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    result = json.loads(first.stdout)
    assert result["completed"] == [str(d) for d in dates[:2]] and result["skipped"] == []

    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["skipped"] == [str(d) for d in dates[:2]]

    monitored = runner.invoke(app, ["monitor", "--date", str(dates[2]), "--json", *common])
    assert monitored.exit_code == 0, monitored.output
    outcome = json.loads(monitored.stdout)
    assert outcome["run"]["partition_date"] == str(dates[2])
    assert outcome["drift_verdicts"] == {"insufficient_data": 2}  # two earlier partitions, three needed

    page = tmp_path / "report.html"
    reported = runner.invoke(app, ["report", "--warehouse", f"duckdb:///{tmp_path}/w.duckdb", "--out", str(page)])
    assert reported.exit_code == 0, reported.output
    assert "document_mrr" in page.read_text() and str(dates[2]) in page.read_text()


def test_backfill_rejects_a_reversed_range(tmp_path: Path) -> None:
    result = runner.invoke(app, ["backfill", "--source", str(tmp_path), "--start", "2026-06-02", "--end", "2026-06-01"])
    assert result.exit_code == 2
    assert "--end 2026-06-01 is before --start 2026-06-02" in result.output


def test_serve_needs_a_prefect_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    result = runner.invoke(app, ["serve", "--source", str(tmp_path)])
    assert result.exit_code == 2
    assert "schedules need a Prefect server" in " ".join(result.output.split())


def test_serve_rejects_a_bad_schedule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    result = runner.invoke(app, ["serve", "--source", str(tmp_path), "--cron", "0 25 * * *"])
    assert result.exit_code == 2 and "Invalid cron string" in result.output
    result = runner.invoke(app, ["serve", "--source", str(tmp_path), "--timezone", "Mars/Olympus"])
    assert result.exit_code == 2 and "Invalid timezone" in result.output


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_registers_the_daily_schedule_and_pauses_it_on_exit(
    prefect_api: str, tmp_path: Path, stop: signal.Signals
) -> None:
    from prefect.client.orchestration import get_client

    env = {**os.environ, "PREFECT_API_URL": prefect_api, "PREFECT_LOGGING_LEVEL": "WARNING"}
    name = f"monitor-{stop.name.lower()}"
    command = [sys.executable, "-m", "ragpulse.flows.cli", "serve", "--source", str(tmp_path), "--name", name]
    command += ["--cron", "30 5 * * *", "--timezone", "Europe/Berlin", "--segment-key", "metadata.app"]
    process = subprocess.Popen(command, env=env, cwd=Path(__file__).parents[3], stderr=subprocess.PIPE, text=True)
    try:
        deployment = None
        deadline = time.monotonic() + 90
        with get_client(sync_client=True) as client:
            while deployment is None or not deployment.schedules:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "serve registered no deployment in 90 s"
                time.sleep(1)
                try:
                    deployment = client.read_deployment_by_name(f"monitor/{name}")
                except Exception:  # not registered yet
                    deployment = None
            schedule = deployment.schedules[0]
            assert (schedule.schedule.cron, schedule.schedule.timezone, schedule.active) == (
                "30 5 * * *", "Europe/Berlin", True,
            )  # fmt: skip
            assert deployment.parameters["source"]["url"] == str(tmp_path)
            assert deployment.parameters["drift"]["segment_key"] == "metadata.app"
            assert deployment.parameters["timezone"] == "Europe/Berlin"
            assert not deployment.paused
            process.send_signal(stop)
            process.wait(timeout=60)
            assert client.read_deployment_by_name(f"monitor/{name}").paused
    finally:
        if process.poll() is None:
            process.kill()
