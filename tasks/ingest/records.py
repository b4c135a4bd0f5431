"""The canonical trace format (docs/traces.md): validation of one raw record and the staged Arrow schema."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from functools import lru_cache
from itertools import accumulate, chain
from operator import itemgetter
from typing import Any

import pyarrow as pa

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest import limits
from ragpulse.tasks.ingest.language import normalize_language_tag

__all__ = [
    "FEEDBACK_SOURCES",
    "HISTORY_ROLES",
    "KNOWN_FIELDS",
    "STAGED_SCHEMA",
    "STEP_KINDS",
    "parse_record",
    "staged_table",
]

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
        "steps",
        "conversation_id",
        "history",
        "tool_calls",
        "reference_tool_calls",
        "latency_ms",
        "retrieval_latency_ms",
        "generation_latency_ms",
        "usage",
        "errors",
        "feedback",
    }
)

STEP_KINDS = ("retriever", "tool", "reranker")
HISTORY_ROLES = ("user", "assistant")
FEEDBACK_SOURCES = ("user", "annotation", "api", "evaluation")

_LABELS = pa.list_(pa.struct([("key", pa.string()), ("gain", pa.float64())]))
_CONTEXTS = pa.list_(pa.struct([("id", pa.string()), ("text", pa.string()), ("score", pa.float64())]))
_STEPS = pa.list_(
    pa.struct(
        [
            ("id", pa.string()),
            ("name", pa.string()),
            ("kind", pa.string()),
            ("query", pa.string()),
            ("contexts", _CONTEXTS),
            ("parent", pa.int32()),
            ("error", pa.string()),
        ]
    )
)
_TOOL_CALLS = pa.list_(
    pa.struct([("name", pa.string()), ("arguments", pa.string()), ("error", pa.string()), ("step", pa.int32())])
)
_USAGE = pa.list_(pa.struct([("model", pa.string()), ("input_tokens", pa.int64()), ("output_tokens", pa.int64())]))
_ERRORS = pa.list_(pa.struct([("kind", pa.string()), ("name", pa.string()), ("message", pa.string())]))
_FEEDBACK = pa.list_(
    pa.struct(
        [
            ("name", pa.string()),
            ("value", pa.float64()),
            ("label", pa.string()),
            ("source", pa.string()),
            ("comment", pa.string()),
        ]
    )
)
STAGED_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("contexts", _CONTEXTS),
        ("reference", pa.string()),
        ("reference_answers", pa.list_(pa.string())),
        ("relevant_context_ids", _LABELS),
        ("relevant_contexts", _LABELS),
        ("metadata", pa.string()),
        ("source_file", pa.string()),
        ("source_line", pa.int64()),
        ("language", pa.string()),
        # The agent's units (docs/traces.md, "Retrieval steps, turns and conversations"): null when not given.
        ("steps", _STEPS),
        ("conversation_id", pa.string()),
        ("history", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("tool_calls", _TOOL_CALLS),
        ("reference_tool_calls", pa.list_(pa.struct([("name", pa.string()), ("arguments", pa.string())]))),
        # What the turn cost to serve and what was said about it (docs/traces.md, "Operations and feedback").
        ("latency_ms", pa.float64()),
        ("retrieval_latency_ms", pa.float64()),
        ("generation_latency_ms", pa.float64()),
        ("usage", _USAGE),
        ("errors", _ERRORS),
        ("feedback", _FEEDBACK),
    ]
)


def staged_table(rows: list[dict[str, Any]]) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=STAGED_SCHEMA)``, built column by column: the same table and the same
    Parquet bytes, in about a fifth less CPU. The contexts, the bulk of a row, are converted as three flat columns
    under one list of offsets rather than dict by dict. A batch whose text overflows one Arrow array (2 GiB) is
    left to ``from_pylist``, which splits it into chunks."""
    columns = []
    for field in STAGED_SCHEMA:
        if field.name != "contexts":
            columns.append(pa.array(list(map(itemgetter(field.name), rows)), type=field.type))
            continue
        lists = list(map(itemgetter("contexts"), rows))
        flat = list(chain.from_iterable(lists))
        children = [
            pa.array(list(map(itemgetter(child.name), flat)), type=child.type) for child in field.type.value_type
        ]
        if any(isinstance(child, pa.ChunkedArray) for child in children):
            return pa.Table.from_pylist(rows, schema=STAGED_SCHEMA)
        offsets = pa.array([0, *accumulate(map(len, lists))], type=pa.int32())
        values = pa.StructArray.from_arrays(children, fields=list(field.type.value_type))
        columns.append(pa.ListArray.from_arrays(offsets, values, type=field.type))
    if any(isinstance(column, pa.ChunkedArray) for column in columns):
        return pa.Table.from_pylist(rows, schema=STAGED_SCHEMA)
    return pa.Table.from_arrays(columns, schema=STAGED_SCHEMA)


