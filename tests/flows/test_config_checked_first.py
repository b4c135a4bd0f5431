"""Fault 6 of issue 16: configuration errors are found before any work. Through the CLI (exit 2, one line, no
traceback, no flow run), through the flows called from Python and through a deployment run whose parameters come
from the API (the flow run fails before its first task run)."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.cli.startup import quiet_run_failures
from ragpulse.flows.backfill import backfill
from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.flows.monitor import monitor
from ragpulse.tasks.config import AlertConfig, OutputConfig, SourceConfig
from ragpulse.tasks.core.exceptions import ConfigError

runner = CliRunner()
ROOT = Path(__file__).parents[2]
DAY = dt.date(2026, 5, 1)
PG = "postgresql://postgres@127.0.0.1:5432/test"
ABSENT_BLOCK = "t16-d-absent-block"


@pytest.fixture(autouse=True)
def _restore_cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / ".prefect"))
    monkeypatch.setenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    yield
    quiet_run_failures(False)


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    """One day of valid traces: a run that gets past the checks would stage and score them."""
    root = tmp_path / "traces"
    (root / f"dt={DAY}").mkdir(parents=True)
    line = {"trace_id": "t-1", "question": "q", "answer": "a", "contexts": [{"id": "d", "text": "t"}]}
    (root / f"dt={DAY}" / "a.jsonl").write_text(json.dumps(line) + "\n")
    return root


# (options, environment, what the one line says): each was found only at publish, or never, before issue 16.
LATE_ERRORS = {
    "unknown scheme": (["--warehouse", "mysql://h/db"], {}, "unsupported warehouse URL scheme 'mysql'"),
    "bad schema": (["--warehouse", f"{PG}?schema=Bad-Name"], {}, "invalid schema 'Bad-Name'"),
    "missing warehouse block": (
        ["--warehouse", f"secret://{ABSENT_BLOCK}"], {}, f"no Prefect Secret block named '{ABSENT_BLOCK}'",
    ),
    "unreachable server": (["--warehouse", "postgresql://postgres@127.0.0.1:1/test"], {}, "cannot be written"),
    "unwritable folder": (["--warehouse", "duckdb:////proc/t16/w.duckdb"], {}, "cannot be written"),
    "negative timeout": ([], {"RAGPULSE_JUDGE_TIMEOUT_SECONDS": "-1"}, "RAGPULSE_JUDGE_TIMEOUT_SECONDS: Input should"),
    "zero concurrency": ([], {"RAGPULSE_JUDGE_MAX_CONCURRENCY": "0"}, "RAGPULSE_JUDGE_MAX_CONCURRENCY: Input should"),
    "misspelt judge variable": (
        [], {"RAGPULSE_JUDGE_TIMEOUT": "-1"}, "unknown judge setting RAGPULSE_JUDGE_TIMEOUT; did you mean "
        "RAGPULSE_JUDGE_TIMEOUT_SECONDS?",
    ),
    "misspelt variable of another group": (
        [], {"RAGPULSE_BATCHSIZE": "10"}, "unknown setting RAGPULSE_BATCHSIZE; did you mean RAGPULSE_BATCH_SIZE?",
    ),
    "misspelt drift variable": (
        [], {"RAGPULSE_DRIFT_CONFIDNCE": "0.9"},
        "unknown setting RAGPULSE_DRIFT_CONFIDNCE; did you mean RAGPULSE_DRIFT_CONFIDENCE?",
    ),
    "judge URL with a password": (
        [], {"RAGPULSE_JUDGE_BASE_URL": "http://u:hunter2@127.0.0.1:9/v1"}, "put the key in RAGPULSE_JUDGE_API_KEY",
    ),
    "missing judge key block": (
        [], {"RAGPULSE_JUDGE_MODEL": "m", "RAGPULSE_JUDGE_API_KEY_BLOCK": ABSENT_BLOCK},
        f"no Prefect Secret block named '{ABSENT_BLOCK}' (judge API key",
    ),
    "no OpenAI key": ([], {"RAGPULSE_JUDGE_MODEL": "m"}, "no API key for the OpenAI API"),
    "embedding store size": (
        [], {"RAGPULSE_EMBEDDING_CACHE_MB": "lots"}, "RAGPULSE_EMBEDDING_CACHE_MB='lots': expected megabytes",
    ),
}  # fmt: skip


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    (line,) = stderr.splitlines()
    assert line.startswith("error: "), line
    return line


def _flow_runs() -> int:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.count_flow_runs()


@pytest.mark.parametrize(("args", "env", "message"), LATE_ERRORS.values(), ids=LATE_ERRORS.keys())
def test_the_cli_refuses_a_late_error_before_any_work(
    traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], message: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    before = _flow_runs()
    base = ["--date", str(DAY), "--source", str(traces), "--work-dir", str(tmp_path / "work")]
    result = runner.invoke(app, ["evaluate", *base, "--warehouse", f"duckdb:///{tmp_path}/w.duckdb", *args])
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.stderr)
    assert message in line and "hunter2" not in line
    assert _flow_runs() == before
    assert not (tmp_path / "work").exists()


def test_a_command_checks_and_plans_its_configuration_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's check, the flow's, its subflows' (monitor -> evaluate-partition -> score-partition, and a backfill's
    partitions in threads of their own) and the backfill's planning task: one plan per command, once published rows
    exist as well as on the first run."""
    from ragpulse.tasks.planning import run as planning

    traces = tmp_path / "traces"
    for day in (DAY - dt.timedelta(days=1), DAY):
        line = {"trace_id": f"t-{day}", "timestamp": f"{day}T10:00:00Z", "question": "q", "answer": "a",
                "contexts": [{"id": "d", "text": "t"}], "relevant_context_ids": ["d"]}  # fmt: skip
        (traces / f"dt={day}").mkdir(parents=True)
        (traces / f"dt={day}" / "a.jsonl").write_text(json.dumps(line) + "\n")
    plans: list[object] = []
    plan_run = planning.plan_run
    monkeypatch.setattr(planning, "plan_run", lambda config: plans.append(config) or plan_run(config))
    common = ["--source", str(traces), "--warehouse", f"duckdb:///{tmp_path}/w.duckdb", "--work-dir", str(tmp_path)]
    day_before = str(DAY - dt.timedelta(days=1))
    commands = {
        "monitor": ["monitor", "--date", str(DAY), *common],
        "backfill": ["backfill", "--start", day_before, "--end", str(DAY), "--force", *common],
        "evaluate": ["evaluate", "--date", str(DAY), *common],
    }
    for name, command in commands.items():
        plans.clear()
        result = runner.invoke(app, command)
        assert result.exit_code == 0, (name, result.output[-1500:])
        assert len(plans) == 1, f"{name} planned its run {len(plans)} times"


