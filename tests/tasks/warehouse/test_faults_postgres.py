"""Fault 4 of issue 16: PostgreSQL publishers behind a dead lock holder, and connections lost around COMMIT.

Real PostgreSQL (127.0.0.1:5432) reached through ``tests/doubles/tcp_proxy.py``, which breaks the connection
at an exact protocol point. Every outcome is checked in SQL: rows expected, present, duplicated and lost.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
import pytest
from psycopg import sql

from ragpulse.tasks.core.exceptions import ConfigError, WarehouseError, WarehouseLockedError
from ragpulse.tasks.warehouse import Publication
from ragpulse.tasks.warehouse._locks import LOCK_PROGRESS_SECONDS
from ragpulse.tasks.warehouse.postgres import PostgresWarehouse
from tests.doubles.publications import scores_publication
from tests.doubles.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow  # PostgreSQL, cut connections and lock waits

PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"
DAY = dt.date(2026, 11, 1)
NOW = dt.datetime(2026, 11, 2, 3, 4, 5, tzinfo=dt.UTC)
OLD, NEW = 5, 7  # score rows of the previous run and of the faulted one


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"t16_pg_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(PG_DSN, autocommit=True) as con:
        con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def proxy(tcp_proxy: type[TcpProxy]) -> TcpProxy:
    return tcp_proxy("127.0.0.1", 5432)


def _url(schema: str, port: int = 5432, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"schema": schema, **params}.items())
    return f"postgresql://postgres@127.0.0.1:{port}/test?{query}"


def _publication(run_id: str, n: int) -> Publication:
    return scores_publication(DAY, run_id, n, now=NOW)


def _query(schema: str, statement: LiteralString, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(PG_DSN, options=f"-csearch_path={schema}") as con:
        return con.execute(statement, params).fetchall()


@dataclass(frozen=True)
class DayState:
    """The date's score rows in SQL: present, distinct (trace, metric) keys, and the runs they come from."""

    present: int
    distinct: int
    score_runs: list[str]
    runs: list[str]

    @property
    def duplicated(self) -> int:
        return self.present - self.distinct

    def lost(self, expected: int) -> int:
        return expected - self.distinct


def _state(schema: str) -> DayState:
    [(present, distinct)] = _query(
        schema, "SELECT count(*), count(DISTINCT (trace_id, metric)) FROM scores WHERE partition_date = %s", (DAY,)
    )
    score_runs = _query(schema, "SELECT DISTINCT run_id FROM scores WHERE partition_date = %s ORDER BY 1", (DAY,))
    runs = _query(schema, "SELECT run_id FROM runs WHERE partition_date = %s ORDER BY 1", (DAY,))
    return DayState(present, distinct, [r for (r,) in score_runs], [r for (r,) in runs])


