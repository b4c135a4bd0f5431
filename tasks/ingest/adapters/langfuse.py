"""Langfuse blob-storage exports (traces/, observations/ or observations_v2/, JSONL or Parquet) -> spans.

Only files that a run's ``manifests/*.json`` lists are read: a run is complete once its manifest
exists, so a half-written export window is never scored. Adjacent windows overlap, so one
observation can arrive twice; staging keeps one copy per observation id (the later file's).
Retriever documents are read from the observation's output through ``format_options``
(``documents_path``, ``id_key``, ``text_key``, ``score_key``; LangChain's ``[{page_content, metadata}]``
by default).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator, Mapping
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.core.errors import ConfigError
from ragpulse.tasks.core.storage import TRACE_SUFFIXES, SourceFile, file_identity, filesystem, storage_errors
from ragpulse.tasks.ingest.adapters._model import AdapterOptions, Document, Kind, Span, dig, parse_time, text_of

__all__ = ["MANIFEST_DIR", "select_files", "spans"]

MANIFEST_DIR = "manifests"
_KINDS: dict[str, Kind] = {"GENERATION": "llm", "RETRIEVER": "retriever"}
_ENTRY_KEYS = ("path", "key", "file", "name", "url")


def spans(record: Any, options: AdapterOptions) -> Iterator[Span]:
    """A trace row (``traces/``) or an observation row (``observations/``, ``observations_v2/``) as a span."""
    if not isinstance(record, Mapping):
        raise InvalidRecordError(None, "<record>", f"expected an object, got {type(record).__name__}")
    if "trace_id" not in record:
        yield _trace_row(record, options)
    elif "type" in record:
        yield _observation(record, options)
    # A row with trace_id but no type is a score (scores/): not part of the trace.


def _trace_row(record: Mapping[str, Any], options: AdapterOptions) -> Span:
    trace_id = record.get("id")
    if not isinstance(trace_id, str) or not trace_id:
        raise InvalidRecordError(None, "id", f"expected the Langfuse trace id, got {trace_id!r}")
    metadata = dig(record.get("metadata"), "")
    extra = {key: record[key] for key in ("name", "user_id", "session_id", "environment", "release", "tags")
             if record.get(key) not in (None, "", [])}  # fmt: skip
    return Span(
        trace_id=trace_id,
        span_id=f"trace:{trace_id}",
        parent_id=None,
        kind="trace",
        name=str(record.get("name") or ""),
        start=parse_time(record.get("timestamp"), trace_id=trace_id, field="timestamp"),
        question=text_of(record.get("input"), options.question_keys, role="user"),
        answer=text_of(record.get("output"), options.answer_keys, role="assistant"),
        metadata={**(metadata if isinstance(metadata, Mapping) else {}), **extra},
    )


def _observation(record: Mapping[str, Any], options: AdapterOptions) -> Span:
    trace_id, observation_id = record.get("trace_id"), record.get("id")
    if not isinstance(trace_id, str) or not trace_id:
        raise InvalidRecordError(None, "trace_id", f"expected the observation's trace id, got {trace_id!r}")
    if not isinstance(observation_id, str) or not observation_id:
        raise InvalidRecordError(trace_id, "id", f"expected the observation id, got {observation_id!r}")
    name = str(record.get("name") or "")
    parent = record.get("parent_observation_id") or None
    kind: Kind = _KINDS.get(str(record.get("type")).upper(), "chain" if parent is None else "other")
    if name in options.retriever_names:
        kind = "retriever"
    output = record.get("output")
    return Span(
        trace_id=trace_id,
        span_id=observation_id,
        parent_id=parent,
        kind=kind,
        name=name,
        start=parse_time(record.get("start_time"), trace_id=trace_id, field=f"observation {observation_id} start_time"),
        question=text_of(record.get("input"), options.question_keys, role="user") if parent is None else None,
        answer=text_of(output, options.answer_keys, role="assistant") if parent is None or kind == "llm" else None,
        documents=_documents(output, observation_id, trace_id, options) if kind == "retriever" else None,
        model=_model(record) if kind == "llm" else None,
        tokens=_tokens(record) if kind == "llm" else {},
        metadata=_trace_context(record) if parent is None else {},
    )


def _documents(output: Any, observation_id: str, trace_id: str, options: AdapterOptions) -> tuple[Document, ...]:
    documents = dig(output, "")
    if not isinstance(documents, list):
        documents = dig(documents, options.documents_path)
    where = f"observation {observation_id} output"
    if documents is None:
        return ()
    if not isinstance(documents, list):
        raise InvalidRecordError(
            trace_id, where, f"expected a list of documents (here or at {options.documents_path!r}), got "
            f"{type(documents).__name__}"
        )  # fmt: skip
    return tuple(
        Document(
            id=dig(doc, options.id_key),
            text=dig(doc, options.text_key),
            score=dig(doc, options.score_key),
            where=f"{where}.{index}",
        )
        for index, doc in enumerate(documents)
    )


def _model(record: Mapping[str, Any]) -> str | None:
    for key in ("provided_model_name", "model", "internal_model_id"):
        if isinstance(record.get(key), str) and record[key]:
            return str(record[key])
    return None


def _tokens(record: Mapping[str, Any]) -> dict[str, int]:
    usage = dig(record.get("usage_details"), "")
    if isinstance(usage, list):  # an Arrow map column decodes to (key, value) pairs
        usage = dict(usage)
    if isinstance(usage, Mapping):
        return {str(k): int(v) for k, v in usage.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    names = {"prompt_tokens": "input", "completion_tokens": "output", "total_tokens": "total"}
    return {name: int(record[key]) for key, name in names.items() if isinstance(record.get(key), int | float)}


def _trace_context(record: Mapping[str, Any]) -> dict[str, Any]:
    """Trace-level fields that enriched observations (observations_v2/) carry on every row."""
    metadata = dig(record.get("metadata"), "")
    context = {key: record[key] for key in ("trace_name", "user_id", "session_id", "environment")
               if record.get(key) not in (None, "")}  # fmt: skip
    return {**(metadata if isinstance(metadata, Mapping) else {}), **context}


def select_files(files: list[SourceFile], storage_options: Mapping[str, Any] | None) -> list[SourceFile]:
    """The data files listed by the complete export runs among ``files`` (their ``manifests/*.json``).

    A manifest is a JSON object with a ``files`` list (or a bare list); an entry is a path string or an
    object with one of ``path``/``key``/``file``/``name``/``url``, relative to the export root (the folder
    holding ``manifests/``) unless it is a full URL. Score files and unknown suffixes are skipped.
    """
    manifests = [f for f in files if _is_manifest(f.url)]
    selected: dict[str, SourceFile] = {}
    for manifest in manifests:
        root = posixpath.dirname(posixpath.dirname(manifest.url))
        for entry in _manifest_entries(manifest, storage_options):
            url = entry if "://" in entry or entry.startswith("/") else f"{root}/{entry.lstrip('/')}"
            if url in selected or not url.endswith(TRACE_SUFFIXES) or "/scores/" in f"/{url}":
                continue
            try:
                selected[url] = file_identity(url, storage_options)
            except FileNotFoundError:
                raise ConfigError(f"Langfuse manifest {manifest.url} lists {url}, which does not exist") from None
    return sorted(selected.values(), key=lambda f: f.url)


def _is_manifest(url: str) -> bool:
    return url.endswith(".json") and posixpath.basename(posixpath.dirname(url)) == MANIFEST_DIR


def _manifest_entries(manifest: SourceFile, storage_options: Mapping[str, Any] | None) -> list[str]:
    fs, path = filesystem(manifest.url, storage_options)
    with storage_errors(manifest.url):
        raw = fs.cat_file(path)
    try:
        parsed = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Langfuse manifest {manifest.url} is not JSON: {exc}") from exc
    entries = parsed.get("files") if isinstance(parsed, Mapping) else parsed
    if not isinstance(entries, list):
        raise ConfigError(f"Langfuse manifest {manifest.url} has no list of files")
    out = []
    for entry in entries:
        if isinstance(entry, Mapping):
            entry = next((entry[k] for k in _ENTRY_KEYS if isinstance(entry.get(k), str)), None)
        if not isinstance(entry, str) or not entry:
            raise ConfigError(f"Langfuse manifest {manifest.url} has an entry without a file path: {entry!r}")
        out.append(entry)
    return out
