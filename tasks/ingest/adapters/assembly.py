"""The one assembly of a trace's spans into a raw canonical trace, by the rules docs/traces.md states ("Reading agent
traces: the rules"). Sources differ in how they log a request (spans, runs, observations) but agree on its structure:
a top span for the turn, retrieval steps (retrievers, and tools that return documents) each with its own query and
ranked documents, maybe a reranker that reorders them, tool calls, and model calls whose input holds what the model
saw. The rules read that structure (span lineage, kinds, the semantic conventions' fields), never one application's
names or shapes. The raw trace then goes through ``parse_record`` like any JSONL line.
"""

from __future__ import annotations

import ast
import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest import limits
from ragpulse.tasks.ingest.adapters.fields import decoded, is_unread_object
from ragpulse.tasks.ingest.adapters.span import CONVERSATION_KEYS, AdapterOptions, Document, Message, Span
from ragpulse.tasks.ingest.language import normalize_language_tag

__all__ = ["assemble"]

_QUESTION_ELSEWHERE = "the model calls' input messages and the retrieval queries"
"""Where every format's user message may sit beside the top span's input (the format names that input's place)."""


def assemble(
    trace_id: str,
    spans: Sequence[Span],
    *,
    source_format: str,
    options: AdapterOptions,
    question_places: str = "the top span's input",
) -> dict[str, Any]:
    """The spans of one trace (one turn) as a raw canonical trace; InvalidRecordError names the source trace and
    field (``question_places``: where the format keeps the user's message, named when there is none). The rules are
    docs/traces.md's ("Reading agent traces: the rules"), read from span lineage and the conventions:

    - root: the trace-level record if there is one, else the earliest span without a parent; in a sub-tree export
      (every top span's parent missing) the earliest top span, flagged ``source.partial_tree``;
    - question: the user's message in the top span's input (any message shape, a known key, a framework object),
      else the text of that input that reached a model call, else a chain's message input, else the model calls'
      user message that is neither a prompt quoting retrieved documents nor a template around another call's user
      message (a grader, rewriter or router); a retrieval's query only when no span holds one (flagged);
    - answer: the top span's output as text, else the final model call's;
    - steps: each retrieval (a retriever, or a tool whose output is documents) with the retrievals nested in it as
      one step, read from the member that logged document ids; rerankers (``parent``: the retrieval they reorder);
    - contexts: each retrieval's documents as the generator received them (a reranker's output replaces the
      retrieval it follows), those whose whole text is in the input of the model calls after the last step;
      without such a match the last reranker's output, else every step's (``source.contexts_from``);
    - tool calls: the tool spans, but for the framework's answer tool and hand-offs between agents; without tool
      spans, the calls the model requested;
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
    calls = _llm_calls(llms, parents)
    steps, step_spans = _steps(ordered, parents, options)
    top = _top_span(root, ordered)
    heads = [head for _, docs in steps for doc in docs if isinstance(doc.text, str) and (head := _head(doc.text))]
    question, question_from, turn_messages = _user_question(root, top, ordered, calls, heads)
    if question is None:
        reason = f"no question in the {source_format} trace (looked in {question_places}, {_QUESTION_ELSEWHERE})"
        if partial:
            reason += f"; it is a sub-tree: the parent {root.parent_id!r} of its top span was not exported"
        raise InvalidRecordError(trace_id, "question", reason)
    final = _final_call(calls)
    answer = _answer(root, top, final)
    tops = {root.span_id, top.span_id}
    contexts, contexts_from, used = _generator_contexts(trace_id, steps, step_spans, calls, final, parents, tops)
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
    latency, latency_from = _latency(top, ordered)
    if latency_from == "span_extent":
        source["latency_from"] = latency_from
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


_HISTORY_MESSAGES = 20
"""Earlier messages of a conversation kept with a turn: judges read the last few (docs/metrics.md), the traces
table keeps what they could read."""

_Call = tuple[Span, list[Span]]
"""A model call: its outermost LLM span and every LLM span nested in it (the same call logged twice)."""


def _user_question(
    root: Span, top: Span, ordered: Sequence[Span], calls: Sequence[_Call], heads: Sequence[str]
) -> tuple[str | None, str, tuple[Message, ...]]:
    """The user's message of the turn, where it was found, and the message list it ends (its history before it).

    In this order (docs/traces.md, "The user's message"): the top span's input, read in every message shape, at a
    known key or as a framework object; the longest text of that input that reached a model call's user message and
    is no retrieved document (a key no convention names, an object's rendering);
    a chain or agent span's input in message form (an agent graph's state); the model calls' user messages, skipping
    a prompt that quotes the turn's retrieved documents (a RAG prompt, a grader's) and a template around another
    call's user message (a grader's, rewriter's or router's prompt embeds the user's message); a retrieval's query
    only when none of these has one (a RAG app that logs only its retriever and its prompt)."""
    for span in _distinct((root, top)):
        found = _last_user(span.messages) or span.question
        if found is not None and not is_unread_object(found):
            return found, "root", _with_history(span, found, ordered)
    users = _call_users(calls)
    for span in _distinct((root, top)):
        reached = [
            text
            for text in span.input_texts
            if any(text in message for _, message in users) and not any(head in _squashed(text) for head in heads)
        ]
        if reached:
            found = max(reached, key=len)  # not a short field value the prompt happens to hold ("en", "user")
            return found, "root_input", _with_history(span, found, ordered)
    for span in ordered:
        found = _last_user(span.messages) if span.kind == "chain" else None
        if found is not None:
            return found, "chain", _with_history(span, found, ordered)
    for span, text in users:
        if any(head in _squashed(text) for head in heads):
            continue  # a prompt built around the turn's documents
        if any(other != text and other.strip() and other in text for _, other in users):
            continue  # a template around another call's user message
        return text, "llm", _with_history(span, text, ordered)
    query = next((s.query for s in ordered if s.query and s.kind in ("retriever", "tool")), None)
    return query, "retrieval_query", ()


def _distinct(spans: Sequence[Span]) -> list[Span]:
    """``spans`` without repeats, in order (a span is one object; its dict fields make it unhashable)."""
    return list({id(span): span for span in spans}.values())


def _call_users(calls: Sequence[_Call]) -> list[tuple[Span, str]]:
    """Each model call's user message (its last one), in start order: the first of its spans that logged one."""
    found = []
    for outer, nested in calls:
        for span in (outer, *(s for s in nested if s is not outer)):
            if (text := _last_user(span.messages)) is not None:
                found.append((span, text))
                break
    return found


