"""OpenInference spans (Phoenix span exports, JSONL or Parquet) -> spans for assembly.

Accepts a span as Phoenix's spans dataframe writes it (``context.trace_id``, ``parent_id``,
``span_kind``, ``attributes.<name>`` columns, documents as lists of ``{"document.id": ...}``) or as
OpenTelemetry-style JSON (``context: {trace_id, span_id}``, ``attributes`` nested or flat): both are
flattened to OpenInference's dotted attribute names, e.g. ``retrieval.documents.0.document.id``. That
covers every layout Phoenix writes: ``TraceDataset.save()`` of a server dataframe (flat
``attributes.retrieval.documents`` list columns), of ``TraceDataset.from_spans`` (nested struct columns
such as ``attributes.retrieval``), ``phoenix.client`` ``get_spans()`` JSON (flat dotted keys) and Phoenix's
span JSON lines (nested ``attributes`` object).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest import limits
from ragpulse.tasks.ingest.adapters.fields import (
    chat_messages,
    dig,
    feedback_entry,
    input_texts,
    parse_time,
    query_of,
    question_of,
    repr_tool_results,
    result_error,
    text_of,
    tool_call_id_of,
    tool_documents,
)
from ragpulse.tasks.ingest.adapters.span import AdapterOptions, Document, Kind, Message, Span, ToolRequest, ToolResult

__all__ = ["QUESTION_PLACES", "flatten_attributes", "spans"]

QUESTION_PLACES = "root span input.value"
"""Where this format keeps the user's message, named in the reason a trace without one is quarantined."""

_KINDS: dict[str, Kind] = {
    "CHAIN": "chain", "AGENT": "chain", "RETRIEVER": "retriever", "RERANKER": "reranker", "LLM": "llm", "TOOL": "tool",
}  # fmt: skip
_MESSAGE = re.compile(
    r"^llm\.(?P<side>input|output)_messages\.(?P<i>\d+)\.message\."
    r"(?:(?P<field>role|content)|contents\.(?P<j>\d+)\.message_content\.text)$"
)
"""A message's role and text: ``message.content``, or its ``message.contents.<j>.message_content.text`` parts (the
form OpenInference writes for multi-part messages: smolagents, PydanticAI, Strands)."""
_TOOL_CALL = re.compile(
    r"^llm\.output_messages\.\d+\.message\.tool_calls\.(?P<j>\d+)\.tool_call\.(?P<field>id|function\.name|function\.arguments)$"
)
_FUNCTION_CONTENT = re.compile(r"^llm\.input_messages\.(?P<i>\d+)\.function\.(?P<j>\d+)$")
"""AutoGen's function results in a model call's input: JSON ``{"name", "content", "call_id", "is_error"}``."""
_CALLABLE_SUFFIX = re.compile(r"\.(?:__call__|acall|call|run|arun|invoke|ainvoke|forward)$")
"""A method an instrumentation names a TOOL span after when it logs no ``tool.name`` (DSPy: ``search_kb.__call__``):
the tool is the part before it."""
_DOCUMENT = re.compile(r"^(?P<i>\d+)\.document\.(?P<field>.+)$")
_METADATA_ID_KEYS = ("id", "document_id", "doc_id")
_METADATA_SCORE_KEYS = ("score", "relevance_score", "_score")


_ANNOTATOR_SOURCES = {"HUMAN": "annotation", "LLM": "evaluation", "CODE": "evaluation"}


def _annotation(record: Mapping[str, Any]) -> Span:
    """A span annotation as Phoenix lists it (``GET /v1/projects/{project}/span_annotations``: ``span_id``, ``name``,
    ``annotator_kind``, ``result`` {label, score, explanation}): feedback on the trace of the annotated span, which
    staging finds by the span id (the record has no trace id). HUMAN annotations are a person's; LLM and CODE
    ones are evaluations Phoenix or the team's code computed."""
    span_id, annotation_id = record.get("span_id"), record.get("id")
    if record.get("document_position") is not None:
        reason = "a document annotation (one retrieved document's, not the turn's) is not read as feedback"
        raise InvalidRecordError(None, "document_position", reason)
    if not isinstance(span_id, str) or not span_id:
        raise InvalidRecordError(None, "span_id", f"expected the annotated span's id, got {span_id!r}")
    source = _ANNOTATOR_SOURCES.get(str(record.get("annotator_kind")).upper())
    if source is None:
        reason = f"expected annotator_kind HUMAN, LLM or CODE, got {record.get('annotator_kind')!r}"
        raise InvalidRecordError(None, "annotator_kind", reason)
    result = record.get("result")
    result = result if isinstance(result, Mapping) else {}
    return Span(
        trace_id="",
        span_id=f"annotation:{annotation_id or record.get('name')}:{span_id}",
        parent_id=span_id,
        kind="feedback",
        name=str(record.get("name") or ""),
        start=None,
        feedback=feedback_entry(
            record.get("name"), result.get("score"), result.get("label"), source, result.get("explanation")
        ),
    )


