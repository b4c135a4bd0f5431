"""Exact match of the answer against any acceptable reference answer, raw or normalised by language."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from ragpulse.metrics._spec import MetricResult, MetricSpec
from ragpulse.metrics._text import normalize_answer
from ragpulse.metrics.batch import TraceBatch

__all__ = ["EXACT", "NORMALIZED", "answer_inapplicable", "exact_match", "score_exact", "score_normalized"]

EXACT = MetricSpec(
    name="answer_exact_match",
    version="1.0.0",
    summary="1 if the answer equals any reference answer character for character, else 0.",
)
NORMALIZED = MetricSpec(
    name="answer_exact_match_normalized",
    version="3.0.0",
    summary="1 if the answer normalised in the trace's language (MLQA rules) equals a normalised reference, else 0.",
)


def exact_match(answer: str, references: Sequence[str], normalize: Callable[[str], str] | None = None) -> float:
    """1.0 when ``answer`` equals one of ``references`` (after ``normalize`` when given).

    >>> exact_match("The Eiffel Tower", ["eiffel tower"], normalize_answer)
    1.0
    """
    if normalize is None:
        return float(answer in references)
    target = normalize(answer)
    return float(any(normalize(reference) == target for reference in references))


def answer_inapplicable(batch: TraceBatch) -> np.ndarray:
    """Why answer metrics do not apply to each trace: no answer, or no reference to compare with."""
    return np.array(
        [
            "no_answer" if answer is None else "no_reference" if not refs else None
            for answer, refs in zip(batch.answers, batch.references, strict=True)
        ],
        dtype=object,
    )


def _score(batch: TraceBatch, normalized: bool) -> MetricResult:
    inapplicable = answer_inapplicable(batch)
    values = np.full(len(batch), np.nan)
    for i, (answer, refs, reason) in enumerate(zip(batch.answers, batch.references, inapplicable, strict=True)):
        if answer is not None and reason is None:  # no reason: an answer and a reference
            normalize = functools.partial(normalize_answer, language=batch.language_of(i)) if normalized else None
            values[i] = exact_match(answer, refs, normalize)
    return MetricResult.from_values(values, inapplicable)


def score_exact(batch: TraceBatch, k: int | None = None) -> MetricResult:
    return _score(batch, normalized=False)


def score_normalized(batch: TraceBatch, k: int | None = None) -> MetricResult:
    return _score(batch, normalized=True)
