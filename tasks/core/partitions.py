"""What a day of a source is: how its files map to dates (the partitionings) and which one a source has unless told.

Apart from object storage so that the run configuration can name them without loading fsspec."""

from __future__ import annotations

from typing import Literal

__all__ = ["DEFAULT_PARTITIONING", "PARTITIONINGS", "Partitioning"]

Partitioning = Literal["dt", "event-time"]
PARTITIONINGS: tuple[Partitioning, ...] = ("dt", "event-time")
DEFAULT_PARTITIONING: Partitioning = "dt"
"""``dt``: the day's files sit in ``<source>/dt=YYYY-MM-DD/``; ``event-time``: files anywhere below
``<source>`` modified within the day widened by the late-arrival window (staging keeps the traces whose
event time falls in the day)."""
