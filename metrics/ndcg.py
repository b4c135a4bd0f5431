"""Normalised discounted cumulative gain of a ranking (``document_ndcg``, ``document_ndcg@k``)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._arrays import RankingArrays
from ragpulse.metrics._spec import MetricResult, MetricSpec

__all__ = ["SPEC", "ndcg", "score"]

SPEC = MetricSpec(
    name="document_ndcg",
    version="1.0.0",
    summary="DCG / ideal DCG with linear gain = graded relevance and discount 1/log2(rank+1); optional cutoff @k.",
    takes_k=True,
)


def _dcg(gains: NDArray[np.float64]) -> NDArray[np.float64]:
    discounts = 1.0 / np.log2(np.arange(2, gains.shape[1] + 2))
    dcg: NDArray[np.float64] = (gains * discounts).sum(axis=1)
    return dcg


def ndcg(gains: NDArray[np.float64], ideal: NDArray[np.float64], k: int | None = None) -> NDArray[np.float64]:
    """NDCG per trace, optionally cut at rank ``k``.

    NDCG@k = DCG@k / IDCG@k with DCG@k = sum_{r<=k} g_r / log2(r + 1) and IDCG@k the same sum over
    all labelled gains sorted descending; 0.0 where the ideal DCG is 0.

    >>> ndcg(np.array([[0.0, 1.0]]), np.array([[1.0]]))
    array([0.63092975])
    """
    if k is not None:
        gains, ideal = gains[:, :k], ideal[:, :k]
    actual, best = _dcg(gains), _dcg(ideal)
    return np.divide(actual, best, out=np.zeros(len(actual)), where=best > 0)


def score(arrays: RankingArrays, k: int | None = None) -> MetricResult:
    return MetricResult.from_values(ndcg(arrays.gains, arrays.ideal, k), arrays.inapplicable)
