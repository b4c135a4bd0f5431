"""metrics/_text.py: SQuAD v1.1 answer normalisation."""

from __future__ import annotations

import pytest

from ragpulse.metrics._text import normalize_answer, tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  Eiffel Tower!", "eiffel tower"),
        ("An apple, a day.", "apple day"),
        ("theatre another", "theatre another"),  # articles only as whole words
        ("A-B", "ab"),  # punctuation is deleted, not turned into a space
        ("  \t\n ", ""),
        ("THE", ""),
        ("Café — ÜBER", "café — über"),  # non-ASCII punctuation is kept, as in SQuAD
        ("the.cat", "thecat"),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_tokens() -> None:
    assert tokens("The cat, the hat.") == ["cat", "hat"]
    assert tokens("a an the") == []
