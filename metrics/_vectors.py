"""Vector helpers shared by the code that reads the encoder's embeddings (the local embedders, refusal prototypes,
topics)."""

from __future__ import annotations

from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

__all__ = ["unit_rows"]

_Float = TypeVar("_Float", bound=np.floating[Any])


def unit_rows(rows: NDArray[_Float]) -> NDArray[_Float]:
    """Each row scaled to unit L2 norm, in the rows' own float type; an all-zero row stays zero.

    >>> unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[0.6, 0.8], [0.0, 0.0]]
    """
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    # numpy's stubs widen the quotient to float64; a float32 row divided by its float32 norm stays float32.
    return cast("NDArray[_Float]", rows / np.where(norms == 0.0, 1.0, norms))
