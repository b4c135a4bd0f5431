"""SQuAD token F1 between the answer and the best-matching reference answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from ragpulse.metrics._spec import MetricResult, MetricSpec
from ragpulse.metrics._text import tokens
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.exact_match import answer_inapplicable

__all__ = ["SPEC", "score", "token_f1"]

SPEC = MetricSpec(
    name="answer_f1",
    version="1.0.0",
    summary="SQuAD token F1 of the normalised answer, maximised over the reference answers.",
)


def token_f1(answer: str, references: Sequence[str]) -> float:
    """Maximum over references of the harmonic mean of token precision and recall (SQuAD v1.1).

    Tokens are counted with multiplicity after SQuAD normalisation; two answers that are both
    empty after normalisation score 1.0, one empty against a non-empty one 0.0 (the SQuAD v2.0
    rule; the v1.1 script scores both-empty 0.0).

    >>> token_f1("the cat sat", ["a cat sat down"])
    0.8
    """
    predicted = tokens(answer)
    return max(_f1(predicted, tokens(reference)) for reference in references)


def _f1(predicted: list[str], expected: list[str]) -> float:
    if not predicted or not expected:
        return float(predicted == expected)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def score(batch: TraceBatch, k: int | None = None) -> MetricResult:
    inapplicable = answer_inapplicable(batch)
    values = np.fromiter(
        (
            token_f1(answer, refs) if reason is None else np.nan
            for answer, refs, reason in zip(batch.answers, batch.references, inapplicable, strict=True)
        ),
        dtype=np.float64,
        count=len(batch),
    )
    return MetricResult.from_values(values, inapplicable)
