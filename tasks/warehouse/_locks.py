"""Publish locks, how every backend queues the publishers of one date: the ``lock_timeout`` warehouse URL parameter
(and other positive numbers in URLs), the key hash of PostgreSQL advisory locks and who holds them, the progress a
wait for a lock reports, and the lake's named locks beside its SQL catalog (``catalog_locks``)."""

from __future__ import annotations

import datetime as dt
import fcntl
import functools
import hashlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ragpulse.tasks.core.exceptions import ConfigError, WarehouseLockedError

if TYPE_CHECKING:  # SQLAlchemy is imported by whoever made the engine; a DuckDB run never needs it
    import sqlalchemy as sa

__all__ = [
    "LOCK_POLL_SECONDS",
    "LOCK_PROGRESS_SECONDS",
    "NamedLocks",
    "advisory_lock_holders",
    "advisory_lock_id",
    "catalog_locks",
    "lock_timeout",
    "positive_parameter",
    "reported_wait",
]

_log = logging.getLogger(__name__)
# How often a wait for a lock says who holds it (DuckDB's wait for its file, PostgreSQL's and the lake's locks).
LOCK_PROGRESS_SECONDS = 5.0
# How often a wait that polls (DuckDB's file, the lake's flock) tries again: the most it overshoots the release.
LOCK_POLL_SECONDS = 0.1
# PostgreSQL's lock_not_available SQLSTATE: a lock wait ran past the session's lock_timeout.
_LOCK_NOT_AVAILABLE = "55P03"


def lock_timeout(value: object, shown_url: str, default: float) -> float:
    """``value`` (the URL's ``lock_timeout``, None when absent) in seconds: a positive, finite number."""
    return positive_parameter(value, "lock_timeout", shown_url, default, unit=" of seconds")


def positive_parameter(value: object, name: str, shown_url: str, default: float, *, unit: str = "") -> float:
    """``value`` (the URL's parameter ``name``, None when absent): a positive, finite number."""
    if value is None:
        return default
    try:
        number = float(str(value))
    except ValueError:
        number = math.nan
    if not (number > 0 and math.isfinite(number)):
        raise ConfigError(f"{name}={value!r} in warehouse URL {shown_url!r} must be a positive number{unit}")
    return number


def advisory_lock_id(key: str) -> int:
    """The signed 64-bit ``pg_advisory_lock`` key of a lock named ``key``."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)


@contextmanager
def reported_wait(what: str, holders: Callable[[], str], timeout: float) -> Iterator[None]:
    """Around a wait for a lock that one blocking statement does on the server: a warning when it starts and every
    LOCK_PROGRESS_SECONDS until it ends, naming the holders (``holders()``, asked anew each time), how long ``what``
    has waited and ``timeout``, the limit; then how long it waited if it got the lock. The warnings come from a
    thread, since the statement blocks this one."""
    started = time.monotonic()
    done = threading.Event()

    def report() -> None:
        reports = 0
        while True:
            held_by = holders()
            if done.is_set():
                return
            waited = time.monotonic() - started
            _log.warning("%s: waiting for its lock, held by %s; waited %.0f of %g s", what, held_by, waited, timeout)
            reports += 1
            if done.wait(max(0.0, started + reports * LOCK_PROGRESS_SECONDS - time.monotonic())):
                return

    threading.Thread(target=report, name="ragpulse-lock-wait", daemon=True).start()
    try:
        yield
    finally:
        done.set()
    _log.info("%s: got its lock after waiting %.1f s", what, time.monotonic() - started)


def advisory_lock_holders(engine: sa.Engine, ids: list[int]) -> str:
    """The sessions holding any of the advisory locks ``ids``, described from a new connection (the waiter's is busy
    or aborted): pid, application, state and since when, client address."""
    import sqlalchemy as sa

    query = sa.text(
        "SELECT DISTINCT a.pid, a.application_name, a.state, a.state_change, a.client_addr "
        "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
        "AND ((l.classid::bigint << 32) | l.objid::bigint) = ANY(:ids) ORDER BY a.pid"
    )
    try:
        with engine.connect() as conn:
            rows = conn.execute(query, {"ids": ids}).all()
    except sa.exc.SQLAlchemyError:
        return "another session (looking it up failed)"
    if not rows:
        return "another session, which has released it since"
    return ", ".join(
        f"PostgreSQL session pid {pid} (application_name {app!r}, {state or 'unknown state'}"
        f"{f' since {since.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC' if since else ''}"
        f"{f', client {client}' if client else ''})"
        for pid, app, state, since, client in rows
    )


class NamedLocks(Protocol):
    """Exclusive locks by name, each held for a ``with`` block; ``what`` names the waiter in progress and errors."""

    def hold(self, key: str, what: str) -> AbstractContextManager[None]: ...


def catalog_locks(engine: sa.Engine, timeout: float, shown: str) -> NamedLocks:
    """The locks of a lake whose SQL catalog is ``engine``'s database: advisory locks in PostgreSQL, ``flock`` on
    files beside a SQLite file. Each waits up to ``timeout`` seconds; ``shown`` is the lake's URL without secrets."""
    if engine.url.get_backend_name() == "postgresql":
        return _AdvisoryLocks(engine, timeout, shown)
    database = engine.url.database
    if not database or database == ":memory:":
        raise ConfigError(f"lake URL {shown!r}: an in-memory SQLite catalog cannot be shared by publishers")
    return _FileLocks(Path(f"{database}.locks"), timeout, shown)


