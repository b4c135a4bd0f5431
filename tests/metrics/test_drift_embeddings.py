"""The kernel two-sample test behind input drift (``metrics/embedding_drift.py``): its statistic against the
definition computed pair by pair, its false-alarm rate on seeded samples of one distribution, its power, its witness."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ragpulse.metrics.embedding_drift import mmd_test


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_statistic_and_bandwidth_follow_their_definitions() -> None:
    rng = np.random.default_rng(0)
    x, y = _unit(rng.normal(size=(7, 5))), _unit(rng.normal(0.3, 1.0, size=(5, 5)))
    pooled = np.vstack([x, y])
    distances = [math.dist(a, b) for a, b in itertools.combinations(pooled, 2)]
    sigma = float(np.median(distances))

    def k(a: np.ndarray, b: np.ndarray) -> float:
        return math.exp(-(math.dist(a, b) ** 2) / (2 * sigma**2))

    n, m = len(x), len(y)
    xx = sum(k(x[i], x[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    yy = sum(k(y[i], y[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    xy = sum(k(a, b) for a in x for b in y) / (n * m)
    result = mmd_test(x, y, n_permutations=100, seed=3)
    assert result.bandwidth == pytest.approx(sigma, rel=1e-7)
    assert result.mmd2 == pytest.approx(xx + yy - 2 * xy, rel=1e-7, abs=1e-12)
    # The witness of each day row, without its own term.
    witness = [(sum(k(y[j], y[i]) for i in range(m) if i != j) / (m - 1)) - sum(k(y[j], a) for a in x) / n
               for j in range(m)]  # fmt: skip
    np.testing.assert_allclose(result.witness, witness, rtol=1e-9, atol=1e-12)
    # The p-value is a permutation p-value: (1 + count) / (1 + B), never 0.
    assert result.p_value * 101 == pytest.approx(round(result.p_value * 101)) and result.p_value >= 1 / 101


def test_the_false_alarm_rate_on_one_distribution_is_at_most_alpha() -> None:
    """300 seeded pairs of samples of one distribution of unit vectors: the share of p-values below 0.05 and below
    0.20 stays within three binomial standard errors of the level (the permutation test is exact: at most alpha)."""
    rng = np.random.default_rng(42)
    centre = rng.normal(size=16)
    p_values = np.array(
        [
            mmd_test(
                _unit(centre + rng.normal(size=(25, 16))),
                _unit(centre + rng.normal(size=(25, 16))),
                n_permutations=200,
                seed=run,
            ).p_value
            for run in range(300)
        ]
    )
    for alpha in (0.05, 0.20):
        rate = float(np.mean(p_values < alpha))
        assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / 300), (alpha, rate)
    assert float(np.mean(p_values < 0.5)) == pytest.approx(0.5, abs=0.1)  # not a test that never rejects


def test_a_planted_cluster_is_detected_and_its_rows_have_the_largest_witness() -> None:
    rng = np.random.default_rng(7)
    centre = rng.normal(size=16)
    baseline = _unit(centre + rng.normal(size=(120, 16)))
    usual = _unit(centre + rng.normal(size=(90, 16)))
    new_topic = _unit(-centre + 0.3 * rng.normal(size=(30, 16)))
    day = np.vstack([usual, new_topic])
    result = mmd_test(baseline, day, n_permutations=300, seed=1)
    assert result.p_value == pytest.approx(1 / 301) and result.mmd2 > 0
    top = np.argsort(-result.witness)[:30]
    assert set(top.tolist()) == set(range(90, 120))
    same = mmd_test(baseline, usual, n_permutations=300, seed=1)
    assert same.p_value > 0.05 and same.mmd2 < result.mmd2


def test_the_seed_fixes_the_p_value_and_identical_rows_compare_as_nothing() -> None:
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(30, 4)), rng.normal(0.2, 1.0, size=(30, 4))
    first, again, other = mmd_test(x, y, seed=9), mmd_test(x, y, seed=9), mmd_test(x, y, seed=10)
    assert (first.mmd2, first.p_value) == (again.mmd2, again.p_value)
    assert first.mmd2 == other.mmd2  # the seed draws the relabellings only
    flat = mmd_test(np.ones((5, 3)), np.ones((4, 3)), n_permutations=100)
    assert (flat.mmd2, flat.p_value, flat.bandwidth) == (0.0, 1.0, 0.0)


@pytest.mark.parametrize(
    ("baseline", "current", "permutations", "message"),
    [
        (np.zeros((5, 3)), np.zeros((5, 4)), 100, "one width"),
        (np.zeros(5), np.zeros((5, 3)), 100, "2-D"),
        (np.zeros((1, 3)), np.zeros((5, 3)), 100, "at least 2 rows"),
        (np.zeros((5, 3)), np.zeros((5, 3)), 0, "n_permutations"),
    ],
)
def test_bad_input_is_refused(baseline: np.ndarray, current: np.ndarray, permutations: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mmd_test(baseline, current, n_permutations=permutations)
