"""metrics/_spec.py: statuses and the per-trace result container."""

from __future__ import annotations

import numpy as np
import pytest

from ragpulse.metrics import MetricResult, MetricSpec, ShapeError, Status


def test_status_labels() -> None:
    assert [s.label for s in Status] == ["ok", "not_applicable", "failed"]
    assert Status.OK == 0


def test_from_values_without_reasons_is_all_ok() -> None:
    result = MetricResult.from_values(np.array([0.5, 1.0]))
    np.testing.assert_array_equal(result.values, [0.5, 1.0])
    np.testing.assert_array_equal(result.status, [Status.OK, Status.OK])
    assert result.status.dtype == np.int8
    assert list(result.reasons) == [None, None]


def test_from_values_sets_nan_exactly_where_a_reason_is_given() -> None:
    reasons = np.array([None, "no_reference", None], dtype=object)
    result = MetricResult.from_values(np.array([0.25, 0.75, 0.0]), reasons)
    np.testing.assert_array_equal(result.values, [0.25, np.nan, 0.0])
    np.testing.assert_array_equal(result.status, [Status.OK, Status.NOT_APPLICABLE, Status.OK])
    assert result.values.dtype == np.float64


def test_lengths_must_agree() -> None:
    with pytest.raises(ShapeError, match="argument 'status': expected length 2, got length 1"):
        MetricResult(np.zeros(2), np.zeros(1, dtype=np.int8), np.full(2, None, dtype=object))
    with pytest.raises(ShapeError, match="argument 'reasons': expected length 2, got length 3"):
        MetricResult(np.zeros(2), np.zeros(2, dtype=np.int8), np.full(3, None, dtype=object))


def test_spec_defaults() -> None:
    spec = MetricSpec(name="x", version="1.0.0", summary="s")
    assert (spec.lower, spec.upper, spec.higher_is_better, spec.takes_k, spec.requires_k) == (
        0.0,
        1.0,
        True,
        False,
        False,
    )