def spans(record: Any, options: AdapterOptions) -> Iterator[Span]:
    """The one span of an exported OpenInference span record, or a Phoenix span annotation on one."""
    if not isinstance(record, Mapping):
        raise InvalidRecordError(None, "<record>", f"expected a span object, got {type(record).__name__}")
    if "annotator_kind" in record:
        yield _annotation(record)
        return
    raw_context = record.get("context")
    context: Mapping[str, Any] = raw_context if isinstance(raw_context, Mapping) else {}
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
    name = str(record.get("name") or "")
    if kind == "tool":
        name = str(attributes.get("tool.name") or _CALLABLE_SUFFIX.sub("", name))
    if kind == "tool" and name in options.retriever_names:
        kind = "retriever" if _documents(attributes, "retrieval.documents", span_id) else kind
    inputs, output = attributes.get("input.value"), attributes.get("output.value")
    documents = None
    if kind == "retriever":
        documents = _documents(attributes, "retrieval.documents", span_id)
    elif kind == "reranker":
        documents = _documents(attributes, "reranker.output_documents", span_id)
    elif kind == "tool":
        named = name in options.retriever_names
        documents = tool_documents(output, options, f"span {span_id} output.value", named=named)
    if kind == "retriever" and documents and any(doc.id is None for doc in documents):
        documents = _with_output_ids(documents, output)
    question = messages = query = None
    if is_root or kind == "chain":
        question = question_of(inputs, options) if is_root else None  # a chain's plain input names no question
        messages = chat_messages(inputs)
    elif kind == "llm":
        messages = _input_messages(attributes)
        if messages is None or any(not text for _, text in messages):
            messages = _richer(messages, chat_messages(inputs))
    elif kind in ("retriever", "tool"):
        query = query_of(inputs, options)
    answer = None
    if kind == "llm":
        answer = _last_output_message(attributes) or text_of(output, options.answer_keys, role="assistant")
    elif is_root:
        answer = text_of(output, options.answer_keys, role="assistant")
    tokens = {
        name: int(count)
        for name in ("prompt", "completion", "total")
        if isinstance(count := attributes.get(f"llm.token_count.{name}"), int | float) and math.isfinite(count)
    }  # Phoenix's server dataframe holds the counts as floats, NaN where a span has none
    error = None
    if str(record.get("status_code") or "").upper() == "ERROR":
        error = str(record.get("status_message") or "error")
    elif kind == "tool":
        error = result_error(output)
    session = attributes.get("session.id")
    yield Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=str(parent) if parent else None,
        kind=kind,
        name=name,
        start=parse_time(record.get("start_time"), trace_id=trace_id, field="start_time"),
        end=parse_time(record.get("end_time"), trace_id=trace_id, field="end_time"),
        question=question,
        answer=answer,
        documents=documents,
        model=attributes.get("llm.model_name") if kind == "llm" else None,
        tokens=tokens,
        metadata=_root_metadata(record, attributes) if is_root else {},
        messages=messages,
        query=query,
        arguments=dig(inputs, "") if kind == "tool" else None,
        error=error,
        session_id=str(session) if isinstance(session, str | int) and session != "" else None,
        tool_call_id=_tool_call_id(attributes, output) if kind == "tool" else None,
        tool_requests=_tool_requests(attributes, output) if kind == "llm" else {},
        tool_results=_tool_results(attributes, inputs) if kind == "llm" else (),
        output_text=output if kind == "tool" and isinstance(output, str) else None,
        input_texts=input_texts(inputs) if is_root else (),
    )


