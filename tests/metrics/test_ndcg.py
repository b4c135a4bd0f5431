"""metrics/ndcg.py: document_ndcg and document_ndcg@k (trec_eval ndcg, ndcg_cut_k)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ragpulse.metrics import Status
from ragpulse.metrics._arrays import ranking_arrays
from ragpulse.metrics.ndcg import SPEC, ndcg, score

Builder = Callable[..., Any]

LOG2_3 = math.log2(3)


def test_kernel_binary_hand_computed() -> None:
    # relevant at ranks 1 and 3 of 3 labelled relevant: DCG = 1 + 1/2, IDCG = 1 + 1/log2(3) + 1/2
    gains = np.array([[1.0, 0.0, 1.0, 0.0]])
    ideal = np.array([[1.0, 1.0, 1.0]])
    np.testing.assert_allclose(ndcg(gains, ideal), [1.5 / (1.5 + 1 / LOG2_3)], rtol=1e-15)
    np.testing.assert_allclose(ndcg(gains, ideal, k=2), [1 / (1 + 1 / LOG2_3)], rtol=1e-15)
    np.testing.assert_allclose(ndcg(gains, ideal, k=1), [1.0], rtol=1e-15)


def test_kernel_graded_hand_computed() -> None:
    # retrieved gains 1, 0, 3; labels also hold an unretrieved 2: ideal order 3, 2, 1
    gains = np.array([[1.0, 0.0, 3.0]])
    ideal = np.array([[3.0, 2.0, 1.0]])
    idcg = 3 + 2 / LOG2_3 + 1 / 2
    np.testing.assert_allclose(ndcg(gains, ideal), [(1 + 3 / 2) / idcg], rtol=1e-15)
    np.testing.assert_allclose(ndcg(gains, ideal, k=2), [1 / (3 + 2 / LOG2_3)], rtol=1e-15)
    np.testing.assert_allclose(ndcg(gains, ideal, k=1), [1 / 3], rtol=1e-15)


def test_kernel_graded_differs_from_binary() -> None:
    gains = np.array([[1.0, 3.0]])
    graded = ndcg(gains, np.array([[3.0, 1.0]]))
    binary = ndcg((gains > 0).astype(float), np.array([[1.0, 1.0]]))
    np.testing.assert_allclose(graded, [(1 + 3 / LOG2_3) / (3 + 1 / LOG2_3)], rtol=1e-15)
    np.testing.assert_array_equal(binary, [1.0])


def test_kernel_k_beyond_both_lists_equals_no_cutoff() -> None:
    gains = np.array([[0.0, 2.0, 1.0], [0.0, 0.0, 0.0]])
    ideal = np.array([[2.0, 1.0], [1.0, 0.0]])
    np.testing.assert_array_equal(ndcg(gains, ideal, k=50), ndcg(gains, ideal))


def test_kernel_zero_ideal_is_zero() -> None:
    np.testing.assert_array_equal(ndcg(np.zeros((1, 2)), np.zeros((1, 0))), [0.0])
    np.testing.assert_array_equal(ndcg(np.zeros((1, 0)), np.ones((1, 1))), [0.0])


def test_score_with_and_without_cutoff(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        make_record("graded", ["a", "b", "c"], relevant={"a": 1, "b": 0, "c": 3, "z": 2}),
        make_record("dupes", ["d1", "d1", "d2"], relevant=["d1", "d2"]),  # DCG 1 + 1/2, not 1 + 1/log2(3) + 1/2
        make_record("missed", ["x"], relevant=["d1"]),
        make_record("empty", [], relevant=["d1"]),
        make_record("zero_gain", ["d1"], relevant={"d1": 0.0}),
        make_record("unlabelled", ["d1"]),
    )
    arrays = ranking_arrays(batch)
    full, at_2 = score(arrays), score(arrays, 2)
    np.testing.assert_allclose(
        full.values, [2.5 / (3.5 + 2 / LOG2_3), 1.5 / (1 + 1 / LOG2_3), 0.0, 0.0, np.nan, np.nan], rtol=1e-15
    )
    np.testing.assert_allclose(
        at_2.values, [1 / (3 + 2 / LOG2_3), 1 / (1 + 1 / LOG2_3), 0.0, 0.0, np.nan, np.nan], rtol=1e-15
    )
    assert list(full.status) == [Status.OK] * 4 + [Status.NOT_APPLICABLE] * 2
    assert list(full.reasons)[4:] == ["no_relevant_context_labelled", "no_relevance_labels"]


def test_spec() -> None:
    assert (SPEC.name, SPEC.version, SPEC.takes_k, SPEC.requires_k) == ("document_ndcg", "1.0.0", True, False)
