"""The shape every adapter maps its source records into, and the one assembly of spans into a canonical trace.

Sources differ in how they log a request (spans, runs, observations) but agree on its structure: a
root that holds the question and the answer, retriever steps that return ranked documents, maybe a
reranker that reorders them, and LLM calls. Each adapter projects its records to :class:`Span`;
:func:`assemble` turns the spans of one trace into a raw canonical trace (docs/traces.md) that then
goes through ``parse_record`` like any JSONL line.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ragpulse.metrics.errors import InvalidRecordError

__all__ = [
    "DEFAULT_ANSWER_KEYS",
    "DEFAULT_QUESTION_KEYS",
    "AdapterOptions",
    "Document",
    "Kind",
    "Span",
    "assemble",
    "dig",
    "parse_time",
    "text_of",
]

Kind = Literal["trace", "chain", "retriever", "reranker", "llm", "other"]
"""What a span does; ``trace`` is a trace-level record (Langfuse's traces table), preferred as the root."""

DEFAULT_QUESTION_KEYS = ("question", "query", "input", "user_input", "prompt", "messages", "text")
_QUESTION_SOURCES = {
    "openinference": "root span input.value, or a RETRIEVER span's input.value",
    "otel-genai": "gen_ai.retrieval.query.text or a user message in gen_ai.input.messages",
    "langfuse": "the trace's input, or the root observation's input",
    "langsmith": "the root run's inputs",
}
DEFAULT_ANSWER_KEYS = ("answer", "output", "response", "result", "generation", "text", "content", "messages")


@dataclass(frozen=True)
class AdapterOptions:
    """``format_options``: where question, answer and document fields sit when sources nest them.

    Dotted paths (``metadata.id``) walk into objects; list indices are numbers (``messages.0``).
    """

    question_keys: tuple[str, ...] = DEFAULT_QUESTION_KEYS
    answer_keys: tuple[str, ...] = DEFAULT_ANSWER_KEYS
    retriever_names: tuple[str, ...] = ()
    documents_path: str = "documents"
    id_key: str = "metadata.id"
    text_key: str = "page_content"
    score_key: str = "metadata.score"

    def to_dict(self) -> dict[str, Any]:
        return {
            "question_keys": list(self.question_keys),
            "answer_keys": list(self.answer_keys),
            "retriever_names": list(self.retriever_names),
            "documents_path": self.documents_path,
            "id_key": self.id_key,
            "text_key": self.text_key,
            "score_key": self.score_key,
        }


@dataclass(frozen=True)
class Document:
    """One retrieved document as the source logged it; ``where`` names its source field for error messages."""

    id: Any
    text: Any
    score: Any
    where: str


@dataclass(frozen=True)
class Span:
    """One span, run or observation of a source trace, projected to what assembly reads."""

    trace_id: str
    span_id: str
    parent_id: str | None
    kind: Kind
    name: str
    start: dt.datetime | None
    question: str | None = None
    answer: str | None = None
    documents: tuple[Document, ...] | None = None
    model: str | None = None
    tokens: Mapping[str, int] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)


def assemble(trace_id: str, spans: Sequence[Span], *, source_format: str, options: AdapterOptions) -> dict[str, Any]:
    """The spans of one trace as a raw canonical trace; InvalidRecordError names the source trace and field.

    - root: the trace-level record if there is one, else the earliest span without a parent in the trace;
    - question/answer: the root's, else the first question (retrieval query, chat input) and the last
      answer (final LLM output) among the spans in start order;
    - contexts: the last reranker's output documents if the trace has a reranker, else the documents of
      every retriever (``retriever_names`` selects some by name) concatenated in start order;
    - metadata: ``source`` = {format, trace_id, root_span_id, retriever_span_ids}, plus model and token
      counts of the LLM spans and the root's own metadata.
    """
    ordered = sorted(spans, key=lambda s: (s.start is None, s.start or dt.datetime.min.replace(tzinfo=dt.UTC)))
    ids = {span.span_id for span in ordered}
    roots = [s for s in ordered if s.parent_id is None or s.parent_id not in ids]
    root = next((s for s in roots if s.kind == "trace"), None) or next((s for s in roots if s.parent_id is None), None)
    if root is None:
        parents = sorted({s.parent_id for s in roots if s.parent_id is not None})
        raise InvalidRecordError(
            trace_id, "root span", f"{source_format} trace has no root span (parent {parents[0]!r} was not exported)"
        )
    question = root.question or next((s.question for s in ordered if s.question), None)
    if question is None:
        where = _QUESTION_SOURCES.get(source_format, "the root span's input")
        raise InvalidRecordError(trace_id, "question", f"no question in the {source_format} trace (looked in {where})")
    answer = root.answer or next((s.answer for s in reversed(ordered) if s.answer and s.kind == "llm"), None)
    retrievers = [s for s in ordered if s.kind == "retriever" and s.documents is not None]
    if options.retriever_names:
        retrievers = [s for s in retrievers if s.name in options.retriever_names]
    rerankers = [s for s in ordered if s.kind == "reranker" and s.documents is not None]
    chosen = rerankers[-1:] if rerankers else retrievers
    contexts = [_context(trace_id, doc) for span in chosen for doc in span.documents or ()]
    llms = [s for s in ordered if s.kind == "llm"]
    source: dict[str, Any] = {
        "format": source_format,
        "trace_id": trace_id,
        "root_span_id": root.span_id,
        "retriever_span_ids": [s.span_id for s in chosen],
    }
    metadata: dict[str, Any] = {**root.metadata, "source": source}
    models = list(dict.fromkeys(s.model for s in llms if s.model))
    if models:
        metadata["model"] = models[-1] if len(models) == 1 else models
    tokens: dict[str, int] = {}
    for span in llms:
        for key, count in span.tokens.items():
            tokens[key] = tokens.get(key, 0) + count
    if tokens:
        metadata["token_counts"] = tokens
    start = root.start or next((s.start for s in ordered if s.start is not None), None)
    return {
        "trace_id": trace_id,
        "timestamp": start.isoformat() if start is not None else None,
        "question": question,
        "answer": answer,
        "contexts": contexts,
        "metadata": metadata,
    }