def _wait_for(condition: Any, timeout: float) -> float:
    """Seconds until ``condition()`` held; fails after ``timeout``."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, "condition not reached in time"
        time.sleep(0.05)
    return time.monotonic() - start


def _session(application_name: str) -> tuple[int, str] | None:
    rows = _query("public", "SELECT pid, state FROM pg_stat_activity WHERE application_name = %s", (application_name,))
    return (int(rows[0][0]), str(rows[0][1])) if rows else None


def test_a_dead_lock_holder_bounds_the_next_publisher_and_the_server_ends_it(schema: str, proxy: TcpProxy) -> None:
    PostgresWarehouse(_url(schema)).publish(_publication("r-old", OLD))
    app = f"dead-{uuid.uuid4().hex[:8]}"
    # The dead publisher: its network goes silent (no FIN) just after it sent its DELETE, holding the date's lock.
    dead = PostgresWarehouse(
        _url(schema, proxy.port, application_name=app, options="-c%20idle_in_transaction_session_timeout%3D4000")
    )
    fired = proxy.on_upstream(b"DELETE FROM", "blackhole")
    dead_errors: list[BaseException] = []

    def publish_dead() -> None:
        try:
            dead.publish(_publication("r-dead", NEW))
        except BaseException as exc:
            dead_errors.append(exc)

    thread = threading.Thread(target=publish_dead, daemon=True)
    thread.start()
    assert fired.wait(10)
    _wait_for(lambda: (s := _session(app)) is not None and s[1] == "idle in transaction", 5)
    session = _session(app)
    assert session is not None
    blackholed_at = time.monotonic()

    start = time.monotonic()
    with pytest.raises(WarehouseLockedError) as caught:
        PostgresWarehouse(_url(schema, lock_timeout="0.5")).publish(_publication("r-new", NEW))
    waited = time.monotonic() - start
    message = str(caught.value)
    assert "\n" not in message and "publishing dt=2026-11-01" in message and "0.5 s" in message
    assert f"pid {session[0]}" in message and repr(app) in message and "idle in transaction" in message
    assert "lock_timeout=<seconds>" in message
    assert waited < 2.5
    during = _state(schema)
    assert (during.present, during.duplicated, during.lost(OLD), during.score_runs) == (OLD, 0, 0, ["r-old"])

    # The server ends the session idle in its transaction; its DELETE is rolled back and the lock released.
    _wait_for(lambda: _session(app) is None, 10)
    released_after = time.monotonic() - blackholed_at
    assert released_after < 8
    PostgresWarehouse(_url(schema, lock_timeout="5")).publish(_publication("r-new", NEW))
    after = _state(schema)
    assert (after.present, after.duplicated, after.lost(NEW)) == (NEW, 0, 0)
    assert (after.score_runs, after.runs) == (["r-new"], ["r-new", "r-old"])

    proxy.cut()
    thread.join(10)
    assert not thread.is_alive()
    assert len(dead_errors) == 1 and "failed, previous rows kept" in str(dead_errors[0])


def test_a_publish_queued_behind_another_session_says_who_holds_the_lock_every_few_seconds(
    schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Another session holds the date's locks in an open transaction: the publish logs when it starts waiting and
    every LOCK_PROGRESS_SECONDS who holds them, how long it waited and the limit; gives up at lock_timeout with the
    one-line error; and, queued again, goes ahead as soon as the holder commits."""
    PostgresWarehouse(_url(schema)).publish(_publication("r-old", OLD))
    app = f"holder-{uuid.uuid4().hex[:8]}"
    limit = LOCK_PROGRESS_SECONDS + 1.5
    warehouse = PostgresWarehouse(_url(schema, lock_timeout=f"{limit:g}"))
    with psycopg.connect(PG_DSN, application_name=app) as holder:
        for key in warehouse.advisory_lock_ids(DAY):
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
        pid = holder.info.backend_pid
        started = time.monotonic()
        with caplog.at_level(logging.INFO), pytest.raises(WarehouseLockedError) as caught:
            warehouse.publish(_publication("r-new", NEW))
        gave_up_after = time.monotonic() - started
        waits = [r.getMessage() for r in caplog.records if "waiting for its lock" in r.getMessage()]
        assert len(waits) == 2, waits
        for waited, message in zip((0, LOCK_PROGRESS_SECONDS), waits, strict=True):
            assert message.startswith(f"publishing dt={DAY} on postgresql://")
            assert f"pid {pid} (application_name {app!r}, idle in transaction since " in message
            assert f"waited {waited:.0f} of {limit:g} s" in message
        assert limit <= gave_up_after < limit + 2
        message = str(caught.value)
        assert "\n" not in message and f"gave up after waiting {limit:g} s" in message and f"pid {pid}" in message
        during = _state(schema)
        assert (during.present, during.duplicated, during.lost(OLD), during.runs) == (OLD, 0, 0, ["r-old"])

        caplog.clear()
        release = threading.Timer(1.0, holder.commit)
        release.start()
        started = time.monotonic()
        with caplog.at_level(logging.INFO):
            warehouse.publish(_publication("r-new", NEW))
        assert time.monotonic() - started >= 1
        release.join()
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "waiting for its lock" in m and f"pid {pid}" in m]) == 1
    assert len([m for m in messages if "got its lock after waiting" in m]) == 1
    after = _state(schema)
    assert (after.present, after.duplicated, after.lost(NEW)) == (NEW, 0, 0)
    assert (after.score_runs, after.runs) == (["r-new"], ["r-new", "r-old"])


