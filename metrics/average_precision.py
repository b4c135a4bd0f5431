"""Average precision of a ranking (``document_map`` when averaged over traces)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._arrays import RankingArrays
from ragpulse.metrics._spec import MetricResult, MetricSpec

__all__ = ["SPEC", "average_precision", "score"]

SPEC = MetricSpec(
    name="document_map",
    version="1.0.0",
    summary="Average precision over the ranked contexts, as trec_eval's map (mean over traces = MAP).",
)


def average_precision(gains: NDArray[np.float64], n_relevant: NDArray[np.int64]) -> NDArray[np.float64]:
    """Average precision per trace.

    AP = (1 / R) * sum over ranks r holding a relevant context of precision@r, where R is the
    number of distinct relevant contexts; 0.0 where R is 0.

    >>> average_precision(np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]), np.array([3, 1]))
    array([0.55555556, 0.        ])
    """
    hits = gains > 0
    precision_at_rank = np.cumsum(hits, axis=1) / np.arange(1, hits.shape[1] + 1)
    summed: NDArray[np.float64] = (precision_at_rank * hits).sum(axis=1)
    return np.divide(summed, n_relevant, out=np.zeros(len(summed)), where=n_relevant > 0)


def score(arrays: RankingArrays, k: int | None = None) -> MetricResult:
    return MetricResult.from_values(average_precision(arrays.gains, arrays.n_relevant), arrays.inapplicable)
