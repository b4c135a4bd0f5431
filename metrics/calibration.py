"""How far to trust a judge: its agreement with human labels, and prediction-powered estimates of a mean.

Pure numpy/scipy, no I/O. Two tools (definitions and the numbers behind them: docs/calibration.md):

- :func:`agreement` compares judge scores with human labels of the same traces: for binary labels accuracy,
  Cohen's kappa and the 2x2 confusion matrix; for graded ones the mean absolute error, Spearman's rank correlation
  and the confusion matrix over the levels the labels use; for both the mean bias ``mean(judge - human)``.
- :func:`ppi_mean` estimates the mean of the *human* score over a partition from the judge's scores of all its
  traces and human labels of a few (prediction-powered inference, Angelopoulos et al., Science 2023, with the power
  tuning of PPI++, Angelopoulos, Duchi and Zrnic 2023). With ``N`` judged traces ``f`` and ``n`` labelled pairs
  ``(y, f_l)``::

      mean = mean(y) + lam * (mean(f) - mean(f_l))
      se   = sqrt(lam**2 * var(f) / N + var(y - lam * f_l) / n)
      lam  = cov(y, f_l) / ((1 + n / N) * var(f_all)), clipped to [0, 1]

  ``lam = 1`` is the original PPI estimator (the judge's mean corrected by its mean error on the labelled set),
  ``lam = 0`` the mean of the labels alone; the tuned ``lam`` is never wider than either, asymptotically. The
  interval is ``mean +- z * se``. Its validity rests on the labelled traces being a random sample of the same
  population as the judged ones: labels drawn from the partition itself (``ragpulse`` draws them stratified) or a
  judge whose error does not change between the partitions the labels come from.

The naive interval of the judge's own mean, ``mean(f) +- z * sd(f) / sqrt(N)``, is returned beside it: it is
narrow and, when the judge is biased, centred on the wrong value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Agreement", "PPIEstimate", "agreement", "ppi_mean"]


@dataclass(frozen=True)
class Agreement:
    """A judge against human labels of the same traces. Fields that do not apply to ``kind`` are None."""

    n: int
    kind: Literal["binary", "graded"]
    mean_bias: float
    """``mean(judge - human)``: positive when the judge scores higher than people do."""
    accuracy: float | None
    cohen_kappa: float | None
    mae: float | None
    spearman: float | None
    levels: tuple[float, ...]
    """The label values the confusion matrix is over, ascending (0 and 1 for binary labels)."""
    confusion: tuple[tuple[int, ...], ...]
    """``confusion[i][j]``: traces labelled ``levels[i]`` by people that the judge scored nearest to ``levels[j]``."""


@dataclass(frozen=True)
class PPIEstimate:
    """The prediction-powered estimate of a partition's mean human score, with the judge's raw mean beside it."""

    mean: float
    ci_low: float
    ci_high: float
    std_error: float
    effective_n: float
    """Labels a classical estimate (the mean of labels alone) would need for the same standard error."""
    tuning: float
    n_labelled: int
    n_unlabelled: int
    raw_mean: float
    raw_ci_low: float
    raw_ci_high: float


def _finite(values: ArrayLike, name: str) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} holds NaN or infinite values; leave out traces without a score or label")
    return array


def agreement(human: ArrayLike, judge: ArrayLike) -> Agreement:
    """Agreement of ``judge`` scores with ``human`` labels, pair by pair (the same traces, in the same order).
    Labels that are all 0 or 1 are binary: a judge score counts as 1 from 0.5 up."""
    y, f = _finite(human, "human labels"), _finite(judge, "judge scores")
    if len(y) != len(f):
        raise ValueError(f"{len(y)} human labels but {len(f)} judge scores; they must pair up")
    if not len(y):
        raise ValueError("no labelled traces to compare")
    bias = float(np.mean(f - y))
    if np.all(np.isin(y, (0.0, 1.0))):
        verdict = (f >= 0.5).astype(np.float64)
        confusion = tuple(tuple(int(np.sum((y == a) & (verdict == b))) for b in (0.0, 1.0)) for a in (0.0, 1.0))
        accuracy = float(np.mean(verdict == y))
        return Agreement(len(y), "binary", bias, accuracy, _kappa(y, verdict), None, None, (0.0, 1.0), confusion)
    levels = tuple(float(v) for v in np.unique(y))
    nearest = np.asarray(levels)[np.argmin(np.abs(f[:, None] - np.asarray(levels)[None, :]), axis=1)]
    confusion = tuple(tuple(int(np.sum((y == a) & (nearest == b))) for b in levels) for a in levels)
    return Agreement(
        len(y), "graded", bias, None, None, float(np.mean(np.abs(f - y))), _spearman(y, f), levels, confusion
    )


def _kappa(y: NDArray[np.float64], verdict: NDArray[np.float64]) -> float:
    """Cohen's kappa of two binary raters; NaN when chance agreement is total (both constant and equal)."""
    observed = float(np.mean(y == verdict))
    chance = float(np.mean(y) * np.mean(verdict) + (1 - np.mean(y)) * (1 - np.mean(verdict)))
    return (observed - chance) / (1 - chance) if chance < 1 else math.nan


