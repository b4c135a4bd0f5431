"""The canonical trace format (docs/traces.md): validation of one raw record and the staged Arrow schema."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.language import normalize_language_tag

__all__ = ["KNOWN_FIELDS", "STAGED_SCHEMA", "parse_record"]

KNOWN_FIELDS = frozenset(
    {
        "trace_id",
        "timestamp",
        "question",
        "answer",
        "contexts",
        "reference",
        "reference_answers",
        "relevant_context_ids",
        "relevant_contexts",
        "metadata",
        "language",
    }
)

_LABELS = pa.list_(pa.struct([("key", pa.string()), ("gain", pa.float64())]))
STAGED_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("contexts", pa.list_(pa.struct([("id", pa.string()), ("text", pa.string()), ("score", pa.float64())]))),
        ("reference", pa.string()),
        ("reference_answers", pa.list_(pa.string())),
        ("relevant_context_ids", _LABELS),
        ("relevant_contexts", _LABELS),
        ("metadata", pa.string()),
        ("source_file", pa.string()),
        ("source_line", pa.int64()),
        ("language", pa.string()),
    ]
)


def parse_record(raw: Any, *, source_file: str, line: int) -> dict[str, Any]:
    """Validate one decoded record and return it as a staged row (see STAGED_SCHEMA).

    Raises InvalidRecordError naming the trace (when known), the field and what is wrong.
    Unknown top-level fields are kept in ``metadata`` (an existing metadata key wins).
    """
    location = f"{source_file}:{line}"
    if not isinstance(raw, Mapping):
        raise InvalidRecordError(
            None, "<record>", f"expected a JSON object, got {type(raw).__name__}", location=location
        )
    trace_id = raw.get("trace_id")
    if not isinstance(trace_id, str) or not trace_id.strip():
        raise InvalidRecordError(None, "trace_id", _required("a non-empty string", trace_id), location=location)

    def fail(field: str, reason: str) -> InvalidRecordError:
        return InvalidRecordError(trace_id, field, reason, location=location)

    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise fail("question", _required("a non-empty string", question))
    metadata = _mapping_or_none(raw.get("metadata"), "metadata", fail) or {}
    extras = {key: value for key, value in raw.items() if key not in KNOWN_FIELDS}
    metadata = {**extras, **metadata}
    return {
        "trace_id": trace_id,
        "timestamp": _timestamp(raw.get("timestamp"), fail),
        "question": question,
        "answer": _optional_str(raw.get("answer"), "answer", fail),
        "contexts": _contexts(raw.get("contexts"), fail),
        "reference": _optional_str(raw.get("reference"), "reference", fail),
        "reference_answers": _optional_str_list(raw.get("reference_answers"), "reference_answers", fail),
        "relevant_context_ids": _labels(raw.get("relevant_context_ids"), "relevant_context_ids", fail),
        "relevant_contexts": _labels(raw.get("relevant_contexts"), "relevant_contexts", fail),
        "metadata": json.dumps(metadata, sort_keys=True, default=str),
        "source_file": source_file,
        "source_line": line,
        "language": _language(raw.get("language"), fail),
    }


def _required(expected: str, got: Any) -> str:
    return "required field missing" if got is None else f"expected {expected}, got {_show(got)}"


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _timestamp(value: Any, fail: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            raise fail("timestamp", f"expected an ISO-8601 timestamp, got {value[:60]!r}") from None
    else:
        raise fail("timestamp", _required("an ISO-8601 string", value))
    # Naive timestamps are taken as UTC, the convention of every tracing SDK we read.
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)


def _language(value: Any, fail: Any) -> str | None:
    """A BCP 47 tag in its canonical case (``zh-TW``); null when the trace does not say."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise fail("language", f"expected a BCP 47 language tag such as 'ja' or 'zh-TW', got {_show(value)}")
    try:
        return normalize_language_tag(value)
    except ValueError as exc:
        raise fail("language", str(exc)) from None


def _optional_str(value: Any, field: str, fail: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise fail(field, f"expected a string or null, got {_show(value)}")


def _optional_str_list(value: Any, field: str, fail: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise fail(field, f"expected a list of strings or null, got {_show(value)}")
    return list(value)


def _mapping_or_none(value: Any, field: str, fail: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):  # Parquet writers often store nested objects as JSON text.
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise fail(field, "expected an object or JSON object text") from None
    if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        value = dict(value)  # An Arrow map column decodes to (key, value) pairs.
    if not isinstance(value, Mapping):
        raise fail(field, f"expected an object, got {_show(value)}")
    return dict(value)


def _contexts(value: Any, fail: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise fail("contexts", f"expected a list of contexts, got {_show(value)}")
    contexts = []
    for rank, context in enumerate(value):
        field = f"contexts[{rank}]"
        if not isinstance(context, Mapping):
            raise fail(field, f"expected an object with id and text, got {_show(context)}")
        context_id, text, score = context.get("id"), context.get("text"), context.get("score")
        # Null id: the source logged text only (OTel GenAI reference scenarios); id metrics say so per trace.
        # Null text: the source logged only ids and scores; metrics that read text say so per trace.
        if text is not None and not isinstance(text, str):
            raise fail(f"{field}.text", f"expected a string or null, got {_show(text)}")
        if context_id is None and text is None:
            raise fail(f"{field}.id", "required field missing (a context needs an id, a text or both)")
        if context_id is not None and (not isinstance(context_id, str) or not context_id):
            raise fail(f"{field}.id", _required("a non-empty string or null", context_id))
        if score is not None and (not isinstance(score, int | float) or isinstance(score, bool) or math.isnan(score)):
            raise fail(f"{field}.score", f"expected a number or null, got {_show(score)}")
        contexts.append({"id": context_id, "text": text, "score": None if score is None else float(score)})
    return contexts


def _labels(value: Any, field: str, fail: Any) -> list[dict[str, Any]] | None:
    """Relevance labels as (key, gain) pairs: a list of keys has gain 1.0 each, an object maps key -> grade."""
    if isinstance(value, str):  # JSON text, as some Parquet writers store nested values
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise fail(field, "expected a list of ids, an object of grades, or their JSON text") from None
    if value is None:
        return None
    if isinstance(value, list | tuple) and all(isinstance(key, str) for key in value):
        return [{"key": key, "gain": 1.0} for key in dict.fromkeys(value)]
    if isinstance(value, list | tuple) and not all(isinstance(p, tuple) and len(p) == 2 for p in value):
        raise fail(field, f"expected a list of id strings or an object of grades, got {_show(value)}")
    grades = _mapping_or_none(value, field, fail) or {}
    labels = []
    for key, grade in grades.items():
        if not isinstance(grade, int | float) or isinstance(grade, bool) or not math.isfinite(grade) or grade < 0:
            raise fail(f"{field}.{key}", f"expected a graded relevance >= 0, got {_show(grade)}")
        labels.append({"key": str(key), "gain": float(grade)})
    return labels
