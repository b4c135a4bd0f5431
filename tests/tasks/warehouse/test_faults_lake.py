"""Faults of the Iceberg lake, injected for real through ``tests/doubles/tcp_proxy.py``: in front of moto's S3 (a data
file PUT cut mid-body) and in front of the PostgreSQL that holds the catalog (a commit that never arrives, a commit
whose reply is lost). Outcomes counted from the rows an independent reader (pyiceberg, through the catalog) reads.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from ragpulse.tasks.core.exceptions import WarehouseError
from ragpulse.tasks.demo.generate import generate_demo_traces
from ragpulse.tasks.warehouse import Publication
from ragpulse.tasks.warehouse.iceberg import IcebergLake
from tests.doubles.publications import scores_publication
from tests.doubles.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow  # PostgreSQL, moto, proxies and other processes

DAY = dt.date(2026, 11, 1)
NOW = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
OLD, NEW = 5, 7
ROOT = Path(__file__).resolve().parents[3]
LEGACY = ROOT / "tests" / "fixtures" / "legacy_lake" / "lake"
# botocore's retries off, so a fault is not simply retried away in the test (s3fs' own few quick ones stay).
NO_RETRIES: dict[str, Any] = {"config_kwargs": {"retries": {"max_attempts": 1}}}
TABLES = ("scores", "quarantine", "traces", "runs", "validations")


def publication(run_id: str, n: int) -> Publication:
    return scores_publication(DAY, run_id, n, now=NOW)


def _url(s3: Any, namespace: str, port: int = 5432) -> str:
    return f"{s3.url}/lake?catalog=postgresql://postgres@127.0.0.1:{port}/test&namespace={namespace}"


def _rows(s3: Any, namespace: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's (run, trace, metric-or-suite) keys, read by pyiceberg through the catalog, not by ragpulse."""
    catalog = SqlCatalog(
        "ragpulse",
        uri="postgresql+psycopg://postgres@127.0.0.1:5432/test",
        warehouse=f"{s3.url}/lake",
        **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"},
    )
    found = {}
    for key in TABLES:
        rows = catalog.load_table((namespace, key)).scan().to_arrow().to_pylist()
        found[key] = sorted((r["run_id"], r.get("trace_id"), r.get("metric") or r.get("suite")) for r in rows)
    return found


def _state(s3: Any, namespace: str) -> tuple[int, int, list[str], list[str]]:
    """Score rows of the date, distinct (trace, metric) keys, the runs they come from, and the runs rows."""
    rows = _rows(s3, namespace)
    scores = rows["scores"]
    return (
        len(scores),
        len({(t, m) for _, t, m in scores}),
        sorted({r for r, _, _ in scores}),
        [r for r, _, _ in rows["runs"]],
    )


def _uncommitted(s3: Any, namespace: str) -> list[str]:
    """Data files of the run that failed: a failed publish deletes what no commit names."""
    s3.fs.invalidate_cache()
    return [p for p in s3.fs.find(f"{s3.name}/lake/{namespace}") if "/data/" in p and p.endswith(".parquet")]


@pytest.fixture
def pg_proxy(tcp_proxy: type[TcpProxy]) -> TcpProxy:
    return tcp_proxy("127.0.0.1", 5432)


@pytest.fixture
def s3_proxy(tcp_proxy: type[TcpProxy], s3: Any) -> TcpProxy:
    return tcp_proxy("127.0.0.1", int(s3.endpoint.url.rsplit(":", 1)[1]))


def test_a_reader_reads_what_another_process_republished(s3: Any, namespace: str) -> None:
    reader = IcebergLake(_url(s3, namespace))
    reader.publish(publication("r-old", OLD))
    assert reader.read("scores", start=DAY, end=DAY).num_rows == OLD
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from tests.tasks.warehouse.test_faults_lake import publication;"
        "from ragpulse.tasks.warehouse.iceberg import IcebergLake;"
        f"IcebergLake(sys.argv[2]).publish(publication('r-new', {NEW}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(ROOT), _url(s3, namespace)],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # The same reader, whose tables were loaded before: the new rows only, whole.
    scores = reader.read("scores", start=DAY, end=DAY)
    assert scores.num_rows == NEW and set(scores["run_id"].to_pylist()) == {"r-new"}


def test_a_cut_during_a_data_file_put_keeps_the_previous_rows(s3: Any, namespace: str, s3_proxy: TcpProxy) -> None:
    IcebergLake(_url(s3, namespace)).publish(publication("r-old", OLD))
    before = _rows(s3, namespace)
    files = _uncommitted(s3, namespace)
    storage = {"endpoint_url": f"http://127.0.0.1:{s3_proxy.port}", "skip_instance_cache": True, **NO_RETRIES}
    lake = IcebergLake(_url(s3, namespace), storage_options=storage)
    # Mid-body of the first data file's PUT, and the store stays unreachable for the client's retries.
    fired = s3_proxy.after_bytes(1500, "up", "down", armed_by=f"PUT /{s3.name}/lake/{namespace}/scores/data".encode())
    with pytest.raises(WarehouseError, match="failed, previous rows kept"):
        lake.publish(publication("r-new", NEW))
    assert fired.is_set()
    assert _rows(s3, namespace) == before
    assert _uncommitted(s3, namespace) == files
    s3_proxy.heal()
    lake.publish(publication("r-new", NEW))
    assert _state(s3, namespace) == (NEW, NEW, ["r-new"], ["r-new", "r-old"])


