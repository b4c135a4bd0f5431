"""The Iceberg lake beyond the warehouse contract: other engines reading it through Iceberg's metadata on real S3
(moto) with its catalog in the real PostgreSQL, publishers in separate processes, readers during republishes, URL
errors, and the one-command migration from the manifest layout (tests/fixtures/legacy_lake, written by the old code).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.tasks.core.exceptions import ConfigError, WarehouseError
from ragpulse.tasks.warehouse import open_warehouse
from ragpulse.tasks.warehouse._schema import TABLES
from ragpulse.tasks.warehouse.iceberg import IcebergLake
from tests.tasks.warehouse.test_warehouse_contract import publication

pytestmark = pytest.mark.slow  # PostgreSQL, moto and publishers in other processes

DAY = dt.date(2026, 11, 1)
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
ROOT = Path(__file__).resolve().parents[3]
LEGACY = ROOT / "tests" / "fixtures" / "legacy_lake" / "lake"


def _catalog(root: str) -> SqlCatalog:
    """The catalog as another engine opens it: Iceberg's own SQL catalog, nothing of ragpulse."""
    return SqlCatalog(
        "ragpulse",
        uri="postgresql+psycopg://postgres@127.0.0.1:5432/test",
        warehouse=root,
        **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"},
    )


def _planned_files(root: str, namespace: str, table: str) -> list[str]:
    return [task.file.file_path for task in _catalog(root).load_table((namespace, table)).scan().plan_files()]


def test_duckdb_and_pyarrow_read_the_tables_through_iceberg_metadata_on_s3(s3: Any, namespace: str) -> None:
    url = f"{s3.url}/lake?catalog={PG_URL}&namespace={namespace}"
    for i in range(3):
        open_warehouse(url).publish(publication(DAY + dt.timedelta(days=i), f"r{i}", n=3 + i, seed=i))
    open_warehouse(url).publish(publication(DAY, "r9", n=7, seed=9))  # replaces the first date
    files = _planned_files(f"{s3.url}/lake", namespace, "scores")
    con = duckdb.connect()
    con.register_filesystem(s3.fs)
    counts = con.execute(
        "SELECT partition_date, count(*), min(run_id), max(run_id) FROM read_parquet(?) GROUP BY ALL ORDER BY ALL",
        [files],
    ).fetchall()
    assert counts == [
        (DAY, 14, "r9", "r9"),
        (DAY + dt.timedelta(days=1), 8, "r1", "r1"),
        (DAY + dt.timedelta(days=2), 10, "r2", "r2"),
    ]
    runs = ds.dataset(_planned_files(f"{s3.url}/lake", namespace, "runs"), filesystem=s3.fs, format="parquet")
    assert sorted(runs.to_table()["run_id"].to_pylist()) == ["r0", "r1", "r2", "r9"]
    # The replaced files are still in the bucket, for time travel: globbing would read r0 and r9 together.
    stored = [p for p in s3.fs.find(f"{s3.name}/lake/{namespace}/scores/data") if p.endswith(".parquet")]
    assert len(stored) == len(files) + 1
    # And ragpulse's helper lists exactly the metadata's files.
    assert sorted(IcebergLake(url).data_files("scores")) == sorted(files)


