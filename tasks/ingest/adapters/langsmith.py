"""LangSmith bulk exports (Parquet of runs, the Run data format) -> spans.

The root run (no ``parent_run_id``) holds the question in ``inputs`` and the answer in ``outputs``;
``retriever`` runs hold ``outputs.documents[*]`` (LangChain documents: text in ``page_content``, id
and score at the ``metadata`` keys named by ``format_options``); ``llm`` runs hold the model and token
counts. Bulk exports store ``inputs``/``outputs``/``extra`` as JSON text; objects are accepted too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.adapters._model import AdapterOptions, Document, Kind, Span, dig, parse_time, text_of

__all__ = ["spans"]

_KINDS: dict[str, Kind] = {"retriever": "retriever", "llm": "llm", "chain": "chain"}


def spans(record: Any, options: AdapterOptions) -> Iterator[Span]:
    """The one span of an exported run."""
    if not isinstance(record, Mapping):
        raise InvalidRecordError(None, "<record>", f"expected a run object, got {type(record).__name__}")
    trace_id, run_id = _id(record.get("trace_id")), _id(record.get("id"))
    if trace_id is None:
        raise InvalidRecordError(None, "trace_id", f"expected the run's trace id, got {record.get('trace_id')!r}")
    if run_id is None:
        raise InvalidRecordError(trace_id, "id", f"expected the run id, got {record.get('id')!r}")
    parent = _id(record.get("parent_run_id"))
    name = str(record.get("name") or "")
    kind = _KINDS.get(str(record.get("run_type")), "other")
    if name in options.retriever_names:
        kind = "retriever"
    inputs, outputs = record.get("inputs"), record.get("outputs")
    answer = None
    if parent is None or kind == "llm":
        answer = text_of(outputs, options.answer_keys, role="assistant") or _generation_text(outputs)
    documents = None
    if kind == "retriever":
        documents = _documents(outputs, run_id, trace_id, options)
    yield Span(
        trace_id=trace_id,
        span_id=run_id,
        parent_id=parent,
        kind=kind,
        name=name,
        start=parse_time(record.get("start_time"), trace_id=trace_id, field=f"run {run_id} start_time"),
        question=text_of(inputs, options.question_keys, role="user") if parent is None or kind == "retriever" else None,
        answer=answer,
        documents=documents,
        model=_model(record.get("extra")) if kind == "llm" else None,
        tokens=_tokens(record) if kind == "llm" else {},
        metadata=_root_metadata(record) if parent is None else {},
    )


def _id(value: Any) -> str | None:
    """Run ids are UUIDs: text in most exports, 16 bytes in some Parquet writers."""
    if isinstance(value, bytes) and len(value) == 16:
        import uuid

        return str(uuid.UUID(bytes=value))
    return str(value) if isinstance(value, str) and value else None


def _documents(outputs: Any, run_id: str, trace_id: str, options: AdapterOptions) -> tuple[Document, ...]:
    documents = dig(outputs, options.documents_path)
    where = f"run {run_id} outputs.{options.documents_path}"
    if documents is None:
        return ()
    if not isinstance(documents, list):
        raise InvalidRecordError(trace_id, where, f"expected a list of documents, got {type(documents).__name__}")
    return tuple(
        Document(
            id=dig(doc, options.id_key),
            text=dig(doc, options.text_key),
            score=dig(doc, options.score_key),
            where=f"{where}.{index}",
        )
        for index, doc in enumerate(documents)
    )


def _generation_text(outputs: Any) -> str | None:
    """An LLM run's output in LangChain's LLMResult shape: ``generations[0][0].text``."""
    text = dig(outputs, "generations.0.0.text")
    return text if isinstance(text, str) and text.strip() else None


def _model(extra: Any) -> str | None:
    for path in ("metadata.ls_model_name", "invocation_params.model", "invocation_params.model_name"):
        found = dig(extra, path)
        if isinstance(found, str) and found:
            return found
    return None


def _tokens(record: Mapping[str, Any]) -> dict[str, int]:
    names = {"prompt_tokens": "prompt", "completion_tokens": "completion", "total_tokens": "total"}
    return {
        name: int(record[key])
        for key, name in names.items()
        if isinstance(record.get(key), int | float) and not isinstance(record.get(key), bool)
    }


def _root_metadata(record: Mapping[str, Any]) -> dict[str, Any]:
    metadata = dig(record.get("extra"), "metadata")
    out = {k: v for k, v in metadata.items() if not str(k).startswith("ls_")} if isinstance(metadata, Mapping) else {}
    for key in ("name", "session_id", "tags"):
        if record.get(key) not in (None, "", []):
            out.setdefault(key, record[key])
    return out