# One encoder for every record's metadata: json.dumps with these options builds a new one per call.
_METADATA_JSON = json.JSONEncoder(sort_keys=True, default=str, allow_nan=False)
# A tool call's arguments are compared with expected ones (tool_call_accuracy): only real JSON, never a repr.
_ARGUMENTS_JSON = json.JSONEncoder(sort_keys=True, allow_nan=False, ensure_ascii=False)
# Language tags repeat on every trace of an application; the canonical form of a valid one is cached.
_canonical_tag = lru_cache(maxsize=1024)(normalize_language_tag)


def parse_record(raw: Any, *, source_file: str, line: int, check_text: bool = True) -> dict[str, Any]:
    """Validate one decoded record and return it as a staged row (see STAGED_SCHEMA).

    Raises InvalidRecordError naming the trace (when known), the field and what is wrong, and never anything
    else, whatever the record holds. Unknown top-level fields are kept in ``metadata`` (an existing metadata key
    wins). A string that no warehouse can store (a NUL, a lone surrogate), in any field or metadata key, is an
    error naming where it is: replacing it would change the trace's text behind its scores. ``check_text=False``
    skips that search when the caller knows no string can hold one (``limits.may_hold_unstorable``).

    A well-formed record of the common shape takes a fast path (``_fast_row``); anything it does not accept at
    a glance, valid or not, is checked by the precise path below, which alone words every error.
    """
    if not check_text and (row := _fast_row(raw, source_file, line)) is not None:
        return row
    location = f"{source_file}:{line}"
    if not isinstance(raw, Mapping):
        raise InvalidRecordError(
            None, "<record>", f"expected a JSON object, got {type(raw).__name__}", location=location
        )
    trace_id = raw.get("trace_id")
    if not isinstance(trace_id, str) or not trace_id.strip():
        raise InvalidRecordError(None, "trace_id", _required("a non-empty string", trace_id), location=location)
    if check_text and (bad_id := limits.unstorable(trace_id)) is not None:
        raise InvalidRecordError(limits.printable(trace_id), "trace_id", bad_id, location=location)

    def fail(field: str, reason: str) -> InvalidRecordError:
        return InvalidRecordError(trace_id, field, reason, location=location)

    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise fail("question", _required("a non-empty string", question))
    metadata = _mapping_or_none(raw.get("metadata"), "metadata", fail) or {}
    extras = {key: value for key, value in raw.items() if key not in KNOWN_FIELDS}
    metadata = {**extras, **metadata}
    row = {
        "trace_id": trace_id,
        "timestamp": _timestamp(raw.get("timestamp"), fail),
        "question": question,
        "answer": _optional_str(raw.get("answer"), "answer", fail),
        "contexts": _contexts(raw.get("contexts"), fail),
        "reference": _optional_str(raw.get("reference"), "reference", fail),
        "reference_answers": _optional_str_list(raw.get("reference_answers"), "reference_answers", fail),
        "relevant_context_ids": _labels(raw.get("relevant_context_ids"), "relevant_context_ids", fail),
        "relevant_contexts": _labels(raw.get("relevant_contexts"), "relevant_contexts", fail),
        "metadata": _metadata_json(metadata, fail, check_text=check_text),
        "source_file": source_file,
        "source_line": line,
        "language": _language(raw.get("language"), fail),
        **_agent_fields(raw, fail),
        **_operational_fields(raw, fail),
    }
    if check_text:
        _check_storable(row, fail)
    return row


