"""Vector helpers shared by the metrics that read the encoder's embeddings (refusal prototypes, topics)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["unit_rows"]


def unit_rows(rows: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each row scaled to unit L2 norm; an all-zero row stays zero.

    >>> unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[0.6, 0.8], [0.0, 0.0]]
    """
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: NDArray[np.float64] = rows / np.where(norms == 0.0, 1.0, norms)
    return unit