def test_a_connection_lost_after_commit_is_reported_as_published(
    schema: str, proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    PostgresWarehouse(_url(schema)).publish(_publication("r-old", OLD))
    # The COMMIT reaches the server; its reply never reaches the publisher.
    fired = proxy.on_upstream(b"COMMIT", after=b"DELETE FROM")
    with caplog.at_level(logging.WARNING):
        PostgresWarehouse(_url(schema, proxy.port)).publish(_publication("r-new", NEW))
    assert fired.is_set()
    assert (
        "connection to" in caplog.text
        and "lost after COMMIT" in caplog.text
        and "run r-new are published" in caplog.text
    )
    after = _state(schema)
    assert (after.present, after.duplicated, after.lost(NEW)) == (NEW, 0, 0)
    assert (after.score_runs, after.runs) == (["r-new"], ["r-new", "r-old"])


def test_a_lost_commit_still_running_on_the_server_is_waited_for(
    schema: str, proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """The COMMIT reaches the server and takes its time there (a deferred trigger sleeps 2 s in it) while the
    publisher, its reply cut, already checks on a new connection: it waits for the lost session to finish, and
    finds the run published rather than reporting the previous rows kept."""
    PostgresWarehouse(_url(schema)).publish(_publication("r-old", OLD))
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        function = sql.Identifier(schema, "slow_commit")
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$"
            ).format(function)
        )
        conn.execute(
            sql.SQL(
                "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON {} DEFERRABLE INITIALLY DEFERRED "
                "FOR EACH ROW EXECUTE FUNCTION {}()"
            ).format(sql.Identifier(schema, "runs"), function)
        )
    # The schema fixture drops the trigger and its function with the schema.
    fired = proxy.on_upstream(b"COMMIT", after=b"DELETE FROM")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        PostgresWarehouse(_url(schema, proxy.port)).publish(_publication("r-new", NEW))
    # Not the 30 s bound of that wait: the check sees the session finish its COMMIT.
    assert fired.is_set() and 2 <= time.monotonic() - started < 10
    assert "lost after COMMIT" in caplog.text and "run r-new are published" in caplog.text
    after = _state(schema)
    assert (after.present, after.duplicated, after.lost(NEW)) == (NEW, 0, 0)
    assert (after.score_runs, after.runs) == (["r-new"], ["r-new", "r-old"])


def test_a_lost_commit_followed_by_an_outage_is_checked_until_the_server_is_back(
    schema: str, proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """The COMMIT reaches the server, then the server is out of reach for 8 s (every connection refused): the check
    goes on with growing pauses, within lock_timeout, and finds the run published once the server is back."""
    PostgresWarehouse(_url(schema)).publish(_publication("r-old", OLD))
    fired = proxy.on_upstream(b"COMMIT", "down", after=b"DELETE FROM")
    outage = 8.0

    def back_later() -> None:
        if fired.wait(60):
            time.sleep(outage)
            proxy.heal()

    healer = threading.Thread(target=back_later, daemon=True)
    healer.start()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        PostgresWarehouse(_url(schema, proxy.port, lock_timeout="30")).publish(_publication("r-new", NEW))
    took = time.monotonic() - started
    healer.join(10)
    assert fired.is_set() and outage < took < outage + 8
    retries = [m for r in caplog.records if "checking whether run r-new committed failed" in (m := r.getMessage())]
    assert len(retries) == proxy.refused >= 4
    pauses = [float(m.split("checking again in ")[1].split(" s")[0]) for m in retries]
    assert pauses == sorted(pauses) and pauses[0] == 0.5 and max(pauses) <= 5
    assert "lost after COMMIT" in caplog.text and "run r-new are published" in caplog.text
    after = _state(schema)
    assert (after.present, after.duplicated, after.lost(NEW)) == (NEW, 0, 0)
    assert (after.score_runs, after.runs) == (["r-new"], ["r-new", "r-old"])


def test_a_commit_whose_outcome_cannot_be_checked_says_so_and_names_the_run(schema: str, proxy: TcpProxy) -> None:
    PostgresWarehouse(_url(schema)).publish(_publication("r-old", OLD))
    # The COMMIT reaches the server, then the server is unreachable for the check too.
    fired = proxy.on_upstream(b"COMMIT", "down", after=b"DELETE FROM")
    started = time.monotonic()
    with pytest.raises(WarehouseError) as caught:
        PostgresWarehouse(_url(schema, proxy.port, lock_timeout="3")).publish(_publication("r-new", NEW))
    # Checked at 0, 0.5, 1.5 and 3 s: until lock_timeout is spent.
    assert fired.is_set() and 3 <= proxy.refused <= 4 and 3 <= time.monotonic() - started < 5
    message = str(caught.value)
    assert "\n" not in message and "checking whether it committed failed too, for 3 s" in message
    assert "run_id r-new" in message
    after = _state(schema)  # it had committed
    assert (after.present, after.duplicated, after.lost(NEW), after.runs) == (NEW, 0, 0, ["r-new", "r-old"])


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        # The COMMIT never reaches the server: ambiguous to the publisher, resolved on a new connection.
        (b"COMMIT", "lost during COMMIT"),
        # The connection dies on the last insert before COMMIT.
        (b"INSERT INTO", "failed, previous rows kept"),
    ],
    ids=["commit-lost", "insert-cut"],
)
def test_a_connection_lost_before_commit_keeps_the_previous_rows(
    schema: str, proxy: TcpProxy, pattern: bytes, message: str
) -> None:
    PostgresWarehouse(_url(schema)).publish(_publication("r-old", OLD))
    fired = proxy.on_upstream(pattern, after=b"DELETE FROM", forward=False)
    with pytest.raises(WarehouseError) as caught:
        PostgresWarehouse(_url(schema, proxy.port)).publish(_publication("r-new", NEW))
    assert fired.is_set()
    assert "failed, previous rows kept" in str(caught.value) and message in str(caught.value)
    after = _state(schema)
    assert (after.present, after.duplicated, after.lost(OLD)) == (OLD, 0, 0)
    assert (after.score_runs, after.runs) == (["r-old"], ["r-old"])
    # The re-run publishes once.
    PostgresWarehouse(_url(schema, proxy.port)).publish(_publication("r-new", NEW))
    healed = _state(schema)
    assert (healed.present, healed.duplicated, healed.lost(NEW)) == (NEW, 0, 0)
    assert (healed.score_runs, healed.runs) == (["r-new"], ["r-new", "r-old"])


