"""The one assembly of a trace's spans into a raw canonical trace, by the rules docs/traces.md states ("Reading agent
traces: the rules"). Sources differ in how they log a request (spans, runs, observations) but agree on its structure:
a top span for the turn, retrieval steps (retrievers, and tools that return documents) each with its own query and
ranked documents, maybe a reranker that reorders them, tool calls, and model calls whose input holds what the model
saw. The rules read that structure (span lineage, kinds, the semantic conventions' fields), never one application's
names or shapes. The raw trace then goes through ``parse_record`` like any JSONL line.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.adapters.fields import decoded
from ragpulse.tasks.ingest.adapters.span import CONVERSATION_KEYS, AdapterOptions, Document, Message, Span
from ragpulse.tasks.ingest.language import normalize_language_tag

__all__ = ["assemble"]

_QUESTION_SOURCES = {
    "openinference": "root span input.value, or a RETRIEVER span's input.value",
    "otel-genai": "gen_ai.retrieval.query.text, a user message in gen_ai.input.messages or gen_ai.prompt "
    "(attribute, indexed or span event), or a gen_ai.user.message log event; instrumentations log message "
    "content only when told to, e.g. OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only",
    "langfuse": "the trace's input, the root observation's input, a RETRIEVER observation's input or a "
    "GENERATION's user message",
    "langsmith": "the root run's inputs",
}


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
    reference_tool_calls = decoded(metadata.pop("reference_tool_calls", None))
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
            return decoded(requested[tool.tool_call_id])
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
