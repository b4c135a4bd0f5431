"""The ragpulse command line: clear errors without tracebacks, exit codes a scheduler can act on, configuration
sources, help and listings, the demo."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import typer
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.cli.startup import quiet_run_failures
from ragpulse.metrics import REGISTRY
from ragpulse.metrics.registry import spec_name
from ragpulse.tasks.scoring.config import ScoringConfig

runner = CliRunner()
ROOT = Path(__file__).parents[3]


@pytest.fixture(autouse=True)
def _restore_cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The CLI sets Prefect defaults in os.environ and filters Prefect's console handler; pin the one and undo the
    other, so each test leaves the process as it found it."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / ".prefect"))
    for name, value in {
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }.items():
        monkeypatch.setenv(name, value)
    yield
    quiet_run_failures(False)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command line in a process of its own: what a terminal or a scheduler sees, Prefect's console included."""
    command = [sys.executable, "-m", "ragpulse.cli", *args]
    return subprocess.run(command, env={**os.environ, **(env or {})}, cwd=ROOT, capture_output=True, text=True)


def _one_error_line(stderr: str) -> str:
    """The single line a failed command prints; anything more (a traceback, Prefect's logs) fails the test."""
    assert "Traceback" not in stderr, stderr
    (line,) = stderr.splitlines()
    assert line.startswith("error: "), line
    return line


def test_metrics_lists_every_family() -> None:
    result = runner.invoke(app, ["metrics"])
    assert result.exit_code == 0
    for name, definition in REGISTRY.items():
        assert name in result.stdout
        assert definition.spec.version in result.stdout


def test_metrics_as_json() -> None:
    result = runner.invoke(app, ["metrics", "--json"])
    assert result.exit_code == 0, result.output
    listed = {row["family"]: row for row in json.loads(result.stdout)}
    assert listed.keys() == REGISTRY.keys()
    for family, definition in REGISTRY.items():
        row, spec = listed[family], definition.spec
        assert (row["name"], row["version"], row["summary"], row["needs"]) == (
            spec_name(spec), spec.version, spec.summary, definition.needs,
        )  # fmt: skip
    assert listed["precision"]["name"] == "precision@k" and listed["precision"]["defaults"] == ["precision@5"]
    assert listed["document_ndcg"]["defaults"] == ["document_ndcg", "document_ndcg@10"]
    assert listed["faithfulness"]["needs"] == "judge" and not listed["faithfulness"]["default"]
    assert sorted(name for row in listed.values() for name in row["defaults"]) == sorted(ScoringConfig().metrics)
    assert listed["user_feedback"]["defaults"] == ["user_feedback:*"] and listed["refusal"]["default"]
    assert all(row["default"] == bool(row["defaults"]) for row in listed.values())


def test_version_is_quick_and_needs_no_prefect() -> None:
    from ragpulse import __version__

    script = "import sys\nfrom ragpulse.cli import app\ntry:\n    app(['--version'])\nexcept SystemExit as e:\n"
    script += "    print(e.code, 'prefect' in sys.modules)"
    shown = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert shown.stdout.splitlines() == [f"ragpulse {__version__}", "0 False"]