def _context(trace_id: str, doc: Document) -> dict[str, Any]:
    """A canonical context; a missing id or a non-numeric score is an error naming the source field."""
    doc_id = doc.id
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)  # OpenInference allows integer document ids
    if not isinstance(doc_id, str) or not doc_id:
        raise InvalidRecordError(trace_id, f"{doc.where}.id", f"expected a document id, got {doc_id!r}")
    score = doc.score
    if isinstance(score, str):
        try:
            score = float(score)
        except ValueError:
            raise InvalidRecordError(trace_id, f"{doc.where}.score", f"expected a number, got {score!r}") from None
    if score is not None and (not isinstance(score, int | float) or isinstance(score, bool) or math.isnan(score)):
        raise InvalidRecordError(trace_id, f"{doc.where}.score", f"expected a number, got {score!r}")
    text = doc.text if isinstance(doc.text, str) else None
    if doc.text is not None and text is None:
        raise InvalidRecordError(trace_id, f"{doc.where}.text", f"expected a string, got {type(doc.text).__name__}")
    return {"id": doc_id, "text": text, "score": score}


def dig(value: Any, path: str) -> Any:
    """The value at a dotted path (``metadata.id``, ``documents.0``) or None; JSON text is decoded on the way."""
    for part in path.split(".") if path else ():
        value = _decoded(value)
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list | tuple) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return _decoded(value)


def _decoded(value: Any) -> Any:
    """JSON object/array text as the object (sources store nested inputs and outputs as JSON strings)."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def text_of(value: Any, keys: Sequence[str], *, role: str | None = None) -> str | None:
    """The text a source logged as an input or output: a plain string, the first of ``keys`` in an object,
    or in a list of chat messages the last one of ``role`` (any role when None)."""
    value = _decoded(value)
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, Mapping):
        if "role" in value or "parts" in value or ("content" in value and "type" not in value):
            return _message_text(value)
        for key in keys:
            found = text_of(value.get(key), keys, role=role)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        messages = [m for m in value if isinstance(m, Mapping)]
        if role is not None:
            messages = [m for m in messages if m.get("role") in (role, _ROLE_ALIASES.get(role))] or messages
        for message in reversed(messages):
            found = _message_text(message)
            if found is not None:
                return found
    return None


_ROLE_ALIASES = {"user": "human", "assistant": "ai"}


def _message_text(message: Mapping[str, Any]) -> str | None:
    """Text of a chat message: ``content`` as a string or text parts (OpenAI, OTel GenAI ``parts``, LangChain)."""
    content = message.get("content", message.get("parts"))
    if content is None and isinstance(message.get("kwargs"), Mapping):  # LangChain's serialised messages
        content = message["kwargs"].get("content")
    if isinstance(content, str):
        return content if content.strip() else None
    if isinstance(content, list):
        texts = [
            str(part.get("content", part.get("text")))
            for part in content
            if isinstance(part, Mapping)
            and part.get("type", "text") == "text"
            and isinstance(part.get("content", part.get("text")), str)
        ]
        joined = "".join(texts)
        return joined if joined.strip() else None
    return None


def parse_time(value: Any, *, trace_id: str | None, field: str) -> dt.datetime | None:
    """A source timestamp as aware UTC: ISO-8601 or ``YYYY-MM-DD HH:MM:SS.ffffff`` text, a datetime, or
    epoch nanoseconds (OTLP's ``*UnixNano`` integers or their decimal strings); None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        parsed = value
    elif (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and value.isdigit()):
        return dt.datetime.fromtimestamp(int(value) / 1e9, tz=dt.UTC)
    else:
        try:
            parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise InvalidRecordError(trace_id, field, f"expected a timestamp, got {str(value)[:60]!r}") from None
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)
