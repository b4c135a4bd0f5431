"""Precision@k and hit rate@k of a ranking."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._arrays import RankingArrays
from ragpulse.metrics._spec import MetricResult, MetricSpec

__all__ = ["HIT_RATE_AT_K", "PRECISION_AT_K", "hit_rate_at_k", "precision_at_k", "score_hit_rate", "score_precision"]

PRECISION_AT_K = MetricSpec(
    name="precision",
    version="1.0.0",
    summary="Relevant contexts in the top k divided by k, fewer retrieved counting as misses (trec_eval P_k).",
    takes_k=True,
    requires_k=True,
)
HIT_RATE_AT_K = MetricSpec(
    name="hit_rate",
    version="1.0.0",
    summary="1 if a relevant context is in the top k, else 0 (trec_eval success_k).",
    takes_k=True,
    requires_k=True,
)


def precision_at_k(gains: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """Relevant contexts among the first ``k`` ranks divided by ``k``.

    >>> precision_at_k(np.array([[1.0, 0.0, 1.0]]), k=5)
    array([0.4])
    """
    relevant: NDArray[np.intp] = (gains[:, :k] > 0).sum(axis=1)
    return relevant / float(k)


def hit_rate_at_k(gains: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """1.0 where a relevant context is among the first ``k`` ranks.

    >>> hit_rate_at_k(np.array([[0.0, 0.0, 1.0]]), k=2)
    array([0.])
    """
    hit: NDArray[np.bool_] = np.any(gains[:, :k] > 0, axis=1)
    return hit.astype(np.float64)


def score_precision(arrays: RankingArrays, k: int | None = None) -> MetricResult:
    return MetricResult.from_values(precision_at_k(arrays.gains, _required(k)), arrays.inapplicable)


def score_hit_rate(arrays: RankingArrays, k: int | None = None) -> MetricResult:
    return MetricResult.from_values(hit_rate_at_k(arrays.gains, _required(k)), arrays.inapplicable)


def _required(k: int | None) -> int:
    if k is None:
        raise TypeError("k is required; the registry instantiates these metrics as name@k")
    return k