def _final_call(calls: Sequence[_Call]) -> _Call | None:
    """The turn's final model call: the last that produced an output, else the last."""
    return next((c for c in reversed(calls) if _call_answer(c) is not None), calls[-1] if calls else None)


def _call_answer(call: _Call) -> str | None:
    """A model call's output: the first of its spans that logged one."""
    outer, nested = call
    return next((s.answer for s in (outer, *nested) if s.answer), None)


def _answer(root: Span, top: Span, final: _Call | None) -> str | None:
    """The answer as text: the top span's output, unless it is a framework object whose text no field names (a
    workflow's ``StopEvent(result=AgentOutput(...))``), else the final model call's output. A top output the tracer
    cut short is completed from the final call's, when it is that output's start."""
    final_answer = _call_answer(final) if final is not None else None
    for span in _distinct((root, top)):
        if span.answer is not None and not is_unread_object(span.answer):
            return _uncut(span.answer, final_answer)
    return final_answer


_CUT_MARKS = ("...", "…")


def _uncut(text: str, full: str | None) -> str:
    """``text``, or where a tracer cut it (it ends with ``...``) ``full`` when it is its start: the whole text as
    another span logged it."""
    for mark in _CUT_MARKS:
        if text.endswith(mark) and (start := text[: -len(mark)].rstrip()):
            return full if full is not None and full.startswith(start) and len(full) > len(start) else text
    return text


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
    """The turn's retrieval steps (fields and documents) in start order, and the span each was read from.

    A retrieval nested in another is the same retrieval logged twice (a framework's retriever around its inner one,
    a tool around the retriever it calls): the group is one step, read from the member whose documents carry the
    most ids (the outermost on a tie), its query from the first member that logged one."""
    retrievals = [s for s in ordered if s.kind in ("retriever", "tool") and s.documents is not None]
    if options.retriever_names:
        named = [s for s in retrievals if s.name in options.retriever_names]
        retrievals = named or [s for s in retrievals if s.kind == "retriever"]
    holding = {s.span_id for s in retrievals if s.documents}  # an empty retrieval hides nothing
    groups: dict[str, list[Span]] = {}
    for span in retrievals:
        outer = next((a for a in reversed(_ancestors(span.span_id, parents)) if a in holding), span.span_id)
        groups.setdefault(outer, []).append(span)
    steps: list[tuple[_StepFields, tuple[Document, ...]]] = []
    chosen: list[Span] = []
    last_retrieval: int | None = None
    for span in ordered:
        if span.kind == "reranker" and span.documents is not None:
            fields = {"id": span.span_id, "name": span.name or None, "kind": "reranker", "query": None,
                      "parent": last_retrieval, "error": span.error}  # fmt: skip
        elif span.span_id in groups:
            members = groups[span.span_id]
            read = max(members, key=lambda m: sum(doc.id is not None for doc in m.documents or ()))
            query = read.query or next((m.query for m in members if m.query), None)
            error = next((m.error for m in members if m.error), None)
            last_retrieval = len(steps)
            fields = {"id": read.span_id, "name": read.name or None, "kind": read.kind, "query": query,
                      "parent": None, "error": error}  # fmt: skip
            span = read
        else:
            continue
        steps.append((fields, span.documents or ()))
        chosen.append(span)
    return steps, chosen