def _fast_row(raw: Any, source_file: str, line: int) -> dict[str, Any] | None:
    """The row ``parse_record`` returns for ``raw``, when ``raw`` has the usual shape and its text need no check:
    exact built-in types, contexts with an id, float scores, labels as id lists or grade objects, metadata as an
    object. None for anything else, valid or not, which the precise path then reads; so every value this path
    returns is the one the precise path would, and it never decides a reason."""
    if type(raw) is not dict:
        return None
    get = raw.get
    trace_id, question, timestamp = get("trace_id"), get("question"), get("timestamp")
    if type(trace_id) is not str or not trace_id.strip() or type(question) is not str or not question.strip():
        return None
    answer, reference = get("answer"), get("reference")
    if (answer is not None and type(answer) is not str) or (reference is not None and type(reference) is not str):
        return None
    try:
        if type(timestamp) is str:
            moment = dt.datetime.fromisoformat(timestamp)
        elif type(timestamp) is dt.datetime:
            moment = timestamp
        else:
            return None
        moment = moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)
    except (ValueError, OverflowError):
        return None
    contexts = _fast_contexts(get("contexts"))
    reference_answers = get("reference_answers")
    if reference_answers is not None:
        if type(reference_answers) is not list or not all(type(item) is str for item in reference_answers):
            return None
        reference_answers = list(reference_answers)
    relevant_ids = _fast_labels(get("relevant_context_ids"))
    relevant_texts = _fast_labels(get("relevant_contexts"))
    language = get("language")
    if language == "":
        language = None
    elif language is not None:
        if type(language) is not str:
            return None
        try:
            language = _canonical_tag(language)
        except ValueError:
            return None
    metadata = get("metadata")
    if metadata is None:
        metadata = {}
    elif type(metadata) is not dict or not all(type(key) is str for key in metadata):
        return None
    if contexts is None or relevant_ids is False or relevant_texts is False:
        return None
    if any(get(name) is not None for name in _AGENT_FIELDS):
        return None  # an agent's turn: the precise path reads its steps and messages
    operations = _fast_operations(get)
    if operations is None:
        return None
    if len(raw) > len(KNOWN_FIELDS.intersection(raw)):
        metadata = {**{key: value for key, value in raw.items() if key not in KNOWN_FIELDS}, **metadata}
    try:
        metadata_json = _METADATA_JSON.encode(metadata)
    except ValueError:  # NaN or Infinity inside
        return None
    return {
        "trace_id": trace_id,
        "timestamp": moment,
        "question": question,
        "answer": answer,
        "contexts": contexts,
        "reference": reference,
        "reference_answers": reference_answers,
        "relevant_context_ids": relevant_ids,
        "relevant_contexts": relevant_texts,
        "metadata": metadata_json,
        "source_file": source_file,
        "source_line": line,
        "language": language,
        **_NO_AGENT_FIELDS,
        **operations,
    }


def _fast_operations(get: Any) -> dict[str, Any] | None:
    """The operational fields and feedback when each is absent or of the usual shape: latencies as finite floats or
    small integers >= 0; usage, errors and feedback as lists of objects whose fields have their exact types
    (integer token counts, a known feedback source, a float, integer or boolean value). None for anything else,
    valid or not (the precise path decides)."""
    fields: dict[str, Any] = {}
    for name in _LATENCIES:
        value = get(name)
        if type(value) is float and math.isfinite(value) and value >= 0:
            fields[name] = value
        elif type(value) is int and 0 <= value < 2**53:
            fields[name] = float(value)
        elif value is None:
            fields[name] = None
        else:
            return None
    usage, errors, feedback = get("usage"), get("errors"), get("feedback")
    fields["usage"] = fields["errors"] = fields["feedback"] = None
    if usage is not None:
        if type(usage) is not list:
            return None
        fields["usage"] = entries = []
        for call in usage:
            if type(call) is not dict:
                return None
            model, tokens_in, tokens_out = call.get("model"), call.get("input_tokens"), call.get("output_tokens")
            if not (model is None or type(model) is str) or not (_fast_count(tokens_in) and _fast_count(tokens_out)):
                return None
            entries.append({"model": model, "input_tokens": tokens_in, "output_tokens": tokens_out})
    if errors is not None:
        if type(errors) is not list:
            return None
        fields["errors"] = failed = []
        for error in errors:
            if type(error) is not dict:
                return None
            kind, span, message = error.get("kind"), error.get("name"), error.get("message")
            if type(kind) is not str or not kind.strip() or not (_fast_text(span) and _fast_text(message)):
                return None
            failed.append({"kind": kind, "name": span, "message": message})
    if feedback is not None:
        if type(feedback) is not list:
            return None
        fields["feedback"] = given = []
        for entry in feedback:
            if type(entry) is not dict:
                return None
            rated, value, source = entry.get("name"), entry.get("value"), entry.get("source")
            label, comment = entry.get("label"), entry.get("comment")
            if type(rated) is not str or not rated.strip() or type(source) is not str or source not in FEEDBACK_SOURCES:
                return None
            if type(value) is bool or (type(value) is int and abs(value) < 2**53):
                value = float(value)
            elif value is not None and (type(value) is not float or not math.isfinite(value)):
                return None
            if not (_fast_text(label) and _fast_text(comment)):
                return None
            given.append({"name": rated, "value": value, "label": label, "source": source, "comment": comment})
    return fields


