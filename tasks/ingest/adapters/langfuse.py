"""Langfuse blob-storage exports (traces/, observations/ or observations_v2/, JSONL or Parquet) -> spans.

Langfuse writes each export run as one file per table at ``{prefix}{projectId}/{table}/{maxTimestamp}.{ext}``
and, last, a manifest at ``{prefix}{projectId}/manifests/{maxTimestamp}.json`` listing every file by its
full object key (langfuse/langfuse ``worker/src/features/blobstorage/manifest.ts``). Only files that a
manifest lists are read, so a half-written run is never scored. Adjacent windows share their boundary, so
one observation can arrive twice; staging keeps one copy per observation id (the later file's).

The legacy tables carry a trace row (``traces/``) with the trace's input and output; the enriched
``observations_v2/`` table has observations only, so the question comes from the root observation's
input, else a retriever's input (its query) or an LLM call's user message, the first in start order.
Retriever documents are the observation's output: LangChain's callback logs a list of ``Document``
(``id``, ``page_content``, ``metadata``) read by :func:`document_from`; ``documents_path`` finds a list
nested in an object.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Iterator, Mapping
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.storage import TRACE_SUFFIXES, SourceFile, file_identity, filesystem, storage_errors
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
    "DOCUMENTS_PATH",
    "MANIFEST_DIR",
    "QUESTION_PLACES",
    "select_files",
    "spans",
]

QUESTION_PLACES = "the trace's input, the root observation's input"
"""Where this format keeps the user's message, named in the reason a trace without one is quarantined."""

MANIFEST_DIR = "manifests"
_KINDS: dict[str, Kind] = {
    "GENERATION": "llm", "RETRIEVER": "retriever", "TOOL": "tool", "AGENT": "chain", "CHAIN": "chain",
}  # fmt: skip
DOCUMENTS_PATH = "documents"
"""Where a retriever observation's documents sit when its output is not the list itself (LangChain's callback
logs the list; an object holding it under ``documents`` is the common custom shape)."""
_DATA_TABLES = frozenset({"traces", "observations", "observations_v2", "scores"})
_log = logging.getLogger(__name__)
_SDK_METADATA = ("resourceAttributes", "scope")
"""Metadata keys the Langfuse server adds to every OTel-ingested observation (nested, or flattened to
``resourceAttributes.*``/``scope.*`` in observations_v2); they describe the SDK process, not the request."""


def spans(record: Any, options: AdapterOptions) -> Iterator[Span]:
    """A trace row (``traces/``) or an observation row (``observations/``, ``observations_v2/``) as a span."""
    if not isinstance(record, Mapping):
        raise InvalidRecordError(None, "<record>", f"expected an object, got {type(record).__name__}")
    if "trace_id" not in record:
        yield _trace_row(record, options)
    elif "type" in record:
        yield _observation(record, options)
    elif (score := _score(record)) is not None:  # a row with trace_id but no type is a score (scores/)
        yield score


_SCORE_SOURCES = {"API": "api", "ANNOTATION": "annotation", "EVAL": "evaluation"}
"""Who wrote a score: the SDK or public API (an application's user feedback, source not said further), a person in
the annotation UI, an LLM-as-judge evaluator of Langfuse."""


