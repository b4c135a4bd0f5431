"""The shape every adapter maps its source records into, and the one assembly of spans into a canonical trace.

Sources differ in how they log a request (spans, runs, observations) but agree on its structure: a
root that holds the question and the answer, retriever steps that return ranked documents, maybe a
reranker that reorders them, and LLM calls. Each adapter projects its records to :class:`Span`;
:func:`assemble` turns the spans of one trace into a raw canonical trace (docs/traces.md) that then
goes through ``parse_record`` like any JSONL line.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest import limits
from ragpulse.tasks.ingest.language import normalize_language_tag

__all__ = [
    "DEFAULT_ANSWER_KEYS",
    "DEFAULT_QUESTION_KEYS",
    "DOCUMENT_ID_KEYS",
    "DOCUMENT_SCORE_KEYS",
    "DOCUMENT_TEXT_KEYS",
    "AdapterOptions",
    "Document",
    "Kind",
    "Span",
    "assemble",
    "dig",
    "document_from",
    "parse_time",
    "text_of",
]

Kind = Literal["trace", "chain", "retriever", "reranker", "llm", "other"]
"""What a span does; ``trace`` is a trace-level record (Langfuse's traces table), preferred as the root."""

DEFAULT_QUESTION_KEYS = ("question", "query", "input", "user_input", "prompt", "messages", "text")
_QUESTION_SOURCES = {
    "openinference": "root span input.value, or a RETRIEVER span's input.value",
    "otel-genai": "gen_ai.retrieval.query.text, a user message in gen_ai.input.messages or gen_ai.prompt "
    "(attribute, indexed or span event), or a gen_ai.user.message log event; instrumentations log message "
    "content only when told to, e.g. OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only",
    "langfuse": "the trace's input, the root observation's input, a RETRIEVER observation's input or a "
    "GENERATION's user message",
    "langsmith": "the root run's inputs",
}
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
    retrievers = _outermost(retrievers, {s.span_id: s.parent_id for s in ordered})
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
        "language": _language_tag(root.metadata.get("language")),
    }


def _language_tag(value: Any) -> str | None:
    """The application's own ``language`` metadata when it is a BCP 47 tag; anything else (``"Japanese"``) is
    left in metadata and the language is identified at staging, rather than quarantining the trace."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return normalize_language_tag(value)
    except ValueError:
        return None


def _outermost(retrievers: list[Span], parents: Mapping[str, str | None]) -> list[Span]:
    """Retrievers not nested in another of them: a framework's retriever that wraps an inner one (LlamaIndex's
    ``retrieve`` around ``_retrieve``) logs the same documents twice, which are one retrieval."""
    chosen = {s.span_id for s in retrievers if s.documents}  # an empty outer retriever hides nothing

    def nested(span: Span) -> bool:
        seen, parent = set(), span.parent_id
        while parent is not None and parent not in seen:
            if parent in chosen:
                return True
            seen.add(parent)
            parent = parents.get(parent)
        return False

    return [s for s in retrievers if not nested(s)]


def _context(trace_id: str, doc: Document) -> dict[str, Any]:
    """A canonical context; a document with neither id nor text, or a non-numeric score, is an error
    naming the source field. A document without id is kept: text metrics still judge it."""
    doc_id = doc.id
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)  # OpenInference allows integer document ids
    if doc_id == "":
        doc_id = None
    if doc_id is not None and not isinstance(doc_id, str):
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
    if doc_id is None and text is None:
        raise InvalidRecordError(trace_id, f"{doc.where}.id", "a document needs an id or a text, it has neither")
    return {"id": doc_id, "text": text, "score": score}


DOCUMENT_ID_KEYS = ("id", "metadata.id", "metadata.document_id", "metadata.doc_id", "id_")
DOCUMENT_TEXT_KEYS = ("page_content", "content", "text")
DOCUMENT_SCORE_KEYS = ("score", "metadata.score", "metadata.relevance_score", "metadata._score")
"""Where frameworks put a retrieved document's id, text and score, looked up in this order when
``format_options`` does not name a key: LangChain's ``Document`` (top-level ``id`` since langchain-core
0.2.11, else ``metadata``), LlamaIndex nodes (``id_``, ``text``), Haystack (``id``, ``content``, ``score``)."""


def document_from(doc: Any, options: AdapterOptions, where: str) -> Document:
    """One logged document (a LangChain ``Document`` as plain or serialised ``{"lc": 1, "kwargs": ...}``
    JSON, a LlamaIndex node, a Haystack document) read at the configured keys or the default ones."""
    doc = _decoded(doc)
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
        value = _decoded(value)
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list | tuple) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return _decoded(value) if decode else value


def _decoded(value: Any) -> Any:
    """JSON object/array text as the object (sources store nested inputs and outputs as JSON strings); text that
    is not JSON, or nested past limits.MAX_DEPTH, stays text."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return limits.loads(value)
        except ValueError:
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
