"""Threshold rules (service-level objectives): is one partition's statistic of a metric past a fixed level? Pure
numpy, no I/O.

Drift compares a partition with its own past, so it cannot see a metric that was bad from the first day (there is no
baseline to drift from) nor a slow decline that each baseline window absorbs. A threshold rule compares with a level
the team chose instead: the day's mean, a percentile (p95 latency), the failure rate or the coverage of a metric,
against a warning and a critical level, in a direction (``below`` for a quality score, ``above`` for latency or a
failure rate). Too few scores (``min_samples``) give ``insufficient_data``, never an alarm. Definitions:
docs/monitoring.md, "Threshold rules".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics.drift import Verdict

__all__ = ["Direction", "ThresholdCheck", "check_threshold", "statistic_value", "valid_statistic"]

Direction = Literal["above", "below"]
"""Which side of a level is a breach: ``below`` for a score where higher is better, ``above`` for latency, cost or a
failure rate."""


_PERCENTILE = re.compile(r"p(\d{1,2}(?:\.\d+)?)")
_RATES = ("failure_rate", "coverage")


def valid_statistic(statistic: str) -> bool:
    """``mean``, ``failure_rate``, ``coverage``, or a percentile ``p<q>`` with 0 < q < 100 (``p95``, ``p99.9``)."""
    if statistic in ("mean", *_RATES):
        return True
    match = _PERCENTILE.fullmatch(statistic)
    return match is not None and 0 < float(match.group(1)) < 100


def statistic_value(statistic: str, ok_values: NDArray[np.float64], n_failed: int, n_total: int) -> float:
    """The statistic over one partition's scores of a metric: ``ok_values`` the ok scores, ``n_failed`` the failed
    ones among ``n_total`` scored traces. Percentiles interpolate linearly between the two nearest ranks, as SQL's
    ``percentile_cont`` does, so a rule on p95 reads the same number as the ``daily_scores`` view's ``p95``. NaN
    where it is undefined (no ok score for a mean or percentile, no trace for a rate)."""
    if statistic == "failure_rate":
        return n_failed / n_total if n_total else math.nan
    if statistic == "coverage":
        return len(ok_values) / n_total if n_total else math.nan
    if not len(ok_values):
        return math.nan
    if statistic == "mean":
        return float(np.mean(ok_values))
    match = _PERCENTILE.fullmatch(statistic)
    if match is None:
        raise ValueError(f"unknown statistic {statistic!r}: mean, failure_rate, coverage or p<q> such as p95")
    return float(np.percentile(ok_values, float(match.group(1)), method="linear"))


@dataclass(frozen=True)
class ThresholdCheck:
    verdict: Verdict
    observed: float
    n: int
    detail: str


def check_threshold(
    statistic: str,
    ok_values: NDArray[np.float64],
    n_failed: int,
    n_total: int,
    *,
    direction: Direction,
    warning: float | None,
    critical: float | None,
    min_samples: int,
) -> ThresholdCheck:
    """The verdict of one rule on one partition's scores: ``critical`` past the critical level, else ``warning`` past
    the warning level, else ``within``. A value equal to a level is past it (``<=`` for ``below``, ``>=`` for
    ``above``): a level names the first bad value. The sample a rule needs is the ok scores for a mean or a
    percentile, the scored traces for a rate."""
    n = n_total if statistic in _RATES else len(ok_values)
    observed = statistic_value(statistic, ok_values, n_failed, n_total)
    if n < min_samples or math.isnan(observed):
        return ThresholdCheck(
            Verdict.INSUFFICIENT_DATA, observed, n, f"{n} {'trace(s)' if statistic in _RATES else 'ok score(s)'}, "
            f"fewer than the rule's {min_samples}",
        )  # fmt: skip

    def past(level: float | None) -> bool:
        return level is not None and (observed <= level if direction == "below" else observed >= level)

    verdict = Verdict.CRITICAL if past(critical) else Verdict.WARNING if past(warning) else Verdict.WITHIN
    level = critical if verdict == Verdict.CRITICAL else warning
    shown = f"{statistic} {_number(observed)}"
    if verdict == Verdict.WITHIN:
        levels = (("warning", warning), ("critical", critical))
        limits = " and ".join(f"{name} {_number(value)}" for name, value in levels if value is not None)
        detail = f"{shown}, not {direction} {limits}; n={n}"
    else:
        detail = f"{shown}, {direction} the {verdict} level {_number(level)}; n={n}"
    return ThresholdCheck(verdict, observed, n, detail)


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
