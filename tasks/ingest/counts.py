"""The check that staging's counts add up, for a whole day, a slice or slices combined.

Every record read ends in exactly one place, staged, quarantined or left to another day (``StagingCounts``): a record
that fits nowhere is a bug, not a lost trace, so staging refuses counts that do not add up before anything is
published.
"""

from __future__ import annotations

import datetime as dt

from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.types import StagingCounts

__all__ = ["CountMismatchError", "check_counts"]


class CountMismatchError(RagpulseError, RuntimeError):
    """Staging's counts do not add up: some record went nowhere or twice. A bug; nothing is published."""


def check_counts(date: dt.date, counts: StagingCounts, n_quarantine: int, *, records_parsed: int) -> None:
    """Refuse to hand on a partition whose counts do not add up (see StagingCounts)."""
    identities = {
        "records read = records quarantined + records parsed": (
            counts.records_read,
            counts.records_quarantined + records_parsed,
        ),
        "traces read = staged + traces quarantined + other days": (
            counts.traces_read,
            counts.staged + counts.traces_quarantined + counts.other_days,
        ),
        "quarantine entries = records + spans + traces quarantined": (n_quarantine, counts.quarantined),
    }
    problems = [f"{name}: {left} != {right}" for name, (left, right) in identities.items() if left != right]
    if problems:
        raise CountMismatchError(f"internal error staging dt={date}, nothing was published: {'; '.join(problems)}")