def test_a_config_file_and_the_monitor_are_checked_too(traces: Path, tmp_path: Path) -> None:
    config = tmp_path / "ragpulse.toml"
    config.write_text(f'[ragpulse]\nsource = "{traces}"\nwarehouse = "ftp://h/scores"\n')
    result = runner.invoke(app, ["evaluate", "--date", str(DAY), "--config", str(config)])
    assert result.exit_code == 2 and "unsupported warehouse URL scheme 'ftp'" in _one_error_line(result.stderr)
    result = runner.invoke(
        app, ["monitor", "--date", str(DAY), "--source", str(traces), "--warehouse", f"duckdb:///{tmp_path}/w.duckdb",
              "--alert-webhook-block", ABSENT_BLOCK],
    )  # fmt: skip
    assert result.exit_code == 2
    assert f"no Prefect Secret block named '{ABSENT_BLOCK}' (alert webhook)" in _one_error_line(result.stderr)


def test_a_real_process_prints_one_line_and_exits_2(prefect_api: str, traces: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "ragpulse.cli", "evaluate", "--date", str(DAY), "--source", str(traces)]
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "RAGPULSE_JUDGE_TIMEOUT_SECONDS": "-1"}
    result = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "RAGPULSE_JUDGE_TIMEOUT_SECONDS: Input should be greater than 0" in _one_error_line(result.stderr)


