"""metrics/errors.py: the exception tree, its attributes and its messages."""

from __future__ import annotations

import pytest

from ragpulse.metrics.errors import InvalidRecordError, RagpulseError, ShapeError, UnknownMetricError


def test_tree() -> None:
    assert issubclass(InvalidRecordError, RagpulseError)
    assert issubclass(InvalidRecordError, ValueError)
    assert issubclass(ShapeError, RagpulseError)
    assert issubclass(ShapeError, ValueError)
    assert issubclass(UnknownMetricError, RagpulseError)
    assert issubclass(UnknownMetricError, KeyError)


def test_invalid_record_names_record_and_field() -> None:
    error = InvalidRecordError("q-0042", "doc_ids", "duplicate id 'd7'")
    assert str(error) == "record 'q-0042', field 'doc_ids': duplicate id 'd7'"
    assert (error.record_id, error.field, error.reason, error.location) == (
        "q-0042",
        "doc_ids",
        "duplicate id 'd7'",
        None,
    )


def test_invalid_record_without_id_and_with_location() -> None:
    assert str(InvalidRecordError(None, "trace_id", "missing")) == "record, field 'trace_id': missing"
    error = InvalidRecordError("q1", "answer", "not a string", location="traces.jsonl:3")
    assert str(error) == "record 'q1' (traces.jsonl:3), field 'answer': not a string"


def test_shape_error() -> None:
    error = ShapeError("k", "k >= 1", 0)
    assert str(error) == "argument 'k': expected k >= 1, got 0"
    assert (error.argument, error.expected, error.got) == ("k", "k >= 1", 0)


def test_unknown_metric_lists_known_names_sorted() -> None:
    error = UnknownMetricError("nope", ["b", "a"])
    assert error.known == ["a", "b"]
    assert str(error) == "unknown metric 'nope'; known metrics: a, b"
    with pytest.raises(KeyError):
        raise error
