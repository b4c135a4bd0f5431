"""metrics/precision.py: precision@k (trec_eval P_k) and hit_rate@k (trec_eval success_k)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import Status
from ragpulse.metrics._arrays import ranking_arrays
from ragpulse.metrics.precision import (
    HIT_RATE_AT_K,
    PRECISION_AT_K,
    hit_rate_at_k,
    precision_at_k,
    score_hit_rate,
    score_precision,
)

Builder = Callable[..., Any]

GAINS = np.array([[1.0, 0.0, 2.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0]])


def test_precision_kernel_divides_by_k() -> None:
    np.testing.assert_array_equal(precision_at_k(GAINS, 1), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(precision_at_k(GAINS, 3), [2 / 3, 0.0, 0.0])
    np.testing.assert_array_equal(precision_at_k(GAINS, 5), [0.6, 0.2, 0.0])
    # k beyond the list: missing ranks count as misses (trec_eval P_k), not a shorter denominator
    np.testing.assert_array_equal(precision_at_k(GAINS, 10), [0.3, 0.1, 0.0])


def test_hit_rate_kernel() -> None:
    np.testing.assert_array_equal(hit_rate_at_k(GAINS, 1), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(hit_rate_at_k(GAINS, 4), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(hit_rate_at_k(GAINS, 5), [1.0, 1.0, 0.0])
    np.testing.assert_array_equal(hit_rate_at_k(GAINS, 50), [1.0, 1.0, 0.0])


def test_scores(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        make_record("short", ["d1", "x"], relevant=["d1", "d2"]),
        make_record("dupes", ["d1", "d1", "d1"], relevant=["d1"]),
        make_record("empty", [], relevant=["d1"]),
        make_record("unlabelled", ["d1"]),
    )
    arrays = ranking_arrays(batch)
    np.testing.assert_array_equal(score_precision(arrays, 3).values, [1 / 3, 1 / 3, 0.0, np.nan])
    np.testing.assert_array_equal(score_precision(arrays, 5).values, [0.2, 0.2, 0.0, np.nan])
    np.testing.assert_array_equal(score_hit_rate(arrays, 1).values, [1.0, 1.0, 0.0, np.nan])
    assert list(score_hit_rate(arrays, 1).status) == [Status.OK] * 3 + [Status.NOT_APPLICABLE]


@pytest.mark.parametrize("scorer", [score_precision, score_hit_rate])
def test_k_is_required(scorer: Callable[..., Any], make_batch: Builder) -> None:
    with pytest.raises(TypeError, match="k is required"):
        scorer(ranking_arrays(make_batch(ids=["d1"], relevant=["d1"])))


def test_specs() -> None:
    assert (PRECISION_AT_K.name, HIT_RATE_AT_K.name) == ("precision", "hit_rate")
    assert PRECISION_AT_K.requires_k and HIT_RATE_AT_K.requires_k