def _generator_contexts(
    trace_id: str,
    steps: Sequence[tuple[_StepFields, tuple[Document, ...]]],
    step_spans: Sequence[Span],
    calls: Sequence[_Call],
    final: _Call | None,
    parents: Mapping[str, str | None],
    tops: set[str],
) -> tuple[list[dict[str, Any]], str, set[int]]:
    """The documents the answer was generated from, de-duplicated by id (else text), how they were chosen, and the
    steps they came from.

    By lineage: each retrieval hands on its documents, or the output of the reranker that follows it. Of those, the
    generator received the ones whose whole text is in the input of its model calls (:func:`_generator_calls`: tools
    return their documents into the conversation, a RAG prompt quotes them, a refine synthesizer spreads them over
    several calls). An input that holds none of them whole (an app that rewrites or cuts documents before prompting)
    is not taken as "none seen": the fallbacks apply."""
    if not steps:
        return [], "no_retrieval", set()
    reranked = {fields["parent"] for fields, _ in steps if fields["kind"] == "reranker"}
    handed_on = [(i, doc) for i, (_, docs) in enumerate(steps) if i not in reranked for doc in docs]
    seen = _seen_text(_generator_calls(step_spans, calls, final, parents, tops))
    reached = [
        (i, doc)
        for i, doc in handed_on
        if isinstance(doc.text, str) and (whole := _squashed(doc.text)) and whole in seen
    ]
    rerankers = [i for i, (fields, _) in enumerate(steps) if fields["kind"] == "reranker"]
    if reached:
        chosen, how = reached, "final_llm_input"
    elif rerankers:
        chosen, how = [(rerankers[-1], doc) for doc in steps[rerankers[-1]][1]], "last_reranker"
    else:
        chosen, how = handed_on, "all_steps"
    contexts, keys = [], set()
    for _, doc in chosen:
        context = _context(trace_id, doc)
        key = ("id", context["id"]) if context["id"] is not None else ("text", context["text"])
        if key not in keys:
            keys.add(key)
            contexts.append(context)
    return contexts, how, {i for i, _ in chosen}


def _generator_calls(
    step_spans: Sequence[Span],
    calls: Sequence[_Call],
    final: _Call | None,
    parents: Mapping[str, str | None],
    tops: set[str],
) -> list[Span]:
    """The spans of the generator's model calls: the final call (the last with an answer) and the calls under the same
    generator, which is the final call's outermost ancestor below the turn's top span that holds no retrieval step
    (a synthesizer that refines over several calls; an agent's last turn), made after the last step ended. A
    reranker's or grader's model call sits beside the generator, not in it."""
    if final is None:
        return []
    steps = [s.span_id for s in step_spans]
    generator = final[0].span_id
    for ancestor in _ancestors(generator, parents):
        if ancestor in tops or any(_descends(step, ancestor, parents) for step in steps):
            break
        generator = ancestor
    ends = [end for s in step_spans if (end := s.end or s.start) is not None]
    last = max(ends) if ends else None
    chosen = [
        c
        for c in calls
        if (c is final or c[0].span_id == generator or _descends(c[0].span_id, generator, parents))
        and (c is final or last is None or (c[0].start is not None and c[0].start >= last))
    ]
    return [span for outer, nested in chosen for span in _distinct((outer, *nested))]


