"""The run's shared types are plain values: equal by content, so they survive pickling into the task cache."""

from __future__ import annotations

from ragpulse.tasks.core.types import QuarantinedRecord


def test_quarantined_record_is_a_plain_value() -> None:
    record = QuarantinedRecord("f.jsonl", 3, None, "<record>", "invalid JSON", "{")

    assert record == QuarantinedRecord("f.jsonl", 3, None, "<record>", "invalid JSON", "{")
