"""Properties every registered metric keeps on random batches: range, NaN and status agree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import REGISTRY, MetricRequest, Status, TraceBatch, compute

Builder = Callable[..., Any]


def _requests() -> list[MetricRequest]:
    requests: list[MetricRequest] = []
    for name, definition in REGISTRY.items():
        if definition.needs in ("judge", "embeddings"):  # scored through judge_batch, tested with a FakeJudge
            continue
        if not definition.spec.requires_k:
            requests.append(MetricRequest(name))
        if definition.spec.takes_k:
            requests.extend(MetricRequest(name, k) for k in (1, 3, 10, 50))
    return requests


REQUESTS = _requests()


@pytest.fixture(scope="module")
def random_batches(random_records: Builder) -> list[TraceBatch]:
    rng = np.random.default_rng(0)
    return [TraceBatch.from_records(random_records(int(rng.integers(1, 400)), rng)) for _ in range(8)]


@pytest.mark.parametrize("index", range(8))
def test_values_in_range_and_nan_exactly_where_not_ok(index: int, random_batches: list[TraceBatch]) -> None:
    batch = random_batches[index]
    results = compute(batch, REQUESTS)
    assert list(results) == [r.name for r in REQUESTS]
    for request in REQUESTS:
        spec, result = request.definition.spec, results[request.name]
        ok = result.status == Status.OK
        assert result.values.shape == result.status.shape == result.reasons.shape == (len(batch),)
        assert set(result.status.tolist()) <= {Status.OK, Status.NOT_APPLICABLE}, request.name
        np.testing.assert_array_equal(np.isnan(result.values), ~ok, err_msg=request.name)
        np.testing.assert_array_equal(np.equal(result.reasons, None), ok, err_msg=request.name)
        values = result.values[ok]
        assert np.all((values >= spec.lower) & (values <= spec.upper)), request.name


def test_random_batches_cover_every_branch(random_records: Builder) -> None:
    batch = TraceBatch.from_records(random_records(400, np.random.default_rng(0)))
    reasons = {name: set(result.reasons.tolist()) for name, result in compute(batch, REQUESTS).items()}
    assert reasons["document_map"] == {None, "no_relevance_labels", "no_relevant_context_labelled"}
    assert reasons["answer_f1"] == {None, "no_answer", "no_reference"}
    assert any(ids and labels is None for ids, labels in zip(batch.context_ids, batch.relevant_ids, strict=True))
    assert any(len(set(ids)) < len(ids) for ids in batch.context_ids)
    assert any(not ids for ids in batch.context_ids)
    assert any(labels is not None for labels in batch.relevant_texts)
