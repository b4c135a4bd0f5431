"""What one trace record may be, checked before it can hurt the run: its size, its nesting, its keys and its text.

A record over these limits is quarantined with the reason; it never raises out of staging. The checks are cheap
on ordinary records: the depth is only scanned exactly when the record has more brackets than the limit, and
strings are only searched for characters no warehouse can store.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

import orjson

__all__ = [
    "MAX_DEPTH",
    "MAX_RECORD_BYTES",
    "DuplicateKeyError",
    "NestingError",
    "loads",
    "loads_record",
    "may_hold_unstorable",
    "printable",
    "too_deep",
    "unstorable",
]

MAX_RECORD_BYTES = 16 * 2**20
"""A JSON line longer than this (16 MiB) is quarantined unread: a trace with hundreds of passages is < 2 MiB."""

MAX_DEPTH = 128
"""Deepest nesting of objects and arrays a record may have. Real traces nest < 30 levels; Python's JSON
parser and every recursive reader after it fail near 1,000 with a RecursionError that would end the run."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# A NUL (PostgreSQL text cannot hold one) or a UTF-16 surrogate: a decoded str holds one only when the JSON
# escaped a lone half of a pair ("\ud800"), which has no UTF-8 encoding, so Arrow, DuckDB and PostgreSQL reject it.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# In JSON text a NUL or a surrogate can only come from an escape: valid UTF-8 encodes neither, and a raw NUL is
# invalid JSON. A match may be a valid pair or an escaped backslash, so it only means "look closer".
_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
# Each key of JSON text ends with its closing quote, optional whitespace and a colon; a string can hold the same
# bytes only as an escaped quote, so this counts every key of the text, and can only count more.
_KEY_END = re.compile(rb'"[ \t\n\r]*:')
# orjson reads an integer beyond 64 bits as a float (json: an int); every such float lies outside this range.
_INT64 = 2.0**63


class NestingError(ValueError):
    """JSON text nested deeper than MAX_DEPTH."""


class DuplicateKeyError(ValueError):
    """A JSON object names a key twice: parsers disagree on which value counts, so neither is taken."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"duplicate key {printable(key)!r} in one object (parsers disagree on which value counts)")


def too_deep(text: str) -> bool:
    """Whether JSON text nests objects and arrays deeper than MAX_DEPTH (brackets inside strings not counted).
    The bracket count bounds the depth, so only records with more brackets than the limit are scanned."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    brackets = _BRACKET.findall(_STRING.sub("", text))
    return max(accumulate(_STEP[b] for b in brackets), default=0) > MAX_DEPTH


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return found


def loads(text: str, *, unique_keys: bool = False) -> Any:
    """``json.loads`` that fails with a ValueError, never a RecursionError: NestingError past MAX_DEPTH,
    DuplicateKeyError for a repeated key when ``unique_keys``, json.JSONDecodeError for bad JSON, ValueError
    for an integer of more than 4,300 digits."""
    if too_deep(text):
        raise NestingError(f"nested deeper than {MAX_DEPTH} levels of objects and arrays")
    try:
        return json.loads(text, object_pairs_hook=_unique if unique_keys else None)
    except RecursionError:  # below MAX_DEPTH only if the caller is already deep in the stack
        raise NestingError(f"nested deeper than Python's JSON parser allows (limit {MAX_DEPTH})") from None


def loads_record(text: str, utf8: bytes) -> Any:
    """``loads(text, unique_keys=True)`` of one record, given also as its UTF-8 bytes: the same value or error.

    orjson reads the bytes several times faster than ``json`` with a pairs hook. Its value is taken only when it
    must equal json's: the keys it kept are as many as the text names (so none repeats), and no float is as
    large as an integer orjson could have read past 64 bits. Anything else (what orjson refuses: NaN, lone
    surrogates, bad JSON; a possible repeated key; a huge number) goes to the precise parser, which gives the
    exact value or error."""
    # The brackets of the bytes are those of the text (ASCII), and bytes count faster than wide strings.
    if utf8.count(b"[") + utf8.count(b"{") > MAX_DEPTH and too_deep(text):
        raise NestingError(f"nested deeper than {MAX_DEPTH} levels of objects and arrays")
    try:
        value = orjson.loads(utf8)
    except orjson.JSONDecodeError:
        return loads(text, unique_keys=True)
    if _distinct_keys(value) != len(_KEY_END.findall(utf8)):
        return loads(text, unique_keys=True)
    return value


def _distinct_keys(value: Any) -> int:
    """How many keys the objects of a decoded value hold, or -1 if it holds a float of magnitude >= 2**63."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            count += len(item)
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
        elif type(item) is float and not -_INT64 < item < _INT64:
            return -1
    return count


def unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored as UTF-8 text by every warehouse (NUL, lone surrogate), or None."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    what = "a NUL character (U+0000)" if found.group() == "\x00" else f"a lone surrogate U+{ord(found.group()):04X}"
    return f"contains {what} at character {found.start()}, which no warehouse can store as text"


def may_hold_unstorable(json_text: str) -> bool:
    """Whether strings decoded from ``json_text`` (JSON text inside them too) can hold a NUL or a lone surrogate."""
    return "\\u" in json_text and _UNSTORABLE_ESCAPE.search(json_text) is not None


def printable(text: str) -> str:
    """``text`` with NULs and lone surrogates escaped (``\\x00``, ``\\ud800``), for quarantine entries and errors."""
    if _UNSTORABLE.search(text) is None:
        return text
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
