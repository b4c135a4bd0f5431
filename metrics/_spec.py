"""Metric specifications, result containers and the status vocabulary shared by all metrics."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics.errors import ShapeError

__all__ = ["MetricResult", "MetricSpec", "Status"]


class Status(enum.IntEnum):
    """Outcome of one metric on one trace; stored as its lower-case name."""

    OK = 0
    NOT_APPLICABLE = 1
    FAILED = 2

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class MetricSpec:
    """What a metric is: its name, version and value range.

    ``version`` is semver; the major part is bumped whenever a change to the formula, prompt or
    parser can move scores, so scores of different major versions are never compared.
    ``takes_k`` marks metric families instantiated with a cutoff, e.g. ``precision@5``;
    ``takes_variant`` families with a named variant, e.g. ``aspect_critique:harmfulness``.
    """

    name: str
    version: str
    summary: str
    lower: float = 0.0
    upper: float = 1.0
    higher_is_better: bool = True
    takes_k: bool = False
    requires_k: bool = False
    takes_variant: bool = False


@dataclass(frozen=True)
class MetricResult:
    """Per-trace values of one metric over a batch.

    ``values[i]`` is NaN exactly when ``status[i]`` is not OK, and ``reasons[i]`` then says why.
    """

    values: NDArray[np.float64]
    status: NDArray[np.int8]
    reasons: NDArray[np.object_]

    def __post_init__(self) -> None:
        n = len(self.values)
        for argument, array in (("status", self.status), ("reasons", self.reasons)):
            if len(array) != n:
                raise ShapeError(argument, f"length {n}", f"length {len(array)}")

    @classmethod
    def from_values(cls, values: NDArray[np.float64], inapplicable: NDArray[np.object_] | None = None) -> MetricResult:
        """Build a result from computed values and, per trace, a reason it does not apply (or None)."""
        n = len(values)
        reasons = np.full(n, None, dtype=object) if inapplicable is None else inapplicable
        not_applicable = np.not_equal(reasons, np.array(None))  # element by element; the stubs refuse a bare None
        status = np.where(not_applicable, Status.NOT_APPLICABLE, Status.OK).astype(np.int8)
        return cls(np.where(not_applicable, np.nan, values).astype(np.float64), status, reasons)