def _score(record: Mapping[str, Any]) -> Span | None:
    """A ``scores/`` row as the feedback of its trace. NUMERIC scores keep their value, BOOLEAN their 1/0,
    CATEGORICAL their label (``string_value``; the numeric ``value`` is a score config's category index, or a
    placeholder 0 without one). TEXT and CORRECTION scores are free text, not a measure: left out."""
    trace_id, score_id = record.get("trace_id"), record.get("id")
    if not isinstance(trace_id, str) or not trace_id:
        reason = f"a score on no trace (session {record.get('session_id')!r}); ragpulse attaches feedback to turns"
        raise InvalidRecordError(None, "trace_id", reason)
    data_type = str(record.get("data_type") or "NUMERIC").upper()
    if data_type not in ("NUMERIC", "BOOLEAN", "CATEGORICAL"):
        return None
    source = _SCORE_SOURCES.get(str(record.get("source") or "API").upper())
    if source is None:
        raise InvalidRecordError(trace_id, "source", f"unknown Langfuse score source {record.get('source')!r}")
    categorical = data_type == "CATEGORICAL"
    return Span(
        trace_id=trace_id,
        span_id=f"score:{score_id}",
        parent_id=record.get("observation_id") or None,
        kind="feedback",
        name=str(record.get("name") or ""),
        start=parse_time(record.get("timestamp"), trace_id=trace_id, field="timestamp"),
        feedback=feedback_entry(
            record.get("name"),
            None if categorical else record.get("value"),
            record.get("string_value") if categorical else None,
            source,
            record.get("comment"),
        ),
    )


def _trace_row(record: Mapping[str, Any], options: AdapterOptions) -> Span:
    trace_id = record.get("id")
    if not isinstance(trace_id, str) or not trace_id:
        raise InvalidRecordError(None, "id", f"expected the Langfuse trace id, got {trace_id!r}")
    extra = {key: record[key] for key in ("name", "user_id", "session_id", "environment", "release", "tags")
             if record.get(key) not in (None, "", [])}  # fmt: skip
    return Span(
        trace_id=trace_id,
        span_id=f"trace:{trace_id}",
        parent_id=None,
        kind="trace",
        name=str(record.get("name") or ""),
        start=parse_time(record.get("timestamp"), trace_id=trace_id, field="timestamp"),
        question=question_of(record.get("input"), options),
        input_texts=input_texts(record.get("input")),
        answer=text_of(record.get("output"), options.answer_keys, role="assistant"),
        metadata={**_metadata(record), **extra},
        messages=chat_messages(record.get("input")),
        session_id=_session(record.get("session_id")),
    )


def _session(value: Any) -> str | None:
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) and value != "" else None


def _observation(record: Mapping[str, Any], options: AdapterOptions) -> Span:
    trace_id, observation_id = record.get("trace_id"), record.get("id")
    if not isinstance(trace_id, str) or not trace_id:
        raise InvalidRecordError(None, "trace_id", f"expected the observation's trace id, got {trace_id!r}")
    if not isinstance(observation_id, str) or not observation_id:
        raise InvalidRecordError(trace_id, "id", f"expected the observation id, got {observation_id!r}")
    name = str(record.get("name") or "")
    parent = record.get("parent_observation_id") or None  # observations_v2 writes "" for a root
    kind: Kind = _KINDS.get(str(record.get("type")).upper(), "chain" if parent is None else "other")
    if name in options.retriever_names and kind != "tool":
        kind = "retriever"
    inputs, output = dig(record.get("input"), ""), dig(record.get("output"), "")  # JSON text decoded once
    question = messages = query = documents = None
    if parent is None or kind == "chain":
        question, messages = question_of(inputs, options), chat_messages(inputs)
    elif kind == "llm":
        messages = chat_messages(inputs)
    if kind in ("retriever", "tool"):
        query = query_of(inputs, options)
    if kind == "retriever":
        documents = _documents(output, observation_id, trace_id, options)
    elif kind == "tool":
        where = f"observation {observation_id} output"
        documents = tool_documents(output, options, where, named=name in options.retriever_names)
    error = None
    if str(record.get("level") or "").upper() == "ERROR":
        error = str(record.get("status_message") or "error")
    return Span(
        trace_id=trace_id,
        span_id=observation_id,
        parent_id=parent,
        kind=kind,
        name=name,
        start=parse_time(record.get("start_time"), trace_id=trace_id, field=f"observation {observation_id} start_time"),
        end=parse_time(record.get("end_time"), trace_id=trace_id, field=f"observation {observation_id} end_time"),
        question=question,
        answer=text_of(output, options.answer_keys, role="assistant") if parent is None or kind == "llm" else None,
        documents=documents,
        model=_model(record) if kind == "llm" else None,
        tokens=_tokens(record) if kind == "llm" else {},
        metadata=_trace_context(record) if parent is None else {},
        input_texts=input_texts(inputs) if parent is None else (),
        messages=messages,
        query=query,
        arguments=inputs if kind == "tool" else None,
        error=error,
        session_id=_session(record.get("session_id")),
    )