def test_a_cut_upload_says_one_line_on_the_command_line_and_no_asyncio_traceback(
    s3: Any, namespace: str, s3_proxy: TcpProxy
) -> None:
    """``ragpulse migrate-lake`` into a lake whose store goes away mid-PUT of the first data file: the command's
    stderr is its one ``error:`` line, without the tracebacks of aiohttp's body writers that asyncio printed."""
    target = f"{s3.url}/lake?catalog=postgresql://postgres@127.0.0.1:5432/test&namespace={namespace}"
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{s3_proxy.port}",
        # botocore's retries off; s3fs' own quick ones still each open a connection the dead store drops.
        "AWS_MAX_ATTEMPTS": "1",
    }
    fired = s3_proxy.after_bytes(1500, "up", "down", armed_by=f"PUT /{s3.name}/lake/{namespace}/scores/data".encode())
    command = [sys.executable, "-m", "ragpulse.cli", "migrate-lake", "--from", str(LEGACY), "--to", target]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert fired.is_set() and s3_proxy.refused >= 2
    assert done.returncode == 1
    # Besides the error, at most the warning that the file no commit names could not be deleted either.
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "dt=2026-11-01" in errors[0] and "failed, previous rows kept" in errors[0]
    assert len(done.stderr.splitlines()) <= 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Task exception was never retrieved" not in done.stderr
    assert _uncommitted(s3, namespace) == []


def test_an_evaluate_whose_lake_upload_is_cut_says_one_line_and_keeps_the_previous_rows(
    s3: Any, namespace: str, s3_proxy: TcpProxy, prefect_api: str, tmp_path: Path
) -> None:
    """The same cut as the user meets it: ``ragpulse evaluate`` of a local day into a lake on S3 whose store goes
    away mid-PUT of the first scores file. stderr holds the run's one ``error:`` line and no asyncio traceback; the
    lake still holds the rows of the run before (counted by pyiceberg), and a re-run once the store is back
    publishes the day once."""
    generate_demo_traces(tmp_path / "traces", start=DAY, days=1, traces_per_day=30, malformed_per_day=0)
    target = f"{s3.url}/lake?catalog=postgresql://postgres@127.0.0.1:5432/test&namespace={namespace}"
    args = ["evaluate", "--date", str(DAY), "--source", str(tmp_path / "traces"), "--warehouse", target,
            "--work-dir", str(tmp_path / "work"), "--metrics", "answer_f1"]  # fmt: skip
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "AWS_MAX_ATTEMPTS": "1"}

    def evaluate(endpoint: str, *extra: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "ragpulse.cli", *args, *extra]
        return subprocess.run(command, env={**env, "AWS_ENDPOINT_URL_S3": endpoint}, cwd=ROOT, capture_output=True,
                              text=True, timeout=300, check=False)  # fmt: skip

    store = os.environ["AWS_ENDPOINT_URL_S3"]  # moto, as the s3 fixture set it
    first = evaluate(store)
    assert first.returncode == 0, first.stderr[-3000:]
    before = _rows(s3, namespace)
    fired = s3_proxy.after_bytes(1500, "up", "down", armed_by=f"PUT /{s3.name}/lake/{namespace}/scores/data".encode())
    cut = evaluate(f"http://127.0.0.1:{s3_proxy.port}", "--republish")
    assert fired.is_set() and cut.returncode == 1, cut.stderr[-3000:]
    assert "Traceback" not in cut.stderr and "Task exception was never retrieved" not in cut.stderr, cut.stderr
    errors = [line for line in cut.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "previous rows kept" in errors[0], cut.stderr[-3000:]
    assert _rows(s3, namespace) == before
    s3_proxy.heal()
    again = evaluate(store, "--republish")
    assert again.returncode == 0, again.stderr[-3000:]
    scores = _rows(s3, namespace)["scores"]
    assert len(scores) == len(before["scores"]) == len(set(scores))


def test_a_catalog_commit_that_never_arrives_restores_the_tables_committed_before_it(
    s3: Any, namespace: str, pg_proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    IcebergLake(_url(s3, namespace)).publish(publication("r-old", OLD))
    before = _rows(s3, namespace)
    lake = IcebergLake(_url(s3, namespace, pg_proxy.port))
    # scores commit; the runs commit's UPDATE of the catalog row is cut before PostgreSQL sees it.
    fired = pg_proxy.on_upstream(f"/{namespace}/runs/metadata/".encode(), forward=False)
    with caplog.at_level(logging.WARNING), pytest.raises(WarehouseError, match="failed, previous rows kept"):
        lake.publish(publication("r-new", NEW))
    assert fired.is_set()
    assert "scores restored to its files before the failed publish" in caplog.text
    assert _rows(s3, namespace) == before
    # r-new's runs file, which no commit names, is gone; its scores file stays in the scores table's history.
    assert len([p for p in _uncommitted(s3, namespace) if f"/{namespace}/runs/" in p]) == 1
    lake.publish(publication("r-new", NEW))
    assert _state(s3, namespace) == (NEW, NEW, ["r-new"], ["r-new", "r-old"])


def test_a_catalog_commit_whose_reply_is_lost_is_found_committed_once(
    s3: Any, namespace: str, pg_proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    IcebergLake(_url(s3, namespace)).publish(publication("r-old", OLD))
    lake = IcebergLake(_url(s3, namespace, pg_proxy.port))
    # The scores commit reaches PostgreSQL and commits; the reply to its COMMIT is lost. The publish goes on.
    fired = pg_proxy.on_reply(b"COMMIT", armed_by=f"/{namespace}/scores/metadata/".encode())
    with caplog.at_level(logging.WARNING):
        lake.publish(publication("r-new", NEW))
    assert fired.is_set()
    assert "the reply to the scores commit" in caplog.text and "it is committed" in caplog.text
    assert _state(s3, namespace) == (NEW, NEW, ["r-new"], ["r-new", "r-old"])
