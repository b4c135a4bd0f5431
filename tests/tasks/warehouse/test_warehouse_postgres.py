"""PostgreSQL specifics against the real server (127.0.0.1:5432, database ``test``, a schema per test): COPY
fidelity, advisory locks, the objects created, URLs, and credentials kept out of errors and logs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from typing import Any, LiteralString

import numpy as np
import psycopg
import pyarrow as pa
import pytest
from psycopg import sql

from ragpulse.tasks.core.exceptions import ConfigError, WarehouseError
from ragpulse.tasks.warehouse import (
    QUARANTINE_SCHEMA,
    RUNS_SCHEMA,
    SCORES_SCHEMA,
    TRACES_SCHEMA,
    Publication,
    open_warehouse,
)
from ragpulse.tasks.warehouse._schema import SCHEMA_VERSION
from ragpulse.tasks.warehouse.postgres import PostgresWarehouse

pytestmark = pytest.mark.slow  # PostgreSQL

PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
DAY = dt.date(2026, 11, 1)
PASSWORD = "pw-4b1d-must-not-leak"
NOW = dt.datetime(2026, 11, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
VIEWS_V8 = ("daily_scores", "drift_segments", "latest_alerts", "worst_traces")


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"ragpulse_test_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(PG_DSN, autocommit=True) as con:
        con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _query(statement: LiteralString, schema: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(PG_DSN, options=f"-csearch_path={schema}") as con:
        return con.execute(statement, params).fetchall()


def _publication(
    day: dt.date, run_id: str, *, trace_ids: list[str], values: list[float], raw: str = "{"
) -> Publication:
    n = len(trace_ids)
    scores = pa.table(
        {
            "partition_date": pa.array([day] * n, pa.date32()),
            "trace_id": trace_ids,
            "metric": ["m"] * n,
            "value": pa.array(values, pa.float64()),
            "status": ["ok"] * n,
            "reason": pa.array([None, "", "a,b", 'q"q', "line\nbreak", "\\N"] * (n // 6) + [None] * (n % 6)),
            "metric_version": ["1.0.0"] * n,
            "run_id": [run_id] * n,
            "computed_at": pa.array([NOW] * n, pa.timestamp("us", tz="UTC")),
            "judge_model": pa.array(["judge-small"] * n, pa.string()),
            "prompt_version": pa.array(["m/1"] * n, pa.string()),
        },
        schema=SCORES_SCHEMA,
    )
    quarantine = pa.Table.from_pylist(
        [
            {
                "partition_date": day,
                "run_id": run_id,
                "source_file": "f.jsonl",
                "line": 1,
                "trace_id": None,
                "field": "<record>",
                "reason": "invalid JSON",
                "raw": raw,
                "quarantined_at": NOW,
            }
        ],
        schema=QUARANTINE_SCHEMA,
    )
    run = pa.Table.from_pylist(
        [
            {
                "run_id": run_id,
                "partition_date": day,
                "source": "s3://logs",
                "config_hash": "h",
                "config": "{}",
                "metrics": "m",
                **dict.fromkeys(["n_files", "n_records", "n_traces", "n_quarantined", "n_batches"], 1),
                "n_batches_cached": 0,
                "n_scores": n,
                "started_at": NOW,
                "finished_at": NOW,
            }
        ],
        schema=RUNS_SCHEMA,
    )
    return Publication(day, ["m"], scores, quarantine, run)


def _simple(day: dt.date, run_id: str, n: int = 3) -> Publication:
    return _publication(day, run_id, trace_ids=[f"t{i}" for i in range(n)], values=[0.5] * n)


def test_copy_round_trips_doubles_and_awkward_text_exactly(schema: str) -> None:
    rng = np.random.default_rng(3)
    values = [*rng.random(5994).tolist(), 5e-324, 1e-300, 1.7976931348623157e308, -0.0, 1 / 3, 0.1]
    trace_ids = [f"t{i}" for i in range(5994)] + ["", "a,b", 'say "hi"', "two\nlines", "\\N", "ünï 🦆"]
    pub = _publication(DAY, "r1", trace_ids=trace_ids, values=values)
    PostgresWarehouse(f"{PG_URL}?schema={schema}").publish(pub)
    stored = _query("SELECT trace_id, value, reason, computed_at FROM scores", schema)
    expected = zip(trace_ids, values, pub.scores.to_table()["reason"].to_pylist(), [NOW] * len(values), strict=True)
    assert sorted(stored, key=repr) == sorted(expected, key=repr)


def test_nul_characters_become_replacement_characters_instead_of_failing(schema: str) -> None:
    warehouse = PostgresWarehouse(f"{PG_URL}?schema={schema}")
    warehouse.publish(_publication(DAY, "r1", trace_ids=["t\x000"], values=[1.0], raw='{"a": "\x00"}'))
    assert _query("SELECT trace_id FROM scores", schema) == [("t\ufffd0",)]
    assert _query("SELECT raw FROM quarantine", schema) == [('{"a": "\ufffd"}',)]


def _waiting_advisory_locks() -> int:
    with psycopg.connect(PG_DSN) as con:
        row = con.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()
        return int(row[0]) if row else 0


def test_a_publisher_waits_on_its_partitions_advisory_lock_and_other_partitions_do_not(schema: str) -> None:
    warehouse = PostgresWarehouse(f"{PG_URL}?schema={schema}")
    warehouse.publish(_simple(DAY, "r1"))
    errors: list[BaseException] = []

    def publish_r2() -> None:
        try:
            PostgresWarehouse(f"{PG_URL}?schema={schema}").publish(_simple(DAY, "r2"))
        except BaseException as exc:
            errors.append(exc)

    with psycopg.connect(PG_DSN) as holder:
        for key in warehouse.advisory_lock_ids(DAY):
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
        # Another day's publisher is not held up.
        warehouse.publish(_simple(DAY + dt.timedelta(days=1), "r-other"))
        waiter = threading.Thread(target=publish_r2)
        waiter.start()
        deadline = time.monotonic() + 20
        while _waiting_advisory_locks() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert waiter.is_alive() and _waiting_advisory_locks() >= 1
        assert _query("SELECT DISTINCT run_id FROM scores WHERE partition_date = %s", schema, (DAY,)) == [("r1",)]
        holder.rollback()
    waiter.join(20)
    assert not waiter.is_alive() and not errors
    assert _query("SELECT DISTINCT run_id FROM scores WHERE partition_date = %s", schema, (DAY,)) == [("r2",)]


def test_tables_are_created_with_constraints_indexes_and_a_version(schema: str) -> None:
    PostgresWarehouse(f"{PG_URL}?schema={schema}").publish(_simple(DAY, "r1"))
    indexes = _query("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s", schema, (schema,))
    assert {name: "USING brin" in definition for name, definition in indexes} == {
        "scores_partition_date_idx": True,
        "quarantine_partition_date_idx": False,
        "runs_partition_date_idx": False,
        "validations_partition_date_idx": False,
        "traces_partition_date_idx": True,
        "drift_partition_date_idx": False,
        "alerts_partition_date_idx": False,
        "calibrations_partition_date_idx": False,
        "estimates_partition_date_idx": False,
        "steps_partition_date_idx": True,
        "step_scores_partition_date_idx": True,
        "conversation_scores_partition_date_idx": False,
        "topics_partition_date_idx": False,
        "trace_topics_partition_date_idx": True,
    }
    checks = _query(
        "SELECT conname FROM pg_constraint WHERE contype = 'c' AND connamespace = %s::regnamespace", schema, (schema,)
    )
    assert sorted(checks) == [
        ("alerts_check0",),
        ("calibrations_check0",),
        ("conversation_scores_check0",),
        ("conversation_scores_check1",),
        ("drift_check0",),
        ("estimates_check0",),
        ("scores_check0",),
        ("scores_check1",),
        ("step_scores_check0",),
        ("step_scores_check1",),
        ("step_scores_check2",),
        ("trace_topics_check0",),
    ]
    assert [row[0] for row in _query("SELECT version FROM ragpulse_schema", schema)] == [SCHEMA_VERSION]


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "postgresql+psycopg"])
def test_url_schemes_and_the_schema_parameter(schema: str, scheme: str) -> None:
    url = f"{scheme}://postgres@127.0.0.1:5432/test?schema={schema}&connect_timeout=5"
    warehouse = open_warehouse(url)
    assert isinstance(warehouse, PostgresWarehouse) and warehouse.schema == schema
    warehouse.publish(_simple(DAY, "r1"))
    assert _query("SELECT count(*) FROM scores", schema) == [(3,)]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql+psycopg2://u@h/db", "unsupported PostgreSQL driver"),
        ("postgresql://u@h/db?schema=a;drop", "invalid schema"),
        ("postgresql://u@h/db?schema=Upper", "invalid schema"),
    ],
)
def test_bad_urls_are_config_errors(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_warehouse(url)


def _chain(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def test_the_password_never_appears_in_errors_urls_or_logs(schema: str, caplog: pytest.LogCaptureFixture) -> None:
    unreachable = open_warehouse(f"postgresql://postgres:{PASSWORD}@127.0.0.1:{_closed_port()}/test")
    with pytest.raises(WarehouseError, match="failed, previous rows kept") as failed:
        unreachable.publish(_simple(DAY, "r1"))
    assert "postgres:***@127.0.0.1" in str(failed.value)
    assert PASSWORD not in _chain(failed.value)
    for bad in (f"postgresql://postgres:{PASSWORD}@127.0.0.1:port/test", f"mysql://h/db?password={PASSWORD}"):
        with pytest.raises(ConfigError) as malformed:
            open_warehouse(bad)
        assert PASSWORD not in _chain(malformed.value)
    in_query = open_warehouse(f"postgresql://postgres@127.0.0.1:5432/test?sslmode=disable&password={PASSWORD}")
    assert in_query.url == "postgresql://postgres@127.0.0.1:5432/test?sslmode=disable&password=***"
    # The server trusts local connections, so the password is accepted and ignored: it must still not be logged.
    caplog.set_level(logging.DEBUG)
    warehouse = open_warehouse(f"postgresql://postgres:{PASSWORD}@127.0.0.1:5432/test?schema={schema}")
    warehouse.publish(_simple(DAY, "r1"))
    assert PASSWORD not in warehouse.url and PASSWORD not in repr(vars(warehouse))
    assert PASSWORD not in caplog.text


def _closed_port() -> int:
    """A loopback port nobody listens on: bound, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def prefect_api() -> Iterator[None]:
    """A throwaway Prefect API for Secret blocks (start-up takes 20-30 s here)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def test_a_secret_block_supplies_the_url_with_its_password(prefect_api: None, schema: str) -> None:
    from prefect.blocks.system import Secret

    block = f"warehouse-{uuid.uuid4().hex[:8]}"
    Secret(value=f"postgresql://postgres:{PASSWORD}@127.0.0.1:5432/test?schema={schema}").save(block)
    warehouse = open_warehouse(f"secret://{block}")
    warehouse.publish(_simple(DAY, "r1"))
    assert warehouse.url == f"postgresql://postgres:***@127.0.0.1:5432/test?schema={schema}"
    assert _query("SELECT count(*) FROM scores", schema) == [(3,)]
    with pytest.raises(ConfigError, match="no Prefect Secret block named 'missing'"):
        open_warehouse("secret://missing")


def _with_traces(pub: Publication, metadata: list[dict[str, Any]]) -> Publication:
    """``pub`` with one trace excerpt per score's trace, carrying ``metadata``."""
    ids = pub.scores.to_table()["trace_id"].to_pylist()
    rows = [
        {
            "partition_date": pub.partition_date,
            "trace_id": trace_id,
            "run_id": "r",
            "question": "富士山の高さは?",
            "metadata": json.dumps(meta, ensure_ascii=True, sort_keys=True),
            "source_file": "a.jsonl",
            "source_line": i + 1,
        }
        for i, (trace_id, meta) in enumerate(zip(dict.fromkeys(ids), metadata, strict=True))
    ]
    return dataclasses.replace(pub, traces=pa.Table.from_pylist(rows, schema=TRACES_SCHEMA))


