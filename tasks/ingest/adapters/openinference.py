"""OpenInference spans (Phoenix span exports, JSONL or Parquet) -> spans for assembly.

Accepts a span as Phoenix's spans dataframe writes it (``context.trace_id``, ``parent_id``,
``span_kind``, ``attributes.<name>`` columns, documents as lists of ``{"document.id": ...}``) or as
OpenTelemetry-style JSON (``context: {trace_id, span_id}``, ``attributes`` nested or flat): both are
flattened to OpenInference's dotted attribute names, e.g. ``retrieval.documents.0.document.id``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.adapters._model import AdapterOptions, Document, Kind, Span, parse_time, text_of

__all__ = ["flatten_attributes", "spans"]

_KINDS: dict[str, Kind] = {"CHAIN": "chain", "RETRIEVER": "retriever", "RERANKER": "reranker", "LLM": "llm"}
_DOCUMENT = re.compile(r"^(?P<list>.+)\.(?P<i>\d+)\.document\.(?P<field>id|content|score)$")


def spans(record: Any, options: AdapterOptions) -> Iterator[Span]:
    """The one span of an exported OpenInference span record."""
    if not isinstance(record, Mapping):
        raise InvalidRecordError(None, "<record>", f"expected a span object, got {type(record).__name__}")
    context = record.get("context") if isinstance(record.get("context"), Mapping) else {}
    trace_id = record.get("context.trace_id", context.get("trace_id", record.get("trace_id")))
    span_id = record.get("context.span_id", context.get("span_id", record.get("span_id")))
    if not isinstance(trace_id, str) or not trace_id:
        raise InvalidRecordError(None, "context.trace_id", f"expected the span's trace id, got {trace_id!r}")
    if not isinstance(span_id, str) or not span_id:
        raise InvalidRecordError(trace_id, "context.span_id", f"expected the span's id, got {span_id!r}")
    attributes = flatten_attributes(record)
    raw_kind = record.get("span_kind") or attributes.get("openinference.span.kind") or ""
    kind = _KINDS.get(str(raw_kind).upper(), "other")
    parent = record.get("parent_id", record.get("parent_span_id"))
    is_root = not parent
    documents = None
    if kind == "retriever":
        documents = _documents(attributes, "retrieval.documents", span_id)
    elif kind == "reranker":
        documents = _documents(attributes, "reranker.output_documents", span_id)
    question = None
    if is_root or kind == "retriever":
        question = text_of(attributes.get("input.value"), options.question_keys, role="user")
    answer = None
    if is_root or kind == "llm":
        answer = text_of(attributes.get("output.value"), options.answer_keys, role="assistant")
        if answer is None and kind == "llm":
            answer = _last_output_message(attributes)
    tokens = {
        name: int(attributes[f"llm.token_count.{name}"])
        for name in ("prompt", "completion", "total")
        if isinstance(attributes.get(f"llm.token_count.{name}"), int | float)
    }
    yield Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=str(parent) if parent else None,
        kind=kind,
        name=str(record.get("name") or ""),
        start=parse_time(record.get("start_time"), trace_id=trace_id, field="start_time"),
        question=question,
        answer=answer,
        documents=documents,
        model=attributes.get("llm.model_name") if kind == "llm" else None,
        tokens=tokens,
        metadata=_root_metadata(attributes) if is_root else {},
    )


def flatten_attributes(record: Mapping[str, Any]) -> dict[str, Any]:
    """Every attribute under its dotted OpenInference name, from an ``attributes`` object (nested, flat or
    JSON text) and from ``attributes.<name>`` columns."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        if key == "attributes":
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except json.JSONDecodeError:
                    continue
            _flatten(value, "", flat)
        elif key.startswith("attributes."):
            _flatten(value, key.removeprefix("attributes."), flat)
    return flat


def _flatten(value: Any, prefix: str, flat: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), flat)
    elif isinstance(value, list | tuple) and value and all(isinstance(item, Mapping) for item in value):
        for index, item in enumerate(value):
            _flatten(item, f"{prefix}.{index}", flat)
    elif prefix:
        flat[prefix] = value


def _documents(attributes: Mapping[str, Any], prefix: str, span_id: str) -> tuple[Document, ...]:
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        match = _DOCUMENT.match(key)
        if match and match["list"] == prefix:
            found.setdefault(int(match["i"]), {})[match["field"]] = value
    return tuple(
        Document(
            id=fields.get("id"),
            text=fields.get("content"),
            score=fields.get("score"),
            where=f"span {span_id} {prefix}.{index}.document",
        )
        for index, fields in sorted(found.items())
    )


def _last_output_message(attributes: Mapping[str, Any]) -> str | None:
    contents = sorted(
        (int(key.split(".")[2]), value)
        for key, value in attributes.items()
        if re.fullmatch(r"llm\.output_messages\.\d+\.message\.content", key) and isinstance(value, str)
    )
    return contents[-1][1] if contents else None


def _root_metadata(attributes: Mapping[str, Any]) -> dict[str, Any]:
    metadata = attributes.get("metadata")
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except json.JSONDecodeError:
            metadata = None
    out = dict(metadata) if isinstance(metadata, Mapping) else {}
    nested = {key.removeprefix("metadata."): v for key, v in attributes.items() if key.startswith("metadata.")}
    out.update(nested)
    for key in ("session.id", "user.id"):
        if attributes.get(key) is not None:
            out[key.replace(".", "_")] = attributes[key]
    return out