def test_readers_of_a_table_never_see_half_a_date(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    open_warehouse(url).publish(publication(DAY, "r0", n=5))
    done = threading.Event()
    seen: list[tuple[str, int]] = []

    def read() -> None:
        reader = open_warehouse(url)
        while not done.is_set():
            table = reader.read("scores", start=DAY, end=DAY, columns=["run_id"])
            (run,) = set(table["run_id"].to_pylist())
            seen.append((run, table.num_rows))

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for i in range(1, 12):
            open_warehouse(url).publish(publication(DAY, f"r{i}", n=5 + i))
    finally:
        done.set()
        thread.join()
    assert len({run for run, _ in seen}) > 1
    assert all(rows == 2 * (5 + int(run[1:])) for run, rows in seen)


_PUBLISHER = """
import sys
sys.path.insert(0, sys.argv[1])
from tests.tasks.warehouse.test_warehouse_contract import publication
from ragpulse.tasks.warehouse import open_warehouse
import datetime as dt
day = dt.date.fromisoformat(sys.argv[3])
open_warehouse(sys.argv[2]).publish(publication(day, sys.argv[4], n=int(sys.argv[5]), seed=int(sys.argv[5])))
"""


def test_publishers_in_separate_processes_queue_per_date_and_land_across_dates(s3: Any, namespace: str) -> None:
    url = f"{s3.url}/lake?catalog={PG_URL}&namespace={namespace}"
    jobs = [(DAY, f"same{i}", 20 + i) for i in range(3)] + [
        (DAY + dt.timedelta(days=d), f"other{d}", 9) for d in (1, 2)
    ]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _PUBLISHER, str(ROOT), url, day.isoformat(), run, str(n)],
            env=os.environ.copy(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for day, run, n in jobs
    ]
    for process in processes:
        _, err = process.communicate(timeout=180)
        assert process.returncode == 0, err[-3000:]
    lake = open_warehouse(url)
    runs = lake.read("runs").to_pylist()
    assert sorted(r["run_id"] for r in runs) == sorted(run for _, run, _ in jobs)
    # One date, one winner in every table it replaces: the run that committed last.
    winner = max((r for r in runs if r["partition_date"] == DAY), key=lambda r: r["published_at"])["run_id"]
    n = dict((run, n) for _, run, n in jobs)[winner]
    for key in ("scores", "quarantine", "traces"):
        rows = lake.read(key, start=DAY, end=DAY).to_pylist()
        assert {r["run_id"] for r in rows} == {winner}, key
    scores = lake.read("scores").to_pylist()
    assert len(scores) == len({(r["partition_date"], r["metric"], r["trace_id"]) for r in scores}) == 2 * (n + 9 + 9)
    assert len(lake.read("validations").to_pylist()) == 5


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("s3://bucket/lake", "names no catalog"),
        ("s3://bucket/lake?catalog=postgresql://u@h/db&region=eu", r"unknown parameter\(s\) \['region'\]"),
        ("/tmp/lake?namespace=Bad-Name", "invalid namespace"),
        ("s3://bucket/lake?catalog=mysql://u@h/db", "use sqlite:///..., postgresql://... or a catalog name"),
        ("gs://bucket/lake?catalog=sqlite:////tmp/c.db", "unsupported warehouse URL scheme"),
        ("/tmp/lake?lock_timeout=-1", "must be a positive number of seconds"),
        ("/tmp/lake?retention_days=0", "retention_days='0' .* must be a positive number"),
    ],
)
def test_bad_lake_urls_are_configuration_errors(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_warehouse(url)


@pytest.mark.parametrize(
    ("kind", "message"),
    [("glue", "is of type GlueCatalog: .* needs a SQL catalog"), ("in-memory", "in-memory SQLite catalog cannot be")],
)
def test_a_catalog_that_cannot_hold_the_date_lock_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str, message: str
) -> None:
    monkeypatch.setenv("PYICEBERG_CATALOG__TEAM__TYPE", kind)
    monkeypatch.setenv("PYICEBERG_CATALOG__TEAM__WAREHOUSE", f"file://{tmp_path}/wh")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    lake = open_warehouse(f"{tmp_path}/lake?catalog=team")
    with pytest.raises(ConfigError, match=message):
        lake.publish(publication(DAY, "r1"))


def test_a_named_pyiceberg_sql_catalog_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYICEBERG_CATALOG__TEAM__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__TEAM__URI", f"sqlite:///{tmp_path}/team.db")
    open_warehouse(f"{tmp_path}/lake?catalog=team").publish(publication(DAY, "r1"))
    catalog = SqlCatalog("team", uri=f"sqlite:///{tmp_path}/team.db")
    assert catalog.load_table(("ragpulse", "runs")).scan().to_arrow()["run_id"].to_pylist() == ["r1"]
    assert not (tmp_path / "lake" / "catalog.db").exists()


def test_an_unmigrated_manifest_lake_is_refused_with_the_command(tmp_path: Path) -> None:
    shutil.copytree(LEGACY, tmp_path / "old")
    for action in (
        lambda lake: lake.read("scores"),
        lambda lake: lake.publish(publication(DAY, "r1")),
    ):
        with pytest.raises(WarehouseError, match="ragpulse migrate-lake --from"):
            action(open_warehouse(str(tmp_path / "old")))


