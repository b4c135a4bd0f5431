"""Publish locks: the ``lock_timeout`` warehouse URL parameter (and other positive numbers in URLs), and the key hash
of PostgreSQL advisory locks."""

from __future__ import annotations

import hashlib
import math

from ragpulse.tasks.core.errors import ConfigError

__all__ = ["advisory_lock_id", "lock_timeout", "positive_parameter"]


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