def _tool_requests(attributes: Mapping[str, Any], output: Any) -> dict[str, ToolRequest]:
    """The tool calls an LLM span's output asked for, by id: ``llm.output_messages.<i>.message.tool_calls.<j>``. An
    instrumentation that logs no call ids (Haystack's) has them in the output's message reprs (``ToolCall(...,
    id=...)``), in the same order."""
    calls: dict[str, dict[str, Any]] = {}
    for key, value in attributes.items():
        if match := _TOOL_CALL.match(key):
            calls.setdefault(key[: match.start("j")] + match["j"], {})[match["field"]] = value
    listed = [calls[key] for key in sorted(calls, key=_call_order)]
    if listed and not any(c.get("id") for c in listed) and isinstance(output, str):
        ids = _REPR_CALL_ID.findall(output)
        if len(ids) == len(listed):
            listed = [{**call, "id": call_id} for call, call_id in zip(listed, ids, strict=True)]
    return {
        str(c["id"]): ToolRequest(name=c.get("function.name"), arguments=c.get("function.arguments"))
        for c in listed
        if c.get("id")
    }


_REPR_CALL_ID = re.compile(r"ToolCall\((?:(?!ToolCall\().)*?\bid='([^']+)'", re.S)


def _call_order(key: str) -> tuple[int, ...]:
    return tuple(int(part) for part in key.split(".") if part.isdigit())


def _tool_results(attributes: Mapping[str, Any], inputs: Any) -> tuple[ToolResult, ...]:
    """The tool results an LLM call received: its tool messages (``llm.input_messages.<i>.message.tool_call_id`` and
    content), AutoGen's function results (``llm.input_messages.<i>.function.<j>``, JSON with ``call_id``, ``content``
    and ``is_error``), and Haystack's ``ToolCallResult(..., error=...)`` in the input's message reprs."""
    tool_messages: dict[int, dict[str, Any]] = {}
    results: list[ToolResult] = []
    for key, value in attributes.items():
        if match := _INPUT_MESSAGE_FIELD.match(key):
            tool_messages.setdefault(int(match["i"]), {})[match["field"]] = value
        elif _FUNCTION_CONTENT.match(key) and isinstance(found := dig(value, ""), Mapping):
            error = found.get("is_error")
            results.append(ToolResult(_text(found.get("call_id")), _text(found.get("content")),
                                      error if isinstance(error, bool) else None))  # fmt: skip
    for _, message in sorted(tool_messages.items()):
        if message.get("tool_call_id"):
            results.append(ToolResult(str(message["tool_call_id"]), _text(message.get("content")), None))
    if isinstance(inputs, str) and "ToolCallResult(" in inputs:
        results += repr_tool_results(inputs)
    return tuple(results)


_INPUT_MESSAGE_FIELD = re.compile(r"^llm\.input_messages\.(?P<i>\d+)\.message\.(?P<field>tool_call_id|content)$")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _tool_call_id(attributes: Mapping[str, Any], output: Any) -> str | None:
    """The id of the model's call a tool span answers: its ToolMessage's ``tool_call_id``, else ``tool_call.id`` or
    ``tool.id`` (Google ADK)."""
    found = tool_call_id_of(output) or attributes.get("tool_call.id") or attributes.get("tool.id")
    return str(found) if isinstance(found, str | int) and found != "" else None


def _richer(*readings: tuple[Message, ...] | None) -> tuple[Message, ...] | None:
    """Of two readings of a call's input messages, the one with more text: an instrumentation may log a message's
    role without its content (Haystack's tool results) where the input's message reprs hold it, so the input is read
    only when a message has no text."""
    found = [r for r in readings if r]
    return max(found, key=lambda messages: sum(len(text) for _, text in messages)) if found else None


def _input_messages(attributes: Mapping[str, Any]) -> tuple[Message, ...] | None:
    """An LLM span's ``llm.input_messages`` as messages (tool outputs included)."""
    return _messages(attributes, "input")


def _messages(attributes: Mapping[str, Any], side: str) -> tuple[Message, ...] | None:
    """``llm.<side>_messages.<i>.message.*`` as messages, a message's text parts joined in order."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if (match := _MESSAGE.match(key)) and match["side"] == side:
            message = found.setdefault(int(match["i"]), {"parts": {}})
            if match["j"] is not None:
                message["parts"][int(match["j"])] = value if isinstance(value, str) else ""
            else:
                message[match["field"]] = value
        elif side == "input" and (match := _FUNCTION_CONTENT.match(key)) and isinstance(got := dig(value, ""), Mapping):
            content = got.get("content")  # AutoGen's function result: a tool message
            message = found.setdefault(int(match["i"]), {"parts": {}})
            message["parts"][int(match["j"])] = content if isinstance(content, str) else ""
            message["role"] = "tool"
    listed = [
        {"role": m.get("role"), "content": m.get("content") or "".join(p for _, p in sorted(m["parts"].items()))}
        for _, m in sorted(found.items())
    ]
    return chat_messages(listed) if listed else None


def flatten_attributes(record: Mapping[str, Any]) -> dict[str, Any]:
    """Every attribute under its dotted OpenInference name, from an ``attributes`` object (nested, flat or
    JSON text) and from ``attributes.<name>`` columns."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        if key == "attributes":
            if isinstance(value, str):
                try:
                    value = limits.loads(value)
                except ValueError:  # not JSON, or nested past limits.MAX_DEPTH
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


