"""DuckDB publishing: replace-not-duplicate, all-or-nothing, a clear message when the file is locked, migration of
files from the first release; and choosing a warehouse by URL. Semantics shared with the other backends are in
test_warehouse_contract.py."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from ragpulse.metrics import Status
from ragpulse.tasks.core.exceptions import ConfigError, WarehouseError, WarehouseLockedError
from ragpulse.tasks.core.types import PartitionScores, QuarantinedRecord, RunInfo
from ragpulse.tasks.warehouse import Publication, TableNames, open_warehouse
from ragpulse.tasks.warehouse._locks import LOCK_PROGRESS_SECONDS
from ragpulse.tasks.warehouse._schema import SCHEMA_VERSION
from ragpulse.tasks.warehouse.duckdb import DuckDBWarehouse, duckdb_path
from ragpulse.tasks.warehouse.iceberg import IcebergLake
from ragpulse.tasks.warehouse.postgres import PostgresWarehouse
from ragpulse.tasks.warehouse.publication import build_publication

DAY = dt.date(2026, 11, 1)


def _scores(
    n: int, *, offset: float = 0.0, day: dt.date = DAY, metrics: tuple[str, ...] = ("m1", "m2")
) -> PartitionScores:
    values = {m: np.linspace(0, 1, n) * 0.5 + offset for m in metrics}
    status = {m: np.zeros(n, dtype=np.int8) for m in metrics}
    reasons = {m: np.full(n, None, dtype=object) for m in metrics}
    status["m1"][0], values["m1"][0], reasons["m1"][0] = Status.NOT_APPLICABLE, np.nan, "no_relevance_labels"
    return PartitionScores(
        date=day,
        trace_ids=np.array([f"t{i}" for i in range(n)], dtype=object),
        values=values,
        status=status,
        reasons=reasons,
        versions=dict.fromkeys(metrics, "1.0.0"),
        quarantined=[QuarantinedRecord("file:///x.jsonl", 3, None, "<record>", "invalid JSON", "{")],
        n_records=n + 1,
        n_files=1,
        n_batches=1,
    )


def _run(run_id: str) -> RunInfo:
    return RunInfo(run_id, "file:///traces", "cfg", {"batch_size": 10}, dt.datetime(2026, 11, 2, tzinfo=dt.UTC))


def _publication(scores: PartitionScores, run_id: str, metrics: list[str]) -> Publication:
    """The run's publication; these scores were not staged, so it has no trace excerpts."""
    return build_publication(scores, _run(run_id), metrics, n_batches_cached=0)


def _publish(warehouse: DuckDBWarehouse, scores: PartitionScores, run_id: str, metrics: list[str]) -> None:
    warehouse.publish(_publication(scores, run_id, metrics))


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_publish_writes_long_scores_with_null_for_not_ok(tmp_path: Path) -> None:
    warehouse = DuckDBWarehouse(f"duckdb:///{tmp_path}/w.duckdb")
    _publish(warehouse, _scores(5), "r1", ["m1", "m2"])
    rows = _rows(warehouse.path, "SELECT metric, trace_id, value, status, reason FROM scores ORDER BY ALL")
    assert len(rows) == 10
    assert ("m1", "t0", None, "not_applicable", "no_relevance_labels") in rows
    assert ("m2", "t0", 0.0, "ok", None) in rows
    assert _rows(warehouse.path, "SELECT count(*), max(line) FROM quarantine") == [(1, 3)]
    assert _rows(warehouse.path, "SELECT run_id, n_traces, n_scores, n_quarantined FROM runs") == [("r1", 5, 10, 1)]


def test_republishing_a_partition_replaces_it_and_keeps_others(tmp_path: Path) -> None:
    warehouse = DuckDBWarehouse(f"duckdb:///{tmp_path}/w.duckdb")
    other_day = DAY + dt.timedelta(days=1)
    _publish(warehouse, _scores(5), "r1", ["m1", "m2"])
    _publish(warehouse, _scores(3, day=other_day), "r-other", ["m1", "m2"])
    _publish(warehouse, _scores(4, offset=0.25), "r2", ["m1", "m2"])
    per_day = _rows(warehouse.path, "SELECT partition_date, count(*), min(run_id) FROM scores GROUP BY 1 ORDER BY 1")
    assert per_day == [(DAY, 8, "r2"), (other_day, 6, "r-other")]
    assert _rows(
        warehouse.path, "SELECT count(*) FROM (SELECT DISTINCT partition_date, trace_id, metric FROM scores)"
    ) == [(14,)]
    assert _rows(warehouse.path, "SELECT count(*) FROM quarantine WHERE partition_date = DATE '2026-11-01'") == [(1,)]
    assert _rows(warehouse.path, "SELECT count(*) FROM runs") == [(3,)]