def _fast_count(value: Any) -> bool:
    return value is None or (type(value) is int and 0 <= value < 2**63)


def _fast_text(value: Any) -> bool:
    return value is None or type(value) is str


def _fast_contexts(value: Any) -> list[dict[str, Any]] | None:
    """Contexts that each have a non-empty string id, a string or null text and a finite float or null score;
    None when any does not (the precise path decides)."""
    if value is None:
        return []
    if type(value) is not list:
        return None
    contexts = []
    for context in value:
        if type(context) is not dict:
            return None
        context_id, text, score = context.get("id"), context.get("text"), context.get("score")
        if type(context_id) is not str or not context_id or (text is not None and type(text) is not str):
            return None
        if score is not None and (type(score) is not float or not math.isfinite(score)):
            return None
        contexts.append({"id": context_id, "text": text, "score": score})
    return contexts


def _fast_labels(value: Any) -> list[dict[str, Any]] | bool | None:
    """Labels from a list of id strings or an object of float or small integer grades >= 0; False when they are
    in any other form (the precise path decides)."""
    if value is None:
        return None
    if type(value) is list:
        if not all(type(key) is str for key in value):
            return False
        return [{"key": key, "gain": 1.0} for key in dict.fromkeys(value)]
    if type(value) is not dict:
        return False
    labels = []
    for key, grade in value.items():
        if type(grade) is float and math.isfinite(grade) and grade >= 0:
            gain = grade
        elif type(grade) is int and 0 <= grade < 2**53:
            gain = float(grade)
        else:
            return False
        if type(key) is not str:
            return False
        labels.append({"key": key, "gain": gain})
    return labels


def _check_storable(row: dict[str, Any], fail: Any) -> None:
    """Refuse a row whose text fields hold a string no warehouse can store, naming the field."""
    names = ("question", "answer", "reference", "language", "conversation_id")
    texts: list[tuple[str, Any]] = [(name, row[name]) for name in names]
    texts += [(f"reference_answers[{i}]", text) for i, text in enumerate(row["reference_answers"] or ())]
    for rank, context in enumerate(row["contexts"]):
        texts += [(f"contexts[{rank}].id", context["id"]), (f"contexts[{rank}].text", context["text"])]
    for i, step in enumerate(row["steps"] or ()):
        texts += [(f"steps[{i}].{key}", step[key]) for key in ("id", "name", "query", "error")]
        for rank, context in enumerate(step["contexts"]):
            where = f"steps[{i}].contexts[{rank}]"
            texts += [(f"{where}.id", context["id"]), (f"{where}.text", context["text"])]
    texts += [(f"history[{i}].content", message["content"]) for i, message in enumerate(row["history"] or ())]
    for name, keys in (("usage", ("model",)), ("errors", ("kind", "name", "message")), ("feedback", _FEEDBACK_TEXT)):
        for i, entry in enumerate(row[name] or ()):
            texts += [(f"{name}[{i}].{key}", entry[key]) for key in keys]
    for name in ("tool_calls", "reference_tool_calls"):
        for i, call in enumerate(row[name] or ()):
            texts += [(f"{name}[{i}].{key}", call.get(key)) for key in ("name", "arguments", "error")]
    for name in ("relevant_context_ids", "relevant_contexts"):
        texts += [(f"{name}[{i}]", label["key"]) for i, label in enumerate(row[name] or ())]
    for field, text in texts:
        if isinstance(text, str) and (reason := limits.unstorable(text)) is not None:
            raise fail(field, reason)


