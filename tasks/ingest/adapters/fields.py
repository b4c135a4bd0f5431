"""Readers of the fields every source logs in its own way: inputs and outputs as text, chat messages in every form
the tracing tools write, documents, tool outputs, timestamps and feedback entries. Adapters call them to fill a
:class:`~ragpulse.tasks.ingest.adapters.span.Span`; assembly calls them to read what the spans hold."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest import limits
from ragpulse.tasks.ingest.adapters.span import AdapterOptions, Document, Message

__all__ = [
    "DOCUMENT_ID_KEYS",
    "DOCUMENT_SCORE_KEYS",
    "DOCUMENT_TEXT_KEYS",
    "QUERY_KEYS",
    "chat_messages",
    "decoded",
    "dig",
    "document_from",
    "feedback_entry",
    "parse_time",
    "query_of",
    "text_of",
    "tool_call_id_of",
    "tool_documents",
]


def feedback_entry(name: Any, value: Any, label: Any, source: str, comment: Any) -> dict[str, Any]:
    """The canonical feedback entry (docs/traces.md): a boolean value as 1/0, empty texts as null."""
    number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if isinstance(value, bool):
        number = 1.0 if value else 0.0
    return {"name": name, "value": number, "label": _text(label), "source": source, "comment": _text(comment)}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


DOCUMENT_ID_KEYS = ("id", "metadata.id", "metadata.document_id", "metadata.doc_id", "id_", "url")
DOCUMENT_TEXT_KEYS = ("page_content", "content", "text", "snippet")
DOCUMENT_SCORE_KEYS = ("score", "metadata.score", "metadata.relevance_score", "metadata._score")
"""Where frameworks put a retrieved document's id, text and score, looked up in this order when
``format_options`` does not name a key: LangChain's ``Document`` (top-level ``id`` since langchain-core
0.2.11, else ``metadata``), LlamaIndex nodes (``id_``, ``text``), Haystack (``id``, ``content``, ``score``),
web search results (``url``, ``content`` or ``snippet``)."""


def document_from(doc: Any, options: AdapterOptions, where: str) -> Document:
    """One logged document (a LangChain ``Document`` as plain or serialised ``{"lc": 1, "kwargs": ...}``
    JSON, a LlamaIndex node, a Haystack document) read at the configured keys or the default ones."""
    doc = decoded(doc)
    if isinstance(doc, Mapping) and doc.get("lc") is not None and isinstance(doc.get("kwargs"), Mapping):
        doc = doc["kwargs"]

    def first(explicit: str | None, defaults: Sequence[str], *, decode: bool = True) -> Any:
        for path in (explicit,) if explicit is not None else defaults:
            found = dig(doc, path, decode=decode)
            if found is not None:
                return found
        return None

    return Document(
        id=first(options.id_key, DOCUMENT_ID_KEYS),
        text=first(options.text_key, DOCUMENT_TEXT_KEYS, decode=False),
        score=first(options.score_key, DOCUMENT_SCORE_KEYS),
        where=where,
    )


def dig(value: Any, path: str, *, decode: bool = True) -> Any:
    """The value at a dotted path (``metadata.id``, ``documents.0``) or None; JSON text is decoded on the way,
    and at the end unless ``decode`` is False (a document's text is kept as logged, even if it looks like JSON)."""
    for part in path.split(".") if path else ():
        value = decoded(value)
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list | tuple) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return decoded(value) if decode else value


def decoded(value: Any) -> Any:
    """JSON object/array text as the object (sources store nested inputs and outputs as JSON strings); text that
    is not JSON, or nested past limits.MAX_DEPTH, stays text."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return limits.loads(value)
        except ValueError:
            return value
    return value


QUERY_KEYS = ("query", "q", "search_query", "input")
"""Where a retriever's or tool's input object names its query, tried before ``question_keys``."""


def query_of(inputs: Any, options: AdapterOptions) -> str | None:
    """A retrieval step's query: its input text, or the first of QUERY_KEYS, then ``question_keys``, that holds one."""
    return text_of(inputs, (*QUERY_KEYS, *options.question_keys), role="user")


def text_of(value: Any, keys: Sequence[str], *, role: str | None = None) -> str | None:
    """The text a source logged as an input or output: a plain string, the first of ``keys`` in an object,
    or in a list of chat messages (any form :func:`chat_messages` reads) the last one of ``role`` (any role when
    None, or when no message has that role)."""
    value = decoded(value)
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, Mapping):
        if _looks_like_message(value):
            return _message_text(value)
        for key in keys:
            found = text_of(value.get(key), keys, role=role)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        messages = chat_messages(value) or ()
        wanted = [m for m in messages if m[0] == role] if role is not None else list(messages)
        for _, text in reversed(wanted or messages):
            if text.strip():
                return text
    return None