def _documents(output: Any, observation_id: str, trace_id: str, options: AdapterOptions) -> tuple[Document, ...]:
    """The retriever's documents: ``output`` (already decoded) if it is the list, else the list at its path."""
    path = options.documents_path or DOCUMENTS_PATH
    documents = output if isinstance(output, list) else dig(output, path)
    where = f"observation {observation_id} output"
    if documents is None:
        return ()
    if not isinstance(documents, list):
        raise InvalidRecordError(
            trace_id, where, f"expected a list of documents (here or at {path!r}), got {type(documents).__name__}"
        )
    return tuple(document_from(doc, options, f"{where}.{index}") for index, doc in enumerate(documents))


def _model(record: Mapping[str, Any]) -> str | None:
    """The model the caller named, else the one Langfuse matched (``model_id`` in exports)."""
    for key in ("provided_model_name", "model", "internal_model_id", "model_id"):
        if isinstance(record.get(key), str) and record[key]:
            return str(record[key])
    return None


def _tokens(record: Mapping[str, Any]) -> dict[str, int]:
    """``usage_details`` (``usageDetails`` in the public API's JSON): a JSON object (ClickHouse quotes its UInt64
    values), JSON text, or the (key, value) pairs an Arrow map column decodes to; the API's older ``usage`` object
    (its ``input``, ``output``, ``total``; its costs and unit are not counts); older rows have
    ``prompt_tokens``/``completion_tokens``/``total_tokens``."""
    usage = _mapping(record.get("usage_details")) or _mapping(record.get("usageDetails"))
    if usage is None and (older := _mapping(record.get("usage"))) is not None:
        usage = {key: older[key] for key in ("input", "output", "total") if key in older}
    if usage is not None:
        return {str(key): count for key, value in usage.items() if (count := _count(value)) is not None}
    names = {"prompt_tokens": "input", "completion_tokens": "output", "total_tokens": "total"}
    return {name: count for key, name in names.items() if (count := _count(record.get(key))) is not None}


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _mapping(value: Any) -> Mapping[str, Any] | None:
    """A map column as a dict: JSON object or text, or Parquet's list of (key, value) pairs."""
    value = dig(value, "")
    if isinstance(value, list) and all(isinstance(pair, list | tuple) and len(pair) == 2 for pair in value):
        value = dict(value)
    return value if isinstance(value, Mapping) else None


def _metadata(record: Mapping[str, Any]) -> dict[str, Any]:
    metadata = _mapping(record.get("metadata")) or {}
    return {
        key: value for key, value in metadata.items()
        if str(key) not in _SDK_METADATA and not str(key).startswith(tuple(f"{k}." for k in _SDK_METADATA))
    }  # fmt: skip


def _trace_context(record: Mapping[str, Any]) -> dict[str, Any]:
    """Trace-level fields that enriched observations (observations_v2/) carry on every row."""
    context = {key: record[key] for key in ("trace_name", "user_id", "session_id", "environment")
               if record.get(key) not in (None, "")}  # fmt: skip
    return {**_metadata(record), **context}


