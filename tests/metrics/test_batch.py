"""metrics/batch.py: building and validating a batch of traces."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from ragpulse.metrics import InvalidRecordError, ShapeError, TraceBatch


def _batch(**overrides: Any) -> TraceBatch:
    fields: dict[str, Any] = {
        "trace_ids": ["q1"],
        "context_ids": [["d1", "d2"]],
        "context_texts": [["one", "two"]],
        "relevant_ids": [{"d1": 1.0}],
        "relevant_texts": [None],
        "answers": ["a"],
        "references": [["a"]],
    }
    return TraceBatch(**{**fields, **overrides})


def test_valid_batch() -> None:
    assert len(_batch()) == 1


@pytest.mark.parametrize(
    "field", ["context_ids", "context_texts", "relevant_ids", "relevant_texts", "answers", "references"]
)
def test_every_field_needs_one_entry_per_trace(field: str) -> None:
    with pytest.raises(
        ShapeError, match=rf"argument '{field}': expected length 1 \(one per trace\), got length 2"
    ) as info:
        _batch(**{field: [None, None]})
    assert info.value.argument == field


def test_ids_and_texts_must_pair_up() -> None:
    with pytest.raises(InvalidRecordError, match="record 'q1', field 'contexts': 2 ids but 1 texts"):
        _batch(context_texts=[["one"]])


@pytest.mark.parametrize(
    ("gain", "shown"),
    [(-1, "-1"), (-0.5, "-0.5"), (math.nan, "nan"), (math.inf, "inf"), (True, "True"), ("2", "'2'"), (None, "None")],
)
def test_id_gains_must_be_finite_non_negative_numbers(gain: object, shown: str) -> None:
    with pytest.raises(
        InvalidRecordError,
        match="record 'q1', field 'relevant_context_ids': "
        + rf"relevance of 'd1' must be a finite number >= 0, got {shown}$",
    ) as info:
        _batch(relevant_ids=[{"d2": 1, "d1": gain}])
    assert (info.value.record_id, info.value.field) == ("q1", "relevant_context_ids")


def test_text_gains_are_validated_too() -> None:
    with pytest.raises(InvalidRecordError, match="record 'q1', field 'relevant_contexts': relevance of 'one'"):
        _batch(relevant_ids=[None], relevant_texts=[{"one": -2.0}])


def test_zero_and_integer_gains_are_valid() -> None:
    assert len(_batch(relevant_ids=[{"d1": 0, "d2": 3}])) == 1


def test_from_records_list_labels_get_gain_one(make_record: Callable[..., dict[str, Any]]) -> None:
    batch = TraceBatch.from_records([make_record("q1", ["d1", "d2"], relevant=["d2", "d3", "d2"])])
    assert batch.trace_ids == ["q1"]
    assert batch.context_ids == [["d1", "d2"]]
    assert batch.context_texts == [["text of d1", "text of d2"]]
    assert batch.relevant_ids == [{"d2": 1.0, "d3": 1.0}]
    assert batch.relevant_texts == [None]


def test_from_records_keeps_graded_labels_and_stringifies_keys() -> None:
    record = {"trace_id": 7, "contexts": [{"id": 1, "text": "t"}], "relevant_context_ids": {1: 2, "d9": 0}}
    batch = TraceBatch.from_records([record])
    assert batch.trace_ids == ["7"]
    assert batch.context_ids == [["1"]]
    assert batch.relevant_ids == [{"1": 2, "d9": 0}]


def test_from_records_without_contexts_or_labels() -> None:
    batch = TraceBatch.from_records([{"trace_id": "q1"}, {"trace_id": "q2", "contexts": None}])
    assert batch.context_ids == [[], []]
    assert batch.relevant_ids == [None, None]
    assert batch.answers == [None, None]
    assert batch.references == [[], []]


def test_from_records_references_in_order_without_repeats(make_record: Callable[..., dict[str, Any]]) -> None:
    record = make_record(answer="x", reference="b", reference_answers=["a", "b", "c"])
    assert TraceBatch.from_records([record]).references == [["b", "a", "c"]]
    assert TraceBatch.from_records([make_record(reference_answers=["a"])]).references == [["a"]]


def test_from_records_validates_gains(make_record: Callable[..., dict[str, Any]]) -> None:
    with pytest.raises(InvalidRecordError, match="record 'q1', field 'relevant_context_ids'"):
        TraceBatch.from_records([make_record("q1", ["d1"], relevant={"d1": -1})])
