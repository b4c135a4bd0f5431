"""SQuAD answer normalisation and tokenisation, shared by exact match and F1."""

from __future__ import annotations

import re
import string

__all__ = ["normalize_answer", "tokens"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and the articles a/an/the, collapse white space (SQuAD v1.1).

    >>> normalize_answer("The  Eiffel Tower!")
    'eiffel tower'
    """
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def tokens(text: str) -> list[str]:
    return normalize_answer(text).split()
