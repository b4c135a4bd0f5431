"""metrics/reciprocal_rank.py: document_mrr (trec_eval recip_rank)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ragpulse.metrics import Status
from ragpulse.metrics._arrays import ranking_arrays
from ragpulse.metrics.reciprocal_rank import SPEC, reciprocal_rank, score

Builder = Callable[..., Any]


def test_kernel_hand_computed() -> None:
    hits = np.array([[1, 0, 1], [0, 0, 1], [0, 1, 1], [0, 0, 0]], dtype=bool)
    np.testing.assert_array_equal(reciprocal_rank(hits), [1.0, 1 / 3, 0.5, 0.0])


def test_kernel_without_ranks() -> None:
    np.testing.assert_array_equal(reciprocal_rank(np.zeros((3, 0), dtype=bool)), [0.0, 0.0, 0.0])


def test_score(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        make_record("third", ["x", "y", "d1", "d2"], relevant=["d1", "d2"]),
        make_record("dupe_of_miss", ["x", "x", "d1"], relevant={"d1": 2, "x": 0}),
        make_record("missed", ["x"], relevant=["d1"]),
        make_record("empty", [], relevant=["d1"]),
        make_record("text", ["a", "b"], texts=["no", "yes"], relevant_texts=["yes"]),
        make_record("unlabelled", ["d1"]),
    )
    result = score(ranking_arrays(batch))
    np.testing.assert_array_equal(result.values, [1 / 3, 1 / 3, 0.0, 0.0, 0.5, np.nan])
    assert list(result.status) == [Status.OK] * 5 + [Status.NOT_APPLICABLE]


def test_spec() -> None:
    assert (SPEC.name, SPEC.version, SPEC.takes_k) == ("document_mrr", "1.0.0", False)
