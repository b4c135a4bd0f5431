"""The ``lock_timeout`` warehouse URL parameter: how long a publish waits for another publisher's lock."""

from __future__ import annotations

import math

from ragpulse.tasks.core.errors import ConfigError

__all__ = ["lock_timeout"]


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
