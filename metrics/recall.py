"""Recall of the relevant contexts: single hit, multi hit and recall@k."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._arrays import RankingArrays
from ragpulse.metrics._spec import MetricResult, MetricSpec

__all__ = ["MULTI_HIT", "RECALL_AT_K", "SINGLE_HIT", "recall", "score_at_k", "score_multi_hit", "score_single_hit"]

SINGLE_HIT = MetricSpec(
    name="document_recall_single_hit",
    version="1.0.0",
    summary="1 if any relevant context was retrieved, else 0.",
)
MULTI_HIT = MetricSpec(
    name="document_recall_multi_hit",
    version="1.0.0",
    summary="|relevant ∩ retrieved| / |relevant| over distinct contexts.",
)
RECALL_AT_K = MetricSpec(
    name="recall",
    version="1.0.0",
    summary="|relevant ∩ top-k retrieved| / |relevant| (trec_eval recall_k).",
    takes_k=True,
    requires_k=True,
)


def recall(gains: NDArray[np.float64], n_relevant: NDArray[np.int64], k: int | None = None) -> NDArray[np.float64]:
    """Share of the distinct relevant contexts found in the top ``k`` (all ranks when k is None).

    >>> recall(np.array([[1.0, 0.0, 2.0]]), np.array([4]), k=2)
    array([0.25])
    """
    found: NDArray[np.intp] = (gains[:, :k] > 0).sum(axis=1)
    return np.divide(found, n_relevant, out=np.zeros(len(found)), where=n_relevant > 0)


def score_single_hit(arrays: RankingArrays, k: int | None = None) -> MetricResult:
    hit: NDArray[np.bool_] = np.any(arrays.gains > 0, axis=1)
    return MetricResult.from_values(hit.astype(np.float64), arrays.inapplicable)


def score_multi_hit(arrays: RankingArrays, k: int | None = None) -> MetricResult:
    return MetricResult.from_values(recall(arrays.gains, arrays.n_relevant), arrays.inapplicable)


def score_at_k(arrays: RankingArrays, k: int | None = None) -> MetricResult:
    return MetricResult.from_values(recall(arrays.gains, arrays.n_relevant, k), arrays.inapplicable)