def _metadata_json(metadata: dict[str, Any], fail: Any, *, check_text: bool) -> str:
    """Metadata as strict JSON text (RFC 8259): NaN and Infinity, which Python and pandas write for missing values,
    are stored as null; a key or string no warehouse can store is an error naming its path."""
    try:
        text = _METADATA_JSON.encode(metadata)
    except ValueError:
        text = _METADATA_JSON.encode(_finite(metadata))
    # ensure_ascii writes NUL and surrogates as escapes; look for the culprit only when one may be there.
    if check_text and ("\\u0000" in text or "\\ud" in text):
        _check_strings(metadata, "metadata", fail)
    return text


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _check_strings(value: Any, path: str, fail: Any) -> None:
    """Raise naming the first key or string under ``value`` that no warehouse can store."""
    stack = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str) and (reason := limits.unstorable(item)) is not None:
            raise fail(where, reason)
        if isinstance(item, Mapping):
            for key, child in item.items():
                name = f"{where}.{limits.printable(str(key))}"
                if (reason := limits.unstorable(str(key))) is not None:
                    raise fail(name, f"key {reason}")
                stack.append((name, child))
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(item))


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
    try:
        return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)
    except OverflowError:  # 9999-12-31T23:00-05:00 is past the last representable UTC instant
        raise fail("timestamp", f"{value!s:.60} is out of range in UTC") from None


def _finite_number(value: Any) -> float | None:
    """``value`` as a finite float, or None when it is not a number, NaN, +-Infinity or too large (1e400)."""
    if type(value) is float:  # the common case, first
        return value if math.isfinite(value) else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range
        return None
    return number if math.isfinite(number) else None


