"""Issue 29, item 2: a secret is masked in every encoding a URL may carry it in, and nothing else is touched.

Properties over generated passwords (any characters), embedded in a URL's userinfo, in a credential query parameter
or in a libpq keyword string, and that inside a lake URL's ``?catalog=`` as it is, percent-encoded once or twice,
``+``-encoded, with lower- or mixed-case hex. The expected output is the same embedding of a placeholder with the
placeholder replaced by ``***``: the mask covers the password's encoded form exactly, the rest stays as it was."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote, quote_plus, unquote

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ragpulse.tasks.core.redaction import carries_secret, redact_url, secret_values
from ragpulse.tasks.core.storage import redact_url as storage_redact_url

PLACEHOLDER = "PLACEHOLDERxPW"
few = settings(max_examples=80, deadline=None, database=None)
passwords = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=24)
credential_keys = st.sampled_from(
    ["password", "sslpassword", "token", "access_token", "X-Amz-Signature", "X-Amz-Credential", "api_key", "apiKey",
     "client_secret", "key", "sig", "secret_key"]
)  # fmt: skip


def _libpq_quoted(password: str) -> str:
    return "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"


# Where a password sits, unencoded context: a template and how the password is written into it.
INNER: dict[str, tuple[str, Callable[[str], str]]] = {
    # SQLAlchemy and libpq take '/', '@' and ':' as they are in a password; the rest percent-encoded.
    "userinfo raw": ("postgresql://user:{}@db.internal:5432/warehouse?schema=s", lambda p: quote(p, safe="/@:")),
    "userinfo encoded": ("postgresql+psycopg://user:{}@db.internal/warehouse", lambda p: quote(p, safe="")),
    "query": ("https://host.example/v1/data?x=1&{key}={}&y=2", lambda p: quote(p, safe="")),
    "query in nested query": ("postgresql://user@db/w?sslmode=require&{key}={}", lambda p: quote(p, safe="")),
    "libpq": ("host=db.internal port=5432 password={} dbname=warehouse", _libpq_quoted),
}


def _lower_hex(text: str, *, odd_only: bool = False) -> str:
    """Lower-case hex in the escapes (of odd bytes only: both cases in one URL, decided by content so that a
    placeholder's surroundings are cased alike)."""
    escape = re.compile(r"%[0-9A-F]{2}")
    return escape.sub(lambda m: m.group() if odd_only and not int(m.group()[1:], 16) % 2 else m.group().lower(), text)


# How the inner text is carried: in a lake URL's catalog parameter, raw or encoded.
def _lake(catalog: str) -> str:
    return f"file:///tmp/x/lake?catalog={catalog}&namespace=team"


OUTER: dict[str, Callable[[str], str]] = {
    "as is": lambda inner: inner,
    "nested raw": _lake,
    "percent once": lambda inner: _lake(quote(inner, safe="")),
    "percent twice": lambda inner: _lake(quote(quote(inner, safe=""), safe="")),
    "plus": lambda inner: _lake(quote_plus(inner, safe="")),
    "lower-case hex": lambda inner: _lake(_lower_hex(quote(inner, safe=""))),
    "mixed-case hex twice": lambda inner: _lake(_lower_hex(quote(quote(inner, safe=""), safe=""), odd_only=True)),
}


def _embedded(inner: str, outer: str, key: str, password: str) -> str:
    template, write = INNER[inner]
    return OUTER[outer](template.replace("{key}", key).replace("{}", write(password)))


def _forms(password: str) -> set[str]:
    """The password as a client may meet it: as is and in each encoding."""
    once = quote(password, safe="")
    return {
        password,
        once,
        quote(once, safe=""),
        quote_plus(password, safe=""),
        _lower_hex(once),
        _libpq_quoted(password),
    }


# A libpq string's spaces would end a raw query value: it is always encoded there.
EMBEDDINGS = [(inner, outer) for inner in INNER for outer in OUTER if (inner, outer) != ("libpq", "nested raw")]


@pytest.mark.parametrize(("inner", "outer"), EMBEDDINGS)
@settings(max_examples=30, deadline=None, database=None)
@given(password=passwords, key=credential_keys)
def test_a_password_is_masked_in_every_encoding(inner: str, outer: str, password: str, key: str) -> None:
    text = _embedded(inner, outer, key, password)
    masked = _embedded(inner, outer, key, PLACEHOLDER).replace(PLACEHOLDER, "***")
    visible = [form for form in _forms(password) if len(form) >= 4]
    # A password that is also the host name, or that the mask itself spells (":***"), cannot vanish.
    assume(not any(form in masked for form in visible))

    redacted = redact_url(text)

    assert not [form for form in visible if form in redacted], redacted
    assert redacted == masked  # masked exactly where it stood: host, db kept
    assert redact_url(redacted) == redacted
    assert carries_secret(text) and carries_secret(redacted)


@few
@given(
    host=st.from_regex(r"[a-z][a-z0-9-]{0,12}(\.[a-z0-9]{1,8}){0,2}", fullmatch=True),
    path=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8), max_size=3),
    params=st.lists(
        st.tuples(
            st.sampled_from(["schema", "sslmode", "namespace", "versionId", "region", "lock_timeout", "catalog"]),
            st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="=@"), max_size=16),
        ),
        max_size=3,
    ),
    encode=st.sampled_from([lambda v: quote(v, safe=""), lambda v: quote(quote(v, safe=""), safe=""), quote_plus]),
)
def test_a_url_without_a_secret_is_unchanged(
    host: str, path: list[str], params: list[tuple[str, str]], encode: Callable[[str], str]
) -> None:
    catalog = encode(f"postgresql://user@{host}:5432/db?sslmode=require")
    query = "&".join([f"catalog={catalog}", *(f"{name}={encode(value)}" for name, value in params)])
    url = f"s3://{host}/{'/'.join(quote(segment) for segment in path)}?{query}"

    assert redact_url(url) == url
    assert not carries_secret(url)


@few
@given(st.text(st.sampled_from(list("?&;=:/@%+ '\\#aZ2F3A40kKeyptsw")) | st.characters(), max_size=60))
def test_redaction_is_idempotent_on_any_text(text: str) -> None:
    once = redact_url(text)
    assert redact_url(once) == once


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("host=db password=hunter22 dbname=w", "host=db password=*** dbname=w"),
        ("host=db password = 'hun ter\\'22' dbname=w", "host=db password = '***' dbname=w"),
        ("dbname=w sslpassword=hunter22", "dbname=w sslpassword=***"),
        ("connect to https://h/p?token=hunter22 failed: refused", "connect to https://h/p?token=*** failed: refused"),
        ("postgresql://u:hun&token=ter22@db/w", "postgresql://u:***@db/w"),
    ],
)  # fmt: skip
def test_libpq_strings_and_messages(text: str, expected: str) -> None:
    """libpq's bare and quoted values, and a query value that ends at the space ending its URL in a message."""
    assert redact_url(text) == expected


def test_a_driver_quoting_the_decoded_password_is_masked_too() -> None:
    url = _lake(quote("postgresql://user:" + quote("p@ss word", safe="") + "@db/w", safe=""))
    assert "p@ss word" in secret_values(url)
    assert storage_redact_url('FATAL: password "p@ss word" rejected', secret_values(url)) == (
        'FATAL: password "***" rejected'
    )
    assert unquote(unquote(storage_redact_url(url))).count("p@ss") == 0
