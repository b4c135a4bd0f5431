"""metrics/exact_match.py: answer_exact_match and answer_exact_match_normalized."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import Status
from ragpulse.metrics._text import normalize_answer
from ragpulse.metrics.exact_match import (
    EXACT,
    NORMALIZED,
    answer_inapplicable,
    exact_match,
    score_exact,
    score_normalized,
)

Builder = Callable[..., Any]


@pytest.mark.parametrize(
    ("answer", "references", "exact", "normalized"),
    [
        ("Paris", ["Paris"], 1.0, 1.0),
        ("Paris", ["paris"], 0.0, 1.0),
        ("Paris ", ["Paris"], 0.0, 1.0),
        ("The Paris!", ["paris"], 0.0, 1.0),
        ("Paris", ["London", "Paris"], 1.0, 1.0),
        ("Paris", ["London", "Rome"], 0.0, 0.0),
        ("", [""], 1.0, 1.0),
        ("the", ["a"], 0.0, 1.0),
        ("Paris France", ["Paris"], 0.0, 0.0),
    ],
)
def test_exact_match(answer: str, references: list[str], exact: float, normalized: float) -> None:
    assert exact_match(answer, references) == exact
    assert exact_match(answer, references, normalize_answer) == normalized


def test_scores_over_reference_and_reference_answers(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        make_record("first", answer="Paris", reference="Paris", reference_answers=["City of Light"]),
        make_record("alternative", answer="city of light", reference="Paris", reference_answers=["City of Light"]),
        make_record("only_alternatives", answer="Paris", reference_answers=["London", "Paris"]),
        make_record("wrong", answer="Rome", reference="Paris"),
        make_record("no_answer", reference="Paris"),
        make_record("no_reference", answer="Paris"),
        make_record("neither"),
    )
    exact, normalized = score_exact(batch), score_normalized(batch)
    np.testing.assert_array_equal(exact.values, [1.0, 0.0, 1.0, 0.0, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(normalized.values, [1.0, 1.0, 1.0, 0.0, np.nan, np.nan, np.nan])
    assert list(exact.status) == [Status.OK] * 4 + [Status.NOT_APPLICABLE] * 3
    assert list(exact.reasons) == [None] * 4 + ["no_answer", "no_reference", "no_answer"]
    assert list(answer_inapplicable(batch)) == list(exact.reasons)


def test_empty_answer_is_an_answer(make_batch: Builder) -> None:
    result = score_exact(make_batch(answer="", reference="Paris"))
    assert result.values.tolist() == [0.0]
    assert result.status.tolist() == [Status.OK]


def test_specs() -> None:
    assert (EXACT.name, NORMALIZED.name) == ("answer_exact_match", "answer_exact_match_normalized")
    assert not EXACT.takes_k and not NORMALIZED.takes_k