def test_a_v7_schema_gets_jsonb_metadata_and_the_views_on_its_next_publish(schema: str) -> None:
    url = f"{PG_URL}?schema={schema}"
    first = _with_traces(_simple(DAY, "r1"), [{"app": "検索"}, {"app": "docs", "n": 1}, {}])
    PostgresWarehouse(url).publish(first)
    # What version 7 left: text metadata, no views (those of version 10 gone too).
    with psycopg.connect(PG_DSN, options=f"-csearch_path={schema}", autocommit=True) as con:
        for view in (*VIEWS_V8, "turn_steps", "conversations", "conversation_turns"):
            con.execute(sql.SQL("DROP VIEW {}").format(sql.Identifier(view)))
        con.execute("ALTER TABLE traces ALTER COLUMN metadata TYPE text")
        con.execute("UPDATE ragpulse_schema SET version = 7")
    PostgresWarehouse(url).publish(_with_traces(_simple(DAY + dt.timedelta(days=1), "r2"), [{"app": "docs"}] * 3))
    assert _query(
        "SELECT data_type FROM information_schema.columns WHERE table_name = 'traces' AND column_name = 'metadata' "
        "AND table_schema = current_schema()",
        schema,
    ) == [("jsonb",)]
    assert _query("SELECT max(version) FROM ragpulse_schema", schema) == [(SCHEMA_VERSION,)]
    # The rows written as text read as the same JSON values.
    assert _query("SELECT trace_id, metadata FROM traces WHERE run_id = 'r' AND partition_date = %s ORDER BY 1",
                  schema, (DAY,)) == [("t0", {"app": "検索"}), ("t1", {"app": "docs", "n": 1}), ("t2", {})]  # fmt: skip
    summary = _query(
        "SELECT partition_date, segment_value, n FROM daily_scores WHERE segment_key = 'metadata.app' ORDER BY 1, 2",
        schema,
    )
    assert summary == [(DAY, "docs", 1), (DAY, "検索", 1), (DAY + dt.timedelta(days=1), "docs", 3)]
    views = _query("SELECT table_name FROM information_schema.views WHERE table_schema = current_schema()", schema)
    assert sorted(name for (name,) in views) == sorted((*VIEWS_V8, "turn_steps", "conversations", "conversation_turns"))