def _spearman(y: NDArray[np.float64], f: NDArray[np.float64]) -> float:
    """Spearman's rank correlation; NaN when either side is constant (no ranks to correlate)."""
    if len(y) < 2 or np.ptp(y) == 0 or np.ptp(f) == 0:
        return math.nan
    from scipy import stats

    return float(stats.spearmanr(y, f).statistic)


def ppi_mean(
    judged: ArrayLike,
    human: ArrayLike,
    judged_labelled: ArrayLike,
    *,
    confidence: float = 0.95,
    power_tuning: bool = True,
) -> PPIEstimate:
    """The prediction-powered estimate of the mean human score (module docstring).

    ``judged``: the judge's scores of the partition's traces (N); ``human`` and ``judged_labelled``: human labels
    and the same judge's scores of the labelled traces (n pairs, in the same order). ``power_tuning=False`` gives
    the original PPI estimator (``lam = 1``).
    """
    f, y, f_l = (
        _finite(judged, "judge scores"),
        _finite(human, "human labels"),
        _finite(judged_labelled, "judge scores"),
    )
    n, big_n = len(y), len(f)
    if len(f_l) != n:
        raise ValueError(f"{n} human labels but {len(f_l)} judge scores of labelled traces; they must pair up")
    if n < 2 or big_n < 2:
        raise ValueError(
            f"prediction-powered inference needs at least 2 labelled and 2 judged traces, got {n}, {big_n}"
        )
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence must lie in (0.5, 1), got {confidence}")
    from scipy import stats

    z = float(stats.norm.ppf(0.5 + confidence / 2))
    var_f = float(np.var(f, ddof=1))
    lam = 1.0
    if power_tuning:
        pooled = float(np.var(np.concatenate([f, f_l]), ddof=1))
        covariance = float(np.cov(y, f_l, ddof=1)[0, 1])
        lam = min(1.0, max(0.0, covariance / ((1 + n / big_n) * pooled))) if pooled > 0 else 0.0
    mean = float(np.mean(y) + lam * (np.mean(f) - np.mean(f_l)))
    se = math.sqrt(lam**2 * var_f / big_n + float(np.var(y - lam * f_l, ddof=1)) / n)
    var_y = float(np.var(y, ddof=1))
    effective = var_y / se**2 if se > 0 else math.inf
    raw = float(np.mean(f))
    raw_half = z * math.sqrt(var_f / big_n)
    return PPIEstimate(
        mean, mean - z * se, mean + z * se, se, effective, lam, n, big_n, raw, raw - raw_half, raw + raw_half
    )
