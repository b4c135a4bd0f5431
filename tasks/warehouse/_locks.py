"""Publish locks: the ``lock_timeout`` warehouse URL parameter, and the key hash of PostgreSQL advisory locks."""

from __future__ import annotations

import hashlib
import math

from ragpulse.tasks.core.errors import ConfigError

__all__ = ["advisory_lock_id", "lock_timeout"]


def lock_timeout(value: object, shown_url: str, default: float) -> float:
    """``value`` (the URL's ``lock_timeout``, None when absent) in seconds: a positive, finite number."""
    if value is None:
        return default
    try:
        seconds = float(str(value))
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ConfigError(f"lock_timeout={value!r} in warehouse URL {shown_url!r} must be a positive number of seconds")
    return seconds


def advisory_lock_id(key: str) -> int:
    """The signed 64-bit ``pg_advisory_lock`` key of a lock named ``key``."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)