def _task_runs(flow_run_id: UUID) -> int:
    """Task runs of the flow run and of its subflow runs."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        return len(client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))))


FLOW_ERRORS = {
    "unknown scheme": ({"warehouse": "mysql://h/db"}, {}, "unsupported warehouse URL scheme"),
    "bad schema": ({"warehouse": f"{PG}?schema=Bad-Name"}, {}, "invalid schema"),
    "missing warehouse block": ({"warehouse": f"secret://{ABSENT_BLOCK}"}, {}, "no Prefect Secret block"),
    "negative timeout": ({}, {"RAGPULSE_JUDGE_TIMEOUT_SECONDS": "-1"}, "RAGPULSE_JUDGE_TIMEOUT_SECONDS"),
}


@pytest.mark.parametrize(("output", "env", "message"), FLOW_ERRORS.values(), ids=FLOW_ERRORS.keys())
def test_a_flow_called_from_python_fails_before_its_first_task(
    traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: dict[str, str], env: dict[str, str],
    message: str,
) -> None:  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    groups: dict[str, Any] = {
        "source": SourceConfig(url=str(traces)),
        "output": OutputConfig(**{"warehouse": f"duckdb:///{tmp_path}/w.duckdb", **output}, work_dir=str(tmp_path)),
    }
    state = evaluate_partition(date=DAY, return_state=True, **groups)
    assert state.is_failed()
    error = state.result(raise_on_failure=False)
    assert isinstance(error, ConfigError) and message in str(error) and "\n" not in str(error)
    assert _task_runs(state.state_details.flow_run_id) == 0


def test_monitor_and_backfill_check_before_any_task(traces: Path, tmp_path: Path) -> None:
    output = OutputConfig(warehouse="mysql://h/db", work_dir=str(tmp_path))
    groups: dict[str, Any] = {"source": SourceConfig(url=str(traces)), "output": output}
    for state in (
        monitor(date=DAY, return_state=True, **groups),
        backfill(start=DAY, end=DAY, return_state=True, **groups),
        monitor(date=DAY, return_state=True, **groups | {"output": OutputConfig(work_dir=str(tmp_path))},
                alerts=AlertConfig(webhook_block=ABSENT_BLOCK)),
    ):  # fmt: skip
        assert state.is_failed()
        assert isinstance(state.result(raise_on_failure=False), ConfigError)
        assert _task_runs(state.state_details.flow_run_id) == 0


@pytest.mark.parametrize(
    ("warehouse", "message"),
    [
        (f"{PG.replace('postgres@', 'postgres:hunter2@')}?schema=t16_d_{uuid.uuid4().hex[:8]}", "carries a password"),
        ("mysql://h/db", "unsupported warehouse URL scheme 'mysql'"),
    ],
    ids=["password", "unknown scheme"],
)
def test_a_deployment_run_fails_before_its_first_task(
    prefect_api: str, traces: Path, tmp_path: Path, warehouse: str, message: str
) -> None:
    """A deployment run as a worker starts it: the flow run created on the API from the deployment, its parameters
    read back from there, executed by Prefect's engine in a process of its own."""
    from prefect.client.orchestration import get_client

    parameters = {"date": str(DAY), "source": {"url": str(traces)},
                  "output": {"warehouse": warehouse, "work_dir": str(tmp_path / "work")}}  # fmt: skip
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("evaluate-partition")
        deployment_id = client.create_deployment(
            flow_id=flow_id, name=f"t16-d-{uuid.uuid4().hex[:8]}", entrypoint="flows/evaluate.py:evaluate_partition"
        )
        run = client.create_flow_run_from_deployment(deployment_id, parameters=parameters)
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "PREFECT__FLOW_RUN_ID": str(run.id)}
    command = [sys.executable, "-m", "prefect.flow_engine", "ragpulse.flows.evaluate:evaluate_partition"]
    subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(run.id).state
    assert state is not None and state.is_failed(), state
    assert message in str(state.message) and "hunter2" not in str(state.message)
    assert _task_runs(run.id) == 0


