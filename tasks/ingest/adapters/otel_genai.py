"""OpenTelemetry GenAI semantic conventions in OTLP/JSON lines (Collector ``file`` or S3 exporter) -> spans.

One line is an ``ExportTraceServiceRequest``: ``resourceSpans[].scopeSpans[].spans[]``, attributes as
``[{"key", "value": AnyValue}]``, ids as hex (base64 as protobuf's own JSON mapping writes them is read
too), times as ``*UnixNano`` decimal strings. A span is typed by ``gen_ai.operation.name``: ``retrieval``
spans carry ``gen_ai.retrieval.documents`` and ``gen_ai.retrieval.query.text``; chat spans carry
``gen_ai.input.messages``/``gen_ai.output.messages`` when content capture is on.

Instrumentations written against older conventions put the content elsewhere, so each place is read in
turn (docs/traces.md): span events (``gen_ai.client.inference.operation.details``,
``gen_ai.content.prompt``/``gen_ai.content.completion``), the deprecated ``gen_ai.prompt``/
``gen_ai.completion`` attributes and their indexed ``gen_ai.prompt.<i>.content`` form, and log events
(``gen_ai.user.message``, ``gen_ai.choice``) that a file exporter shared with the logs pipeline writes as
``resourceLogs`` lines into the same files. Metrics lines of a shared file are skipped.
"""

from __future__ import annotations

import ast
import base64
import binascii
import contextlib
import math
import re
import string
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.adapters.fields import (
    chat_messages,
    dig,
    document_from,
    feedback_entry,
    input_texts,
    parse_time,
    query_of,
    question_of,
    result_error,
    text_of,
    tool_documents,
)
from ragpulse.tasks.ingest.adapters.span import CONVERSATION_KEYS, AdapterOptions, Document, Kind, Message, Span

__all__ = ["EVALUATION_EVENT", "QUESTION_PLACES", "any_value", "spans"]

QUESTION_PLACES = (
    "the root span's traceloop.entity.input, a user message in gen_ai.input.messages or gen_ai.prompt (attribute, "
    "indexed or span event), a gen_ai.user.message log event; instrumentations log message content only when told "
    "to, e.g. OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only"
)
"""Where this format keeps the user's message, named in the reason a trace without one is quarantined."""

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_RETRIEVAL_OPERATIONS = frozenset({"retrieval", "vector_db_retrieve"})
"""``retrieval`` (GenAI conventions); ``vector_db_retrieve``: OpenLLMetry's retriever spans."""
_AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})
_TRACELOOP_KINDS: dict[str, Kind] = {"workflow": "chain", "agent": "chain", "task": "chain", "tool": "tool"}
"""OpenLLMetry's ``traceloop.span.kind`` (its entity spans carry ``traceloop.entity.input``/``output``)."""
_OTHER_SIGNALS = ("resourceMetrics", "resourceProfiles")
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_INDEXED = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(content|role)$")


