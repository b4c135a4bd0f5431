"""Issue 16, storage faults in a real run: the S3 connection dies while staging reads a trace file.

moto's S3 server behind ``tests/doubles/tcp_proxy.py``, a real Prefect test server, DuckDB out. The outcome is
checked in SQL against a clean run of the same traces from local files: rows expected, present, duplicated, lost.
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, SourceConfig
from ragpulse.tasks.demo.generate import generate_demo_traces
from tests.doubles.tcp_proxy import TcpProxy

DAY = dt.date(2026, 3, 2)
TRACES = 40


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("traces")
    generate_demo_traces(root, start=DAY, days=1, traces_per_day=TRACES, seed=5, malformed_per_day=2)
    return root


def _run(source: str, warehouse: Path, work_dir: Path, storage_options: dict[str, Any] | None = None) -> str:
    summary = evaluate_partition(
        date=DAY,
        source=SourceConfig(url=source, storage_options=storage_options or {}),
        output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(work_dir)),
    )
    return summary.run_id


def _rows(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_a_connection_cut_mid_trace_file_is_retried_and_the_day_published_whole(
    traces: Path, tmp_path: Path, s3: Any, tcp_proxy: type[TcpProxy]
) -> None:
    s3.fs.put(str(traces) + "/", f"{s3.name}/logs/", recursive=True)
    reference = tmp_path / "reference.duckdb"
    _run(str(traces), reference, tmp_path / "work-reference")
    expected = _rows(reference, "SELECT trace_id, metric, value, status FROM scores ORDER BY ALL")
    assert expected

    proxy = tcp_proxy("127.0.0.1", int(s3.endpoint.url.rsplit(":", 1)[1]))
    # Mid-body of the first trace file's GET, and S3 stays unreachable for ~3 s; the read is retried (by s3fs,
    # or by the stage task's retries on its StorageError) until the endpoint is back.
    fired = proxy.after_bytes(2000, "down", "down", armed_by=f"GET /{s3.name}/logs/dt%3D{DAY}/".encode())

    def heal_later() -> None:
        if fired.wait(60):
            threading.Event().wait(3)
            proxy.heal()

    healer = threading.Thread(target=heal_later, daemon=True)
    healer.start()
    faulted = tmp_path / "faulted.duckdb"
    options = {"endpoint_url": f"http://127.0.0.1:{proxy.port}", "config_kwargs": {"retries": {"max_attempts": 1}}}
    run_id = _run(f"{s3.url}/logs", faulted, tmp_path / "work-faulted", options)
    healer.join(10)
    assert fired.is_set()
    assert proxy.refused >= 1  # the reader retried against the dead endpoint, then got through

    present = _rows(faulted, "SELECT trace_id, metric, value, status FROM scores ORDER BY ALL")
    [(n, distinct)] = _rows(faulted, "SELECT count(*), count(DISTINCT (trace_id, metric)) FROM scores")
    assert (n, distinct) == (len(expected), len(expected))  # none duplicated
    assert present == expected  # none lost, none changed
    assert _rows(faulted, "SELECT count(*) FROM quarantine") == _rows(reference, "SELECT count(*) FROM quarantine")
    assert _rows(faulted, "SELECT run_id FROM runs") == [(run_id,)]