def test_the_probe_leaves_nothing_behind_but_a_created_schema(s3: Any, tmp_path: Path) -> None:
    """A lake gets a probe object written and deleted and its catalog reached; DuckDB a temporary file beside the
    (unopened) database; PostgreSQL its schema created, as the first publish would."""
    import sqlalchemy as sa

    from ragpulse.tasks.warehouse.probe import probe_warehouse

    probe_warehouse(f"s3://{s3.name}/lake?catalog={PG}&namespace=t16_probe_{uuid.uuid4().hex[:8]}")
    probe_warehouse(f"file://{tmp_path}/lake")
    probe_warehouse(f"duckdb:///{tmp_path}/db/w.duckdb")
    s3.fs.invalidate_cache()
    assert s3.fs.find(s3.name) == [] and [*(tmp_path / "lake").iterdir(), *(tmp_path / "db").iterdir()] == []
    with pytest.raises(ConfigError, match="cannot be written"):
        probe_warehouse(f"s3://t16-d-no-such-bucket/lake?catalog={PG}")
    schema = f"t16_d_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(PG.replace("postgresql://", "postgresql+psycopg://"))
    try:
        probe_warehouse(f"{PG}?schema={schema}")
        probe_warehouse(f"{PG}?schema={schema}")  # and again, once it exists
        with engine.connect() as conn:
            found = conn.execute(sa.text("SELECT count(*) FROM pg_namespace WHERE nspname = :s"), {"s": schema})
            assert found.scalar_one() == 1
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


