"""Readers of the fields every source logs in its own way: inputs and outputs as text, chat messages in every form
the tracing tools write, documents, tool outputs, timestamps and feedback entries. Adapters call them to fill a
:class:`~ragpulse.tasks.ingest.adapters.span.Span`; assembly calls them to read what the spans hold."""

from __future__ import annotations

import ast
import datetime as dt
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest import limits
from ragpulse.tasks.ingest.adapters.span import AdapterOptions, Document, Message, ToolResult

__all__ = [
    "DOCUMENT_ID_KEYS",
    "DOCUMENT_SCORE_KEYS",
    "DOCUMENT_TEXT_KEYS",
    "FRAMEWORK_QUESTION_KEYS",
    "QUERY_KEYS",
    "chat_messages",
    "decoded",
    "dig",
    "document_from",
    "feedback_entry",
    "input_texts",
    "is_unread_object",
    "parse_time",
    "query_of",
    "question_of",
    "repr_field",
    "repr_message",
    "repr_tool_results",
    "result_error",
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


FRAMEWORK_QUESTION_KEYS = ("message", "user_msg", "user_message", "task", "query_str")
"""Where frameworks put the user's message in their top call's input, read after ``question_keys``: LlamaIndex's chat
engines (``message``) and agent workflows (``user_msg``), smolagents' ``run(task)``, LlamaIndex's ``QueryBundle``
(``query_str``)."""


def question_of(inputs: Any, options: AdapterOptions) -> str | None:
    """The user's message in a top or chain span's input: the last user message of a message list or state, else
    the text at the first of ``question_keys`` then :data:`FRAMEWORK_QUESTION_KEYS` (nested objects too)."""
    return text_of(inputs, (*options.question_keys, *FRAMEWORK_QUESTION_KEYS), role="user")


_INPUT_TEXTS = 32
"""At most this many texts are kept of a top span's input (its first ones): the user's message is among a call's
first arguments, and a state of thousands of texts must not cost its size on every trace."""


def input_texts(value: Any) -> tuple[str, ...]:
    """Every text a span's input holds, in order (JSON text decoded, a framework object's repr read for its text
    fields), at most :data:`_INPUT_TEXTS`."""
    found: list[str] = []

    def walk(item: Any, depth: int) -> None:
        item = decoded(item)
        if len(found) >= _INPUT_TEXTS or depth > _NESTED_KEY_DEPTH + 2:
            return
        if isinstance(item, str):
            if _REPR.match(item) or _FIELD_LIST.match(item):  # an object's rendering: its text fields
                found.extend(value for _, value in _repr_fields(item) if value.strip())
            elif item.strip():
                found.append(item)
        elif isinstance(item, Mapping):
            for child in item.values():
                walk(child, depth + 1)
        elif isinstance(item, list | tuple):
            for child in item:
                walk(child, depth + 1)

    walk(value, 0)
    return tuple(found)


def text_of(value: Any, keys: Sequence[str], *, role: str | None = None) -> str | None:
    """The text a source logged as an input or output: a plain string, a framework object's text (its repr, see
    :func:`repr_message` and :func:`repr_field`), the first of ``keys`` in an object (nearest first, then in the
    objects it nests: a pipeline's ``{"data": {"prompt_builder": {"question": ...}}}``), or in a list of chat messages
    (any form :func:`chat_messages` reads) the last one of ``role`` (any role when None, or when no message has that
    role)."""
    value = decoded(value)
    if isinstance(value, str):
        return _repr_text(value, keys) if _REPR.match(value) else (value if value.strip() else None)
    if isinstance(value, Mapping):
        if _looks_like_message(value):
            return _message_text(value)
        level: list[Mapping[str, Any]] = [value]
        for _ in range(_NESTED_KEY_DEPTH):
            for mapping in level:
                for key in keys:
                    found = text_of(mapping.get(key), keys, role=role) if key in mapping else None
                    if found is not None:
                        return found
            level = [
                child
                for mapping in level
                for item in mapping.values()
                if isinstance(child := decoded(item), Mapping) and not _looks_like_message(child)
            ]
        return None
    if isinstance(value, list | tuple):
        messages = chat_messages(value) or ()
        wanted = [m for m in messages if m[0] == role] if role is not None else list(messages)
        for _, text in reversed(wanted or messages):
            if text.strip():
                return text
    return None


_NESTED_KEY_DEPTH = 4
"""How deep :func:`text_of` looks for a key in nested objects: a pipeline's input per component (two levels), a
function's ``input_args``, a framework's ``kwargs``."""

_REPR = re.compile(r"^\s*(?P<cls>[A-Z][A-Za-z0-9_]+)\((?P<body>.*?)(?:\)|\.\.\.|…)\s*$", re.S)
"""A Python object's repr, as tracers log a framework object they cannot serialise: ``ChatMessage(...)``,
``StopEvent(result=...)``, ``Response(response=...)``; or its start, where the tracer cut it (``...``)."""
_REPR_STRING = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_REPR_FIELD = re.compile(rf"(?:\b(?P<name>\w+)=|'(?P<key>\w+)':\s*)(?P<value>{_REPR_STRING})", re.S)
_REPR_ROLE = re.compile(r"\b_?role=(?:<\w+\.\w+:\s*'(?P<enum>[\w-]+)'>|'(?P<text>[\w-]+)')")
_REPR_MESSAGE_CLASSES = re.compile(r"^(?:\w*Message|\w*MessageChunk|ChatTurn)$")
_REPR_TEXT_FIELDS = ("text", "content", "result")
"""Where a message object's repr holds its text: Haystack ``TextContent(text=...)`` and a tool message's
``ToolCallResult(result=...)``, LlamaIndex ``TextBlock(text=...)``, smolagents ``{'type': 'text', 'text': ...}``,
LangChain ``content='...'``."""
_REPR_TOOL_RESULT = re.compile(r"ToolCallResult\(.*?\bid='(?P<id>[^']*)'.*?\berror=(?P<error>True|False)\)", re.S)


def repr_tool_results(text: str) -> list[ToolResult]:
    """The tool results a message repr carries: Haystack's ``ToolCallResult(result=..., origin=ToolCall(..., id=...),
    error=...)``."""
    found = []
    for match in _REPR_TOOL_RESULT.finditer(text):
        result = next((value for name, value in _repr_fields(match[0]) if name == "result"), None)
        found.append(ToolResult(call_id=match["id"] or None, text=result, error=match["error"] == "True"))
    return found


def _repr_fields(body: str) -> list[tuple[str, str]]:
    """Every ``name='text'`` and ``'name': 'text'`` of a repr, in order, each string literal decoded."""
    found = []
    for match in _REPR_FIELD.finditer(body):
        literal = match["value"]
        if "\\" not in literal:
            found.append((match["name"] or match["key"], literal[1:-1]))  # no escape: the text between the quotes
            continue
        try:
            text = ast.literal_eval(literal)
        except (ValueError, SyntaxError):
            continue
        if isinstance(text, str):
            found.append((match["name"] or match["key"], text))
    return found


def repr_message(text: str) -> Message | None:
    """A chat message a tracer logged as its class's repr (Haystack's, LlamaIndex's, smolagents' ``ChatMessage``,
    LangChain's ``HumanMessage``...), as (role, text); None for any other text. The role is the repr's ``role=``
    (an enum's value or a string), else the class's name; the text is its text parts joined."""
    match = _REPR.match(text)
    if match is None or not _REPR_MESSAGE_CLASSES.match(match["cls"]):
        return None
    body = match["body"]
    role_match = _REPR_ROLE.search(body)
    raw_role = (role_match["enum"] or role_match["text"]) if role_match else match["cls"]
    role = _ROLES.get(raw_role.lower())
    if role is None:
        return None
    parts = [value for name, value in _repr_fields(body) if name in _REPR_TEXT_FIELDS]
    return (role, "".join(parts))


def is_unread_object(text: str) -> bool:
    """Whether ``text`` is a framework object's rendering that :func:`text_of` could not read for a text: a repr
    (``StartEvent()``, ``StopEvent(result=AgentOutput(...))``) or a pydantic model's fields (``id='…' source='user'
    content='…' type='TextMessage'``, AutoGen's messages): no question or answer, only an object's rendering."""
    return (_REPR.match(text) is not None and repr_message(text) is None) or _FIELD_LIST.match(text) is not None


_FIELD_LIST = re.compile(r"^\s*[a-z_]\w*=\S[^\n]*?\s[a-z_]\w*=\S")
"""A pydantic model's ``str()``: its fields as ``name=value`` pairs, separated by spaces."""


def repr_field(text: str, keys: Sequence[str]) -> str | None:
    """The first of ``keys`` a framework object's repr holds as text (``StopEvent(result='...')``,
    ``Response(response='...', source_nodes=[...])``), or None."""
    match = _REPR.match(text)
    if match is None:
        return None
    fields = _repr_fields(match["body"])
    return next((value for key in keys for name, value in fields if name == key and value.strip()), None)


def _repr_text(text: str, keys: Sequence[str]) -> str | None:
    """A repr's text: a message's, else the first of ``keys`` it holds, else (an object we cannot read) the repr."""
    message = repr_message(text)
    if message is not None:
        return message[1] if message[1].strip() else None
    return repr_field(text, keys) or (text if text.strip() else None)


_ROLES = {
    "user": "user", "human": "user", "humanmessage": "user", "humanmessagechunk": "user",
    "assistant": "assistant", "ai": "assistant", "model": "assistant", "aimessage": "assistant",
    "aimessagechunk": "assistant", "system": "system", "developer": "system", "systemmessage": "system",
    "tool": "tool", "function": "tool", "ipython": "tool", "toolmessage": "tool", "functionmessage": "tool",
    "tool-call": "assistant", "tool-response": "tool", "chatbot": "assistant",
}  # fmt: skip
"""Role names of OpenAI, OTel GenAI, LangChain (message types and class names), Gemini, smolagents (``tool-call``,
``tool-response``) and Cohere (``chatbot``), as the four roles."""


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
    texts = [item for item in value if isinstance(item, str)]
    if not in_state and texts and not all(repr_message(text) for text in texts):
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
        # A framework's message object logged as its repr, else LangChain's bare string: the user's.
        return repr_message(item) or ("user", item)
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


_TOOL_DOCUMENT_PATHS = ("documents", "results", "result", "output")
"""Where a tool's output object holds its list of documents when ``tool_documents_path`` is not set: a
retriever's ``documents``, a search API's ``results`` (Tavily's, Brave's shape), a wrapper's ``result`` (Google ADK
wraps a function's return value so) or ``output``."""


def tool_documents(
    output: Any, options: AdapterOptions, where: str, *, named: bool = False
) -> tuple[Document, ...] | None:
    """A tool's output as retrieved documents, or None when it is not a retrieval (docs/traces.md, "Tools").

    The output is read through the ToolMessage that carries it (LangChain's serialised or plain ``{"type": "tool",
    "content"}``, OpenAI's ``{"role": "tool", "content"}``), JSON text decoded; documents are a list of objects each
    with a text (LangChain ``Document``, LlamaIndex node, ``{url, title, content}`` search results) at the top or
    at ``tool_documents_path`` (else the first list among ``documents``, ``results``, ``output``). A tool named in
    ``retriever_names`` whose output is plain text is one document of that text. A result given as content parts
    (MCP's ``{"content": [{"type": "text", "text"}]}``, Strands' and Bedrock's ``[{"text"}]``) is read as its text,
    JSON decoded: a list of documents inside it is found, and a plain text (an error, a price) is no retrieval."""
    value = decoded(_unquoted(_tool_content(decoded(output))))
    if (parts := _text_parts(value)) is not None:
        value = decoded(parts)
    if options.tool_documents_path is not None:
        value = dig(value, options.tool_documents_path)
    elif isinstance(value, Mapping):
        value = next((found for path in _TOOL_DOCUMENT_PATHS if isinstance(found := dig(value, path), list)), value)
    if isinstance(value, list) and value and all(_is_document(item) for item in value):
        return tuple(document_from(item, options, f"{where}.{index}") for index, item in enumerate(value))
    if named and isinstance(value, str) and value.strip():
        return (Document(id=None, text=value, score=None, where=where),)
    return None


def _unquoted(value: Any) -> Any:
    """A tool result encoded as a JSON string of its JSON text (DSPy encodes a tool's return value again) as that
    text; any other value as it is."""
    if isinstance(value, str) and len(value) > 1 and value[0] == value[-1] == '"':
        try:
            inner = json.loads(value)
        except ValueError:
            return value
        return inner if isinstance(inner, str) else value
    return value


_PART_KEYS = frozenset({"type", "text"})
_RESULT_KEYS = frozenset({"content", "isError", "structuredContent", "_meta"})


def _text_parts(value: Any) -> str | None:
    """The text of a tool result given as content parts, or None for any other value. A part has no key but
    ``type`` (``text``) and ``text``: a list of documents carries more (an id, a score, metadata)."""
    if isinstance(value, Mapping) and "content" in value and set(value) <= _RESULT_KEYS:
        value = value["content"]
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(p, Mapping) and set(p) <= _PART_KEYS and p.get("type", "text") == "text" for p in value):
        return None
    if not all(isinstance(p.get("text"), str) for p in value):
        return None
    return "".join(p["text"] for p in value)


