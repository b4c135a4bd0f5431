"""The shape every adapter maps its source records into, and the one assembly of spans into a canonical trace.

Sources differ in how they log a request (spans, runs, observations) but agree on its structure: a
root that holds the user's message and the answer, retrieval steps (retrievers, and tools that return
documents) each with its own query and ranked documents, maybe a reranker that reorders them, tool calls, and
LLM calls whose input holds what the model saw. Each adapter projects its records to :class:`Span`;
:func:`assemble` turns the spans of one trace (one turn of a conversation) into a raw canonical trace
(docs/traces.md, "Retrieval steps, turns and conversations") that then goes through ``parse_record`` like any
JSONL line.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest import limits
from ragpulse.tasks.ingest.language import normalize_language_tag

__all__ = [
    "CONVERSATION_KEYS",
    "DEFAULT_ANSWER_KEYS",
    "DEFAULT_QUESTION_KEYS",
    "DOCUMENT_ID_KEYS",
    "DOCUMENT_SCORE_KEYS",
    "DOCUMENT_TEXT_KEYS",
    "QUERY_KEYS",
    "AdapterOptions",
    "Document",
    "Kind",
    "Message",
    "Span",
    "assemble",
    "chat_messages",
    "dig",
    "document_from",
    "feedback_entry",
    "parse_time",
    "query_of",
    "text_of",
    "tool_call_id_of",
    "tool_documents",
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
    tool_requests: Mapping[str, Any] = field(default_factory=dict)
    """An LLM call's requested tool calls by id (their arguments as the model wrote them); a tool span's
    ``tool_call_id`` finds its call there when the tool logged only part of its input (a bare query text)."""
    feedback: Mapping[str, Any] | None = None
    """A ``feedback`` record's canonical entry {name, value, label, source, comment}. A record that names only the
    span it annotates (Phoenix) has an empty ``trace_id`` and that span's id in ``parent_id``; staging finds its
    trace."""


def assemble(trace_id: str, spans: Sequence[Span], *, source_format: str, options: AdapterOptions) -> dict[str, Any]:
    """The spans of one trace (one turn) as a raw canonical trace; InvalidRecordError names the source trace and
    field. The rules, with each tool's spans, are in docs/traces.md ("Retrieval steps, turns and conversations"):

    - root: the trace-level record if there is one, else the earliest span without a parent; in a sub-tree export
      (every top span's parent missing) the earliest top span, flagged ``source.partial_tree``;
    - question: the user's last message in the root's input, else in the first chain or agent span's input, else
      in the first LLM call's input; a retrieval's query only when nothing else names one (flagged);
    - steps: retrievers not nested in another retrieval, tools whose output is a list of documents, and rerankers
      (``parent``: the retrieval they reorder), in start order;
    - contexts: the documents of the steps that reached the final LLM call's input, de-duplicated; without that
      input, the last reranker's output, else every step's documents de-duplicated (``source.contexts_from``);
    - history: the turn's earlier user and assistant messages, as the agent's LLM call received them;
    - conversation_id: the session or thread id the source logged;
    - metadata: ``source`` = {format, trace_id, root_span_id, retriever_span_ids, ...}, the LLM calls' models and
      token counts, and the root's own metadata.
    """
    ordered = sorted(spans, key=lambda s: (s.start is None, s.start or dt.datetime.min.replace(tzinfo=dt.UTC)))
    feedback = [span.feedback for span in ordered if span.kind == "feedback" and span.feedback is not None]
    ordered = [span for span in ordered if span.kind != "feedback"]
    if not ordered:
        reason = f"{len(feedback)} feedback record(s) on trace {trace_id!r}, whose spans are not in the partition"
        raise InvalidRecordError(trace_id, "feedback", reason)
    ids = {span.span_id for span in ordered}
    parents = {s.span_id: s.parent_id for s in ordered}
    roots = [s for s in ordered if s.parent_id is None or s.parent_id not in ids]
    root = next((s for s in roots if s.kind == "trace"), None) or next((s for s in roots if s.parent_id is None), None)
    partial = root is None and bool(roots)
    if root is None:
        if not roots:
            raise InvalidRecordError(trace_id, "root span", f"{source_format} trace has no span without a parent")
        root = roots[0]
    llms = [s for s in ordered if s.kind == "llm"]
    steps, step_spans = _steps(ordered, parents, options)
    heads = [head for _, docs in steps for doc in docs if isinstance(doc.text, str) and (head := _head(doc.text))]
    in_llm_calls = source_format in _QUESTION_IN_LLM_CALLS
    question, question_from, turn_messages = _user_question(root, ordered, llms, heads, in_llm_calls=in_llm_calls)
    if question is None:
        where = _QUESTION_SOURCES.get(source_format, "the root span's input")
        reason = f"no question in the {source_format} trace (looked in {where})"
        if partial:
            reason += f"; it is a sub-tree: the parent {root.parent_id!r} of its top span was not exported"
        raise InvalidRecordError(trace_id, "question", reason)
    answer = root.answer or next((s.answer for s in reversed(ordered) if s.answer and s.kind == "llm"), None)
    final = next((s for s in reversed(llms) if s.answer), llms[-1] if llms else None)
    contexts, contexts_from, used = _generator_contexts(trace_id, steps, final)
    source: dict[str, Any] = {
        "format": source_format,
        "trace_id": trace_id,
        "root_span_id": root.span_id,
        "retriever_span_ids": [span.span_id for i, span in enumerate(step_spans) if i in used],
        "contexts_from": contexts_from,
    }
    if partial:
        source["partial_tree"] = True
    if question_from != "root":
        source["question_from"] = question_from
    metadata: dict[str, Any] = {**root.metadata, "source": source}
    # Expected tool calls, as an evaluation app logs them in the run's metadata (Langfuse keeps metadata as text).
    reference_tool_calls = _decoded(metadata.pop("reference_tool_calls", None))
    models = list(dict.fromkeys(s.model for s in llms if s.model))
    if models:
        metadata["model"] = models[-1] if len(models) == 1 else models
    tokens: dict[str, int] = {}
    for span in llms:
        for key, count in span.tokens.items():
            tokens[key] = tokens.get(key, 0) + count
    if tokens:
        metadata["token_counts"] = tokens
    top = _top_span(root, ordered)
    latency, latency_from = _latency(top, ordered)
    if latency_from == "span_extent":
        source["latency_from"] = latency_from
    calls = _llm_calls(llms, parents)
    start = root.start or next((s.start for s in ordered if s.start is not None), None)
    conversation = root.session_id or next((s.session_id for s in ordered if s.session_id), None)
    if conversation is None:
        conversation = next((str(root.metadata[k]) for k in CONVERSATION_KEYS if root.metadata.get(k)), None)
    return {
        "trace_id": trace_id,
        "timestamp": start.isoformat() if start is not None else None,
        "question": question,
        "answer": answer,
        "contexts": contexts,
        "metadata": metadata,
        "language": _language_tag(root.metadata.get("language")),
        "latency_ms": latency,
        "retrieval_latency_ms": _busy_ms(step_spans),
        "generation_latency_ms": _busy_ms([outer for outer, _ in calls]),
        "usage": _usage(calls),
        "errors": [
            {
                "kind": "root" if span is root or span is top else span.kind,
                "name": span.name or None,
                "message": span.error,
            }
            for span in ordered
            if span.error is not None
        ],
        "steps": [{**step, "contexts": [_context(trace_id, doc) for doc in docs]} for step, docs in steps],
        "conversation_id": conversation,
        "history": _history(turn_messages),
        "tool_calls": _tool_calls(ordered, step_spans, parents),
        "reference_tool_calls": reference_tool_calls,
        **({"feedback": feedback} if feedback else {}),
    }


def feedback_entry(name: Any, value: Any, label: Any, source: str, comment: Any) -> dict[str, Any]:
    """The canonical feedback entry (docs/traces.md): a boolean value as 1/0, empty texts as null."""
    number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if isinstance(value, bool):
        number = 1.0 if value else 0.0
    return {"name": name, "value": number, "label": _text(label), "source": source, "comment": _text(comment)}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _ms(start: dt.datetime | None, end: dt.datetime | None) -> float | None:
    """A span's duration in milliseconds; None without both times, or when the end precedes the start (clock
    skew between processes), which no latency should be made of."""
    if start is None or end is None or end < start:
        return None
    return (end - start) / dt.timedelta(milliseconds=1)


def _top_span(root: Span, ordered: Sequence[Span]) -> Span:
    """The span that stands for the whole turn: the root, or for a trace-level record (which has no end) its single
    top-level span (Langfuse's root observation)."""
    if root.kind == "trace" and root.end is None:
        tops = [s for s in ordered if s.parent_id is None and s.kind != "trace"]
        return tops[0] if len(tops) == 1 else root
    return root


def _latency(top: Span, ordered: Sequence[Span]) -> tuple[float | None, str | None]:
    """The turn's end-to-end latency and what it was read from: the top span's duration (``root``), else the extent
    of every timed span, max end - min start (``span_extent``)."""
    if (duration := _ms(top.start, top.end)) is not None:
        return duration, "root"
    timed = [(s.start, s.end) for s in ordered if s.start is not None and s.end is not None and s.end >= s.start]
    if not timed:
        return None, None
    return _ms(min(start for start, _ in timed), max(end for _, end in timed)), "span_extent"


def _busy_ms(spans: Sequence[Span]) -> float | None:
    """Wall time covered by ``spans``: the union of their intervals, so that calls run in parallel count once. None
    when there are no spans, or when one of them lacks its times (a partial sum would read as a fast turn)."""
    intervals = sorted(
        (s.start, s.end) for s in spans if s.start is not None and s.end is not None and s.end >= s.start
    )
    if not intervals or len(intervals) < len(spans):
        return None
    total = dt.timedelta()
    current_start, current_end = intervals[0]
    for start, end in intervals[1:]:
        if start > current_end:
            total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    total += current_end - current_start
    return total / dt.timedelta(milliseconds=1)


def _llm_calls(llms: Sequence[Span], parents: Mapping[str, str | None]) -> list[tuple[Span, list[Span]]]:
    """The model calls of a turn in start order: each LLM span not nested in another, with the LLM spans nested in
    it (an instrumented client's span inside a framework's chat-model span, an OTel GenAI log event inside its
    span: the same call, logged twice)."""
    by_id = {span.span_id: span for span in llms}
    calls: dict[str, list[Span]] = {}
    for span in llms:
        outer = next((a for a in reversed(_ancestors(span.span_id, parents)) if a in by_id), span.span_id)
        calls.setdefault(outer, []).append(span)
    return [(by_id[outer], spans) for outer, spans in calls.items()]


def _usage(calls: Sequence[tuple[Span, list[Span]]]) -> list[dict[str, Any]] | None:
    """One entry per model call, with the model and token counts of the first span of the call that logged them.
    The sources name the counts ``input``/``output`` (OTel GenAI, Langfuse) or ``prompt``/``completion``
    (OpenInference, LangSmith). None without model calls."""
    usage = []
    for outer, nested in calls:
        spans = [outer, *(s for s in nested if s is not outer)]
        counted = next((s.tokens for s in spans if _count(s.tokens, "input", "prompt", "output", "completion")), {})
        usage.append(
            {
                "model": next((s.model for s in spans if s.model), None),
                "input_tokens": _count(counted, "input", "prompt"),
                "output_tokens": _count(counted, "output", "completion"),
            }
        )
    return usage or None


def _count(tokens: Mapping[str, int], *names: str) -> int | None:
    return next((tokens[name] for name in names if tokens.get(name, -1) >= 0), None)


def _ancestors(span_id: str, parents: Mapping[str, str | None]) -> list[str]:
    """The ids above ``span_id``, nearest first."""
    found: list[str] = []
    parent = parents.get(span_id)
    while parent is not None and parent not in found:
        found.append(parent)
        parent = parents.get(parent)
    return found


_QUESTION_IN_LLM_CALLS = frozenset({"otel-genai", "langfuse"})
"""Formats whose user message may sit on the model calls only (the GenAI conventions log content there, OpenLLMetry's
agent root has no input); elsewhere a root or chain input names the question, and an LLM call's user message is the
app's prompt, which may be internal."""

_HISTORY_MESSAGES = 20
"""Earlier messages of a conversation kept with a turn: judges read the last few (docs/metrics.md), the traces
table keeps what they could read."""


def _user_question(
    root: Span, ordered: Sequence[Span], llms: Sequence[Span], heads: Sequence[str], *, in_llm_calls: bool
) -> tuple[str | None, str, tuple[Message, ...]]:
    """The user's message of the turn, where it was found, and the message list it ends (its history before it).

    Sub-queries (a retriever's or tool's input) and internal prompts are not the user's: the root's input wins,
    then the first chain span's input in message form (an agent graph's state; a chain's plain text input may be
    anything, a text splitter's included), then (formats that log content only on model calls) the
    first LLM call's whose user message quotes no retrieved document (a RAG prompt or a grader's quotes them); a
    retrieval's query only when none of these has one (a RAG app that logs only its retriever and its prompt)."""
    candidates = [("root", root), *(("chain", s) for s in ordered if s.kind == "chain")]
    candidates += [("llm", s) for s in llms] if in_llm_calls else []
    for where, span in candidates:
        found = _last_user(span.messages) or (span.question if where == "root" else None)
        if found is None:
            continue
        if where == "llm" and any(head in _squashed(found) for head in heads):
            continue
        return found, where, _with_history(span, found, ordered)
    query = next((s.query for s in ordered if s.query and s.kind in ("retriever", "tool")), None)
    return query, "retrieval_query", ()


def _last_user(messages: Sequence[Message] | None) -> str | None:
    return next((text for role, text in reversed(messages or ()) if role == "user" and text.strip()), None)


def _with_history(span: Span, question: str, spans: Sequence[Span]) -> tuple[Message, ...]:
    """The messages before the question in the longest message list that ends with it: the span's own, or a later
    span's (an agent with memory loads its history from a checkpoint, so only its graph nodes and model calls see
    it)."""
    best: tuple[Message, ...] = ()
    for messages in (span.messages, *(s.messages for s in spans)):
        if messages and _last_user(messages) == question:
            last = max(i for i, (role, text) in enumerate(messages) if role == "user" and text == question)
            best = max(best, tuple(messages[:last]), key=len)
    return best


def _history(messages: Sequence[Message]) -> list[dict[str, str]] | None:
    """Earlier user and assistant messages with text (tool messages and calls without text are dropped)."""
    kept = [
        {"role": role, "content": text} for role, text in messages if role in ("user", "assistant") and text.strip()
    ]
    return kept[-_HISTORY_MESSAGES:] or None


_StepFields = dict[str, Any]


def _steps(
    ordered: Sequence[Span], parents: Mapping[str, str | None], options: AdapterOptions
) -> tuple[list[tuple[_StepFields, tuple[Document, ...]]], list[Span]]:
    """The turn's retrieval steps (fields and documents) in start order, and their spans."""
    retrievals = [s for s in ordered if s.kind in ("retriever", "tool") and s.documents is not None]
    if options.retriever_names:
        named = [s for s in retrievals if s.name in options.retriever_names]
        retrievals = named or [s for s in retrievals if s.kind == "retriever"]
    retrievals = _outermost(retrievals, parents)
    chosen = [s for s in ordered if s in retrievals or (s.kind == "reranker" and s.documents is not None)]
    steps: list[tuple[_StepFields, tuple[Document, ...]]] = []
    last_retrieval: int | None = None
    for span in chosen:
        query = span.query if span.kind != "reranker" else None
        parent = last_retrieval if span.kind == "reranker" else None
        if span.kind != "reranker":
            last_retrieval = len(steps)
        fields = {"id": span.span_id, "name": span.name or None, "kind": span.kind, "query": query,
                  "parent": parent, "error": span.error}  # fmt: skip
        steps.append((fields, span.documents or ()))
    return steps, chosen


def _generator_contexts(
    trace_id: str, steps: Sequence[tuple[_StepFields, tuple[Document, ...]]], final: Span | None
) -> tuple[list[dict[str, Any]], str, set[int]]:
    """The documents the answer was generated from, de-duplicated by id (else text), how they were chosen, and the
    steps they came from.

    A document reached the final LLM call when the start of its text is in that call's input (tools return their
    documents into the conversation; a RAG prompt quotes them). An input that quotes none of them (an app that
    rewrites documents before prompting) is not taken as "none seen": the fallbacks apply."""
    seen_text = _squashed(" ".join(text for _, text in final.messages)) if final and final.messages else ""
    rerankers = [i for i, (fields, _) in enumerate(steps) if fields["kind"] == "reranker"]
    candidates = [(i, doc) for i, (_, docs) in enumerate(steps) for doc in docs]
    reached = [
        (i, doc)
        for i, doc in candidates
        if isinstance(doc.text, str) and (head := _head(doc.text)) and head in seen_text
    ]
    if reached:
        chosen, how = reached, "final_llm_input"
    elif rerankers:
        chosen, how = [(rerankers[-1], doc) for doc in steps[rerankers[-1]][1]], "last_reranker"
    else:
        chosen, how = candidates, "all_steps"
    contexts, keys = [], set()
    for _, doc in chosen:
        context = _context(trace_id, doc)
        key = ("id", context["id"]) if context["id"] is not None else ("text", context["text"])
        if key not in keys:
            keys.add(key)
            contexts.append(context)
    used = {i for i, _ in chosen}
    return contexts, how if steps else "no_retrieval", used


_QUOTE_CHARS = 80
"""How much of a document's start (whitespace squashed) must appear in the final LLM input to count as seen:
enough to tell passages apart, short enough to survive a prompt that cuts documents."""


def _squashed(text: str) -> str:
    return " ".join(text.split())


def _head(text: str) -> str:
    """The start of a document's text that a prompt quoting it holds (whitespace squashed)."""
    return _squashed(text)[:_QUOTE_CHARS]


def _tool_calls(
    ordered: Sequence[Span], step_spans: Sequence[Span], parents: Mapping[str, str | None]
) -> list[dict[str, Any]] | None:
    """Every tool call of the turn in start order; ``step`` is the retrieval step it made (the tool's own documents
    or a retriever run inside it). None when the source logged no tool spans at all."""
    tools = [s for s in ordered if s.kind == "tool"]
    if not tools:
        return None
    step_of = {span.span_id: i for i, span in enumerate(step_spans)}
    requested = {call_id: arguments for s in ordered for call_id, arguments in s.tool_requests.items()}

    def step(tool: Span) -> int | None:
        if tool.span_id in step_of:
            return step_of[tool.span_id]
        inside = [i for span_id, i in step_of.items() if _descends(span_id, tool.span_id, parents)]
        return inside[0] if inside else None

    def arguments(tool: Span) -> Any:
        if tool.tool_call_id is not None and tool.tool_call_id in requested:
            return _decoded(requested[tool.tool_call_id])
        return tool.arguments

    return [
        {"name": tool.name or "tool", "arguments": arguments(tool), "error": tool.error, "step": step(tool)}
        for tool in tools
    ]


def _descends(span_id: str, ancestor: str, parents: Mapping[str, str | None]) -> bool:
    seen, parent = set(), parents.get(span_id)
    while parent is not None and parent not in seen:
        if parent == ancestor:
            return True
        seen.add(parent)
        parent = parents.get(parent)
    return False


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


QUERY_KEYS = ("query", "q", "search_query", "input")
"""Where a retriever's or tool's input object names its query, tried before ``question_keys``."""


def query_of(inputs: Any, options: AdapterOptions) -> str | None:
    """A retrieval step's query: its input text, or the first of QUERY_KEYS, then ``question_keys``, that holds one."""
    return text_of(inputs, (*QUERY_KEYS, *options.question_keys), role="user")


def text_of(value: Any, keys: Sequence[str], *, role: str | None = None) -> str | None:
    """The text a source logged as an input or output: a plain string, the first of ``keys`` in an object,
    or in a list of chat messages (any form :func:`chat_messages` reads) the last one of ``role`` (any role when
    None, or when no message has that role)."""
    value = _decoded(value)
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
    value = _decoded(value)
    in_state = False
    if isinstance(value, Mapping) and not _looks_like_message(value):
        value, in_state = _decoded(value.get("messages")), True
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
    item = _decoded(item)
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
    value = _tool_content(_decoded(output))
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
    if isinstance(value, Mapping) and isinstance(output := _decoded(value.get("output")), Mapping):
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
    return _decoded(message.get("content")) if message is not None else value


def tool_call_id_of(output: Any) -> str | None:
    """The ``tool_call_id`` of the ToolMessage carrying a tool's output: the id of the model's call it answers."""
    message = _tool_message(_unwrapped(_decoded(output)))
    call_id = message.get("tool_call_id") if message is not None else None
    return call_id if isinstance(call_id, str) else None


def _is_document(item: Any) -> bool:
    item = _decoded(item)
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