def test_a_refused_run_leaves_the_published_day_and_the_fixed_run_replaces_it(tmp_path: Path) -> None:
    """The data outcome: a day published to PostgreSQL, re-run with a configuration error (refused before any
    work: its rows stay as they were), then with the mistake fixed (the day replaced, nothing duplicated)."""
    import sqlalchemy as sa

    source = tmp_path / "traces"
    (source / f"dt={DAY}").mkdir(parents=True)
    lines = [{"trace_id": f"t{i}", "timestamp": f"{DAY}T10:00:00Z", "question": f"q {i}?", "answer": "a",
              "contexts": [{"id": "d", "text": "t"}], "relevant_context_ids": {"d": 1}} for i in range(20)]  # fmt: skip
    (source / f"dt={DAY}" / "a.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    schema = f"t16_d_{uuid.uuid4().hex[:8]}"
    base = ["evaluate", "--date", str(DAY), "--source", str(source), "--metrics", "document_mrr,precision@1"]
    base += ["--work-dir", str(tmp_path / "work")]
    engine = sa.create_engine(PG.replace("postgresql://", "postgresql+psycopg://"))

    def counts() -> tuple[int, int, int]:
        with engine.connect() as conn:
            return conn.execute(sa.text(
                f"SELECT count(*), count(DISTINCT (trace_id, metric)), (SELECT count(*) FROM {schema}.runs) "
                f"FROM {schema}.scores WHERE partition_date = :day"), {"day": DAY}).one()  # fmt: skip

    try:
        assert runner.invoke(app, [*base, "--warehouse", f"{PG}?schema={schema}"]).exit_code == 0
        assert counts() == (40, 40, 1)  # expected 20 traces x 2 metrics
        refused = [
            runner.invoke(app, [*base, "--warehouse", f"postgresql://postgres@127.0.0.1:1/test?schema={schema}"]),
            runner.invoke(app, [*base, "--warehouse", f"{PG}?schema={schema}"], env={"RAGPULSE_JUDGE_TIMEOUT": "5"}),
        ]
        assert [result.exit_code for result in refused] == [2, 2]
        assert counts() == (40, 40, 1)  # present, none duplicated, none lost, no runs row added
        assert runner.invoke(app, [*base, "--warehouse", f"{PG}?schema={schema}"]).exit_code == 0
        assert counts() == (40, 40, 1)  # the fixed run found the same content published: its rows stand
        fixed = [*base, "--warehouse", f"{PG}?schema={schema}", "--republish"]
        assert runner.invoke(app, fixed).exit_code == 0
        assert counts() == (40, 40, 2)  # republished: the day replaced, nothing duplicated
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


# Issue 29, item 3: a mistyped source root is a configuration error (exit 2), not a day without traces (exit 3).
def _source_refused(args: list[str], message: str) -> None:
    before = _flow_runs()
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in _one_error_line(result.stderr)
    assert _flow_runs() == before


@pytest.mark.parametrize("partitioning", ["dt", "event-time"])
def test_a_local_source_that_is_not_there_is_refused_before_any_work(
    traces: Path, tmp_path: Path, partitioning: str
) -> None:
    typo = tmp_path / "tarces"
    common = ["--source", str(typo), "--partitioning", partitioning, "--warehouse", f"duckdb:///{tmp_path}/w.duckdb",
              "--work-dir", str(tmp_path / "work")]  # fmt: skip
    for command in (["evaluate", "--date", str(DAY)], ["monitor", "--date", str(DAY)],
                    ["backfill", "--start", str(DAY), "--end", str(DAY)]):  # fmt: skip
        _source_refused([*command, *common], f"source {typo} does not exist (setting `source`)")
    a_file = traces / f"dt={DAY}" / "a.jsonl"
    common[1] = str(a_file)
    _source_refused(["evaluate", "--date", str(DAY), *common], f"source {a_file} is not a folder (setting `source`)")
    assert not (tmp_path / "work").exists()


def test_an_s3_source_that_is_not_there_is_refused_and_an_empty_day_still_exits_3(s3: Any, tmp_path: Path) -> None:
    """A bucket that does not exist and a prefix that does not exist exit 2 under both partitionings; the source
    that is there, with no traces for the date (its only day is another), still exits 3."""
    line = {"trace_id": "t-1", "question": "q", "answer": "a", "contexts": [{"id": "d", "text": "t"}]}
    s3.fs.pipe(f"{s3.name}/traces/dt={DAY - dt.timedelta(days=3)}/a.jsonl", (json.dumps(line) + "\n").encode())
    output = ["--warehouse", f"duckdb:///{tmp_path}/w.duckdb", "--work-dir", str(tmp_path / "work")]
    for partitioning in ("dt", "event-time"):
        for typo in ("s3://t29-no-such-bucket/traces", f"{s3.url}/tarces", f"{s3.url}/traces/dt={DAY}"):
            args = ["evaluate", "--date", str(DAY), "--source", typo, "--partitioning", partitioning, *output]
            _source_refused(args, f"source {typo} does not exist (setting `source`)")
        empty_day = runner.invoke(
            app, ["evaluate", "--date", str(DAY), "--source", f"{s3.url}/traces", "--partitioning", partitioning,
                  *output],
        )  # fmt: skip
        assert empty_day.exit_code == 3, empty_day.output
        last_line = empty_day.stderr.splitlines()[-1]  # in this process the terminal also gets Prefect's logs
        assert last_line.startswith(f"error: no trace files for {'dt=' if partitioning == 'dt' else ''}{DAY}")


def test_a_worker_fails_a_deployment_run_with_a_mistyped_source_before_its_first_task(
    prefect_api: str, traces: Path, tmp_path: Path
) -> None:
    """The daily deployment as a process worker runs it, with a typo in its source: the flow run fails with the
    one-line configuration error and not a single task run, instead of completing as a day without traces."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate

    pool = f"t29-{uuid.uuid4().hex[:8]}"
    typo = tmp_path / "tarces"
    output = {"warehouse": f"duckdb:///{tmp_path}/w.duckdb", "work_dir": str(tmp_path / "work")}
    parameters = {"date": str(DAY), "source": {"url": str(typo)}, "output": output}
    with get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(name=pool, type="process"))
        deployment_id = client.create_deployment(
            flow_id=client.create_flow_from_name("monitor"), name=pool, entrypoint="ragpulse.flows.monitor:monitor",
            work_pool_name=pool, parameters=parameters, pull_steps=[],
        )  # fmt: skip
        run = client.create_flow_run_from_deployment(deployment_id)
    worker = [str(Path(sys.executable).parent / "prefect"), "worker", "start", "--pool", pool, "--run-once"]
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    finished = subprocess.run(worker, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(run.id).state
    assert state is not None and state.is_failed(), (state, finished.stderr[-2000:])
    assert f"source {typo} does not exist (setting `source`)" in str(state.message), state.message
    assert _task_runs(run.id) == 0


def test_the_source_check_reads_no_listing_of_the_source(s3: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Two requests to moto's server (a HEAD of the root as an object, a listing of at most one key), whatever the
    size of the source: 60 days of files here."""
    import logging

    from ragpulse.tasks.core.storage import check_source_root

    for day in range(60):
        s3.fs.pipe(f"{s3.name}/traces/dt={DAY - dt.timedelta(days=day)}/a.jsonl", b"{}\n")
    caplog.clear()  # the uploads
    with caplog.at_level(logging.INFO, logger="werkzeug"):
        check_source_root(f"{s3.url}/traces", {"endpoint_url": s3.endpoint.url})
    requests = [record.getMessage() for record in caplog.records if record.name == "werkzeug"]
    assert len(requests) == 2, requests
    assert "HEAD /" in requests[0] and "max-keys=1" in requests[1].lower(), requests
