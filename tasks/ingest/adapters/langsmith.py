"""LangSmith runs (bulk-export Parquet, or JSONL of the runs the SDK posts) -> spans.

A run is stored once per id: what the SDK creates (``post``) with its update (``patch``: outputs,
end_time) applied. The root run (no ``parent_run_id``) holds the question in ``inputs`` and the answer
in ``outputs``; ``retriever`` runs hold the documents; ``llm`` runs hold the model and token counts.
The same field sits in different places depending on what produced the run (LangChain callbacks,
``@traceable``, ``wrap_openai`` in Python or JS), so each is read from a list of places in order
(docs/traces.md). Bulk exports store ``inputs``/``outputs``/``extra`` as JSON text; objects are accepted
too, and ``start_time`` may be ISO text, a datetime or the JS SDK's epoch milliseconds.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
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
    text_of,
    tool_documents,
)
from ragpulse.tasks.ingest.adapters.span import AdapterOptions, Document, Kind, Span

__all__ = [
    "ANSWER_PATHS",
    "DOCUMENT_PATHS",
    "MODEL_PATHS",
    "QUESTION_PLACES",
    "TOKEN_SOURCES",
    "spans",
]

QUESTION_PLACES = "the root run's inputs"
"""Where this format keeps the user's message, named in the reason a trace without one is quarantined."""

_KINDS: dict[str, Kind] = {"retriever": "retriever", "llm": "llm", "chain": "chain", "tool": "tool"}

ANSWER_PATHS = (
    "outputs",  # a JS @traceable function's returned string
    "choices.0.message.content",  # OpenAI chat completions through wrap_openai (Python and JS, streamed too)
    "choices.0.text",  # OpenAI completions through wrap_openai
    "generations.0.0.text",  # LangChain LLM and chat model runs (LLMResult)
    "generations.0.0.message.kwargs.content",  # ... whose text is empty but whose AIMessage has content
)
"""Where a run's answer sits when no ``answer_keys`` key holds it, tried in order after the Responses API's
``output[*].content[*]`` ``output_text`` parts."""

DOCUMENT_PATHS = ("documents", "output", "outputs")
"""Where a retriever run's documents sit when ``documents_path`` is left at its default: LangChain retrievers
log ``documents``, a ``@traceable(run_type="retriever")`` function's returned list is ``output`` (Python) or
``outputs`` (JS)."""


TOKEN_SOURCES = (
    ("", ("prompt_tokens", "completion_tokens", "total_tokens")),  # bulk-export columns
    ("outputs.usage_metadata", ("input_tokens", "output_tokens", "total_tokens")),  # wrap_openai, @traceable
    ("extra.metadata.usage_metadata", ("input_tokens", "output_tokens", "total_tokens")),
    ("outputs.generations.0.0.message.kwargs.usage_metadata", ("input_tokens", "output_tokens", "total_tokens")),
    ("outputs.llm_output.token_usage", ("prompt_tokens", "completion_tokens", "total_tokens")),  # ChatOpenAI
)
"""Where an llm run's token counts sit, as (path, (prompt, completion, total) keys); the first that has any wins."""

MODEL_PATHS = ("metadata.ls_model_name", "invocation_params.model", "invocation_params.model_name")
"""Where an llm run's model sits in ``extra``, in order."""


_FEEDBACK_SOURCES = {"api": "api", "app": "api", "model": "evaluation", "auto_eval": "evaluation"}
"""``feedback_source.type``: the SDK writes ``api`` (the application's or a reviewer's call) or ``model`` (an
evaluator); the server's UI writes ``app``; its online evaluators ``auto_eval``."""


