"""Staging's fast paths (orjson decoding, ``_fast_row``, ``staged_table``) give what the precise paths give: the
same value, the same error, the same reason, the same Parquet bytes. Each case also says which path it takes, so
that a change that sends everything one way fails here."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest import limits, records
from ragpulse.tasks.ingest.records import STAGED_SCHEMA, parse_record, staged_table
from tests.tasks.ingest.test_hostile_records import CANONICAL, good


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return "value", fn(*args, **kwargs)
    except InvalidRecordError as exc:
        return "invalid", (exc.record_id, exc.field, exc.reason)
    except ValueError as exc:
        return type(exc).__name__, str(exc)


def _takes_orjson(text: str) -> bool:
    """Whether loads_record keeps orjson's value for ``text`` (no fallback to the precise parser)."""
    try:
        import orjson

        value = orjson.loads(text.encode("utf-8", "surrogatepass"))
    except ValueError:
        return False
    return limits._distinct_keys(value) == len(limits._KEY_END.findall(text.encode("utf-8", "surrogatepass")))


JSON_TEXTS = [
    ("plain record", json.dumps(good("t1")), True),
    ("non-ASCII and escapes", json.dumps({"q": 'say "hi", 日本 😀', "n": [1, 2.5, -0.0, None, True]}), True),
    ("unicode escapes", r'{"a": "\u65e5\ud83d\ude00\u0022", "b": 1}', True),
    ("repeated key", '{"a": 1, "a": 2}', False),
    ("repeated key deep", '{"x": [{"k": 1}, {"k": 2, "j": {"z": 1, "z": 1}}]}', False),
    ("repeated key, whitespace before colons", '{"a" : 1, "b"\t:\n2, "a"\r: 3}', False),
    # An escaped quote and a colon in a string look like one more key: the precise parser decides.
    ("quote-colon in a string", r'{"a": "x\": y", "b": 1}', False),
    ("quote-colon in a string hides a repeat", r'{"a": "x\": y", "a": 1}', False),
    ("quote as \\u0022 then colon", r'{"a": "\u0022: y", "b": 1}', True),
    ("empty key", '{"": 1, "b": {}}', True),
    ("integer past 64 bits", '{"n": 18446744073709551616}', False),
    ("integer below -2**63", '{"n": -9223372036854775809}', False),
    ("largest unsigned 64-bit integer", '{"n": 18446744073709551615}', True),
    ("large float", '{"f": 1e300, "g": -9.3e18}', False),
    ("overflowing float", '{"f": 1e400}', False),
    ("NaN", '{"f": NaN}', False),
    ("lone surrogate", '{"s": "\\ud800"}', False),
    ("escaped NUL", '{"s": "\\u0000"}', True),
    ("bad JSON", '{"a": 1,}', False),
    ("truncated", '{"a": [1, 2', False),
    ("4,301 digits", '{"n": ' + "1" * 4301 + "}", False),
    ("too deep", "[" * 200 + "]" * 200, False),
    ("deep in a string only", json.dumps({"s": "[" * 500}), True),
    ("top-level array", "[1, 2]", True),
    ("CRLF", '{"a": 1}\r\n', True),
]


@pytest.mark.parametrize(("name", "text", "fast"), JSON_TEXTS, ids=[case[0] for case in JSON_TEXTS])
def test_loads_record_gives_the_precise_parsers_value_or_error(name: str, text: str, fast: bool) -> None:
    utf8 = text.encode("utf-8", "surrogatepass")
    expected = _outcome(limits.loads, text, unique_keys=True)
    got = _outcome(limits.loads_record, text, utf8)
    assert got == expected
    assert type(got[1]) is type(expected[1])
    if got[0] == "value":
        assert json.dumps(got[1]) == json.dumps(expected[1])  # ints stay ints, -0.0 stays -0.0
    if not limits.too_deep(text):
        assert _takes_orjson(text) is fast


def test_loads_record_names_the_repeated_key_as_before() -> None:
    text = '{"ok": 1, "inner": {"k": 1, "k": 2}, "ok": 3}'
    with pytest.raises(limits.DuplicateKeyError) as error:
        limits.loads_record(text, text.encode())
    assert error.value.key == "k"  # the innermost object closes first, as with json's pairs hook