def _unwrapped(value: Any) -> Any:
    """A tool run's output without the ``{"output": ...}`` its run wraps it in, or the ``response`` of a function
    response (Gemini's and Google ADK's ``{"id", "name", "response"}``)."""
    if isinstance(value, Mapping) and isinstance(output := decoded(value.get("output")), Mapping):
        return output
    response = decoded(value.get("response")) if isinstance(value, Mapping) and "name" in value else None
    if isinstance(response, Mapping):
        return response
    return value


_FAILURE_FLAGS = ("isError", "is_error")
_FAILURE_FIELDS = ("error_type", "error")


def result_error(output: Any) -> str | None:
    """The failure a tool's result reports, although its span may have ended well: MCP's ``isError``, ``is_error``,
    or an ``error_type`` or ``error`` text (Google ADK's retry plugin hands an error to the model as a result)."""
    value = _unwrapped(decoded(output))
    if not isinstance(value, Mapping):
        return None
    if any(value.get(flag) is True for flag in _FAILURE_FLAGS):
        return _text_parts(value) or "the tool's result reports a failure"
    found = next((value[k] for k in _FAILURE_FIELDS if isinstance(value.get(k), str) and value[k].strip()), None)
    details = value.get("error_details") or value.get("message")
    return f"{found}: {details}" if found and isinstance(details, str) else found


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