def spans(record: Any, options: AdapterOptions) -> Iterator[Span | InvalidRecordError]:
    """Every span of one OTLP/JSON line; a span that cannot be read is yielded as its error, the rest go on."""
    if isinstance(record, Mapping) and isinstance(record.get("resourceLogs"), list):
        yield from _log_spans(record["resourceLogs"], options)
        return
    if isinstance(record, Mapping) and any(isinstance(record.get(key), list) for key in _OTHER_SIGNALS):
        return
    if not isinstance(record, Mapping) or not isinstance(record.get("resourceSpans"), list):
        raise InvalidRecordError(
            None, "resourceSpans", "expected an OTLP/JSON ExportTraceServiceRequest (or resourceLogs) line"
        )
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
    trace_id = _hex_id(span.get("traceId"), 16)
    if trace_id is None:
        raise InvalidRecordError(None, f"{where}.traceId", f"expected a trace id, got {span.get('traceId')!r}")
    span_id = _hex_id(span.get("spanId"), 8)
    if span_id is None:
        raise InvalidRecordError(trace_id, f"{where}.spanId", f"expected a span id, got {span.get('spanId')!r}")
    attributes = _attributes(span.get("attributes"))
    operation = attributes.get("gen_ai.operation.name")
    parent = _hex_id(span.get("parentSpanId"), 8)
    name = str(span.get("name") or "")
    traceloop_kind = _TRACELOOP_KINDS.get(str(attributes.get("traceloop.span.kind")))
    kind: Kind = (
        "retriever" if operation in _RETRIEVAL_OPERATIONS or "gen_ai.retrieval.documents" in attributes
        else "llm" if operation in _LLM_OPERATIONS
        else "tool" if operation == "execute_tool" or traceloop_kind == "tool"
        else "chain" if operation in _AGENT_OPERATIONS or traceloop_kind is not None or not parent
        else "other"
    )  # fmt: skip
    entity_input = dig(attributes.get("traceloop.entity.input"), "")
    entity_output = dig(attributes.get("traceloop.entity.output"), "")
    if isinstance(entity_input, Mapping) and "inputs" in entity_input:
        entity_input = dig(entity_input, "inputs")  # OpenLLMetry's LangChain spans wrap a run's inputs
    if isinstance(entity_output, Mapping) and "outputs" in entity_output:
        entity_output = dig(entity_output, "outputs")
    tool_name = attributes.get("gen_ai.tool.name")
    if kind == "tool" and isinstance(tool_name, str) and tool_name:
        name = tool_name
    documents = None
    if kind == "retriever":
        documents = _documents(attributes, trace_id, span_id, options)
        if not documents and entity_output is not None:
            documents = tool_documents(entity_output, options, f"span {span_id} traceloop.entity.output")
        documents = documents or ()
    elif kind == "tool":
        result = attributes.get("gen_ai.tool.call.result", entity_output)
        documents = tool_documents(
            result, options, f"span {span_id} tool result", named=name in options.retriever_names
        )
    question, answer, messages = _content(attributes, None, None, options)
    for event in span.get("events") or []:
        if isinstance(event, Mapping) and (question is None or answer is None or messages is None):
            found = _content(_attributes(event.get("attributes")), event.get("name"), None, options)
            question, answer, messages = question or found[0], answer or found[1], messages or found[2]
    query = None
    arguments = _tool_arguments(attributes.get("gen_ai.tool.call.arguments", entity_input)) if kind == "tool" else None
    if kind in ("retriever", "tool"):
        query = question or query_of(arguments if kind == "tool" else entity_input, options)
        question = None
    elif kind == "chain" and entity_input is not None:
        question = question or question_of(entity_input, options)
        messages = messages or chat_messages(entity_input)
    if kind == "chain" and answer is None and entity_output is not None and not parent:
        answer = text_of(entity_output, options.answer_keys, role="assistant")
    tokens = {
        name: int(count)
        for name, older in (("input", "prompt"), ("output", "completion"))
        if isinstance(
            count := attributes.get(f"gen_ai.usage.{name}_tokens", attributes.get(f"gen_ai.usage.{older}_tokens")),
            int | float,
        )
        and not isinstance(count, bool)
        and math.isfinite(count)
    }  # semantic conventions before v1.27 named them prompt_tokens and completion_tokens
    metadata: dict[str, Any] = {}
    if not parent:
        for key, label in (("service.name", "service_name"), ("deployment.environment", "environment")):
            if resource.get(key) is not None:
                metadata[label] = resource[key]
    session = attributes.get("gen_ai.conversation.id") or attributes.get("session.id")
    for key, value in attributes.items():
        if (
            session is None
            and key.startswith("traceloop.association.properties.")
            and key.rsplit(".", 1)[1] in (CONVERSATION_KEYS)
        ):
            session = value
    if not parent and session is not None:
        metadata["conversation_id"] = session
    raw_status = span.get("status")
    status: Mapping[str, Any] = raw_status if isinstance(raw_status, Mapping) else {}
    error = None
    if status.get("code") in (2, "STATUS_CODE_ERROR", "ERROR"):
        error = str(status.get("message") or attributes.get("error.type") or "error")
    elif kind == "tool":
        error = result_error(attributes.get("gen_ai.tool.call.result", entity_output))
    model = attributes.get("gen_ai.response.model") or attributes.get("gen_ai.request.model")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent,
        kind=kind,
        name=name,
        start=parse_time(span.get("startTimeUnixNano"), trace_id=trace_id, field=f"{where}.startTimeUnixNano"),
        end=parse_time(span.get("endTimeUnixNano"), trace_id=trace_id, field=f"{where}.endTimeUnixNano"),
        question=question if kind != "llm" else None,
        answer=answer,
        documents=documents,
        model=model if kind == "llm" and isinstance(model, str) else None,
        tokens=tokens,
        metadata=metadata,
        messages=messages,
        query=query,
        arguments=arguments,
        error=error,
        session_id=str(session) if isinstance(session, str | int) and session != "" else None,
        input_texts=input_texts(entity_input) if not parent and entity_input is not None else (),
    )


