"""Parquet lake specifics: Hive layout that DuckDB and pyarrow read from real S3 (moto) by globbing, readers
following the manifests never seeing half a partition, orphan sweeping, manifest pruning, and errors.
"""

from __future__ import annotations

import datetime as dt
import threading
import traceback
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from ragpulse.tasks.core.errors import ConfigError, WarehouseError
from ragpulse.tasks.warehouse import QUARANTINE_SCHEMA, RUNS_SCHEMA, SCORES_SCHEMA, Publication, open_warehouse
from ragpulse.tasks.warehouse.parquet import ParquetLake

DAY = dt.date(2026, 11, 1)
NOW = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)


def _publication(day: dt.date, run_id: str, n: int = 4) -> Publication:
    scores = pa.table(
        {
            "partition_date": pa.array([day] * 2 * n, pa.date32()),
            "trace_id": [f"t{i}" for i in range(n)] * 2,
            "metric": ["m1"] * n + ["m2"] * n,
            "value": pa.array([i / n for i in range(2 * n)], pa.float64()),
            "status": ["ok"] * 2 * n,
            "reason": pa.nulls(2 * n, pa.string()),
            "metric_version": ["1.0.0"] * 2 * n,
            "run_id": [run_id] * 2 * n,
            "computed_at": pa.array([NOW] * 2 * n, pa.timestamp("us", tz="UTC")),
            "judge_model": pa.nulls(2 * n, pa.string()),
            "prompt_version": pa.nulls(2 * n, pa.string()),
        },
        schema=SCORES_SCHEMA,
    )
    run = {name: 0 for name in RUNS_SCHEMA.names if name.startswith("n_")}
    run.update(run_id=run_id, partition_date=day, source="s3://logs", config_hash="h", config="{}", metrics="m1,m2")
    run.update(started_at=NOW, finished_at=NOW)
    return Publication(
        day,
        ["m1", "m2"],
        scores,
        QUARANTINE_SCHEMA.empty_table(),
        pa.Table.from_pylist([run], schema=RUNS_SCHEMA),
    )


def _lake(url: str, **options: Any) -> ParquetLake:
    return ParquetLake(url, **options)


def test_the_layout_is_hive_partitioned_and_globbing_readers_read_it_from_s3(s3: Any) -> None:
    lake = _lake(f"{s3.url}/lake")
    for i in range(3):
        lake.publish(_publication(DAY + dt.timedelta(days=i), f"r{i}", n=3 + i))
    s3.fs.invalidate_cache()
    assert sorted(s3.fs.ls(f"{s3.name}/lake")) == [
        f"{s3.name}/lake/{name}" for name in ("_ragpulse_schema", "runs", "scores")
    ]
    assert s3.fs.ls(f"{s3.name}/lake/scores", detail=False) == [
        f"{s3.name}/lake/scores/dt=2026-11-0{i}" for i in (1, 2, 3)
    ]
    con = duckdb.connect()
    con.register_filesystem(s3.fs)
    counts = con.execute(
        f"SELECT dt, count(*), count(DISTINCT run_id) FROM read_parquet('{s3.url}/lake/scores/*/*.parquet', "
        "hive_partitioning = true) WHERE dt = partition_date GROUP BY dt ORDER BY dt"
    ).fetchall()
    assert counts == [(DAY + dt.timedelta(days=i), 2 * (3 + i), 1) for i in range(3)]
    # pyarrow's datasets (like Spark and Athena) skip the _ragpulse_schema folder by its leading underscore.
    dataset = ds.dataset(f"{s3.name}/lake/runs", filesystem=s3.fs, format="parquet", partitioning="hive")
    assert sorted(dataset.to_table()["run_id"].to_pylist()) == ["r0", "r1", "r2"]
    assert sorted(lake.live_files("scores")) == sorted(
        f"s3://{p}" for p in s3.fs.find(f"{s3.name}/lake/scores") if p.endswith(".parquet")
    )


def test_readers_following_the_manifest_never_see_half_a_partition(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    _lake(url).publish(_publication(DAY, "r0", n=5))
    done = threading.Event()
    seen: list[tuple[str, int]] = []

    def read() -> None:
        reader = _lake(url)
        while not done.is_set():
            try:
                table = pq.read_table(reader.live_files("scores"))
            except FileNotFoundError:
                continue  # a commit landed and removed what we had listed: read the new state
            (run,) = set(table["run_id"].to_pylist())
            seen.append((run, table.num_rows))

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for i in range(1, 16):
            _lake(url).publish(_publication(DAY, f"r{i}", n=5 + i))
    finally:
        done.set()
        thread.join()
    assert seen and all(rows == 2 * (5 + int(run[1:])) for run, rows in seen)


def test_orphans_of_a_crashed_publisher_are_swept_only_after_the_grace_period(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    _lake(url).publish(_publication(DAY, "r1"))
    partition = tmp_path / "lake" / "scores" / "dt=2026-11-01"
    orphan, temporary = partition / "crashed-run.parquet", partition / ".0a1b.tmp"
    pq.write_table(_publication(DAY, "crashed").scores.to_table(), orphan)
    temporary.write_bytes(b"half a file")
    _lake(url).publish(_publication(DAY, "r2"))
    assert orphan.exists() and temporary.exists()  # young: could belong to a publish in flight
    lake = _lake(url, orphan_grace=dt.timedelta(0))
    lake.publish(_publication(DAY, "r3"))
    assert not orphan.exists() and not temporary.exists()
    assert set(pq.read_table(lake.live_files("scores"))["run_id"].to_pylist()) == {"r3"}


def test_manifests_are_pruned_after_the_grace_period(tmp_path: Path) -> None:
    commits = tmp_path / "lake" / "_ragpulse_schema" / "commits" / "dt=2026-11-01"
    for i in range(4):
        _lake(str(tmp_path / "lake")).publish(_publication(DAY, f"r{i}"))
    assert sorted(p.name for p in commits.iterdir()) == [f"{g:020d}.json" for g in (1, 2, 3, 4)]
    lake = _lake(str(tmp_path / "lake"), orphan_grace=dt.timedelta(0))
    lake.publish(_publication(DAY, "r4"))
    assert [p.name for p in commits.iterdir()] == [f"{5:020d}.json"]
    assert len(lake.live_files("runs")) == 5


def test_only_stores_with_an_atomic_create_are_accepted() -> None:
    with pytest.raises(ConfigError, match="s3:// or a local directory"):
        ParquetLake("memory://lake")


def test_storage_failures_keep_credentials_out_of_the_error(s3: Any) -> None:
    lake = _lake("s3://no-such-bucket-here/lake")
    with pytest.raises(WarehouseError, match="previous rows kept") as failed:
        lake.publish(_publication(DAY, "r1"))
    text = "".join(traceback.format_exception(failed.value))
    assert "testing-secret-do-not-log" not in text


@pytest.mark.parametrize("url", ["{tmp}/lake", "file://{tmp}/lake"])
def test_plain_directories_and_file_urls_are_local_lakes(tmp_path: Path, url: str) -> None:
    lake = open_warehouse(url.format(tmp=tmp_path))
    assert isinstance(lake, ParquetLake)
    lake.publish(_publication(DAY, "r1"))
    assert lake.live_files("scores") == [str(p) for p in (tmp_path / "lake" / "scores").glob("*/*.parquet")]