def _seen_text(spans: Sequence[Span]) -> str:
    """Everything the model calls received, whitespace squashed: each message's text, and the texts inside a message
    that is JSON or a Python literal (a tool's result as the model got it: a JSON list of documents, escaped)."""
    parts = []
    for span in spans:
        for _, text in span.messages or ():
            parts.append(_squashed(text))
            parts.extend(_squashed(inner) for inner in _literal_texts(text))
    return "\n".join(parts)


def _literal_texts(text: str) -> list[str]:
    """The strings inside ``text`` when it is JSON or a Python literal (a list of documents a tool returned, with
    quotes and non-ASCII characters escaped); none otherwise."""
    stripped = text.strip()
    if stripped[:1] not in ("[", "{"):
        return []
    try:
        value = limits.loads(stripped)
    except ValueError:
        try:
            value = ast.literal_eval(stripped) if len(stripped) <= _LITERAL_CHARS else None
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return []
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return found


_LITERAL_CHARS = 200_000
"""The longest message read as a Python literal (smolagents and Haystack hand tool results to the model as reprs)."""


_QUOTE_CHARS = 80
"""How much of a document's start (whitespace squashed) marks a model call's user message as a prompt quoting the
turn's documents (not the user's message)."""


def _squashed(text: str) -> str:
    return " ".join(text.split())


def _head(text: str) -> str:
    """The start of a document's text that a prompt quoting it holds (whitespace squashed)."""
    return _squashed(text)[:_QUOTE_CHARS]


_ANSWER_TOOLS = frozenset({"final_answer", "final_result", "finish"})
"""Tools through which a framework returns the turn's answer (smolagents' ``final_answer``, PydanticAI's output tool
``final_result``, DSPy ReAct's ``finish``): the answer, not a tool call of the turn."""


def _is_handoff(tool: Span) -> bool:
    """A hand-off from one agent to another, which frameworks log as a tool span (OpenInference's OpenAI Agents
    instrumentation: ``handoff to <agent>``): routing, not a tool call."""
    return tool.name.startswith("handoff to ")


def _tool_calls(
    ordered: Sequence[Span], step_spans: Sequence[Span], parents: Mapping[str, str | None]
) -> list[dict[str, Any]] | None:
    """Every tool call of the turn in start order; ``step`` is the retrieval step it made (the tool's own documents
    or a retriever run inside it). Without tool spans, the calls the model requested (Haystack's Agent runs its
    tools unlogged). A call failed where its span says so, or where the model was handed its result as a failure
    (AutoGen's tool spans end well whatever happens). None when the source logged neither."""
    results = [result for span in ordered for result in span.tool_results]
    failed_ids = {r.call_id for r in results if r.error and r.call_id}
    failed_texts = {r.text for r in results if r.error and r.text}
    logged = [s for s in ordered if s.kind == "tool"]
    if not logged:
        return _requested_calls(ordered, failed_ids)
    tools = [s for s in logged if s.name not in _ANSWER_TOOLS and not _is_handoff(s)]
    step_of = {span.span_id: i for i, span in enumerate(step_spans)}
    requested = {call_id: request for s in ordered for call_id, request in s.tool_requests.items()}

    def step(tool: Span) -> int | None:
        if tool.span_id in step_of:
            return step_of[tool.span_id]
        inside = [i for span_id, i in step_of.items() if _descends(span_id, tool.span_id, parents)]
        return inside[0] if inside else None

    def arguments(tool: Span) -> Any:
        if tool.tool_call_id is not None and tool.tool_call_id in requested:
            return decoded(requested[tool.tool_call_id].arguments)
        return tool.arguments

    def error(tool: Span) -> str | None:
        if tool.error is not None:
            return tool.error
        if tool.tool_call_id in failed_ids or (tool.output_text is not None and tool.output_text in failed_texts):
            return tool.output_text or _REPORTED_FAILURE
        return None

    return [
        {"name": tool.name or "tool", "arguments": arguments(tool), "error": error(tool), "step": step(tool)}
        for tool in tools
    ]


_REPORTED_FAILURE = "the model was handed the tool's result as a failure"


def _requested_calls(ordered: Sequence[Span], failed: set[str]) -> list[dict[str, Any]] | None:
    requested: dict[str, Any] = {}
    for span in ordered:
        for call_id, request in span.tool_requests.items():
            requested.setdefault(call_id, request)
    if not requested:
        return None
    return [
        {
            "name": request.name or "tool",
            "arguments": decoded(request.arguments),
            "error": _REPORTED_FAILURE if call_id in failed else None,
            "step": None,
        }
        for call_id, request in requested.items()
        if request.name not in _ANSWER_TOOLS
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