def _tool_arguments(value: Any) -> Any:
    """A tool call's arguments: the GenAI attribute's JSON object, or OpenLLMetry's LangChain ``input_str``, the
    ``str()`` of the arguments dict (a Python literal, read as one, never evaluated)."""
    value = dig(value, "")
    if isinstance(value, Mapping) and "input_str" in value:
        text = value["input_str"]
        decoded = dig(text, "")
        if isinstance(decoded, str) and decoded[:1] == "{":
            with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
                decoded = ast.literal_eval(decoded)
        return decoded
    return value


def _content(
    attributes: Mapping[str, Any], event: Any, body: Any, options: AdapterOptions
) -> tuple[str | None, str | None, tuple[Message, ...] | None]:
    """Question (a retrieval's query text, else a user message), answer and input messages of a span, span event or
    log event, each from the first place that has one: current attributes, the deprecated ones, their indexed form,
    then the event body of the v1.28-1.36 log events (``gen_ai.user.message`` body ``{content}``, ``gen_ai.choice``
    body ``{message: {content}}``)."""
    messages = (
        chat_messages(attributes.get("gen_ai.input.messages"))
        or chat_messages(attributes.get("gen_ai.prompt"))
        or _indexed_messages(attributes, "prompt")
    )
    instructions = chat_messages([{"role": "system", "parts": dig(attributes.get("gen_ai.system_instructions"), "")}])
    if messages is not None and instructions is not None and instructions[0][1]:
        messages = instructions + messages  # the system prompt sits apart since the conventions' v1.37
    question = attributes.get("gen_ai.retrieval.query.text")
    if not isinstance(question, str) or not question.strip():
        question = (
            text_of(attributes.get("gen_ai.input.messages"), options.question_keys, role="user")
            or text_of(attributes.get("gen_ai.prompt"), options.question_keys, role="user")
            or _indexed(attributes, "prompt", "user")
            or (text_of(body, options.question_keys) if event == "gen_ai.user.message" else None)
        )
        if messages is None and event == "gen_ai.user.message" and question is not None:
            messages = (("user", question),)
    answer = (
        text_of(attributes.get("gen_ai.output.messages"), options.answer_keys, role="assistant")
        or text_of(attributes.get("gen_ai.completion"), options.answer_keys, role="assistant")
        or _indexed(attributes, "completion", "assistant")
        or (text_of(dig(body, "message"), options.answer_keys) if event == "gen_ai.choice" else None)
    )
    return question, answer, messages


def _indexed_messages(attributes: Mapping[str, Any], kind: str) -> tuple[Message, ...] | None:
    """``gen_ai.<kind>.<i>.{role,content}`` (OpenLLMetry) as messages, in index order."""
    messages: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if (match := _INDEXED.match(key)) and match[1] == kind:
            messages.setdefault(int(match[2]), {})[match[3]] = value
    listed = [{"role": m.get("role") or "user", "content": m.get("content") or ""} for _, m in sorted(messages.items())]
    return chat_messages(listed) if listed else None


def _indexed(attributes: Mapping[str, Any], kind: str, role: str) -> str | None:
    """The last ``gen_ai.<kind>.<i>.content`` of ``role`` (any role when none is logged), OpenLLMetry's form."""
    messages: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if (match := _INDEXED.match(key)) and match[1] == kind:
            messages.setdefault(int(match[2]), {})[match[3]] = value
    ordered = [messages[i] for i in sorted(messages)]
    return text_of(ordered, (), role=role) if ordered else None


def _documents(
    attributes: Mapping[str, Any], trace_id: str, span_id: str, options: AdapterOptions
) -> tuple[Document, ...]:
    """``gen_ai.retrieval.documents``: structured or JSON text, in rank order.

    The convention asks for ``{id, score}`` and allows more keys; the reference scenarios log ``content``
    and a ``source_id`` that names the data source, not the document. So a document's id is the first of
    the shared document keys (``id``, ``metadata.id``, ...), else its ``source_id`` only when that tells
    documents apart (differs from ``gen_ai.data_source.id`` and from the other documents' ``source_id``);
    a document with text but no id is kept without one.
    """
    field = f"span {span_id} gen_ai.retrieval.documents"
    documents = dig(attributes.get("gen_ai.retrieval.documents"), "")
    if documents is None:
        return ()
    if not isinstance(documents, list):
        raise InvalidRecordError(trace_id, field, f"expected a list of documents, got {type(documents).__name__}")
    if any(not isinstance(doc, Mapping) for doc in documents):
        index = next(i for i, doc in enumerate(documents) if not isinstance(doc, Mapping))
        raise InvalidRecordError(trace_id, f"{field}.{index}", "expected a document object with id and score")
    out = [document_from(doc, options, f"{field}.{index}") for index, doc in enumerate(documents)]
    if options.id_key is None:
        out = _with_source_ids(out, documents, attributes.get("gen_ai.data_source.id"))
    return tuple(out)


