"""The ragpulse exception tree; the one module every layer may import.

```text
RagpulseError
├── InvalidRecordError(ValueError)   .record_id .field .reason
├── ShapeError(ValueError)           .argument .expected .got
├── UnknownMetricError(KeyError)     .name .known
└── (tasks/core/exceptions.py) StorageError, PartitionNotFoundError, WarehouseError, ...
```
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["InvalidRecordError", "RagpulseError", "ShapeError", "UnknownMetricError"]


class RagpulseError(Exception):
    """Base class of every error ragpulse raises on purpose."""


class InvalidRecordError(RagpulseError, ValueError):
    """A trace record does not fit the trace format; names the record and the field."""

    def __init__(self, record_id: str | None, field: str, reason: str, *, location: str | None = None) -> None:
        self.record_id = record_id
        self.field = field
        self.reason = reason
        self.location = location
        who = f"record {record_id!r}" if record_id is not None else "record"
        where = f" ({location})" if location else ""
        super().__init__(f"{who}{where}, field {field!r}: {reason}")


class ShapeError(RagpulseError, ValueError):
    """Arrays or sequences handed to a metric disagree in length or have an invalid parameter."""

    def __init__(self, argument: str, expected: object, got: object) -> None:
        self.argument = argument
        self.expected = expected
        self.got = got
        super().__init__(f"argument {argument!r}: expected {expected}, got {got}")


class UnknownMetricError(RagpulseError, KeyError):
    """A metric name is not in the registry; lists the names that are."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = sorted(known)
        super().__init__(name)

    def __str__(self) -> str:
        return f"unknown metric {self.name!r}; known metrics: {', '.join(self.known)}"