def test_publishing_a_subset_of_metrics_leaves_the_other_metrics(tmp_path: Path) -> None:
    warehouse = DuckDBWarehouse(f"duckdb:///{tmp_path}/w.duckdb")
    _publish(warehouse, _scores(5), "r1", ["m1", "m2"])
    _publish(warehouse, _scores(5, offset=0.5, metrics=("m1",)), "r2", ["m1"])
    assert _rows(warehouse.path, "SELECT metric, min(run_id), count(*) FROM scores GROUP BY 1 ORDER BY 1") == [
        ("m1", "r2", 5),
        ("m2", "r1", 5),
    ]


def test_failed_publish_rolls_back_and_keeps_previous_rows(tmp_path: Path) -> None:
    warehouse = DuckDBWarehouse(f"duckdb:///{tmp_path}/w.duckdb")
    _publish(warehouse, _scores(5), "r1", ["m1", "m2"])
    before = _rows(warehouse.path, "SELECT * FROM scores ORDER BY ALL")
    publication = _publication(_scores(5, offset=0.1), "r2", ["m1", "m2"])
    # The last row breaks NOT NULL, so the failure comes after the DELETE and the first inserts ran.
    scores = publication.scores.to_table()
    trace_ids = scores.column("trace_id").to_pylist()
    trace_ids[-1] = None
    broken = dataclasses.replace(publication, scores=scores.set_column(1, "trace_id", pa.array(trace_ids, pa.string())))
    with pytest.raises(WarehouseError, match="previous rows kept"):
        warehouse.publish(broken)
    assert _rows(warehouse.path, "SELECT * FROM scores ORDER BY ALL") == before
    assert _rows(warehouse.path, "SELECT run_id FROM runs") == [("r1",)]


@pytest.mark.slow
def test_locked_file_gives_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    DuckDBWarehouse(f"duckdb:///{path}").publish(_publication(_scores(2), "r1", ["m1", "m2"]))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(path)!r})
            print("locked", flush=True)
            time.sleep(60)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        message = rf"held open by PID {holder.pid} \(.*python.*\) \(waited 1 s\).*lock_timeout="
        with pytest.raises(WarehouseLockedError, match=message):
            _publish(DuckDBWarehouse(f"duckdb:///{path}?lock_timeout=1"), _scores(2), "r2", ["m1", "m2"])
        assert time.monotonic() - started < 10
    finally:
        holder.kill()
        holder.wait()
    assert _rows(path, "SELECT DISTINCT run_id FROM scores") == [("r1",)]


@pytest.mark.slow
def test_a_publish_waits_for_a_reader_in_another_process_and_says_who_it_waits_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A notebook's read-only connection keeps a writer out as a writer would; the publish waits, logs the wait
    with the reader's PID, and goes ahead once the reader closes."""
    path = tmp_path / "w.duckdb"
    DuckDBWarehouse(f"duckdb:///{path}").publish(_publication(_scores(2), "r1", ["m1", "m2"]))
    hold = LOCK_PROGRESS_SECONDS + 1.5
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import duckdb, time
            con = duckdb.connect({str(path)!r}, read_only=True)
            print(con.execute("SELECT count(*) FROM daily_scores").fetchone()[0], flush=True)
            time.sleep({hold})
            con.close()
            print("closed", flush=True)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None and int(reader.stdout.readline()) > 0
        started = time.monotonic()
        with caplog.at_level(logging.INFO, logger="ragpulse.tasks.warehouse.duckdb"):
            _publish(
                DuckDBWarehouse(f"duckdb:///{path}"), _scores(2, day=DAY + dt.timedelta(days=1)), "r2", ["m1", "m2"]
            )
        waited = time.monotonic() - started
        assert reader.stdout.readline().strip() == "closed"
    finally:
        reader.kill()
        reader.wait()
    assert hold - 1 < waited < 30
    waits = [r.getMessage() for r in caplog.records if "held open by" in r.getMessage()]
    assert len(waits) == 2 and all(f"PID {reader.pid} (" in message for message in waits)
    assert any("opened after waiting" in r.getMessage() for r in caplog.records)
    assert _rows(path, "SELECT run_id, count(*) FROM scores GROUP BY 1 ORDER BY 1") == [("r1", 4), ("r2", 4)]