def _with_source_ids(out: list[Document], documents: Sequence[Mapping[str, Any]], source: Any) -> list[Document]:
    source_ids = [doc.get("source_id") for doc in documents]
    return [
        Document(id=sid, text=doc.text, score=doc.score, where=doc.where)
        if doc.id is None and isinstance(sid, str) and sid and sid != source and source_ids.count(sid) == 1
        else doc
        for doc, sid in zip(out, source_ids, strict=True)
    ]


EVALUATION_EVENT = "gen_ai.evaluation.result"
_HUMAN_SOURCES = frozenset({"human", "user", "annotation"})


def _evaluation(attributes: Mapping[str, Any], trace_id: str, span_id: str, key: str, start: Any) -> Span:
    """A ``gen_ai.evaluation.result`` event (GenAI semantic conventions: ``gen_ai.evaluation.name``,
    ``.score.value``, ``.score.label``, ``.explanation``) as feedback on its trace. The conventions describe
    evaluations (a model's or code's); one is taken for a person's only when ``gen_ai.evaluation.source`` (not in
    the conventions) says ``human``, ``user`` or ``annotation``."""
    said = str(attributes.get("gen_ai.evaluation.source") or "").lower()
    source = "annotation" if said in _HUMAN_SOURCES - {"user"} else "user" if said == "user" else "evaluation"
    return Span(
        trace_id=trace_id,
        span_id=key,
        parent_id=span_id,
        kind="feedback",
        name=EVALUATION_EVENT,
        start=start,
        feedback=feedback_entry(
            attributes.get("gen_ai.evaluation.name"),
            attributes.get("gen_ai.evaluation.score.value"),
            attributes.get("gen_ai.evaluation.score.label"),
            source,
            attributes.get("gen_ai.evaluation.explanation"),
        ),
    )


def _log_spans(resource_logs: list[Any], options: AdapterOptions) -> Iterator[Span | InvalidRecordError]:
    """GenAI log events as child spans of the span they were emitted in (other logs are not traces)."""
    for r, resource in enumerate(resource_logs):
        for s, scope in enumerate((resource or {}).get("scopeLogs") or []):
            for i, log in enumerate(scope.get("logRecords") or []):
                attributes = _attributes(log.get("attributes"))
                event = log.get("eventName") or attributes.get("event.name")
                if not isinstance(event, str) or not event.startswith("gen_ai."):
                    continue
                where = f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{i}]"
                trace_id, span_id = _hex_id(log.get("traceId"), 16), _hex_id(log.get("spanId"), 8)
                if trace_id is None or span_id is None:
                    yield InvalidRecordError(trace_id, f"{where}.traceId", f"{event} log event is not in a span")
                    continue
                time = log.get("timeUnixNano") or log.get("observedTimeUnixNano")
                try:
                    start = parse_time(time, trace_id=trace_id, field=f"{where}.timeUnixNano")
                except InvalidRecordError as exc:
                    yield exc
                    continue
                if event == EVALUATION_EVENT:
                    yield _evaluation(attributes, trace_id, span_id, f"{span_id}:{event}@{time}", start)
                    continue
                _, answer, messages = _content(attributes, event, any_value(log.get("body")), options)
                yield Span(
                    trace_id=trace_id,
                    span_id=f"{span_id}:{event}@{time}",
                    parent_id=span_id,
                    kind="llm" if answer or messages else "other",
                    name=event,
                    start=start,
                    question=None,
                    answer=answer,
                    messages=messages,
                )


def _hex_id(value: Any, size: int) -> str | None:
    """A trace (16 bytes) or span (8 bytes) id as lowercase hex, so that spans written by different
    tools join: OTLP/JSON writes hex (any case), protobuf's JSON mapping base64; other text is kept."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) == 2 * size and all(c in string.hexdigits for c in value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value
    return raw.hex() if len(raw) == size else value


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
