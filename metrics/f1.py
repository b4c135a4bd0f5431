"""Token F1 (SQuAD v1.1, MLQA) between the answer and the best-matching reference answer."""

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
    version="3.0.0",
    summary="Token F1 of the answer normalised by the trace's language (MLQA rules), maximised over the references.",
)


def token_f1(answer: str, references: Sequence[str], language: str | None = None) -> float:
    """Maximum over references of the harmonic mean of token precision and recall (SQuAD v1.1, MLQA).

    Tokens (``ragpulse.metrics._text.tokens`` in ``language``, a BCP 47 tag or None) are counted with
    multiplicity; two answers that are both empty after normalisation score 1.0, one empty against a
    non-empty one 0.0 (the SQuAD v2.0 rule; the v1.1 and MLQA scripts score both-empty 0.0).

    >>> token_f1("the cat sat", ["a cat sat down"])
    0.8
    >>> token_f1("北京", ["北京。"], "zh"), token_f1("北京", ["北京市"], "zh")
    (1.0, 0.8)
    """
    predicted = tokens(answer, language)
    return max(_f1(predicted, tokens(reference, language)) for reference in references)


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
    values = np.full(len(batch), np.nan)
    for i, (answer, refs, reason) in enumerate(zip(batch.answers, batch.references, inapplicable, strict=True)):
        if answer is not None and reason is None:  # no reason: an answer and a reference
            values[i] = token_f1(answer, refs, batch.language_of(i))
    return MetricResult.from_values(values, inapplicable)
