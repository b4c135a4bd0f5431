"""Reciprocal rank of the first relevant context (``document_mrr`` when averaged)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._arrays import RankingArrays
from ragpulse.metrics._spec import MetricResult, MetricSpec

__all__ = ["SPEC", "reciprocal_rank", "score"]

SPEC = MetricSpec(
    name="document_mrr",
    version="1.0.0",
    summary="1 / rank of the first relevant context, 0 if none is retrieved (mean over traces = MRR).",
)


def reciprocal_rank(hits: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Reciprocal rank of the first hit, per trace.

    RR = 1 / rank of the first relevant context; 0.0 when no relevant context was retrieved.

    >>> reciprocal_rank(np.array([[0, 1, 0], [0, 0, 0]], dtype=bool))
    array([0.5, 0. ])
    """
    if hits.shape[1] == 0:
        return np.zeros(hits.shape[0])
    return np.where(hits.any(axis=1), 1.0 / (hits.argmax(axis=1) + 1.0), 0.0)


def score(arrays: RankingArrays, k: int | None = None) -> MetricResult:
    return MetricResult.from_values(reciprocal_rank(arrays.gains > 0), arrays.inapplicable)
