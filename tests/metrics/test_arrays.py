"""metrics/_arrays.py: matching retrieved contexts to labels, as dense gain matrices."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ragpulse.metrics import TraceBatch
from ragpulse.metrics._arrays import NO_LABELS, NO_RELEVANT, ranking_arrays

Builder = Callable[..., Any]


def test_graded_labels_padding_and_ideal(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        make_record("q1", ["a", "b", "c"], relevant={"a": 1, "b": 0, "c": 3, "z": 2}),
        make_record("q2", ["x"], relevant=["y", "x"]),
    )
    arrays = ranking_arrays(batch)
    np.testing.assert_array_equal(arrays.gains, [[1.0, 0.0, 3.0], [1.0, 0.0, 0.0]])
    np.testing.assert_array_equal(arrays.ideal, [[3.0, 2.0, 1.0], [1.0, 1.0, 0.0]])
    np.testing.assert_array_equal(arrays.n_relevant, [3, 2])
    assert list(arrays.inapplicable) == [None, None]
    assert arrays.gains.dtype == np.float64
    assert arrays.n_relevant.dtype == np.int64


def test_duplicates_are_credited_once_at_their_first_rank(make_batch: Builder) -> None:
    arrays = ranking_arrays(make_batch(ids=["d1", "d1", "d2", "d1", "d2"], relevant={"d1": 2, "d2": 1}))
    np.testing.assert_array_equal(arrays.gains, [[2.0, 0.0, 1.0, 0.0, 0.0]])
    np.testing.assert_array_equal(arrays.n_relevant, [2])


def test_duplicates_are_per_trace(make_batch: Builder, make_record: Builder) -> None:
    arrays = ranking_arrays(
        make_batch(make_record("q1", ["d1", "d2"], relevant=["d1"]), make_record("q2", ["d1"], relevant=["d1"]))
    )
    np.testing.assert_array_equal(arrays.gains, [[1.0, 0.0], [1.0, 0.0]])


def test_reasons_for_missing_and_zero_labels(make_batch: Builder, make_record: Builder) -> None:
    arrays = ranking_arrays(
        make_batch(
            make_record("none", ["d1"]),
            make_record("zeros", ["d1"], relevant={"d1": 0}),
            make_record("empty", ["d1"], relevant=[]),
            make_record("fine", [], relevant=["d1"]),
        )
    )
    assert list(arrays.inapplicable) == [NO_LABELS, NO_RELEVANT, NO_RELEVANT, None]
    assert (NO_LABELS, NO_RELEVANT) == ("no_relevance_labels", "no_relevant_context_labelled")
    np.testing.assert_array_equal(arrays.n_relevant, [0, 0, 0, 1])
    np.testing.assert_array_equal(arrays.gains, np.zeros((4, 1)))


def test_text_labels_used_only_without_id_labels(make_batch: Builder, make_record: Builder) -> None:
    arrays = ranking_arrays(
        make_batch(
            make_record("by_text", ["d1", "d2"], texts=["alpha", "beta"], relevant_texts={"beta": 2}),
            make_record("by_id", ["d1", "d2"], texts=["alpha", "beta"], relevant=["d1"], relevant_texts=["beta"]),
            make_record("text_dupes", ["d1", "d2"], texts=["beta", "beta"], relevant_texts=["beta"]),
        )
    )
    np.testing.assert_array_equal(arrays.gains, [[0.0, 2.0], [1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_array_equal(arrays.n_relevant, [1, 1, 1])


def test_empty_batch() -> None:
    arrays = ranking_arrays(TraceBatch([], [], [], [], [], [], []))
    assert arrays.gains.shape == (0, 0)
    assert arrays.ideal.shape == (0, 0)
    assert arrays.n_relevant.shape == (0,)


def test_no_contexts_anywhere(make_batch: Builder, make_record: Builder) -> None:
    arrays = ranking_arrays(make_batch(make_record("q1", [], relevant=["d1"]), make_record("q2", [], relevant=["d2"])))
    assert arrays.gains.shape == (2, 0)
    np.testing.assert_array_equal(arrays.ideal, [[1.0], [1.0]])


def test_same_key_in_many_traces_matches_each_traces_own_labels(make_batch: Builder, make_record: Builder) -> None:
    records = [make_record(f"q{i}", ["d0", "d1", "d2"], relevant={f"d{i}": i + 1}) for i in range(3)]
    arrays = ranking_arrays(make_batch(*records))
    np.testing.assert_array_equal(arrays.gains, [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]])


def test_matches_a_naive_per_trace_loop(random_records: Builder) -> None:
    rng = np.random.default_rng(0)
    batch = TraceBatch.from_records(random_records(500, rng))
    arrays = ranking_arrays(batch)
    for i in range(len(batch)):
        labels = batch.relevant_ids[i]
        keys = batch.context_ids[i]
        if labels is None:
            labels, keys = batch.relevant_texts[i], batch.context_texts[i]
        expected = np.zeros(arrays.gains.shape[1])
        seen: set[str] = set()
        for rank, key in enumerate(keys if labels is not None else ()):
            if key not in seen:
                expected[rank] = labels.get(key, 0.0)  # type: ignore[union-attr]
            seen.add(key)
        np.testing.assert_array_equal(arrays.gains[i], expected)
        positive = sorted((float(g) for g in (labels or {}).values() if g > 0), reverse=True)
        assert arrays.n_relevant[i] == len(positive)
        np.testing.assert_array_equal(arrays.ideal[i, : len(positive)], positive)
        assert not arrays.ideal[i, len(positive) :].any()


def test_text_labels_with_contexts_logged_without_text_are_not_applicable() -> None:
    from ragpulse.metrics._arrays import NO_CONTEXT_TEXT

    batch = TraceBatch(
        trace_ids=["by-text", "by-id"],
        context_ids=[["a", "b"], ["a"]],
        context_texts=[["first", None], [None]],
        relevant_ids=[None, {"a": 1.0}],
        relevant_texts=[{"first": 1.0}, None],
        answers=[None, None],
        references=[[], []],
    )
    arrays = ranking_arrays(batch)
    assert list(arrays.inapplicable) == [NO_CONTEXT_TEXT, None]  # ids still score without text
    np.testing.assert_array_equal(arrays.gains[1], [1.0])


def test_id_labels_with_contexts_logged_without_id_fall_back_to_text_labels_or_are_not_applicable() -> None:
    from ragpulse.metrics._arrays import NO_CONTEXT_ID

    batch = TraceBatch(
        trace_ids=["ids-only", "both", "all-ids"],
        context_ids=[[None, "b"], [None, "b"], ["a", "b"]],
        context_texts=[["first", "second"], ["first", "second"], ["first", None]],
        relevant_ids=[{"b": 1.0}, {"b": 1.0}, {"b": 2.0}],
        relevant_texts=[None, {"first": 1.0}, None],
        answers=[None, None, None],
        references=[[], [], []],
    )
    arrays = ranking_arrays(batch)
    assert list(arrays.inapplicable) == [NO_CONTEXT_ID, None, None]
    np.testing.assert_array_equal(arrays.gains[1], [1.0, 0.0])  # matched by text: "first" at rank 1
    np.testing.assert_array_equal(arrays.gains[2], [0.0, 2.0])