def _help_commands() -> list[list[str]]:
    group = typer.main.get_command(app)
    return [[], *([name] for name in group.commands)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", _help_commands(), ids=lambda c: " ".join(c) or "ragpulse")
def test_help_shows_flags_as_flags(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "--help" in result.stdout
    assert "<bool>" not in result.stdout
    if command in (["evaluate"], ["monitor"], ["backfill"], ["settings"], ["metrics"]):
        assert "--json" in result.stdout
    if command == ["evaluate"]:
        assert "--date" in result.stdout and "<str>" in result.stdout  # options that take a value keep their type


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--date", "2026-11-01", "--source", "x", "--metrics", "ndcg"],
            "unknown metric 'ndcg'; known metrics: agent_goal_accuracy, answer",
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
    assert message in _one_error_line(result.stderr)
    assert "Traceback" not in result.stdout


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--metrics", "aspect_critique:tone"], {}, "unknown aspect 'tone' for aspect_critique"),
        (["--metrics", "llm_judge:mine"], {}, "no llm_judge named 'mine'"),
        (["--judge-config", "absent.toml"], {}, "cannot read judge config 'absent.toml'"),
        (["--input-suite", "absent.json"], {}, "cannot read expectation suite 'absent.json'"),
        (["--warehouse", "ftp://host/scores"], {}, "unsupported warehouse URL scheme 'ftp'"),
        (
            [],
            {"RAGPULSE_JUDGE_MAX_CONCURRENCY": "many"},
            "invalid ragpulse settings: RAGPULSE_JUDGE_MAX_CONCURRENCY: Input should be a valid integer",
        ),
    ],
)
def test_what_a_run_would_find_wrong_is_refused_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], message: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["evaluate", "--date", "2026-06-01", "--source", str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    assert message in _one_error_line(result.stderr)


def test_a_configuration_error_starts_no_flow_run(prefect_api: str, tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        before = client.count_flow_runs()
        for args in (["--date", "2026-06-01"], ["--date", "2026-06-01", "--source", ".", "--judge-config", "no.toml"]):
            result = _cli("evaluate", *args, env={"PREFECT_API_URL": prefect_api})
            assert result.returncode == 2, result.stderr
            _one_error_line(result.stderr)
        assert client.count_flow_runs() == before


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
    from ragpulse.tasks.core.exceptions import ConfigError

    with pytest.raises(ConfigError, match="must not carry credentials \\(secret\\)"):
        load_config(None, source="s3://logs", storage_options={"endpoint_url": "http://minio", "secret": "s3cr3t"})


@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_no_traces_for_the_date_is_exit_3_and_one_line(prefect_api: str, tmp_path: Path, verbose: bool) -> None:
    """The flow fails inside Prefect; the terminal shows the command's line only, unless --verbose, and the server
    still gets Prefect's logs of the failed run."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.sorting import FlowRunSort

    (tmp_path / "traces" / "dt=2026-11-02").mkdir(parents=True)
    (tmp_path / "traces" / "dt=2026-11-02" / "a.jsonl").write_text("")
    args = ["evaluate", "--date", "2026-11-05", "--source", str(tmp_path / "traces")]
    args += ["--warehouse", f"duckdb:///{tmp_path}/w.duckdb", "--work-dir", str(tmp_path / "work")]
    result = _cli(*(["--verbose", *args] if verbose else args), env={"PREFECT_API_URL": prefect_api})
    assert result.returncode == 3, result.stderr
    if verbose:
        assert "Encountered exception during execution" in result.stderr and "Traceback" in result.stderr
        assert result.stderr.splitlines()[-1].startswith("error: no trace files for dt=2026-11-05")
        return
    line = _one_error_line(result.stderr)
    assert "no trace files for dt=2026-11-05" in line and "2026-11-02" in line
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=10)
        (run,) = [r for r in runs if r.parameters.get("source", {}).get("url") == str(tmp_path / "traces")][:1]
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])))
    assert any(log.level >= 40 and "PartitionNotFoundError" in log.message for log in logs)


@pytest.mark.slow
def test_demo_generates_scores_and_reuses_partitions(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    result = runner.invoke(app, ["demo", "--directory", str(directory), "--days", "2", "--traces-per-day", "40"])
    assert result.exit_code == 0, result.output
    assert "Scores are in" in result.output
    with duckdb.connect(str(directory / "ragpulse.duckdb"), read_only=True) as con:
        per_day = con.execute("SELECT partition_date, count(DISTINCT trace_id) FROM scores GROUP BY 1").fetchall()
        cjk = con.execute("SELECT language, count(*) FROM traces WHERE language IN ('ja', 'zh') GROUP BY 1").fetchall()
    assert [count for _, count in per_day] == [40, 40]
    # The Japanese and Chinese apps' traces are in the warehouse and in the demo's table of scores per language.
    rows = {cells[1].strip(): cells for line in result.stdout.splitlines() if len(cells := line.split("│")) == 7}
    assert {language for language, _ in cjk} == {"ja", "zh"}
    assert all(rows[language][2].strip() == str(n) for language, n in cjk)

    again = runner.invoke(app, ["demo", "--directory", str(directory), "--days", "2", "--traces-per-day", "40"])
    assert again.exit_code == 0, again.output
    assert "Using the 2 partitions already in" in " ".join(again.output.split())
    assert "1 (1)" in again.output  # every day's single batch came from the cache


def _demo_traces(root: Path, days: int = 2) -> list[dt.date]:
    from ragpulse.tasks.demo.generate import generate_demo_traces

    return generate_demo_traces(root, start=dt.date(2026, 6, 1), days=days, traces_per_day=40)


@pytest.mark.slow
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
    assert again.exit_code == 3, again.output  # nothing left to evaluate
    assert json.loads(again.stdout)["skipped"] == [str(d) for d in dates[:2]]

    monitored = runner.invoke(app, ["monitor", "--date", str(dates[2]), "--json", *common])
    assert monitored.exit_code == 0, monitored.output
    outcome = json.loads(monitored.stdout)
    assert outcome["run"]["partition_date"] == str(dates[2])
    # Two earlier partitions, three needed: both metrics and the questions' input drift.
    assert outcome["drift_verdicts"] == {"insufficient_data": 3}
    shown = runner.invoke(app, ["monitor", "--date", str(dates[2]), *common])
    assert shown.exit_code == 0, shown.output
    assert f"drift verdicts for dt={dates[2]}" in shown.stdout and "{" not in shown.output
    (verdict_row,) = [line for line in shown.stdout.splitlines() if "insufficient_data" in line]
    assert verdict_row.split("│")[2].strip() == "3"

    # A day whose records are all bad: its quarantine and run row are published, the outcome is exit 3.
    broken = dates[2] + dt.timedelta(days=1)
    (tmp_path / "traces" / f"dt={broken}").mkdir()
    lines = ['{"trace_id": "t-1"}', '{"question": "where?", "trace_id": ""}', "not json"]
    (tmp_path / "traces" / f"dt={broken}" / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    unscored = runner.invoke(app, ["monitor", "--date", str(broken), "--json", *common])
    assert unscored.exit_code == 3, unscored.output
    assert json.loads(unscored.stdout)["run"]["outcome"] == "no_traces"
    assert f"dt={broken}: no valid traces: 3 record(s) quarantined" in " ".join(unscored.stderr.split())
    with duckdb.connect(f"{tmp_path}/w.duckdb", read_only=True) as con:
        day = f"partition_date = DATE '{broken}'"
        assert con.execute(f"SELECT line, field FROM quarantine WHERE {day} ORDER BY line").fetchall() == [
            (1, "question"),
            (2, "trace_id"),
            (3, "<record>"),
        ]
        assert con.execute(f"SELECT n_records, n_traces, n_quarantined, n_scores FROM runs WHERE {day}").fetchall() == [
            (3, 0, 3, 0)
        ]
        assert con.execute(f"SELECT count(*) FROM scores WHERE {day}").fetchone() == (0,)

    page = tmp_path / "report.html"
    reported = runner.invoke(app, ["report", "--warehouse", f"duckdb:///{tmp_path}/w.duckdb", "--out", str(page)])
    assert reported.exit_code == 0, reported.output
    assert "document_mrr" in page.read_text() and str(dates[2]) in page.read_text()

    mistyped = runner.invoke(app, ["report", "--warehouse", f"duckdb:///{tmp_path}/w.duckdb", "--metrics", "mrr"])
    assert mistyped.exit_code == 2
    line = _one_error_line(mistyped.stderr)
    assert "unknown metric(s) 'mrr'" in line and line.endswith("the warehouse has: answer_f1, document_mrr")


@pytest.mark.slow
def test_a_backfill_with_failed_partitions_exits_1_and_one_with_nothing_to_do_3(tmp_path: Path) -> None:
    days = _demo_traces(tmp_path / "traces", days=1)
    strict = tmp_path / "strict.json"
    strict.write_text(
        json.dumps(
            {
                "name": "team_scores_out",
                "expectations": [
                    {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "value", "min_value": 0.99}}
                ],
            }
        )
    )
    common = ["--source", str(tmp_path / "traces"), "--warehouse", f"duckdb:///{tmp_path}/w.duckdb"]
    common += ["--work-dir", str(tmp_path / "work"), "--metrics", "document_mrr"]
    failed = runner.invoke(app, ["backfill", "--start", str(days[0]), "--end", str(days[0]), *common, "--output-suite",
                                 str(strict)])  # fmt: skip
    assert failed.exit_code == 1, failed.output
    assert f"error: dt={days[0]}: " in failed.stderr and "team_scores_out" in failed.stderr

    empty = runner.invoke(app, ["backfill", "--start", "2026-01-01", "--end", "2026-01-03", "--json", *common])
    assert empty.exit_code == 3, empty.output
    assert json.loads(empty.stdout)["missing"] == ["2026-01-01", "2026-01-02", "2026-01-03"]


@pytest.mark.parametrize("url", ["duckdb:///{tmp}/typo.duckdb", "{tmp}/typo.duckdb", "{tmp}/lake", "file://{tmp}/lake"])
def test_report_refuses_a_warehouse_that_does_not_exist(tmp_path: Path, url: str) -> None:
    warehouse = url.format(tmp=tmp_path)
    result = runner.invoke(app, ["report", "--warehouse", warehouse, "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.stderr)
    assert line.startswith(f"error: no warehouse at {warehouse}: ") and "does not exist" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # neither the warehouse nor a report was created


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
    command = [sys.executable, "-m", "ragpulse.cli", "serve", "--source", str(tmp_path), "--name", name]
    command += ["--cron", "30 5 * * *", "--timezone", "Europe/Berlin", "--segment-key", "metadata.app"]
    # serve started as a user starts it, from a terminal: SIGINT at its default. A suite run in the background of a
    # script (`make test &`) has SIGINT ignored, which a child inherits, and Python then keeps ignoring it.
    process = subprocess.Popen(
        command, env=env, cwd=Path(__file__).parents[3], stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        deployment = None
        deadline = time.monotonic() + 90
        with get_client(sync_client=True) as client:
            # Until its runner polls, serve is still starting: a signal there races Prefect's runner start-up
            # (on a loaded machine SIGINT once left serve running), which this test is not about.
            while deployment is None or not deployment.schedules or deployment.last_polled is None:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "serve registered and polled for no deployment in 90 s"
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