def _manifest_rows(root: Path, key: str) -> list[dict[str, Any]]:
    """The rows of ``key`` that each date's newest manifest names, read with pyarrow alone; columns added since the
    fixture was written (``traces.conversation_id``, v10) are NULL."""
    rows: list[dict[str, Any]] = []
    for partition in sorted((root / "_ragpulse_schema" / "commits").iterdir()):
        newest = sorted(partition.iterdir())[-1]
        for path in json.loads(newest.read_text())["files"].get(key, []):
            rows += pq.read_table(root / path).to_pylist()
    return [{name: row.get(name) for name in TABLES[key].schema.names} for row in rows]


def _canonical(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in rows)


def test_migrate_lake_moves_every_live_row_once_and_can_run_again(s3: Any, namespace: str) -> None:
    s3.fs.put(str(LEGACY), f"{s3.name}/old", recursive=True)
    target = f"{s3.url}/old?catalog={PG_URL}&namespace={namespace}"
    runner = CliRunner()
    for attempt in range(2):
        result = runner.invoke(app, ["migrate-lake", "--from", f"{s3.url}/old", "--to", target, "--json"])
        assert result.exit_code == 0, (attempt, result.output)
        assert json.loads(result.stdout)["dates"] == ["2026-11-01", "2026-11-02"]
        lake = open_warehouse(target)
        for key in TABLES:
            assert _canonical(lake.read(key).to_pylist()) == _canonical(_manifest_rows(LEGACY, key)), key
    scores = lake.read("scores", start=DAY, end=DAY).to_pylist()
    assert sorted({(r["metric"], r["run_id"]) for r in scores}) == [("m1", "r3"), ("m2", "r2")]  # no orphan
    # The migrated lake takes publishes as any other.
    lake.publish(publication(DAY, "r-next", n=3, metrics=("m2",)))
    scores = open_warehouse(target).read("scores", start=DAY, end=DAY).to_pylist()
    assert sorted({(r["metric"], r["run_id"]) for r in scores}) == [("m1", "r3"), ("m2", "r-next")]


