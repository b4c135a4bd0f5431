"""The shape every adapter maps its source records into: a :class:`Span` per span, run or observation, with its
:class:`Document` list and chat :data:`Message` list, and the ``format_options`` (:class:`AdapterOptions`) that tell
an adapter where a source nests its fields. Assembly (``assembly.py``) reads only these."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "CONVERSATION_KEYS",
    "DEFAULT_ANSWER_KEYS",
    "DEFAULT_QUESTION_KEYS",
    "AdapterOptions",
    "Document",
    "Kind",
    "Message",
    "Span",
    "ToolRequest",
    "ToolResult",
]

Kind = Literal["trace", "chain", "retriever", "reranker", "llm", "tool", "other", "feedback"]
"""What a span does; ``trace`` is a trace-level record (Langfuse's traces table), preferred as the root;
``feedback`` is a score, feedback or annotation record on the trace (no span of its tree)."""

Message = tuple[str, str]
"""A chat message as (role, text): role ``user``, ``assistant``, ``system`` or ``tool``, whatever the source
called it."""

CONVERSATION_KEYS = ("session_id", "thread_id", "conversation_id")
"""Metadata keys applications set to name a conversation (LangGraph copies its ``thread_id`` into every run's
metadata; LangSmith groups threads by these three), read when the source has no session field of its own."""

DEFAULT_QUESTION_KEYS = ("question", "query", "input", "user_input", "prompt", "messages", "text")
DEFAULT_ANSWER_KEYS = ("answer", "output", "response", "result", "generation", "text", "content", "messages")


@dataclass(frozen=True)
class AdapterOptions:
    """``format_options``: where question, answer and document fields sit when sources nest them.

    Dotted paths (``metadata.id``) walk into objects; list indices are numbers (``messages.0``). A document
    setting left at None reads the adapter's documented default places, in order.
    """

    question_keys: tuple[str, ...] = DEFAULT_QUESTION_KEYS
    answer_keys: tuple[str, ...] = DEFAULT_ANSWER_KEYS
    retriever_names: tuple[str, ...] = ()
    documents_path: str | None = None
    id_key: str | None = None
    text_key: str | None = None
    score_key: str | None = None
    tool_documents_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The options as JSON data, which the run's configuration hash includes: an option added later appears
        only when set, so the hashes warehouses hold from before it stay valid."""
        later = {} if self.tool_documents_path is None else {"tool_documents_path": self.tool_documents_path}
        return {
            "question_keys": list(self.question_keys),
            "answer_keys": list(self.answer_keys),
            "retriever_names": list(self.retriever_names),
            "documents_path": self.documents_path,
            "id_key": self.id_key,
            "text_key": self.text_key,
            "score_key": self.score_key,
            **later,
        }


@dataclass(frozen=True)
class Document:
    """One retrieved document as the source logged it; ``where`` names its source field for error messages."""

    id: Any
    text: Any
    score: Any
    where: str


@dataclass(frozen=True)
class ToolRequest:
    """A tool call a model asked for: the tool's name and its arguments as the model wrote them."""

    name: str | None
    arguments: Any


@dataclass(frozen=True)
class ToolResult:
    """A tool result as a model call received it: the call it answers (None when not logged), its text, and whether
    the source marks it failed (None when it does not say)."""

    call_id: str | None
    text: str | None
    error: bool | None


@dataclass(frozen=True)
class Span:
    """One span, run or observation of a source trace, projected to what assembly reads.

    - ``question``: a root's or chain's input as text when it is not in message form (``{"question": ...}``);
    - ``messages``: a root's, chain's or LLM call's input in message form, every message as logged (an LLM call's
      input holds the tool outputs it was given, so assembly can tell which documents reached the answer);
    - ``query``: a retriever's or tool's query (its input), never taken for the user's question;
    - ``documents``: a retriever's, reranker's or document-returning tool's output, in rank order;
    - ``arguments``: a tool call's input;
    - ``error``: the message of a span (of any kind) that ended in error status, else None;
    - ``end``: when the span ended (latencies are read from ``start`` and ``end``).
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    kind: Kind
    name: str
    start: dt.datetime | None
    end: dt.datetime | None = None
    question: str | None = None
    answer: str | None = None
    documents: tuple[Document, ...] | None = None
    model: str | None = None
    tokens: Mapping[str, int] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    messages: tuple[Message, ...] | None = None
    query: str | None = None
    arguments: Any = None
    error: str | None = None
    session_id: str | None = None
    tool_call_id: str | None = None
    tool_requests: Mapping[str, ToolRequest] = field(default_factory=dict)
    """An LLM call's requested tool calls by id (name and arguments as the model wrote them); a tool span's
    ``tool_call_id`` finds its call there when the tool logged only part of its input (a bare query text), and a
    source that logs no tool span at all (Haystack's Agent under OpenInference) has its tool calls read from here."""
    tool_results: tuple[ToolResult, ...] = ()
    """The tool results an LLM call received: the failed calls of a source that logs no tool spans, and the failures
    a tool span's own status does not show (the model was told the tool failed)."""
    output_text: str | None = None
    """A tool span's output as text, as logged: how its result is found among those a model call received."""
    input_texts: tuple[str, ...] = ()
    """A top span's input as its texts, every string it holds in order: where the user's message may sit under a key
    no convention names (assembly finds it as the text that reached a model call)."""
    feedback: Mapping[str, Any] | None = None
    """A ``feedback`` record's canonical entry {name, value, label, source, comment}. A record that names only the
    span it annotates (Phoenix) has an empty ``trace_id`` and that span's id in ``parent_id``; staging finds its
    trace."""