def _feedback(record: Mapping[str, Any]) -> Span:
    """A feedback record as ``create_feedback`` sends it and ``list_feedback`` returns it (``key``, ``score``,
    ``value``, ``comment``, ``feedback_source``): feedback on its trace. A number or boolean is the value, a text
    ``value`` the label. Without ``trace_id``, staging finds the trace of its ``run_id``."""
    trace_id, run_id = _id(record.get("trace_id")), _id(record.get("run_id"))
    if trace_id is None and run_id is None:
        raise InvalidRecordError(None, "run_id", "feedback on no run (a session's feedback); ragpulse reads a turn's")
    origin = record.get("feedback_source")
    kind = str(origin.get("type") if isinstance(origin, Mapping) else "api").lower()
    source = _FEEDBACK_SOURCES.get(kind)
    if source is None:
        raise InvalidRecordError(trace_id, "feedback_source.type", f"unknown LangSmith feedback source {kind!r}")
    score, value = record.get("score"), record.get("value")
    number = score if score is not None else value if isinstance(value, int | float) else None
    return Span(
        trace_id=trace_id or "",
        span_id=f"feedback:{record.get('id')}",
        parent_id=run_id,
        kind="feedback",
        name=str(record.get("key") or ""),
        start=None,
        feedback=feedback_entry(
            record.get("key"), number, value if isinstance(value, str) else None, source, record.get("comment")
        ),
    )


def spans(record: Any, options: AdapterOptions) -> Iterator[Span]:
    """The one span of a stored run, or a feedback record on one."""
    if not isinstance(record, Mapping):
        raise InvalidRecordError(None, "<record>", f"expected a run object, got {type(record).__name__}")
    if "key" in record and "run_type" not in record:
        yield _feedback(record)
        return
    trace_id, run_id = _id(record.get("trace_id")), _id(record.get("id"))
    if trace_id is None:
        raise InvalidRecordError(None, "trace_id", f"expected the run's trace id, got {record.get('trace_id')!r}")
    if run_id is None:
        raise InvalidRecordError(trace_id, "id", f"expected the run id, got {record.get('id')!r}")
    parent = _id(record.get("parent_run_id"))
    name = str(record.get("name") or "")
    kind = _KINDS.get(str(record.get("run_type")), "other")
    if name in options.retriever_names and kind != "tool":
        kind = "retriever"
    # Bulk exports hold inputs, outputs and extra as JSON text: decoded once here, not by every look-up below.
    run = {**record, **{key: dig(record.get(key), "") for key in ("inputs", "outputs", "extra")}}
    inputs, outputs = run["inputs"], run["outputs"]
    question = messages = query = documents = None
    if parent is None or kind == "chain":
        question, messages = _question(inputs, options), chat_messages(inputs)
    elif kind == "llm":
        messages = chat_messages(inputs)
    if kind in ("retriever", "tool"):
        query = query_of(inputs, options)
    if kind == "retriever":
        documents = _documents(outputs, run_id, trace_id, options)
    elif kind == "tool":
        output = dig(outputs, "output") if isinstance(outputs, Mapping) and "output" in outputs else outputs
        where = f"run {run_id} outputs.output"
        documents = tool_documents(output, options, where, named=name in options.retriever_names)
    error = record.get("error")
    yield Span(
        trace_id=trace_id,
        span_id=run_id,
        parent_id=parent,
        kind=kind,
        name=name,
        start=parse_time(record.get("start_time"), trace_id=trace_id, field=f"run {run_id} start_time"),
        end=parse_time(record.get("end_time"), trace_id=trace_id, field=f"run {run_id} end_time"),
        question=question,
        answer=_answer(outputs, options) if parent is None or kind == "llm" else None,
        documents=documents,
        model=_model(run["extra"]) if kind == "llm" else None,
        tokens=_tokens(run) if kind == "llm" else {},
        metadata=_root_metadata(run) if parent is None else {},
        input_texts=input_texts(inputs) if parent is None else (),
        messages=messages,
        query=query,
        arguments=_tool_arguments(inputs) if kind == "tool" else None,
        error=str(error) if isinstance(error, str) and error else None,
    )


def _tool_arguments(inputs: Any) -> Any:
    """A tool run's arguments: LangChain logs the call's input under ``input`` (JSON text or a string)."""
    if isinstance(inputs, Mapping) and set(inputs) == {"input"}:
        return dig(inputs["input"], "")
    return inputs


def _id(value: Any) -> str | None:
    """Run ids are UUIDs: text in most exports, 16 bytes or UUID objects from some Parquet readers."""
    if isinstance(value, bytes) and len(value) == 16:
        return str(uuid.UUID(bytes=value))
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value) if isinstance(value, str) and value else None


