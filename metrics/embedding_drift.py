"""Has a distribution of embeddings moved? The kernel two-sample test (MMD) with a permutation p-value. numpy only.

Two samples of embeddings, the baseline's ``X`` (n rows) and the day's ``Y`` (m rows), are compared with the maximum
mean discrepancy of Gretton et al., "A Kernel Two-Sample Test" (JMLR 13, 2012):

- **kernel** Gaussian, ``k(a, b) = exp(-||a - b||^2 / (2 sigma^2))``, with ``sigma`` the median distance between
  distinct rows of the pooled sample (the median heuristic, section 8 of the paper): no bandwidth to tune, and the
  same test for any encoder's scale;
- **statistic** the unbiased ``MMD^2_u = S_xx / (n(n-1)) + S_yy / (m(m-1)) - 2 S_xy / (nm)`` (their eq. 3), where
  ``S_xx`` sums ``k`` over ordered pairs of distinct baseline rows, ``S_yy`` of distinct day rows and ``S_xy`` over
  (baseline, day) pairs. It is 0 in expectation when both samples come from one distribution (and may then be
  slightly negative), and grows with the difference: it is the effect size reported beside the p-value;
- **p-value** from ``B`` random relabellings of the pooled rows into groups of n and m:
  ``(1 + #{b: MMD^2_u(b) >= observed}) / (1 + B)`` (Phipson and Smyth 2010). Under no change the rows are
  exchangeable, so the test's false-alarm rate is at most ``alpha`` whatever the distribution in 384 dimensions: no
  normality or density assumption, unlike a per-dimension test or a density estimate;
- **witness** ``f(z) = mean_j k(z, y_j) - mean_i k(z, x_i)`` (section 2.3 of the paper), evaluated at each day row
  without its own term: positive where the day has more mass than the baseline. The day's rows of largest witness
  are the ones that set the day apart (a new topic's questions), which the drift row quotes.

Cost: the pooled kernel matrix is ``(n+m)^2`` and each relabelling a pass over it (``O((n+m)^2 B)``, one matrix
product for all of them), so the caller bounds n and m by sampling. The result depends only on the rows' order and
the seed; callers give rows in a fixed order (``tasks/monitoring/questions.py`` sorts them by a hash of the trace id).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["MmdTest", "mmd_test"]


@dataclass(frozen=True)
class MmdTest:
    """The outcome of :func:`mmd_test`: the unbiased MMD^2, its permutation p-value, the kernel bandwidth, the
    number of relabellings, and the witness value of each day row (in the day rows' order)."""

    mmd2: float
    p_value: float
    bandwidth: float
    n_permutations: int
    witness: NDArray[np.float64]


def mmd_test(baseline: ArrayLike, current: ArrayLike, *, n_permutations: int = 500, seed: int = 0) -> MmdTest:
    """Kernel two-sample test of ``current`` (m rows) against ``baseline`` (n rows), both 2-D with one width.

    Rows that are all identical have bandwidth 0: nothing to compare, MMD^2 0 and p-value 1.

    >>> rng = np.random.default_rng(0)
    >>> same = mmd_test(rng.normal(size=(60, 4)), rng.normal(size=(60, 4)), n_permutations=200, seed=1)
    >>> moved = mmd_test(rng.normal(size=(60, 4)), rng.normal(1.0, 1.0, size=(60, 4)), n_permutations=200, seed=1)
    >>> bool(same.p_value > 0.05), bool(moved.p_value < 0.01), bool(moved.mmd2 > same.mmd2)
    (True, True, True)
    """
    x = np.asarray(baseline, dtype=np.float64)
    y = np.asarray(current, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"baseline and current must be 2-D with one width, got shapes {x.shape} and {y.shape}")
    n, m = len(x), len(y)
    if min(n, m) < 2:
        raise ValueError(f"each side needs at least 2 rows, got {n} and {m}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be at least 1, got {n_permutations}")
    pooled = np.vstack([x, y])
    squares = np.square(pooled).sum(axis=1)
    distances2 = np.maximum(squares[:, None] + squares[None, :] - 2.0 * pooled @ pooled.T, 0.0)
    upper = distances2[np.triu_indices(n + m, k=1)]
    bandwidth = float(np.median(np.sqrt(upper)))
    if bandwidth == 0.0:
        return MmdTest(0.0, 1.0, 0.0, n_permutations, np.zeros(m))
    kernel = np.exp(-distances2 / (2.0 * bandwidth**2))
    # Column 0 labels the rows as given (baseline first); the others are seeded relabellings.
    labels = np.zeros((n + m, n_permutations + 1))
    labels[:n, 0] = 1.0
    rng = np.random.default_rng(seed)
    for column in range(1, n_permutations + 1):
        labels[rng.permutation(n + m)[:n], column] = 1.0
    statistics = _unbiased_mmd2(kernel, labels, n, m)
    observed = float(statistics[0])
    p_value = (1 + int(np.count_nonzero(statistics[1:] >= observed))) / (1 + n_permutations)
    day_rows = kernel[n:]
    witness = (day_rows[:, n:].sum(axis=1) - 1.0) / (m - 1) - day_rows[:, :n].mean(axis=1)
    return MmdTest(observed, p_value, bandwidth, n_permutations, witness)


def _unbiased_mmd2(kernel: NDArray[np.float64], labels: NDArray[np.float64], n: int, m: int) -> NDArray[np.float64]:
    """MMD^2_u of each labelling (a column of 1 for baseline rows, 0 for day rows), from one product ``K @ labels``:
    with a the labels and b = 1 - a, S_xx = a'Ka - n, S_xy = a'K1 - a'Ka, S_yy = 1'K1 - 2 a'K1 + a'Ka - m (the
    kernel's diagonal is 1)."""
    row_sums = kernel.sum(axis=1)
    total = float(row_sums.sum())
    aka = np.einsum("ij,ij->j", labels, kernel @ labels)
    ak1 = labels.T @ row_sums
    s_xx = aka - n
    s_xy = ak1 - aka
    s_yy = total - 2.0 * ak1 + aka - m
    return np.asarray(s_xx / (n * (n - 1)) + s_yy / (m * (m - 1)) - 2.0 * s_xy / (n * m), dtype=np.float64)