@dataclass(frozen=True)
class _AdvisoryLocks:
    """Session advisory locks in the PostgreSQL database of the catalog: released by the server when the holder's
    connection ends, so a publisher that dies holds nothing."""

    engine: sa.Engine
    timeout: float
    shown: str

    @contextmanager
    def hold(self, key: str, what: str) -> Iterator[None]:
        import sqlalchemy as sa

        lock = advisory_lock_id(key)
        with self.engine.connect() as conn:
            conn.execute(sa.text(f"SET lock_timeout = '{int(self.timeout * 1000)}ms'"))
            try:
                if not conn.execute(sa.text("SELECT pg_try_advisory_lock(:id)"), {"id": lock}).scalar():
                    holders = functools.partial(advisory_lock_holders, self.engine, [lock])
                    with reported_wait(f"{what} on {self.shown}", holders, self.timeout):
                        conn.execute(sa.text("SELECT pg_advisory_lock(:id)"), {"id": lock})
            except sa.exc.OperationalError as exc:
                # lock_not_available, by SQLSTATE: psycopg 3 calls it sqlstate, psycopg2 (a named catalog's) pgcode.
                if _LOCK_NOT_AVAILABLE not in (getattr(exc.orig, "sqlstate", None), getattr(exc.orig, "pgcode", None)):
                    raise
                raise WarehouseLockedError(
                    f"{what} on {self.shown}: gave up after waiting {self.timeout:g} s for another publisher's lock; "
                    "to wait longer add lock_timeout=<seconds> to the lake URL"
                ) from None
            conn.commit()
            try:
                yield
            finally:
                with suppress(sa.exc.SQLAlchemyError):
                    conn.execute(sa.text("SELECT pg_advisory_unlock(:id)"), {"id": lock})
                    conn.commit()


@dataclass(frozen=True)
class _FileLocks:
    """``flock`` on files beside a SQLite catalog, which lives on one machine: released by the kernel when the
    holder's process ends."""

    directory: Path
    timeout: float
    shown: str

    @contextmanager
    def hold(self, key: str, what: str) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / (re.sub(r"[^A-Za-z0-9_.=-]", "_", key) + ".lock")
        with open(path, "a+b") as handle:
            started = last_report = time.monotonic()
            while True:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    waited = time.monotonic() - started
                    if waited >= self.timeout:
                        raise WarehouseLockedError(
                            f"{what} on {self.shown}: gave up after waiting {self.timeout:g} s for another publisher's "
                            "lock; to wait longer add lock_timeout=<seconds> to the lake URL"
                        ) from None
                    if time.monotonic() - last_report >= LOCK_PROGRESS_SECONDS:
                        _log.warning("%s on %s: waiting %.0f s for another publisher", what, self.shown, waited)
                        last_report = time.monotonic()
                    time.sleep(LOCK_POLL_SECONDS)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
