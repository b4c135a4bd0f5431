"""OpenTelemetry GenAI semantic conventions in OTLP/JSON lines (Collector ``file`` or S3 exporter) -> spans.

One line is an ``ExportTraceServiceRequest``: ``resourceSpans[].scopeSpans[].spans[]``, attributes as
``[{"key", "value": AnyValue}]``, ids as hex, times as ``*UnixNano`` decimal strings. A span is typed
by ``gen_ai.operation.name``: ``retrieval`` spans carry ``gen_ai.retrieval.documents`` (ids and
scores; text only where the instrumentation captured it) and ``gen_ai.retrieval.query.text``; chat
spans carry ``gen_ai.input.messages``/``gen_ai.output.messages`` when content capture is on.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.adapters._model import AdapterOptions, Document, Kind, Span, dig, parse_time, text_of

__all__ = ["any_value", "spans"]

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})


def spans(record: Any, options: AdapterOptions) -> Iterator[Span | InvalidRecordError]:
    """Every span of one OTLP/JSON line; a span that cannot be read is yielded as its error, the rest go on."""
    if not isinstance(record, Mapping) or not isinstance(record.get("resourceSpans"), list):
        raise InvalidRecordError(None, "resourceSpans", "expected an OTLP/JSON ExportTraceServiceRequest line")
    for r, resource_spans in enumerate(record["resourceSpans"]):
        resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
        for s, scope_spans in enumerate(resource_spans.get("scopeSpans") or []):
            for i, span in enumerate(scope_spans.get("spans") or []):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                try:
                    yield _span(span, resource, where, options)
                except InvalidRecordError as exc:
                    yield exc


def _span(span: Mapping[str, Any], resource: Mapping[str, Any], where: str, options: AdapterOptions) -> Span:
    trace_id, span_id = span.get("traceId"), span.get("spanId")
    if not isinstance(trace_id, str) or not trace_id:
        raise InvalidRecordError(None, f"{where}.traceId", f"expected a hex trace id, got {trace_id!r}")
    if not isinstance(span_id, str) or not span_id:
        raise InvalidRecordError(trace_id, f"{where}.spanId", f"expected a hex span id, got {span_id!r}")
    attributes = _attributes(span.get("attributes"))
    operation = attributes.get("gen_ai.operation.name")
    parent = span.get("parentSpanId") or None
    kind: Kind = (
        "retriever" if operation == "retrieval" else "llm" if operation in _LLM_OPERATIONS else "chain" if not parent
        else "other"
    )  # fmt: skip
    documents = None
    if kind == "retriever":
        documents = _documents(attributes.get("gen_ai.retrieval.documents"), trace_id, span_id)
    question = attributes.get("gen_ai.retrieval.query.text")
    if not isinstance(question, str) or not question.strip():
        question = text_of(attributes.get("gen_ai.input.messages"), options.question_keys, role="user")
    answer = text_of(attributes.get("gen_ai.output.messages"), options.answer_keys, role="assistant")
    tokens = {
        name: int(attributes[f"gen_ai.usage.{name}_tokens"])
        for name in ("input", "output")
        if isinstance(attributes.get(f"gen_ai.usage.{name}_tokens"), int | float)
    }
    metadata: dict[str, Any] = {}
    if not parent:
        for key, name in (("service.name", "service_name"), ("deployment.environment", "environment")):
            if resource.get(key) is not None:
                metadata[name] = resource[key]
        if attributes.get("gen_ai.conversation.id") is not None:
            metadata["conversation_id"] = attributes["gen_ai.conversation.id"]
    model = attributes.get("gen_ai.response.model") or attributes.get("gen_ai.request.model")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent,
        kind=kind,
        name=str(span.get("name") or ""),
        start=parse_time(span.get("startTimeUnixNano"), trace_id=trace_id, field=f"{where}.startTimeUnixNano"),
        question=question,
        answer=answer,
        documents=documents,
        model=model if kind == "llm" and isinstance(model, str) else None,
        tokens=tokens,
        metadata=metadata,
    )


def _documents(value: Any, trace_id: str, span_id: str) -> tuple[Document, ...]:
    """``gen_ai.retrieval.documents``: structured or JSON text, ``[{id, score, content?}]`` in rank order."""
    field = f"span {span_id} gen_ai.retrieval.documents"
    documents = dig(value, "")
    if documents is None:
        return ()
    if not isinstance(documents, list):
        raise InvalidRecordError(trace_id, field, f"expected a list of documents, got {type(documents).__name__}")
    out = []
    for index, doc in enumerate(documents):
        if not isinstance(doc, Mapping):
            raise InvalidRecordError(trace_id, f"{field}.{index}", "expected a document object with id and score")
        text = doc.get("content", doc.get("text"))
        out.append(Document(id=doc.get("id"), text=text, score=doc.get("score"), where=f"{field}.{index}"))
    return tuple(out)


def _attributes(values: Any) -> dict[str, Any]:
    if not isinstance(values, list):
        return {}
    return {kv["key"]: any_value(kv.get("value")) for kv in values if isinstance(kv, Mapping) and "key" in kv}


def any_value(value: Any) -> Any:
    """An OTLP/JSON AnyValue as a Python value (``intValue`` arrives as a decimal string in OTLP/JSON)."""
    if not isinstance(value, Mapping):
        return value
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [any_value(item) for item in (value["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in value:
        return _attributes((value["kvlistValue"] or {}).get("values"))
    if "bytesValue" in value:
        return base64.b64decode(value["bytesValue"]).hex()
    return None