GOOD = good("g1")
OPERATIONS: dict[str, Any] = {
    "latency_ms": 1834, "retrieval_latency_ms": 212.5, "generation_latency_ms": 1490.0,
    "usage": [{"model": "gpt-4o-mini", "input_tokens": 812, "output_tokens": 64}, {"model": None}],
    "errors": [{"kind": "tool", "name": "exchange_rate", "message": "為替レートを取得できません"}],
    "feedback": [{"name": "thumbs", "value": False, "source": "user", "comment": "答案不对"},
                 {"name": "stars", "value": 4, "source": "user"},
                 {"name": "topic", "label": "billing", "source": "api"},
                 {"name": "quality", "value": -0.5, "label": None, "source": "evaluation"}],
}  # fmt: skip
# (name, record, whether _fast_row takes it): valid and invalid records on both sides of the fast path.
RECORDS: list[tuple[str, Any, bool]] = [
    ("plain", GOOD, True),
    ("graded labels, int and float", {**GOOD, "relevant_context_ids": {"c0": 2, "c1": 0.5, "c2": 0}}, True),
    ("labels as ids, repeated", {**GOOD, "relevant_contexts": ["a", "b", "a"]}, True),
    ("no optional fields", {"trace_id": "t", "timestamp": "2024-03-11T08:00:00", "question": "q?"}, True),
    ("null text, null score", {**GOOD, "contexts": [{"id": "c0", "text": None, "score": None}]}, True),
    ("extra fields go to metadata", {**GOOD, "queue_ms": 12, "metadata": {"queue_ms": 1, "app": "x"}}, True),
    ("latencies, int and float", {**GOOD, "latency_ms": 812, "retrieval_latency_ms": 40.5}, True),
    ("latency of zero", {**GOOD, "latency_ms": 0.0, "generation_latency_ms": 0}, True),
    ("operations and feedback", {**GOOD, **OPERATIONS}, True),
    ("no span errors", {**GOOD, "errors": [], "usage": []}, True),
    ("token count as a float", {**GOOD, "usage": [{"model": "m", "input_tokens": 3.0}]}, False),
    ("usage as a tuple", {**GOOD, "usage": ({"model": "m"},)}, False),
    ("huge feedback value", {**GOOD, "feedback": [{"name": "n", "value": 2**60, "source": "api"}]}, False),
    ("timestamp with offset", {**GOOD, "timestamp": "2024-03-11T08:00:00+09:00"}, True),
    ("timestamp as datetime", {**GOOD, "timestamp": dt.datetime(2024, 3, 11, 8, tzinfo=dt.UTC)}, True),
    ("language in odd case", {**GOOD, "language": "ZH-hant-tw"}, True),
    ("empty language", {**GOOD, "language": ""}, True),
    ("metadata with a NaN", {**GOOD, "metadata": {"x": float("nan")}}, False),
    ("metadata as JSON text", {**GOOD, "metadata": '{"app": "bot"}'}, False),
    ("metadata as pairs", {**GOOD, "metadata": [("app", "bot")]}, False),
    ("integer score", {**GOOD, "contexts": [{"id": "c0", "text": "t", "score": 1}]}, False),
    ("text-only context", {**GOOD, "contexts": [{"id": None, "text": "t"}]}, False),
    ("labels as JSON text", {**GOOD, "relevant_context_ids": '["c0"]'}, False),
    ("labels as pairs", {**GOOD, "relevant_context_ids": [("c0", 1.0)]}, False),
    ("huge integer grade", {**GOOD, "relevant_context_ids": {"c0": 10**400}}, False),
    ("contexts as a tuple", {**GOOD, "contexts": ({"id": "c0", "text": "t"},)}, False),
    # Invalid records: the fast path declines and the precise path words the reason.
    ("not an object", ["a"], False),
    ("blank trace_id", {**GOOD, "trace_id": " "}, False),
    ("missing question", {k: v for k, v in GOOD.items() if k != "question"}, False),
    ("bad timestamp", {**GOOD, "timestamp": "11/03/2024 08:00"}, False),
    ("timestamp out of range", {**GOOD, "timestamp": "9999-12-31T23:00:00-05:00"}, False),
    ("contexts not a list", {**GOOD, "contexts": "[]"}, False),
    ("empty context id", {**GOOD, "contexts": [{"id": "", "text": "t"}]}, False),
    ("infinite score", {**GOOD, "contexts": [{"id": "c0", "text": "t", "score": float("inf")}]}, False),
    ("negative grade", {**GOOD, "relevant_context_ids": {"c0": -1}}, False),
    ("boolean grade", {**GOOD, "relevant_context_ids": {"c0": True}}, False),
    ("non-string answer", {**GOOD, "answer": 3}, False),
    ("non-string reference answer", {**GOOD, "reference_answers": ["a", 1]}, False),
    ("bad language", {**GOOD, "language": "english"}, False),
    ("non-string language", {**GOOD, "language": 7}, False),
    ("negative latency", {**GOOD, "latency_ms": -1.0}, False),
    ("boolean latency", {**GOOD, "generation_latency_ms": True}, False),
    ("infinite latency", {**GOOD, "latency_ms": float("inf")}, False),
    ("negative token count", {**GOOD, "usage": [{"input_tokens": -1}]}, False),
    ("boolean token count", {**GOOD, "usage": [{"output_tokens": True}]}, False),
    ("error without kind", {**GOOD, "errors": [{"name": "tool"}]}, False),
    ("unknown feedback source", {**GOOD, "feedback": [{"name": "n", "value": 1, "source": "human"}]}, False),
    ("NaN feedback value", {**GOOD, "feedback": [{"name": "n", "value": float("nan"), "source": "user"}]}, False),
    ("feedback label not text", {**GOOD, "feedback": [{"name": "n", "label": 3, "source": "user"}]}, False),
]


