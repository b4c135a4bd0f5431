"""Shared builders for the metric tests: trace records in the documented trace format and random batches."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import TraceBatch

Record = dict[str, Any]


def _record(
    trace_id: str = "q1",
    ids: Sequence[str] = (),
    *,
    relevant: Sequence[str] | Mapping[str, float] | None = None,
    texts: Sequence[str] | None = None,
    relevant_texts: Sequence[str] | Mapping[str, float] | None = None,
    answer: str | None = None,
    reference: str | None = None,
    reference_answers: Sequence[str] | None = None,
) -> Record:
    """One trace; context texts default to ``text of <id>``."""
    texts = [f"text of {i}" for i in ids] if texts is None else texts
    record: Record = {"trace_id": trace_id, "contexts": [{"id": i, "text": t} for i, t in zip(ids, texts, strict=True)]}
    optional = {
        "relevant_context_ids": relevant,
        "relevant_contexts": relevant_texts,
        "answer": answer,
        "reference": reference,
        "reference_answers": reference_answers,
    }
    record.update({key: value for key, value in optional.items() if value is not None})
    return record


@pytest.fixture
def make_record() -> Callable[..., Record]:
    return _record


@pytest.fixture
def make_batch() -> Callable[..., TraceBatch]:
    """``make_batch(record, ...)`` or ``make_batch(ids=[...], relevant=[...])`` for a one-trace batch."""

    def build(*records: Record, **one_trace: Any) -> TraceBatch:
        return TraceBatch.from_records([*records, _record(**one_trace)] if one_trace else list(records))

    return build


def _random_records(
    n: int,
    rng: np.random.Generator,
    *,
    pool: int = 30,
    max_contexts: int = 12,
    duplicates: bool = True,
    text_labels: bool = True,
    answers: bool = True,
) -> list[Record]:
    """Random traces covering every branch: graded and list labels, zero gains, no labels, text-only
    labels, empty and duplicated retrievals, missing answers and references."""
    words = ["paris", "Paris", "the paris", "london", "rome", "Rome!", "a b", "", "berlin city"]
    records: list[Record] = []
    for i in range(n):
        size = int(rng.integers(0, max_contexts + 1))
        if duplicates and rng.random() < 0.3:
            ids = [f"d{x}" for x in rng.integers(0, pool // 3, size)]
        else:
            ids = [f"d{x}" for x in rng.choice(pool, size=min(size, pool), replace=False)]
        labelled = [f"d{x}" for x in rng.choice(pool, size=int(rng.integers(0, 7)), replace=False)]
        kind = rng.random()
        relevant: Sequence[str] | dict[str, float] | None = None
        relevant_texts: Sequence[str] | None = None
        if kind < 0.45:
            relevant = {key: float(rng.integers(0, 4)) for key in labelled}
        elif kind < 0.75:
            relevant = labelled
        elif kind < 0.9 and text_labels:
            relevant_texts = [f"text of {key}" for key in labelled]
        answer = str(rng.choice(words)) if answers and rng.random() < 0.9 else None
        references = [str(w) for w in rng.choice(words, size=int(rng.integers(0, 3)))] if answers else []
        records.append(
            _record(
                f"q{i}",
                ids,
                relevant=relevant,
                relevant_texts=relevant_texts,
                answer=answer,
                reference=references[0] if references else None,
                reference_answers=references[1:],
            )
        )
    return records


@pytest.fixture(scope="session")
def random_records() -> Callable[..., list[Record]]:
    return _random_records
