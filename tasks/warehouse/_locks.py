"""Publish locks: the ``lock_timeout`` warehouse URL parameter (and other positive numbers in URLs), the key hash
of PostgreSQL advisory locks, and the progress a wait for a lock reports."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from ragpulse.tasks.core.exceptions import ConfigError

__all__ = [
    "LOCK_PROGRESS_SECONDS",
    "advisory_lock_holders",
    "advisory_lock_id",
    "lock_timeout",
    "positive_parameter",
    "reported_wait",
]

_log = logging.getLogger(__name__)
# How often a wait for a lock says who holds it, as DuckDB's wait for its file does.
LOCK_PROGRESS_SECONDS = 5.0


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