def test_a_cut_mid_copy_keeps_the_previous_rows_and_a_rerun_publishes_once(schema: str, proxy: TcpProxy) -> None:
    big = 20_000
    PostgresWarehouse(_url(schema)).publish(_publication("r-old", OLD))
    fired = proxy.after_bytes(64_000, "up", armed_by=b"COPY")
    with pytest.raises(WarehouseError, match="failed, previous rows kept"):
        PostgresWarehouse(_url(schema, proxy.port)).publish(_publication("r-new", big))
    assert fired.is_set()
    after = _state(schema)
    assert (after.present, after.duplicated, after.lost(OLD), after.runs) == (OLD, 0, 0, ["r-old"])
    PostgresWarehouse(_url(schema, proxy.port)).publish(_publication("r-new", big))
    healed = _state(schema)
    assert (healed.present, healed.duplicated, healed.lost(big)) == (big, 0, 0)
    assert (healed.score_runs, healed.runs) == (["r-new"], ["r-new", "r-old"])


def test_sessions_get_keepalives_and_an_idle_transaction_bound_unless_the_url_sets_them(schema: str) -> None:
    def session(url: str) -> tuple[dict[str, str], str]:
        warehouse = PostgresWarehouse(url)
        with warehouse._engine.connect() as conn:
            driver: psycopg.Connection[Any] = conn.connection.driver_connection  # type: ignore[assignment]
            idle = conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar_one()
            return driver.info.get_parameters(), str(idle)

    parameters, idle = session(_url(schema))
    assert {k: parameters.get(k) for k in ("keepalives", "keepalives_idle", "application_name", "connect_timeout")} == {
        "keepalives": "1",
        "keepalives_idle": "30",
        "application_name": "ragpulse",
        "connect_timeout": "30",
    }
    assert idle == "1min"
    parameters, idle = session(
        _url(schema, keepalives_idle="7", options="-c%20idle_in_transaction_session_timeout%3D5000")
    )
    assert parameters.get("keepalives_idle") == "7" and idle == "5s"


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf"])
def test_a_bad_lock_timeout_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match=f"lock_timeout={value!r}"):
        PostgresWarehouse(_url("s", lock_timeout=value))
