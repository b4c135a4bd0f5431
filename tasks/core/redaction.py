"""Credentials in URLs, connection strings and the messages quoting them, found however they are encoded.

One finder, ``secret_spans``, serves every place that masks (``redact_url``) and every place that refuses
(``carries_secret``), so a form of a secret that one of them sees the other sees too. It finds:

- userinfo passwords, ``scheme://user:password@host`` (the password may hold ``/``, ``@`` and ``:``, as SQLAlchemy
  and libpq accept; it runs to the last ``@`` before the query);
- credential query parameters (``password``, ``sslpassword``, tokens, secrets, signatures, API keys, ``key``, ``sig``);
- libpq keyword/value strings, ``host=db password=secret`` and ``password='a b'``;
- all of these inside the value of any query parameter, percent-encoded once or more, ``+``-encoded or not (a lake
  URL's ``?catalog=`` is decoded by the lake and then by SQLAlchemy).

A secret is masked where it stands, in the encoding it has there, so the rest of the text (host, path, database,
other parameters) stays as it was, and masking a masked text changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MASK",
    "carries_secret",
    "redact_url",
    "redacted_line",
    "reject_credentials",
    "secret_spans",
    "secret_values",
]

MASK = "***"
#: Decodings looked through: a URL in a parameter of a URL in a parameter, each encoded twice, takes four.
_MAX_DEPTH = 4

_NAME_CHAR = r"[^=&#;?/\s'\"]"
_CREDENTIAL_NAME = (
    rf"(?:{_NAME_CHAR}*(?:password|passwd|pwd|secret|token|signature|credential|(?:api|private|access)[-_]?key)"
    rf"{_NAME_CHAR}*|key|sig)"
)
# libpq's ``keyword = value``: a value is single-quoted (backslash escapes ' and \) or runs to the next whitespace.
_LIBPQ = re.compile(
    rf"(?i)(?:^|(?<=\s)){_CREDENTIAL_NAME}\s*=\s*"
    r"(?:'(?P<quoted>(?:[^'\\]|\\.)*)'?|(?P<bare>(?:[^\s\\']|\\.)(?:[^\s\\]|\\.)*))",
    re.DOTALL,
)
# The user part stops at ``/``, so ``s3://bucket/key:with@signs`` holds no userinfo.
_USERINFO = re.compile(r"://[^/:@\s?#]*:(?P<secret>[^\s?#]*)@")
_QUERY_SECRET = re.compile(rf"(?i)[?&;]{_CREDENTIAL_NAME}=(?P<secret>[^&#;\s]*)")
# Every query parameter's value: it may be a URL or connection string of its own, encoded.
_PARAMETER = re.compile(rf"[?&;]{_NAME_CHAR}*=(?P<value>[^&#;\s]*)")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_STRUCTURE = re.compile(r"://|[=&?;\s]")
# A placeholder for a secret already found, so a later pattern neither starts nor ends inside it.
_FOUND = "\x00"

_Span = tuple[int, int]


def secret_spans(text: str) -> list[_Span]:
    """The ``(start, end)`` of every credential in ``text``, sorted, overlapping ones merged; empty values are none."""
    return _merged(_spans(text, _MAX_DEPTH))


def carries_secret(text: str) -> bool:
    """Whether ``text`` holds a credential (a masked ``***`` counts: a setting must not hold one either)."""
    return bool(secret_spans(text))


def redact_url(text: str, known: Iterable[str] = ()) -> str:
    """``text`` (a URL, a connection string or a message quoting them) with every credential replaced by ``***``,
    for logs, errors, artifacts, tables and Prefect parameters; and every occurrence of the ``known`` secrets too
    (a driver may quote a password decoded, outside any URL)."""
    spans = _spans(text, _MAX_DEPTH)
    for secret in {value for value in known if value and value != MASK}:
        spans += [(found.start(), found.end()) for found in re.finditer(re.escape(secret), text)]
    parts, at = [], 0
    for start, end in _merged(spans):
        parts += [text[at:start], MASK]
        at = end
    return "".join([*parts, text[at:]])


def redacted_line(exc: BaseException, known: Iterable[str] = ()) -> str:
    """An error's own words on one line (a storage or catalog client's span several), every credential masked."""
    return " ".join(redact_url(str(exc) or type(exc).__name__, known).split())


def secret_values(text: str) -> set[str]:
    """The credentials in ``text`` as they stand and decoded, layer by layer: what a client that decodes them might
    quote in its own error messages."""
    values = set()
    for start, end in secret_spans(text):
        value = text[start:end]
        for _ in range(_MAX_DEPTH + 1):
            values |= {value, _decoded(value, plus=True)[0]}
            value = _decoded(value, plus=False)[0]
    return values - {"", MASK}


def _spans(text: str, depth: int) -> list[_Span]:
    spans = _direct_spans(text)
    if depth:
        for parameter in _PARAMETER.finditer(text):
            offset = parameter.start("value")
            spans += [(offset + start, offset + end) for start, end in _encoded_spans(parameter["value"], depth)]
    return spans


def _direct_spans(text: str) -> list[_Span]:
    """Credentials written plainly. libpq's quoted values may hold anything, so they are found first; then
    userinfo passwords, which may hold ``&`` and ``=``; then query parameters."""
    spans: list[_Span] = []
    for pattern in (_LIBPQ, _USERINFO, _QUERY_SECRET):
        found = []
        for match in pattern.finditer(text):
            group = next(name for name in ("quoted", "bare", "secret") if match.groupdict().get(name) is not None)
            if match.end(group) > match.start(group):
                found.append(match.span(group))
        for start, end in found:
            text = text[:start] + _FOUND * (end - start) + text[end:]
        spans += found
    return spans


def _encoded_spans(value: str, depth: int) -> list[_Span]:
    """Credentials in ``value`` once decoded (percent escapes, and ``+`` as a space or not), at any depth of encoding,
    as spans of ``value`` itself. A decoded value with no structure yet (no ``://``, ``=``, separator or space) is
    one encoded again, decoded as a whole; one with structure is read as a text of its own."""
    if not depth or not (_ESCAPE.search(value) or "+" in value):
        return []
    spans = []
    for plus in (False, True) if "+" in value else (False,):
        decoded, starts = _decoded(value, plus=plus)
        if decoded == value:
            continue
        inner = _spans(decoded, depth - 1) if _STRUCTURE.search(decoded) else _encoded_spans(decoded, depth - 1)
        spans += [(starts[start], starts[end]) for start, end in inner]
    return spans


def _decoded(text: str, *, plus: bool) -> tuple[str, list[int]]:
    """``text`` percent-decoded as UTF-8 (as ``urllib.parse.unquote``, ``unquote_plus`` when ``plus``), and where
    each decoded character starts in ``text`` (one more entry: the end)."""
    chars: list[str] = []
    starts: list[int] = []
    at = 0
    while at < len(text):
        if not _ESCAPE.match(text, at):
            chars.append(" " if plus and text[at] == "+" else text[at])
            starts.append(at)
            at += 1
            continue
        escapes = []
        while escape := _ESCAPE.match(text, at):
            escapes.append((int(escape.group()[1:], 16), at))
            at = escape.end()
        chars_starts = _utf8(escapes)
        chars += [char for char, _ in chars_starts]
        starts += [start for _, start in chars_starts]
    return "".join(chars), [*starts, len(text)]


def _utf8(escapes: list[tuple[int, int]]) -> list[tuple[str, int]]:
    """A run of escaped bytes as characters, each with the position of its first escape; a byte that starts no
    valid sequence decodes as U+FFFD, as ``unquote`` does."""
    decoded = []
    at = 0
    while at < len(escapes):
        lead = escapes[at][0]
        size = 1 if lead < 0x80 else 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4
        try:
            char = bytes(byte for byte, _ in escapes[at : at + size]).decode("utf-8")
        except UnicodeDecodeError:
            char, size = "\ufffd", 1
        decoded.append((char, escapes[at][1]))
        at += size
    return decoded


def _merged(spans: Iterable[_Span]) -> list[_Span]:
    merged: list[_Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


_CREDENTIAL_KEYS = frozenset({"key", "secret", "token", "password", "aws_secret_access_key"})


def reject_credentials(options: Mapping[str, Any], setting: str) -> dict[str, Any]:
    """fsspec options as given, or ValueError when they carry credentials (those belong in the environment)."""
    leaked = sorted(k for k in options if k.lower() in _CREDENTIAL_KEYS)
    if leaked:
        raise ValueError(
            f"{setting} must not carry credentials ({', '.join(leaked)}); "
            "use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile instead"
        )
    return dict(options)