def _documents(attributes: Mapping[str, Any], prefix: str, span_id: str) -> tuple[Document, ...] | None:
    """The span's documents in rank order; None when it logged none (LlamaIndex nests a retriever span
    without documents inside the one that has them, which must not count as a retriever).

    id: ``document.id``, else ``document.metadata`` ``id``/``document_id``/``doc_id``; text:
    ``document.content`` as is; score: ``document.score``, else ``document.metadata``
    ``score``/``relevance_score``/``_score``. Metadata is a JSON text, an object or flattened keys."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        match = _DOCUMENT.match(key.removeprefix(f"{prefix}.")) if key.startswith(f"{prefix}.") else None
        if match:
            found.setdefault(int(match["i"]), {})[match["field"]] = value
    if not found:
        return None
    documents = []
    for index, fields in sorted(found.items()):
        metadata = _metadata(fields)
        doc_id = fields.get("id")
        if doc_id is None:
            doc_id = next((metadata[k] for k in _METADATA_ID_KEYS if metadata.get(k) is not None), None)
        score = fields.get("score")
        if score is None:
            score = next((metadata[k] for k in _METADATA_SCORE_KEYS if metadata.get(k) is not None), None)
        where = f"span {span_id} {prefix}.{index}.document"
        documents.append(Document(id=doc_id, text=fields.get("content"), score=score, where=where))
    return tuple(documents)


def _metadata(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A ``metadata`` attribute as an object: OpenTelemetry attributes hold it as JSON text, Phoenix's
    dataframes as a struct, its client's span JSON as flattened ``metadata.<key>`` entries."""
    metadata = fields.get("metadata")
    if isinstance(metadata, str):
        try:
            metadata = limits.loads(metadata)
        except ValueError:  # not JSON, or nested past limits.MAX_DEPTH
            metadata = None
    out = dict(metadata) if isinstance(metadata, Mapping) else {}
    out.update({key.removeprefix("metadata."): v for key, v in fields.items() if key.startswith("metadata.")})
    return out


def _with_output_ids(documents: tuple[Document, ...], output: Any) -> tuple[Document, ...]:
    """Ids from the retriever's ``output.value`` where OpenInference dropped them: its LangChain
    instrumentation logs no ``document.id`` but the output holds the ``Document`` objects, ``id`` included
    (serialised ones under ``kwargs``). An output document is used only if its text is the document's."""
    listed = dig(output, "documents")
    if not isinstance(listed, list) or len(listed) != len(documents):
        return documents
    resolved = []
    for doc, item in zip(documents, listed, strict=True):
        if isinstance(item, Mapping) and isinstance(item.get("kwargs"), Mapping):
            item = item["kwargs"]
        item_id = item.get("id") if isinstance(item, Mapping) else None
        if doc.id is None and isinstance(item_id, str | int) and item.get("page_content") == doc.text:
            doc = Document(id=item_id, text=doc.text, score=doc.score, where=doc.where)
        resolved.append(doc)
    return tuple(resolved)


def _last_output_message(attributes: Mapping[str, Any]) -> str | None:
    messages = _messages(attributes, "output")
    return next((text for _, text in reversed(messages or ()) if text.strip()), None)


def _root_metadata(record: Mapping[str, Any], attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The root's ``metadata`` attribute as the app logged it (lists of objects whole, not flattened), with its
    session and user ids."""
    nested = record.get("attributes")
    logged = dig(nested, "metadata") if isinstance(nested, Mapping | str) else None
    if not isinstance(logged, Mapping):
        logged = dig(record.get("attributes.metadata"), "")
    out = {**_metadata(attributes), **(logged if isinstance(logged, Mapping) else {})}
    for key in ("session.id", "user.id"):
        if attributes.get(key) is not None:
            out[key.replace(".", "_")] = attributes[key]
    return out
