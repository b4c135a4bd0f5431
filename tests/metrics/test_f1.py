"""metrics/f1.py: answer_f1, SQuAD token F1."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import Status
from ragpulse.metrics.f1 import SPEC, score, token_f1

Builder = Callable[..., Any]


@pytest.mark.parametrize(
    ("answer", "references", "expected"),
    [
        ("the cat sat", ["a cat sat down"], 0.8),  # P = 2/2, R = 2/3
        ("cat cat dog", ["cat dog dog"], 2 / 3),  # tokens count with multiplicity: common = 1 cat + 1 dog
        ("cat", ["dog", "cat dog"], 2 / 3),  # maximum over references
        ("Cat!", ["the cat"], 1.0),  # after normalisation
        ("cat", ["dog"], 0.0),
        ("the", ["a"], 1.0),  # both empty after normalisation
        ("the", ["cat"], 0.0),  # one empty
        ("cat", ["an"], 0.0),
        ("new york city", ["york city hall", "new york"], 0.8),  # 2/3 against the first, 0.8 against the second
    ],
)
def test_token_f1(answer: str, references: list[str], expected: float) -> None:
    assert token_f1(answer, references) == pytest.approx(expected, rel=1e-15)


def test_score(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        make_record("q1", answer="the cat sat", reference="dog", reference_answers=["a cat sat down"]),
        make_record("q2", answer="cat", reference="cat"),
        make_record("q3", reference="cat"),
        make_record("q4", answer="cat"),
    )
    result = score(batch)
    np.testing.assert_allclose(result.values, [0.8, 1.0, np.nan, np.nan], rtol=1e-15)
    assert list(result.status) == [Status.OK, Status.OK, Status.NOT_APPLICABLE, Status.NOT_APPLICABLE]
    assert list(result.reasons) == [None, None, "no_answer", "no_reference"]


def test_spec() -> None:
    assert (SPEC.name, SPEC.version) == ("answer_f1", "1.0.0")