def test_migrate_lake_says_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["migrate-lake", "--from", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "no lake in the manifest layout" in missing.stderr
    (tmp_path / "empty" / "_ragpulse_schema").mkdir(parents=True)
    (tmp_path / "empty" / "_ragpulse_schema" / "schema.json").write_text('{"version": 8}')
    (tmp_path / "empty" / "_ragpulse_schema" / "commits").mkdir()
    empty = runner.invoke(app, ["migrate-lake", "--from", str(tmp_path / "empty")])
    assert empty.exit_code == 3 and "no dates to migrate" in empty.stderr
    s3_without_catalog = runner.invoke(app, ["migrate-lake", "--from", str(tmp_path / "empty"), "--to", "s3://b/x"])
    assert s3_without_catalog.exit_code == 2 and "names no catalog" in s3_without_catalog.stderr


def test_storage_failures_keep_credentials_out_of_the_error(s3: Any, namespace: str) -> None:
    lake = open_warehouse(f"s3://no-such-bucket-here/lake?catalog={PG_URL}&namespace={namespace}")
    with pytest.raises(WarehouseError, match="previous rows kept") as failed:
        lake.publish(publication(DAY, "r1"))
    assert "testing-secret-do-not-log" not in str(failed.value) and "\n" not in str(failed.value)


def test_snapshots_past_the_retention_are_expired_and_the_files_only_they_named_deleted(tmp_path: Path) -> None:
    url = f"{tmp_path}/lake?retention_days=7"
    for i in range(4):
        open_warehouse(url).publish(publication(DAY, f"r{i}", n=5 + i, seed=i))
    data = tmp_path / "lake" / "ragpulse" / "scores" / "data" / f"partition_date={DAY}"
    assert len(list(data.glob("*.parquet"))) == 4  # the replaced ones stay, for time travel
    crashed = data / "crashed-publisher.parquet"
    shutil.copy(next(data.glob("*.parquet")), crashed)
    lake = IcebergLake(url)
    lake.expire_snapshots()  # nothing is older than seven days yet
    assert len(list(data.glob("*.parquet"))) == 5
    lake.expire_snapshots(now=dt.datetime.now(dt.UTC) + dt.timedelta(days=8))
    live = {Path(p.removeprefix("file://")) for p in lake.data_files("scores")}
    assert set(data.glob("*.parquet")) == live and len(live) == 1  # the old ones and the crashed one are gone
    scores = lake.read("scores")
    assert set(scores["run_id"].to_pylist()) == {"r3"} and scores.num_rows == 2 * 8
    assert len(lake.table("scores").snapshots()) == 1
    runs = lake.read("runs")["run_id"].to_pylist()
    assert sorted(runs) == ["r0", "r1", "r2", "r3"]  # appended rows live in the current snapshot
    metadata = tmp_path / "lake" / "ragpulse" / "scores" / "metadata"
    named = {lake.table("scores").current_snapshot().manifest_list.removeprefix("file://")}
    assert {str(p) for p in metadata.glob("snap-*.avro")} == named


def test_a_state_replaced_within_the_last_hour_is_kept_however_old(tmp_path: Path) -> None:
    """A publish that fails after its first commit puts the state that commit replaced back: that state, and the
    files only it names, must survive an expiry running meanwhile, even when it was made before the retention."""
    url = f"{tmp_path}/lake?retention_days=0.000001"  # 0.09 s
    open_warehouse(url).publish(publication(DAY, "r0", n=5))
    time.sleep(0.2)
    open_warehouse(url).publish(publication(DAY, "r1", n=6))  # replaces r0's state now; r0's snapshot is "old"
    data = tmp_path / "lake" / "ragpulse" / "scores" / "data"
    lake = IcebergLake(url)
    lake.expire_snapshots()
    assert len(list(data.rglob("*.parquet"))) == 2
    lake.expire_snapshots(now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=2))
    assert len(list(data.rglob("*.parquet"))) == 1


def test_a_publish_waits_for_another_publisher_of_its_date_then_gives_up_with_the_lock_named(
    tmp_path: Path, namespace: str, s3: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The date's lock held by another session (PostgreSQL catalog, whose wait is logged naming it) or process (a
    SQLite catalog's flock): the publish waits lock_timeout, then fails as locked, with the previous rows kept."""
    import psycopg

    from ragpulse.tasks.core.exceptions import WarehouseLockedError
    from ragpulse.tasks.warehouse._locks import advisory_lock_id

    postgres = IcebergLake(f"{s3.url}/lake?catalog={PG_URL}&namespace={namespace}&lock_timeout=1")
    postgres.publish(publication(DAY, "r1"))
    dsn = "host=127.0.0.1 port=5432 dbname=test user=postgres application_name=lake-holder"
    with psycopg.connect(dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (advisory_lock_id(f"{namespace}.ragpulse_schema/dt={DAY}"),))
        with caplog.at_level(logging.WARNING), pytest.raises(WarehouseLockedError, match="gave up after waiting 1 s"):
            postgres.publish(publication(DAY, "r2"))
        waits = [r.getMessage() for r in caplog.records if "waiting for its lock" in r.getMessage()]
        assert len(waits) == 1 and f"pid {holder.info.backend_pid} (application_name 'lake-holder'" in waits[0]
        assert waits[0].endswith("waited 0 of 1 s")
    assert set(postgres.read("runs")["run_id"].to_pylist()) == {"r1"}

    local = IcebergLake(f"{tmp_path}/lake?lock_timeout=1")
    local.publish(publication(DAY, "r1"))
    lock = tmp_path / "lake" / "catalog.db.locks" / f"ragpulse.ragpulse_schema_dt={DAY}.lock"
    child = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a+b'); "
         "fcntl.flock(f.fileno(), fcntl.LOCK_EX); print('held', flush=True); time.sleep(30)", str(lock)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        with pytest.raises(WarehouseLockedError, match="gave up after waiting 1 s"):
            local.publish(publication(DAY, "r2"))
    finally:
        child.kill()
        child.wait()
    assert set(local.read("runs")["run_id"].to_pylist()) == {"r1"}