def _question(inputs: Any, options: AdapterOptions) -> str | None:
    """The question in ``inputs`` at ``question_keys``; else the first message batch of a LangChain chat model
    run (``messages`` is a list of lists), else a JS ``@traceable`` function's first of several arguments."""
    found = question_of(inputs, options)
    batch = dig(inputs, "messages.0")
    if found is None and isinstance(batch, list):
        found = text_of(batch, options.question_keys, role="user")
    first = dig(inputs, "args.0")
    if found is None and isinstance(first, str) and first.strip():
        found = first
    return found


def _answer(outputs: Any, options: AdapterOptions) -> str | None:
    """The answer in ``outputs``: at ``answer_keys`` (``@traceable`` returning a str logs ``output``, LCEL
    chains ``output`` as text or an AIMessage), else in an OpenAI or LangChain LLM response shape."""
    found = text_of(outputs, options.answer_keys, role="assistant") or _responses_text(dig(outputs, "output"))
    for path in ANSWER_PATHS:
        if found is not None:
            break
        text = dig(outputs, path)
        found = text if isinstance(text, str) and text.strip() else None
    return found


def _responses_text(items: Any) -> str | None:
    """The ``output_text`` parts of an OpenAI Responses API response (``wrap_openai`` on ``responses``)."""
    if not isinstance(items, list):
        return None
    texts = [
        part["text"]
        for item in items
        if isinstance(item, Mapping) and item.get("type") == "message" and isinstance(item.get("content"), list)
        for part in item["content"]
        if isinstance(part, Mapping) and part.get("type") == "output_text" and isinstance(part.get("text"), str)
    ]
    joined = "".join(texts)
    return joined if joined.strip() else None


def _documents(outputs: Any, run_id: str, trace_id: str, options: AdapterOptions) -> tuple[Document, ...]:
    """A retriever's documents at ``documents_path``, or with the default path at the first of DOCUMENT_PATHS."""
    paths = DOCUMENT_PATHS if options.documents_path is None else (options.documents_path,)
    path, documents = next(((p, found) for p in paths if (found := dig(outputs, p)) is not None), (paths[0], None))
    if documents is None:
        return ()
    where = f"run {run_id} outputs.{path}"
    if not isinstance(documents, list):
        raise InvalidRecordError(trace_id, where, f"expected a list of documents, got {type(documents).__name__}")
    return tuple(document_from(doc, options, f"{where}.{index}") for index, doc in enumerate(documents))


def _model(extra: Any) -> str | None:
    for path in MODEL_PATHS:
        found = dig(extra, path)
        if isinstance(found, str) and found:
            return found
    return None


def _tokens(record: Mapping[str, Any]) -> dict[str, int]:
    for path, keys in TOKEN_SOURCES:
        counts = dig(record, path) if path else record
        if not isinstance(counts, Mapping):
            continue
        found = {
            name: int(counts[key])
            for key, name in zip(keys, ("prompt", "completion", "total"), strict=True)
            if isinstance(counts.get(key), int | float) and not isinstance(counts.get(key), bool)
        }
        if found:
            return found
    return {}


# Keys the SDKs add to every run's metadata: their own ``ls_*`` fields and a copy of the process's
# LANGSMITH_*/LANGCHAIN_* settings (endpoint, project), which describe the tracer, not the request.
_SDK_METADATA_PREFIXES = ("ls_", "LANGSMITH_", "LANGCHAIN_")


def _root_metadata(record: Mapping[str, Any]) -> dict[str, Any]:
    metadata = dig(record.get("extra"), "metadata")
    out = (
        {k: v for k, v in metadata.items() if not str(k).startswith(_SDK_METADATA_PREFIXES)}
        if isinstance(metadata, Mapping)
        else {}
    )
    for key in ("name", "tags"):
        if record.get(key) not in (None, "", []):
            out.setdefault(key, record[key])
    # A run's ``session_id`` is its tracing project, not a conversation: threads are named in metadata
    # (CONVERSATION_KEYS), which assembly reads.
    if record.get("session_id") not in (None, ""):
        out.setdefault("project_id", str(record["session_id"]))
    return out