_ROLES = {
    "user": "user", "human": "user", "humanmessage": "user", "humanmessagechunk": "user",
    "assistant": "assistant", "ai": "assistant", "model": "assistant", "aimessage": "assistant",
    "aimessagechunk": "assistant", "system": "system", "developer": "system", "systemmessage": "system",
    "tool": "tool", "function": "tool", "ipython": "tool", "toolmessage": "tool", "functionmessage": "tool",
}  # fmt: skip
"""Role names of OpenAI, OTel GenAI, LangChain (message types and class names) and Gemini, as the four roles."""


def chat_messages(value: Any) -> tuple[Message, ...] | None:
    """A chat input in any form the tracing tools log, as (role, text) messages; None when ``value`` is not one.

    Read: OpenAI ``{"role", "content"}`` (text or parts), OTel GenAI ``{"role", "parts"}``, LangChain/LangGraph
    ``("user", "text")`` tuples and bare strings, messages as LangChain serialises them (``{"lc": 1, ...,
    "kwargs"}``, ``{"type": "human", "data": {...}}``, ``{"type": "human", "content"}``), a LangGraph state
    ``{"messages": [...]}``, and a chat model's batch of message lists (the first list)."""
    value = decoded(value)
    in_state = False
    if isinstance(value, Mapping) and not _looks_like_message(value):
        value, in_state = decoded(value.get("messages")), True
    elif isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list | tuple) or not value:
        return None
    if all(isinstance(item, list) for item in value) and not any(_is_pair(item) for item in value):
        value = value[0]  # a chat model run's batch of prompts
    if not in_state and any(isinstance(item, str) for item in value):
        return None  # a list of texts (documents to index) is not a conversation
    found = tuple(m for m in map(_message, value) if m is not None)
    return found or None


def _is_pair(item: Any) -> bool:
    return (
        isinstance(item, list | tuple)
        and len(item) == 2
        and isinstance(item[0], str)
        and item[0].lower() in _ROLES
        and isinstance(item[1], str | list)
    )


def _looks_like_message(value: Mapping[str, Any]) -> bool:
    kind = value.get("type")
    typed = isinstance(kind, str) and kind.lower() in _ROLES
    serialised = value.get("lc") is not None and isinstance(value.get("kwargs"), Mapping)
    return typed or serialised or "role" in value or "parts" in value or ("content" in value and "type" not in value)


def _message(item: Any) -> Message | None:
    """One message of a chat input, or None for anything else in the list."""
    item = decoded(item)
    if isinstance(item, str):
        return ("user", item)  # LangChain takes a bare string in a message list as the user's
    if _is_pair(item):
        return (_ROLES[item[0].lower()], _content_text(item[1]) or "")
    if not isinstance(item, Mapping):
        return None
    role: Any = item.get("role")
    body: Mapping[str, Any] = item
    if item.get("lc") is not None and isinstance(item.get("kwargs"), Mapping):
        body = item["kwargs"]
        ids = item.get("id")
        role = body.get("type") or (ids[-1] if isinstance(ids, list) and ids else None)
    elif isinstance(item.get("data"), Mapping) and isinstance(item.get("type"), str):
        body, role = item["data"], item["type"]
    elif role is None:
        role = item.get("type")
    if isinstance(body.get("role"), str) and str(role).lower() not in _ROLES:
        role = body["role"]  # LangChain's ChatMessage (type "chat") carries its own role
    name = _ROLES.get(str(role).lower()) if role is not None else ""  # a bare {"content"}: role unknown
    if name is None:
        return None
    return (name, _content_text(body.get("content", body.get("parts"))) or "")


def _content_text(content: Any) -> str | None:
    """A message's text: ``content`` as a string, or its text parts joined (OpenAI, OTel GenAI, LangChain)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(text for part in content if (text := _part_text(part)) is not None)
    return None


def _part_text(part: Any) -> str | None:
    """A text part's text, or a tool call response's (OTel GenAI ``tool_call_response``: what the model was given)."""
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type", "text")
    text = part.get("content", part.get("text")) if kind == "text" else None
    if kind == "tool_call_response":
        text = part.get("response")
        if text is not None and not isinstance(text, str):
            text = json.dumps(text, ensure_ascii=False, default=str)
    return text if isinstance(text, str) else None


def _message_text(message: Mapping[str, Any]) -> str | None:
    """Text of a chat message, None when blank."""
    found = _message(message)
    return found[1] if found is not None and found[1].strip() else None


_TOOL_DOCUMENT_PATHS = ("documents", "results", "output")
"""Where a tool's output object holds its list of documents when ``tool_documents_path`` is not set: a
retriever's ``documents``, a search API's ``results`` (Tavily's, Brave's shape), a wrapper's ``output``."""


