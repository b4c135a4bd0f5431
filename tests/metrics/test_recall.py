"""metrics/recall.py: document_recall_single_hit, document_recall_multi_hit, recall@k (trec_eval recall_k)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ragpulse.metrics import Status
from ragpulse.metrics._arrays import ranking_arrays
from ragpulse.metrics.recall import (
    MULTI_HIT,
    RECALL_AT_K,
    SINGLE_HIT,
    recall,
    score_at_k,
    score_multi_hit,
    score_single_hit,
)

Builder = Callable[..., Any]


def test_kernel_hand_computed() -> None:
    gains = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    n_relevant = np.array([4, 1, 2])
    np.testing.assert_array_equal(recall(gains, n_relevant), [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(recall(gains, n_relevant, k=1), [0.25, 0.0, 0.0])
    np.testing.assert_array_equal(recall(gains, n_relevant, k=3), [0.5, 0.0, 0.0])
    np.testing.assert_array_equal(recall(gains, n_relevant, k=100), [0.5, 1.0, 0.0])


def test_kernel_no_relevant_is_zero() -> None:
    np.testing.assert_array_equal(recall(np.zeros((1, 2)), np.array([0])), [0.0])


def _batch(make_batch: Builder, make_record: Builder) -> Any:
    return make_batch(
        make_record("half", ["d1", "x", "d2", "y"], relevant=["d1", "d2", "d3", "d4"]),
        make_record("dupes", ["d1", "d1", "d1"], relevant=["d1", "d2"]),  # d1 found once: 1/2, not 3/2
        make_record("late", ["x", "y", "z", "d1"], relevant={"d1": 3}),
        make_record("missed", ["x"], relevant=["d1"]),
        make_record("empty", [], relevant=["d1"]),
        make_record("text", ["a"], texts=["yes"], relevant_texts=["yes", "also"]),
        make_record("unlabelled", ["d1"]),
        make_record("zero_gain", ["d1"], relevant={"d1": 0}),
    )


def test_single_hit(make_batch: Builder, make_record: Builder) -> None:
    result = score_single_hit(ranking_arrays(_batch(make_batch, make_record)))
    np.testing.assert_array_equal(result.values, [1.0, 1.0, 1.0, 0.0, 0.0, 1.0, np.nan, np.nan])
    assert list(result.status) == [Status.OK] * 6 + [Status.NOT_APPLICABLE] * 2


def test_multi_hit(make_batch: Builder, make_record: Builder) -> None:
    result = score_multi_hit(ranking_arrays(_batch(make_batch, make_record)))
    np.testing.assert_array_equal(result.values, [0.5, 0.5, 1.0, 0.0, 0.0, 0.5, np.nan, np.nan])


def test_recall_at_k(make_batch: Builder, make_record: Builder) -> None:
    arrays = ranking_arrays(_batch(make_batch, make_record))
    np.testing.assert_array_equal(score_at_k(arrays, 2).values, [0.25, 0.5, 0.0, 0.0, 0.0, 0.5, np.nan, np.nan])
    np.testing.assert_array_equal(score_at_k(arrays, 10).values, score_multi_hit(arrays).values)


def test_specs() -> None:
    assert (SINGLE_HIT.name, MULTI_HIT.name, RECALL_AT_K.name) == (
        "document_recall_single_hit",
        "document_recall_multi_hit",
        "recall",
    )
    assert RECALL_AT_K.requires_k and not MULTI_HIT.takes_k and not SINGLE_HIT.takes_k