def test_readers_of_the_snapshot_never_hold_up_a_publish_and_see_whole_publishes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A reader that keeps the snapshot open all along: publishes do not wait for it, a new connection to the
    snapshot sees each publish once it is committed, and the reader's own connection keeps the version it
    opened, whole."""
    path, snapshot = tmp_path / "w.duckdb", tmp_path / "read" / "w-snapshot.duckdb"
    url = f"duckdb:///{path}?snapshot={snapshot}"
    _publish(DuckDBWarehouse(url), _scores(3), "r1", ["m1", "m2"])
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import duckdb, sys
            con = duckdb.connect({str(snapshot)!r}, read_only=True)
            for _ in sys.stdin:
                print(con.execute("SELECT count(*) FROM scores").fetchone()[0], flush=True)
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def held_count() -> int:
        assert reader.stdin is not None and reader.stdout is not None
        reader.stdin.write("count\n")
        reader.stdin.flush()
        return int(reader.stdout.readline())

    try:
        assert held_count() == 6
        with caplog.at_level(logging.INFO, logger="ragpulse.tasks.warehouse.duckdb"):
            for day in (1, 2):
                later = _scores(3, day=DAY + dt.timedelta(days=day))
                _publish(DuckDBWarehouse(url), later, f"r{day + 1}", ["m1", "m2"])
                assert _rows(snapshot, "SELECT count(*) FROM scores") == [(6 * (day + 1),)]
        assert held_count() == 6
    finally:
        reader.kill()
        reader.wait()
    # Never waited for the reader: it holds another file.
    assert not [r for r in caplog.records if "held open by" in r.getMessage()]
    assert sum("refreshed the reader snapshot" in r.getMessage() for r in caplog.records) == 2
    assert _rows(snapshot, "SELECT * FROM scores ORDER BY ALL") == _rows(path, "SELECT * FROM scores ORDER BY ALL")
    assert _rows(snapshot, "SELECT count(*) FROM daily_scores WHERE segment_key = 'all'") == [(6,)]
    assert sorted(p.name for p in snapshot.parent.iterdir()) == ["w-snapshot.duckdb"]


def test_a_snapshot_that_cannot_be_written_leaves_the_publish_in_place_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "not-a-dir").write_text("")
    url = f"duckdb:///{tmp_path}/w.duckdb?snapshot={tmp_path}/not-a-dir/s.duckdb"
    with caplog.at_level(logging.WARNING, logger="ragpulse.tasks.warehouse.duckdb"):
        _publish(DuckDBWarehouse(url), _scores(2), "r1", ["m1", "m2"])
    assert _rows(tmp_path / "w.duckdb", "SELECT DISTINCT run_id FROM scores") == [("r1",)]
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "was not refreshed" in warning and "not-a-dir/s.duckdb" in warning


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("duckdb:///rel/x.duckdb", Path("rel/x.duckdb")),
        ("duckdb:////abs/x.duckdb", Path("/abs/x.duckdb")),
        ("x.duckdb", Path("x.duckdb")),
        ("duckdb:///rel/x.duckdb?lock_timeout=5", Path("rel/x.duckdb")),
        ("duckdb:///rel/x.duckdb?snapshot=/tmp/s.duckdb&lock_timeout=5", Path("rel/x.duckdb")),
    ],
)
def test_duckdb_urls(url: str, expected: Path) -> None:
    assert duckdb_path(url) == expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("duckdb:///x.duckdb?lock_timeout=0", "lock_timeout='0' in warehouse URL"),
        ("duckdb:///x.duckdb?lock_timeout=soon", "must be a positive number of seconds"),
        ("duckdb:///x.duckdb?mode=ro", "unknown parameter 'mode'.*only lock_timeout=<seconds> and snapshot=<path>"),
        ("duckdb:///x.duckdb?snapshot=./x.duckdb", "is the warehouse file itself"),
        ("duckdb:///x.duckdb?snapshot=", "names no file"),
    ],
)
def test_bad_duckdb_url_parameters_are_config_errors(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        DuckDBWarehouse(url)


@pytest.mark.parametrize(
    ("url", "backend"),
    [
        ("duckdb:///rel/x.duckdb", DuckDBWarehouse),
        ("x.db", DuckDBWarehouse),
        ("postgresql://ragpulse@db.internal/analytics", PostgresWarehouse),
        ("postgresql+psycopg://ragpulse:pw@db.internal/analytics?schema=scores", PostgresWarehouse),
        ("s3://bucket/scores?catalog=postgresql://ragpulse:pw@db.internal/catalog", IcebergLake),
        ("file:///data/lake", IcebergLake),
        ("data/lake", IcebergLake),
    ],
)
def test_the_url_chooses_the_backend(url: str, backend: type) -> None:
    warehouse = open_warehouse(url)
    assert isinstance(warehouse, backend)
    assert "pw" not in warehouse.url


@pytest.mark.parametrize("url", ["", "duckdb:///", "mysql://host/db", "gs://bucket/scores"])
def test_unsupported_or_empty_warehouse_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError, match="warehouse URL"):
        open_warehouse(url)


# What the first release (schema version 1, before the validations table) created.
_RELEASE_1_DDL = """
CREATE TABLE ragpulse_schema (version INTEGER NOT NULL, applied_at TIMESTAMPTZ NOT NULL);
CREATE TABLE scores (
    partition_date DATE NOT NULL, trace_id VARCHAR NOT NULL, metric VARCHAR NOT NULL, value DOUBLE,
    status VARCHAR NOT NULL CHECK (status IN ('ok', 'not_applicable', 'failed')), reason VARCHAR,
    metric_version VARCHAR NOT NULL, run_id VARCHAR NOT NULL, computed_at TIMESTAMPTZ NOT NULL,
    CHECK ((status = 'ok') = (value IS NOT NULL))
);
CREATE TABLE quarantine (
    partition_date DATE NOT NULL, run_id VARCHAR NOT NULL, source_file VARCHAR NOT NULL, line BIGINT NOT NULL,
    trace_id VARCHAR, field VARCHAR NOT NULL, reason VARCHAR NOT NULL, raw VARCHAR, quarantined_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE runs (
    run_id VARCHAR NOT NULL, partition_date DATE NOT NULL, source VARCHAR NOT NULL, config_hash VARCHAR NOT NULL,
    config VARCHAR NOT NULL, metrics VARCHAR NOT NULL, n_files BIGINT NOT NULL, n_records BIGINT NOT NULL,
    n_traces BIGINT NOT NULL, n_quarantined BIGINT NOT NULL, n_batches BIGINT NOT NULL,
    n_batches_cached BIGINT NOT NULL, n_scores BIGINT NOT NULL, started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ NOT NULL
);
INSERT INTO ragpulse_schema VALUES (1, now());
"""


def test_a_file_from_the_first_release_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    old = _publication(_scores(5), "r1", ["m1", "m2"])
    with duckdb.connect(str(path)) as con:
        con.execute(_RELEASE_1_DDL)
        for table, rows in (("scores", old.scores.to_table()), ("quarantine", old.quarantine), ("runs", old.run)):
            release_1_columns = [d[0] for d in con.execute(f"SELECT * FROM {table} LIMIT 0").description]
            con.register("incoming", rows.select(release_1_columns))
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
            con.unregister("incoming")
    before = _rows(path, "SELECT * FROM scores ORDER BY ALL")
    _publish(DuckDBWarehouse(f"duckdb:///{path}"), _scores(3, day=DAY + dt.timedelta(days=1)), "r2", ["m1", "m2"])
    after = "SELECT * EXCLUDE (judge_model, prompt_version) FROM scores WHERE run_id = 'r1' ORDER BY ALL"
    assert _rows(path, after) == before
    assert _rows(path, "SELECT run_id, published_at IS NULL FROM runs ORDER BY 1") == [("r1", True), ("r2", False)]
    assert _rows(path, "SELECT version FROM ragpulse_schema ORDER BY 1") == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
    assert _rows(path, "SELECT DISTINCT judge_model, prompt_version FROM scores") == [(None, None)]
    assert _rows(path, "SELECT count(*) FROM validations") == [(0,)]


def test_a_traces_table_from_before_zstd_is_rebuilt_once_with_its_rows(tmp_path: Path) -> None:
    warehouse = DuckDBWarehouse(f"duckdb:///{tmp_path}/w.duckdb")
    _publish(warehouse, _scores(2), "r1", ["m1", "m2"])
    with duckdb.connect(str(warehouse.path)) as con:  # the traces table as schema v7 created it, holding a trace
        columns = [f"{name} {kind}" for name, kind, *_ in con.execute("DESCRIBE traces").fetchall()]
        con.execute(f"DROP TABLE traces; CREATE TABLE traces ({', '.join(columns)})")
        con.execute(
            "INSERT INTO traces (partition_date, trace_id, run_id, question, answer, contexts, metadata, source_file,"
            " source_line) VALUES (?, 't0', 'r1', '富士山の高さは?', '3776 m', '[]', '{}', 'file:///x.jsonl', 1)",
            [DAY],
        )
        old_columns = con.execute("SELECT * FROM traces LIMIT 0").description
    assert "ZSTD" not in _rows(warehouse.path, "SELECT sql FROM duckdb_tables() WHERE table_name = 'traces'")[0][0]

    _publish(warehouse, _scores(2, day=DAY + dt.timedelta(days=1)), "r2", ["m1", "m2"])
    _publish(warehouse, _scores(2, day=DAY + dt.timedelta(days=2)), "r3", ["m1", "m2"])  # no second rebuild

    (ddl,) = _rows(warehouse.path, "SELECT sql FROM duckdb_tables() WHERE table_name = 'traces'")[0]
    assert ddl.count("USING COMPRESSION ZSTD") == 4
    assert _rows(warehouse.path, "SELECT trace_id, question, answer, source_line FROM traces") == [
        ("t0", "富士山の高さは?", "3776 m", 1)
    ]
    with duckdb.connect(str(warehouse.path), read_only=True) as con:
        assert con.execute("SELECT * FROM traces LIMIT 0").description == old_columns
        assert sorted(name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()) == [
            "alerts",
            "calibrations",
            "conversation_scores",
            "drift",
            "estimates",
            "quarantine",
            "ragpulse_schema",
            "runs",
            "scores",
            "step_scores",
            "steps",
            "topics",
            "trace_topics",
            "traces",
            "validations",
        ]


def test_table_names_can_carry_a_prefix(tmp_path: Path) -> None:
    warehouse = DuckDBWarehouse(f"duckdb:///{tmp_path}/w.duckdb", tables=TableNames.with_prefix("rp_"))
    _publish(warehouse, _scores(2), "r1", ["m1", "m2"])
    tables = _rows(warehouse.path, "SELECT table_name, table_type FROM information_schema.tables ORDER BY 1")
    assert tables == [
        ("rp_alerts", "BASE TABLE"),
        ("rp_calibrations", "BASE TABLE"),
        ("rp_conversation_scores", "BASE TABLE"),
        ("rp_conversation_turns", "VIEW"),
        ("rp_conversations", "VIEW"),
        ("rp_daily_scores", "VIEW"),
        ("rp_drift", "BASE TABLE"),
        ("rp_drift_segments", "VIEW"),
        ("rp_estimates", "BASE TABLE"),
        ("rp_latest_alerts", "VIEW"),
        ("rp_quarantine", "BASE TABLE"),
        ("rp_ragpulse_schema", "BASE TABLE"),
        ("rp_runs", "BASE TABLE"),
        ("rp_scores", "BASE TABLE"),
        ("rp_step_scores", "BASE TABLE"),
        ("rp_steps", "BASE TABLE"),
        ("rp_topics", "BASE TABLE"),
        ("rp_trace_topics", "BASE TABLE"),
        ("rp_traces", "BASE TABLE"),
        ("rp_turn_steps", "VIEW"),
        ("rp_validations", "BASE TABLE"),
        ("rp_worst_traces", "VIEW"),
    ]
    # The views read the prefixed tables.
    assert _rows(warehouse.path, "SELECT DISTINCT metric FROM rp_daily_scores ORDER BY 1") == [("m1",), ("m2",)]