@pytest.mark.parametrize(("name", "record", "fast"), RECORDS, ids=[case[0] for case in RECORDS])
def test_the_fast_path_returns_the_precise_row_and_leaves_every_error_to_it(name: str, record: Any, fast: bool) -> None:
    assert (records._fast_row(record, "f.jsonl", 3) is not None) is fast
    got = _outcome(parse_record, record, source_file="f.jsonl", line=3, check_text=False)
    # check_text=True always takes the precise path; on clean text it adds no error.
    assert got == _outcome(parse_record, record, source_file="f.jsonl", line=3, check_text=True)


def test_every_hostile_record_gets_the_same_row_or_reason_on_either_path() -> None:
    taken = 0
    for name, line, _, _ in CANONICAL:
        text = line.decode("utf-8", "replace")
        decoded = _outcome(limits.loads_record, text, line)
        if decoded[0] != "value" or limits.may_hold_unstorable(text):
            continue
        taken += records._fast_row(decoded[1], "f.jsonl", 1) is not None
        fast = _outcome(parse_record, decoded[1], source_file="f.jsonl", line=1, check_text=False)
        assert fast == _outcome(parse_record, decoded[1], source_file="f.jsonl", line=1), name
    assert taken > 0


def _parquet_hash(table: pa.Table) -> str:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def test_staged_table_is_from_pylist_to_the_byte() -> None:
    rows = [
        parse_record(record, source_file="f.jsonl", line=i)
        for i, record in enumerate(
            [
                GOOD,
                {"trace_id": "t", "timestamp": "2024-03-11T08:00:00", "question": "q?"},  # nulls, no contexts
                {**GOOD, "contexts": [{"id": "c0", "text": None}, {"id": None, "text": "only text", "score": 1}]},
                {**GOOD, "reference_answers": [], "relevant_context_ids": {}, "relevant_contexts": ["x"]},
                {**GOOD, "question": "日本の首都は？ 😀", "language": None},
                {**GOOD, **OPERATIONS},
                {**GOOD, "errors": [], "usage": [], "feedback": []},
            ]
        )
    ]
    expected = pa.Table.from_pylist(rows, schema=STAGED_SCHEMA)
    got = staged_table(rows)
    assert got.schema == STAGED_SCHEMA
    assert got.equals(expected)
    assert _parquet_hash(got) == _parquet_hash(expected)
    assert staged_table(rows[1:2]).to_pylist() == rows[1:2]
