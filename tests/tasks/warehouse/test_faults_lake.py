"""Fault 5 of issue 16 and S3 faults of the Parquet lake: a reader after another process's republish, and PUTs
cut through ``tests/doubles/tcp_proxy.py`` in front of moto's S3 server. Outcomes counted from the rows read.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from ragpulse.tasks.core.errors import WarehouseError
from ragpulse.tasks.warehouse import Publication
from ragpulse.tasks.warehouse.parquet import ParquetLake
from tests.doubles.publications import scores_publication
from tests.doubles.tcp_proxy import TcpProxy

DAY = dt.date(2026, 11, 1)
NOW = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
OLD, NEW = 5, 7
ROOT = Path(__file__).resolve().parents[3]
# botocore's retries off, so a fault is not simply retried away in the test (s3fs' own few quick ones stay).
NO_RETRIES: dict[str, Any] = {"config_kwargs": {"retries": {"max_attempts": 1}}}
# botocore quotes "=" in keys.
MANIFESTS = f"_ragpulse_schema/commits/dt%3D{DAY}/"


def publication(run_id: str, n: int) -> Publication:
    return scores_publication(DAY, run_id, n, now=NOW)


def _state(lake: ParquetLake) -> tuple[int, int, list[str], list[str]]:
    """Score rows present and distinct (trace, metric) keys of the date, the runs they come from, the runs rows."""
    scores = lake.read("scores", start=DAY, end=DAY)
    keys = {(t, m) for t, m in zip(scores["trace_id"].to_pylist(), scores["metric"].to_pylist(), strict=True)}
    runs = lake.read("runs", start=DAY, end=DAY)["run_id"].to_pylist()
    return scores.num_rows, len(keys), sorted(set(pc.unique(scores["run_id"]).to_pylist())), sorted(runs)


def _through(proxy: TcpProxy, s3: Any, **options: Any) -> ParquetLake:
    storage = {"endpoint_url": f"http://127.0.0.1:{proxy.port}", "skip_instance_cache": True, **options}
    return ParquetLake(f"{s3.url}/lake", storage_options=storage)


@pytest.fixture
def s3_proxy(tcp_proxy: type[TcpProxy], s3: Any) -> TcpProxy:
    port = int(s3.endpoint.url.rsplit(":", 1)[1])
    return tcp_proxy("127.0.0.1", port)


def test_a_reader_reads_what_another_process_republished(s3: Any) -> None:
    reader = ParquetLake(f"{s3.url}/lake")
    reader.publish(publication("r-old", OLD))  # leaves this process's listings of the date cached
    assert _state(reader) == (OLD, OLD, ["r-old"], ["r-old"])
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from tests.tasks.warehouse.test_faults_lake import publication;"
        "from ragpulse.tasks.warehouse.parquet import ParquetLake;"
        f"ParquetLake(sys.argv[2]).publish(publication('r-new', {NEW}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(ROOT), f"{s3.url}/lake"],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # The same reader: the new rows only, whole, no FileNotFoundError from its stale listing of the date.
    assert _state(reader) == (NEW, NEW, ["r-new"], ["r-new", "r-old"])


def test_a_cut_during_a_data_file_put_keeps_the_previous_rows(s3: Any, s3_proxy: TcpProxy) -> None:
    direct = ParquetLake(f"{s3.url}/lake", storage_options={"skip_instance_cache": True})
    direct.publish(publication("r-old", OLD))
    lake = _through(s3_proxy, s3, **NO_RETRIES)
    # Mid-body of the first data file's PUT, and the store stays unreachable for the client's retries.
    fired = s3_proxy.after_bytes(1500, "up", "down", armed_by=f"PUT /{s3.name}/lake/scores/".encode())
    with pytest.raises(WarehouseError, match="failed, previous rows kept"):
        lake.publish(publication("r-new", NEW))
    assert fired.is_set()
    assert _state(direct) == (OLD, OLD, ["r-old"], ["r-old"])
    s3_proxy.heal()
    lake.publish(publication("r-new", NEW))
    assert _state(direct) == (NEW, NEW, ["r-new"], ["r-new", "r-old"])


def test_a_lost_reply_to_the_manifest_put_is_found_by_the_clients_retry(s3: Any, s3_proxy: TcpProxy) -> None:
    direct = ParquetLake(f"{s3.url}/lake", storage_options={"skip_instance_cache": True})
    direct.publish(publication("r-old", OLD))
    lake = _through(s3_proxy, s3)
    # The manifest PUT reaches the store, which commits it; its reply is lost. The client's retry of the PUT
    # finds the generation taken: by this very manifest, read back, so the publish is committed, once.
    fired = s3_proxy.on_reply(b" 200 OK", armed_by=f"PUT /{s3.name}/lake/{MANIFESTS}".encode())
    lake.publish(publication("r-new", NEW))
    assert fired.is_set()
    assert _state(direct) == (NEW, NEW, ["r-new"], ["r-new", "r-old"])


def test_a_lost_reply_to_the_manifest_put_is_resolved_by_reading_it_back(
    s3: Any, s3_proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    direct = ParquetLake(f"{s3.url}/lake", storage_options={"skip_instance_cache": True})
    direct.publish(publication("r-old", OLD))
    lake = _through(s3_proxy, s3, **NO_RETRIES)
    # The first manifest PUT lands but its reply is lost; every retry of it is cut before reaching the store.
    put = f"PUT /{s3.name}/lake/{MANIFESTS}".encode()
    fired = s3_proxy.on_reply(b" 200 OK", armed_by=put)
    s3_proxy.on_upstream(put, forward=False, times=None)
    with caplog.at_level(logging.WARNING):
        lake.publish(publication("r-new", NEW))
    assert fired.is_set()
    assert "the reply to the manifest write" in caplog.text and "it is committed" in caplog.text
    assert _state(direct) == (NEW, NEW, ["r-new"], ["r-new", "r-old"])


def test_a_manifest_put_that_never_arrived_is_fenced_and_fails_cleanly(s3: Any, s3_proxy: TcpProxy) -> None:
    direct = ParquetLake(f"{s3.url}/lake", storage_options={"skip_instance_cache": True})
    direct.publish(publication("r-old", OLD))
    lake = _through(s3_proxy, s3, **NO_RETRIES)
    # Every attempt of the manifest PUT is cut before the store sees it, until the publisher reads the
    # generation back; its fence (the previous state at that generation) then passes.
    generation = f"/{s3.name}/lake/{MANIFESTS}{2:020d}.json".encode()
    fired = s3_proxy.on_upstream(
        b"PUT " + generation, forward=False, times=None, until=(b"GET " + generation, b"HEAD " + generation)
    )
    with pytest.raises(WarehouseError, match="failed, previous rows kept: the manifest write failed") as caught:
        lake.publish(publication("r-new", NEW))
    assert fired.is_set() and "did not commit; re-run the date" in str(caught.value)
    assert _state(direct) == (OLD, OLD, ["r-old"], ["r-old"])
    # The fence holds generation 2, and the run's data files are gone: no manifest can ever name them.
    assert direct.read("scores", start=DAY, end=DAY).num_rows == OLD
    assert [p.rsplit("/", 1)[1] for p in direct._fs.ls(f"{s3.name}/lake/_ragpulse_schema/commits/dt={DAY}")] == [
        f"{1:020d}.json",
        f"{2:020d}.json",
    ]
    assert not [f for f in direct._fs.find(f"{s3.name}/lake") if "/r-new" in f]
    lake.publish(publication("r-new", NEW))
    assert _state(direct) == (NEW, NEW, ["r-new"], ["r-new", "r-old"])


def test_a_manifest_put_whose_outcome_cannot_be_read_back_says_so(s3: Any, s3_proxy: TcpProxy) -> None:
    direct = ParquetLake(f"{s3.url}/lake", storage_options={"skip_instance_cache": True})
    direct.publish(publication("r-old", OLD))
    lake = _through(s3_proxy, s3, **NO_RETRIES)
    # The manifest lands, then the store is unreachable for the retries and the read-back too.
    fired = s3_proxy.on_reply(b" 200 OK", "down", armed_by=f"PUT /{s3.name}/lake/{MANIFESTS}".encode())
    with pytest.raises(WarehouseError, match="cannot tell yet whether it committed") as caught:
        lake.publish(publication("r-new", NEW))
    assert fired.is_set() and "\n" not in str(caught.value)
    assert _state(direct) == (NEW, NEW, ["r-new"], ["r-new", "r-old"])  # it had committed
    s3_proxy.heal()
    lake.publish(publication("r-new2", NEW))
    assert _state(direct) == (NEW, NEW, ["r-new2"], ["r-new", "r-new2", "r-old"])
