"""How the run summary groups quarantine reasons: by kind, with the record's own details cut, and commas kept."""

from __future__ import annotations

import pytest

from ragpulse.tasks.reporting.run_summary import _reason_kind

LOOKED_IN = "no question in the langsmith trace (looked in the root run's inputs, or a retriever run's inputs)"


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("expected a non-empty string, got NoneType None", "expected a non-empty string"),
        ("invalid JSON: Expecting value at column 1", "invalid JSON"),
        (
            "duplicate trace_id within the partition, first seen at s3://b/a.jsonl:3",
            "duplicate trace_id within the partition",
        ),
        ("line is not UTF-8: invalid start byte at byte 4", "line is not UTF-8"),
        ("file is corrupt after line 41: EOFError: Compressed file ended", "file is corrupt"),
        # Commas that belong to the reason stay: the old summary cut these at the first comma.
        ("a document needs an id or a text, it has neither", "a document needs an id or a text, it has neither"),
        (LOOKED_IN, LOOKED_IN),
    ],
)
def test_reasons_are_grouped_by_kind(reason: str, kind: str) -> None:
    assert _reason_kind(reason) == kind
