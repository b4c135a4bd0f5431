"""metrics/average_precision.py: document_map (trec_eval map)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ragpulse.metrics import Status
from ragpulse.metrics._arrays import ranking_arrays
from ragpulse.metrics.average_precision import SPEC, average_precision, score

Builder = Callable[..., Any]


def test_kernel_hand_computed() -> None:
    gains = np.array(
        [
            [1.0, 0.0, 1.0, 0.0, 0.0],  # hits at 1 and 3 of 3 relevant: (1/1 + 2/3) / 3
            [0.0, 1.0, 0.0, 0.0, 1.0],  # hits at 2 and 5 of 2: (1/2 + 2/5) / 2
            [3.0, 2.0, 0.0, 0.0, 0.0],  # graded gains count as hits: (1 + 1) / 2
            [0.0, 0.0, 0.0, 0.0, 0.0],  # nothing relevant retrieved
            [0.0, 0.0, 0.0, 0.0, 0.0],  # no relevant label at all: 0, the caller marks it not applicable
        ]
    )
    expected = [(1 + 2 / 3) / 3, (1 / 2 + 2 / 5) / 2, 1.0, 0.0, 0.0]
    np.testing.assert_allclose(average_precision(gains, np.array([3, 2, 2, 4, 0])), expected, rtol=1e-15)


def test_kernel_without_ranks() -> None:
    np.testing.assert_array_equal(average_precision(np.zeros((2, 0)), np.array([1, 0])), [0.0, 0.0])


def test_score_statuses_and_duplicates(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        make_record("perfect", ["d1", "d2"], relevant=["d1", "d2"]),
        make_record("dupes", ["d1", "d1", "d2"], relevant=["d1", "d2"]),  # second d1 is a miss: (1 + 2/3) / 2
        make_record("missed", ["x", "y"], relevant=["d1"]),
        make_record("empty", [], relevant=["d1"]),
        make_record("beyond", ["d1"], relevant=["d1", "d2", "d3", "d4"]),  # unretrieved relevant still count in R
        make_record("unlabelled", ["d1"]),
        make_record("zero_gain", ["d1"], relevant={"d1": 0}),
    )
    result = score(ranking_arrays(batch))
    np.testing.assert_allclose(result.values, [1.0, (1 + 2 / 3) / 2, 0.0, 0.0, 0.25, np.nan, np.nan], rtol=1e-15)
    assert list(result.status) == [Status.OK] * 5 + [Status.NOT_APPLICABLE] * 2
    assert list(result.reasons) == [None] * 5 + ["no_relevance_labels", "no_relevant_context_labelled"]


def test_spec() -> None:
    assert (SPEC.name, SPEC.version, SPEC.takes_k) == ("document_map", "1.0.0", False)