def select_files(files: list[SourceFile], storage_options: Mapping[str, Any] | None) -> list[SourceFile]:
    """The data files listed by the complete export runs among ``files`` (their ``manifests/*.json``).

    A manifest's ``files[].key`` is the object's full key, ``{prefix}{projectId}/{table}/{file}``, relative
    to the bucket root. The manifest itself sits at ``{prefix}{projectId}/manifests/``, so the bucket root
    is the manifest's URL minus its own key and the file is at root + key: the same URL as the manifest's
    project folder (its URL minus ``manifests/{name}``) + ``{table}/{file}``, which is how ragpulse resolves
    it, so it is also found when the project folder was copied or mounted away from the bucket root.
    Score files are read as the traces' feedback; CSV and JSON exports are a clear error (ragpulse reads JSONL
    and Parquet).

    Langfuse versions before manifests were introduced write none: with no manifest among ``files`` at all,
    every JSONL or Parquet file in a ``traces/``, ``observations/`` or ``observations_v2/`` folder is read,
    and a warning says that the completeness of an export run cannot be checked.
    """
    manifests = [f for f in files if _is_manifest(f.url)]
    if not manifests:
        return _files_without_manifests(files)
    selected: dict[str, SourceFile] = {}
    for manifest in manifests:
        project_url = posixpath.dirname(posixpath.dirname(manifest.url))
        for _, relative in _manifest_files(manifest, storage_options):
            url = f"{project_url}/{relative}"
            if url in selected:
                continue
            if not url.endswith(TRACE_SUFFIXES):
                raise ConfigError(
                    f"Langfuse manifest {manifest.url} lists {url}, which ragpulse cannot read: set the blob "
                    f"storage integration's file type to JSONL or Parquet"
                )
            try:
                selected[url] = file_identity(url, storage_options)
            except FileNotFoundError:
                raise ConfigError(f"Langfuse manifest {manifest.url} lists {url}, which does not exist") from None
    return sorted(selected.values(), key=lambda f: f.url)


def _files_without_manifests(files: list[SourceFile]) -> list[SourceFile]:
    data = [f for f in files if posixpath.basename(posixpath.dirname(f.url)) in _DATA_TABLES]
    readable = [f for f in data if f.url.endswith(TRACE_SUFFIXES)]
    if data:
        _log.warning(
            "Langfuse export without manifests/ (written by Langfuse before export manifests): reading its %d "
            "data file(s) as they are; an export run still being written may be read in part",
            len(readable),
        )
    if len(readable) < len(data):
        unreadable = next(f.url for f in data if not f.url.endswith(TRACE_SUFFIXES))
        raise ConfigError(
            f"Langfuse export file {unreadable} cannot be read: set the blob storage integration's file type to "
            "JSONL or Parquet"
        )
    return sorted(readable, key=lambda f: f.url)


def _is_manifest(url: str) -> bool:
    return url.endswith(".json") and posixpath.basename(posixpath.dirname(url)) == MANIFEST_DIR


def _manifest_files(manifest: SourceFile, storage_options: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(table, path below the project folder) of every file the manifest lists."""
    fs, path = filesystem(manifest.url, storage_options)
    with storage_errors(manifest.url):
        raw = fs.cat_file(path)
    try:
        parsed = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Langfuse manifest {manifest.url} is not JSON: {exc}") from exc
    entries = parsed.get("files") if isinstance(parsed, Mapping) else None
    project = parsed.get("projectId") if isinstance(parsed, Mapping) else None
    if not isinstance(entries, list) or not isinstance(project, str) or not project:
        raise ConfigError(f"Langfuse manifest {manifest.url} has no projectId and files list (manifest.ts layout)")
    out = []
    for entry in entries:
        key = entry.get("key") if isinstance(entry, Mapping) else None
        table = entry.get("table") if isinstance(entry, Mapping) else None
        marker = f"{project}/{table}/"
        if not isinstance(key, str) or not isinstance(table, str) or marker not in key:
            raise ConfigError(
                f"Langfuse manifest {manifest.url} has an entry that is not a {{prefix}}{project}/<table>/<file> "
                f"object key: {entry!r}"
            )
        out.append((table, key[key.rindex(marker) + len(project) + 1 :]))
    return out