def _language(value: Any, fail: Any) -> str | None:
    """A BCP 47 tag in its canonical case (``zh-TW``); null when the trace does not say."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise fail("language", f"expected a BCP 47 language tag such as 'ja' or 'zh-TW', got {_show(value)}")
    try:
        return _canonical_tag(value)
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
            value = limits.loads(value)
        except ValueError as exc:
            reason = str(exc) if isinstance(exc, limits.NestingError) else "expected an object or JSON object text"
            raise fail(field, reason) from None
    if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        value = dict(value)  # An Arrow map column decodes to (key, value) pairs.
    if not isinstance(value, Mapping):
        raise fail(field, f"expected an object, got {_show(value)}")
    # Keys as text: an Arrow map may have integer keys, which json.dumps(sort_keys=True) cannot order among strings.
    return {str(key): item for key, item in value.items()}


def _contexts(value: Any, fail: Any, name: str = "contexts") -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise fail(name, f"expected a list of contexts, got {_show(value)}")
    contexts = []
    for rank, context in enumerate(value):
        field = f"{name}[{rank}]"
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
        number = _finite_number(score)
        if score is not None and number is None:
            raise fail(f"{field}.score", f"expected a finite number or null, got {_show(score)}")
        contexts.append({"id": context_id, "text": text, "score": number})
    return contexts


def _labels(value: Any, field: str, fail: Any) -> list[dict[str, Any]] | None:
    """Relevance labels as (key, gain) pairs: a list of keys has gain 1.0 each, an object maps key -> grade."""
    if isinstance(value, str):  # JSON text, as some Parquet writers store nested values
        try:
            value = limits.loads(value)
        except ValueError as exc:
            reason = (
                str(exc)
                if isinstance(exc, limits.NestingError)
                else "expected a list of ids, an object of grades, or their JSON text"
            )
            raise fail(field, reason) from None
    if value is None:
        return None
    if isinstance(value, list | tuple) and all(isinstance(key, str) for key in value):
        return [{"key": key, "gain": 1.0} for key in dict.fromkeys(value)]
    if isinstance(value, list | tuple) and not all(isinstance(p, tuple) and len(p) == 2 for p in value):
        raise fail(field, f"expected a list of id strings or an object of grades, got {_show(value)}")
    grades = _mapping_or_none(value, field, fail) or {}
    labels = []
    for key, grade in grades.items():
        gain = _finite_number(grade)
        if gain is None or gain < 0:
            raise fail(f"{field}.{key}", f"expected a graded relevance >= 0, got {_show(grade)}")
        labels.append({"key": str(key), "gain": gain})
    return labels


_AGENT_FIELDS = ("steps", "conversation_id", "history", "tool_calls", "reference_tool_calls")
_NO_AGENT_FIELDS: dict[str, Any] = dict.fromkeys(_AGENT_FIELDS)


def _agent_fields(raw: Mapping[str, Any], fail: Any) -> dict[str, Any]:
    """The agent's units of a record (docs/traces.md): its retrieval steps, conversation, earlier turns and tool
    calls, each null when the record does not give it."""
    steps = _steps(raw.get("steps"), fail)
    return {
        "steps": steps,
        "conversation_id": _conversation_id(raw.get("conversation_id"), fail),
        "history": _history(raw.get("history"), fail),
        "tool_calls": _tool_calls(raw.get("tool_calls"), "tool_calls", fail, n_steps=len(steps or ())),
        "reference_tool_calls": _tool_calls(raw.get("reference_tool_calls"), "reference_tool_calls", fail),
    }


def _list_of_objects(value: Any, field: str, what: str, fail: Any) -> list[Mapping[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise fail(field, f"expected a list of {what}, got {_show(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise fail(f"{field}[{i}]", f"expected an object, got {_show(item)}")
    return list(value)


def _steps(value: Any, fail: Any) -> list[dict[str, Any]] | None:
    """Retrieval steps in the order the agent ran them; ``parent`` points to an earlier step (a reranker's input)."""
    items = _list_of_objects(value, "steps", "retrieval steps", fail)
    if items is None:
        return None
    steps = []
    for i, step in enumerate(items):
        where = f"steps[{i}]"
        kind = step.get("kind", "retriever")
        if kind not in STEP_KINDS:
            raise fail(f"{where}.kind", f"expected one of {', '.join(STEP_KINDS)}, got {_show(kind)}")
        parent = step.get("parent")
        if parent is not None and (type(parent) is not int or not 0 <= parent < i):
            raise fail(
                f"{where}.parent", f"expected the index of an earlier step (0 to {i - 1}) or null, got {_show(parent)}"
            )
        step_id = step.get("id")
        if isinstance(step_id, int) and not isinstance(step_id, bool):
            step_id = str(step_id)
        steps.append(
            {
                "id": _optional_str(step_id or None, f"{where}.id", fail),
                "name": _optional_str(step.get("name"), f"{where}.name", fail),
                "kind": kind,
                "query": _optional_str(step.get("query"), f"{where}.query", fail),
                "contexts": _contexts(step.get("contexts"), fail, f"{where}.contexts"),
                "parent": parent,
                "error": _optional_str(step.get("error"), f"{where}.error", fail),
            }
        )
    return steps


def _conversation_id(value: Any, fail: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    raise fail("conversation_id", f"expected a non-empty string or null, got {_show(value)}")


def _history(value: Any, fail: Any) -> list[dict[str, str]] | None:
    """Earlier turns of the conversation as (role, content) messages, oldest first."""
    items = _list_of_objects(value, "history", "messages", fail)
    if items is None:
        return None
    history = []
    for i, message in enumerate(items):
        role, content = message.get("role"), message.get("content")
        if role not in HISTORY_ROLES:
            raise fail(f"history[{i}].role", f"expected one of {', '.join(HISTORY_ROLES)}, got {_show(role)}")
        if not isinstance(content, str):
            raise fail(f"history[{i}].content", _required("a string", content))
        history.append({"role": role, "content": content})
    return history


def _tool_calls(value: Any, field: str, fail: Any, *, n_steps: int | None = None) -> list[dict[str, Any]] | None:
    """Tool calls with their arguments as JSON text; ``step`` (``tool_calls`` only) points to the retrieval step
    the call produced."""
    items = _list_of_objects(value, field, "tool calls", fail)
    if items is None:
        return None
    calls = []
    for i, call in enumerate(items):
        where = f"{field}[{i}]"
        name = call.get("name")
        if not isinstance(name, str) or not name.strip():
            raise fail(f"{where}.name", _required("a non-empty string", name))
        arguments = call.get("arguments")
        try:
            arguments_json = None if arguments is None else _ARGUMENTS_JSON.encode(arguments)
        except (TypeError, ValueError):
            raise fail(f"{where}.arguments", f"expected JSON (an object or a string), got {_show(arguments)}") from None
        entry: dict[str, Any] = {"name": name, "arguments": arguments_json}
        if n_steps is not None:
            step = call.get("step")
            if step is not None and (type(step) is not int or not 0 <= step < n_steps):
                raise fail(
                    f"{where}.step", f"expected the index of a step (0 to {n_steps - 1}) or null, got {_show(step)}"
                )
            entry["error"] = _optional_str(call.get("error"), f"{where}.error", fail)
            entry["step"] = step
        calls.append(entry)
    return calls


_LATENCIES = ("latency_ms", "retrieval_latency_ms", "generation_latency_ms")
_FEEDBACK_TEXT = ("name", "label", "source", "comment")


def _operational_fields(raw: Mapping[str, Any], fail: Any) -> dict[str, Any]:
    """What the turn cost to serve (latencies, the application's token usage, the spans that failed) and the
    feedback given on it (docs/traces.md), each null when the record does not give it."""
    fields: dict[str, Any] = {}
    for name in _LATENCIES:
        value = raw.get(name)
        number = _finite_number(value)
        if value is not None and (number is None or number < 0):
            raise fail(name, f"expected a finite number of milliseconds >= 0 or null, got {_show(value)}")
        fields[name] = number
    fields["usage"] = _usage(raw.get("usage"), fail)
    fields["errors"] = _errors(raw.get("errors"), fail)
    fields["feedback"] = _feedback(raw.get("feedback"), fail)
    return fields


def _usage(value: Any, fail: Any) -> list[dict[str, Any]] | None:
    """One entry per model call of the application: its model and token counts, each null when not logged."""
    items = _list_of_objects(value, "usage", "model calls", fail)
    if items is None:
        return None
    usage = []
    for i, call in enumerate(items):
        entry: dict[str, Any] = {"model": _optional_str(call.get("model"), f"usage[{i}].model", fail)}
        for key in ("input_tokens", "output_tokens"):
            entry[key] = _token_count(call.get(key), f"usage[{i}].{key}", fail)
        usage.append(entry)
    return usage


def _token_count(value: Any, field: str, fail: Any) -> int | None:
    """A whole number >= 0 (``12.0`` as some exporters write it is 12), or null."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if type(value) is not int or not 0 <= value < 2**63:
        raise fail(field, f"expected a whole number of tokens >= 0 or null, got {_show(value)}")
    return value


def _errors(value: Any, fail: Any) -> list[dict[str, Any]] | None:
    """The spans that ended in error; ``[]`` says the turn is known to have none, null that nobody said."""
    items = _list_of_objects(value, "errors", "span errors", fail)
    if items is None:
        return None
    errors = []
    for i, error in enumerate(items):
        kind = error.get("kind")
        if not isinstance(kind, str) or not kind.strip():
            raise fail(f"errors[{i}].kind", _required("a non-empty string (root, llm, retriever, tool, ...)", kind))
        errors.append(
            {
                "kind": kind,
                "name": _optional_str(error.get("name"), f"errors[{i}].name", fail),
                "message": _optional_str(error.get("message"), f"errors[{i}].message", fail),
            }
        )
    return errors


def _feedback(value: Any, fail: Any) -> list[dict[str, Any]] | None:
    """Feedback and annotations on the turn: a number (a boolean as 1.0/0.0; negative scores are kept, as the tools
    allow them), a category label, or both, and who gave it."""
    items = _list_of_objects(value, "feedback", "feedback entries", fail)
    if items is None:
        return None
    entries = []
    for i, entry in enumerate(items):
        where = f"feedback[{i}]"
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise fail(f"{where}.name", _required("a non-empty string", name))
        source = entry.get("source")
        if source not in FEEDBACK_SOURCES:
            reason = f"expected one of {', '.join(FEEDBACK_SOURCES)}, got {_show(source)}"
            raise fail(f"{where}.source", "required field missing" if source is None else reason)
        raw_value = entry.get("value")
        number = float(raw_value) if isinstance(raw_value, bool) else _finite_number(raw_value)
        if raw_value is not None and number is None:
            raise fail(f"{where}.value", f"expected a finite number, a boolean or null, got {_show(raw_value)}")
        entries.append(
            {
                "name": name,
                "value": number,
                "label": _optional_str(entry.get("label"), f"{where}.label", fail),
                "source": source,
                "comment": _optional_str(entry.get("comment"), f"{where}.comment", fail),
            }
        )
    return entries
