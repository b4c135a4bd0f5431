"""Errors raised by the I/O layer, translated from client libraries at the boundary.

```text
RagpulseError (metrics/errors.py)
├── ConfigError                   bad settings or URLs; names the setting
├── StorageError                  transient object-storage failure (the only kind retried)
├── PartitionNotFoundError        no trace files for the requested date; lists nearby dates
└── WarehouseError
    └── WarehouseLockedError      the DuckDB file or a PostgreSQL date lock stayed taken past lock_timeout
```
"""

from __future__ import annotations

from ragpulse.metrics.errors import RagpulseError

__all__ = [
    "ConfigError",
    "PartitionNotFoundError",
    "StorageError",
    "WarehouseError",
    "WarehouseLockedError",
]


class ConfigError(RagpulseError, ValueError):
    """A setting, URL or option is invalid; the message names it and the accepted values."""


class StorageError(RagpulseError):
    """A transient failure talking to object storage (timeouts, 5xx, throttling)."""


class PartitionNotFoundError(RagpulseError, LookupError):
    """The source has no trace files for the requested partition date."""

    def __init__(self, source: str, date: str, available: list[str]) -> None:
        self.source = source
        self.date = date
        self.available = available
        hint = (
            f" Nearest partitions present: {', '.join(available)}." if available else " No dt= partitions found there."
        )
        super().__init__(f"no trace files for dt={date} under {source}.{hint}")


class WarehouseError(RagpulseError):
    """Publishing to the warehouse failed; the partition's previous rows are unchanged."""


class WarehouseLockedError(WarehouseError):
    """The warehouse's write lock stayed taken past ``lock_timeout``: another process holds the DuckDB file (one
    writing process), or another publisher of the date holds its PostgreSQL advisory lock."""