def tool_documents(
    output: Any, options: AdapterOptions, where: str, *, named: bool = False
) -> tuple[Document, ...] | None:
    """A tool's output as retrieved documents, or None when it is not a retrieval (docs/traces.md, "Tools").

    The output is read through the ToolMessage that carries it (LangChain's serialised or plain ``{"type": "tool",
    "content"}``, OpenAI's ``{"role": "tool", "content"}``), JSON text decoded; documents are a list of objects each
    with a text (LangChain ``Document``, LlamaIndex node, ``{url, title, content}`` search results) at the top or
    at ``tool_documents_path`` (else the first list among ``documents``, ``results``, ``output``). A tool named in
    ``retriever_names`` whose output is plain text is one document of that text."""
    value = _tool_content(decoded(output))
    if options.tool_documents_path is not None:
        value = dig(value, options.tool_documents_path)
    elif isinstance(value, Mapping):
        value = next((found for path in _TOOL_DOCUMENT_PATHS if isinstance(found := dig(value, path), list)), value)
    if isinstance(value, list) and value and all(_is_document(item) for item in value):
        return tuple(document_from(item, options, f"{where}.{index}") for index, item in enumerate(value))
    if named and isinstance(value, str) and value.strip():
        return (Document(id=None, text=value, score=None, where=where),)
    return None


def _unwrapped(value: Any) -> Any:
    """A tool run's output without the ``{"output": ...}`` its run wraps it in."""
    if isinstance(value, Mapping) and isinstance(output := decoded(value.get("output")), Mapping):
        return output
    return value


def _tool_message(value: Any) -> Mapping[str, Any] | None:
    """The ToolMessage carrying a tool's (unwrapped) output: LangChain's serialised or ``message_to_dict`` form, or
    a plain ``{"type": "tool"}``/``{"role": "tool"}`` message; None for anything else."""
    if not isinstance(value, Mapping):
        return None
    message = value
    if value.get("lc") is not None and isinstance(value.get("kwargs"), Mapping):
        message = value["kwargs"]
    elif isinstance(value.get("data"), Mapping) and value.get("type") == "tool":  # message_to_dict's form
        message = value["data"]
    if "tool_call_id" in message or message.get("type") == "tool" or message.get("role") == "tool":
        return message
    return None


def _tool_content(value: Any) -> Any:
    """The content of the ToolMessage carrying a tool's output, or the (unwrapped) output itself."""
    value = _unwrapped(value)
    message = _tool_message(value)
    return decoded(message.get("content")) if message is not None else value


def tool_call_id_of(output: Any) -> str | None:
    """The ``tool_call_id`` of the ToolMessage carrying a tool's output: the id of the model's call it answers."""
    message = _tool_message(_unwrapped(decoded(output)))
    call_id = message.get("tool_call_id") if message is not None else None
    return call_id if isinstance(call_id, str) else None


def _is_document(item: Any) -> bool:
    item = decoded(item)
    if isinstance(item, Mapping) and item.get("lc") is not None and isinstance(item.get("kwargs"), Mapping):
        item = item["kwargs"]
    return isinstance(item, Mapping) and any(isinstance(item.get(key), str) for key in DOCUMENT_TEXT_KEYS)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# An integer epoch's unit, told by its size: any date from 1973 to 5138 has exactly one reading here.
_EPOCH_UNITS = ((10**11, 1_000_000), (10**14, 1_000), (10**17, 1))  # bound, microseconds per unit
_NANOS_PER_MICRO = 1_000


def parse_time(value: Any, *, trace_id: str | None, field: str) -> dt.datetime | None:
    """A source timestamp as aware UTC: ISO-8601 or ``YYYY-MM-DD HH:MM:SS.ffffff`` text, a datetime,
    float epoch seconds, or an integer epoch (or its decimal string) in seconds, milliseconds (LangSmith's
    JS SDK), microseconds or nanoseconds (OTLP's ``*UnixNano``), told apart by magnitude and read exactly;
    None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        parsed = value
    elif (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and value.isdigit()):
        return _from_epoch(int(value), trace_id=trace_id, field=field)
    elif isinstance(value, float) and math.isfinite(value):
        return _EPOCH + dt.timedelta(seconds=value)
    else:
        try:
            parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise InvalidRecordError(trace_id, field, f"expected a timestamp, got {str(value)[:60]!r}") from None
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)


def _from_epoch(value: int, *, trace_id: str | None, field: str) -> dt.datetime:
    """An integer epoch in the unit its magnitude implies, in integer microseconds (no float rounding)."""
    micros = value // _NANOS_PER_MICRO
    for bound, per_unit in _EPOCH_UNITS:
        if value < bound:
            micros = value * per_unit
            break
    try:
        return _EPOCH + dt.timedelta(microseconds=micros)
    except OverflowError:
        raise InvalidRecordError(trace_id, field, f"epoch {value} is out of range") from None
