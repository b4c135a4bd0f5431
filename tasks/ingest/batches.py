"""Reading staged batches back: the Parquet file of a ``BatchRef`` and its rows as the metrics' input."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numpy.typing import NDArray

from ragpulse.metrics import MetricRequest, TraceBatch
from ragpulse.metrics.batch import Feedback, Operations, SpanError, Step, ToolCall, Usage
from ragpulse.metrics.registry import STEP_FAMILIES
from ragpulse.tasks.core.storage import filesystem, storage_errors
from ragpulse.tasks.core.types import BatchRef
from ragpulse.tasks.ingest.records import STAGED_SCHEMA

__all__ = [
    "CONVERSATION_COLUMNS",
    "OPERATIONS_COLUMNS",
    "judging_columns",
    "read_scoring_table",
    "read_staged",
    "read_trace_batch",
    "shared_strings",
    "tool_calls_column",
]

OPERATIONS_COLUMNS = ("latency_ms", "retrieval_latency_ms", "generation_latency_ms", "usage", "errors")
"""The staged columns behind ``TraceBatch.operations``."""

# What each kind of metric reads from a staged batch (a nested leaf is named by its Parquet path). Context texts are
# most of a batch's bytes; ranking metrics read them only for traces labelled by text (``read_scoring_table``).
_LOCATION_COLUMNS = ("trace_id", "source_file", "source_line")
_COLUMNS_READ_BY = {
    "ranking": ("contexts.list.element.id", "relevant_context_ids", "relevant_contexts"),
    "answers": ("answer", "reference", "reference_answers", "language"),
    # The agent's turn metrics count steps, compare their queries and read the tool calls, never step documents.
    "agent": ("steps.list.element.kind", "steps.list.element.query", "tool_calls", "reference_tool_calls"),
    # What a turn cost to serve and what was said about it: small columns, read whole.
    "operations": OPERATIONS_COLUMNS,
    "feedback": ("feedback",),
    # Whether each retrieval returned documents: the documents' ids of the turn and of each step, never their texts.
    "retrieval": ("contexts.list.element.id", "steps.list.element.kind", "steps.list.element.contexts.list.element.id"),
}
# What a ranking metric scored per retrieval step reads: the step's id and its documents' ids (texts as above).
_STEP_RANKING_COLUMNS = ("steps.list.element.id", "steps.list.element.contexts.list.element.id")
_STEP_TEXT_COLUMNS = (*_STEP_RANKING_COLUMNS, "steps.list.element.contexts.list.element.text")
# What the judge never reads: tool calls (judged per conversation), operations and feedback (read without a judge),
# and steps unless it scores them.
_NOT_JUDGED = ("tool_calls", "reference_tool_calls", *OPERATIONS_COLUMNS, "feedback")
CONVERSATION_COLUMNS = ("trace_id", "timestamp", "conversation_id", "question", "answer", "tool_calls", "language")
"""What a conversation metric reads of each turn (``judge_conversations``)."""


def read_staged(
    batch: BatchRef, storage_options: Mapping[str, Any] | None = None, *, columns: Sequence[str] | None = None
) -> pa.Table:
    """The staged rows of ``batch`` (only ``columns`` when given), ``source_line`` shifted by its line offset:
    every reader of staged batches goes through here, so that none sees a byte-range slice's own numbering."""
    fs, path = filesystem(batch.url, storage_options)
    with storage_errors(batch.url):
        if not fs.exists(path):
            raise FileNotFoundError(
                f"staged batch {batch.url} was removed while this run was scoring it; re-run the day: a run stages "
                "again whatever staged batches it finds gone"
            )
        with fs.open(path, "rb") as handle:
            table = pq.ParquetFile(handle).read(columns=columns)
    if batch.line_offset and "source_line" in table.column_names:
        index = table.column_names.index("source_line")
        shifted = pc.add(table.column(index), pa.scalar(batch.line_offset, pa.int64()))
        table = table.set_column(index, table.schema.field(index), shifted)
    return table


def shared_strings(column: pa.ChunkedArray | pa.Array) -> NDArray[np.object_]:
    """``column`` as Python strings with one object per distinct value: a batch's rows come from a few source
    files, and a str per row would cost ~100 bytes each for the whole day in the flow process."""
    encoded = pc.dictionary_encode(column)
    chunks = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
    parts = [np.array(c.dictionary.to_pylist(), dtype=object)[c.indices.to_numpy(zero_copy_only=False)] for c in chunks]
    return np.concatenate(parts) if parts else np.array([], dtype=object)


def read_scoring_table(
    batch: BatchRef, requests: Iterable[MetricRequest], storage_options: Mapping[str, Any] | None = None
) -> pa.Table:
    """The columns of ``batch`` that ``requests`` (metrics that need no judge) read; context texts only when some
    trace is labelled by text, since only those are matched to contexts by text. A ranking metric scored per
    retrieval step too (``STEP_FAMILIES``) reads the steps' ids and documents the same way."""
    requests = list(requests)
    kinds = {request.definition.needs for request in requests}
    per_step = any(request.family in STEP_FAMILIES and not request.is_judge for request in requests)
    columns = [*_LOCATION_COLUMNS, *(column for kind in sorted(kinds) for column in _COLUMNS_READ_BY.get(kind, ()))]
    columns += _STEP_RANKING_COLUMNS if per_step else ()
    columns = list(dict.fromkeys(columns))  # kinds share some columns (the documents' ids)
    table = read_staged(batch, storage_options, columns=columns)
    if "ranking" in kinds and table.column("relevant_contexts").null_count < table.num_rows:
        texts = read_staged(batch, storage_options, columns=["contexts.list.element.text"]).column(0)
        index = table.column_names.index("contexts")
        table = table.set_column(index, "contexts", _zip_contexts(table.column(index), texts))
        if per_step:  # the steps' documents again, with their texts (the fields read before come along)
            step_columns = [c for c in columns if c.startswith("steps.")] + [_STEP_TEXT_COLUMNS[-1]]
            steps = read_staged(batch, storage_options, columns=step_columns).column("steps")
            table = table.set_column(table.column_names.index("steps"), "steps", steps)
    return table


def judging_columns(*, steps: bool) -> list[str]:
    """The staged columns the judge task reads: everything a judge metric may quote, the retrieval steps only when
    it ``steps`` scores them too (their documents would double the bytes read)."""
    skipped = {*_NOT_JUDGED, *(() if steps else ("steps",))}
    return [name for name in STAGED_SCHEMA.names if name not in skipped]


def _zip_contexts(ids: pa.ChunkedArray, texts: pa.ChunkedArray) -> pa.Array:
    """The two one-field context columns of one batch (same offsets) as one list of {id, text} structs."""
    ids_list, texts_list = ids.combine_chunks(), texts.combine_chunks()
    fields = [ids_list.values.field(0), texts_list.values.field(0)]
    values = pa.StructArray.from_arrays(fields, names=["id", "text"])
    return pa.ListArray.from_arrays(ids_list.offsets, values, mask=ids_list.is_null())


def read_trace_batch(table: pa.Table) -> TraceBatch:
    """Staged Arrow rows -> the metrics' input, converting column by column rather than row by row. Columns left
    out (``read_scoring_table``) read as absent: no context texts, answers, references, questions, languages,
    steps, tool calls, histories, conversation ids, operations or feedback; step fields left out of ``steps`` read
    as None (documents as none). A batch staged before a column existed reads the same as one that left it out."""
    n = table.num_rows
    if "contexts" in table.column_names:
        contexts = table.column("contexts").combine_chunks()
        offsets = contexts.offsets.to_numpy()
        flat = contexts.values  # what the offsets index, whatever the column's own offset
        ids = flat.field("id").to_pylist()
        texts = flat.field("text").to_pylist() if flat.type.get_field_index("text") >= 0 else [None] * len(flat)
        spans = list(zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True))
    else:
        ids, texts, spans = [], [], [(0, 0)] * n
    if "answer" in table.column_names:
        answers = table.column("answer").to_pylist()
        references = [
            [r for r in dict.fromkeys([ref, *(alts or [])]) if r is not None]
            for ref, alts in zip(
                table.column("reference").to_pylist(), table.column("reference_answers").to_pylist(), strict=True
            )
        ]
    else:
        answers, references = [None] * n, [[] for _ in range(n)]
    return TraceBatch(
        trace_ids=table.column("trace_id").to_pylist(),
        context_ids=[ids[a:b] for a, b in spans],
        context_texts=[texts[a:b] for a, b in spans],
        relevant_ids=_label_column(table, "relevant_context_ids"),
        relevant_texts=_label_column(table, "relevant_contexts"),
        answers=answers,
        references=references,
        questions=_optional_column(table, "question"),
        languages=_optional_column(table, "language"),
        steps=_steps_column(table) if "steps" in table.column_names else None,
        tool_calls=tool_calls_column(table, "tool_calls"),
        reference_tool_calls=tool_calls_column(table, "reference_tool_calls"),
        histories=_history_column(table) if "history" in table.column_names else None,
        conversation_ids=_optional_column(table, "conversation_id"),
        operations=_operations_column(table),
        feedback=_feedback_column(table) if "feedback" in table.column_names else None,
    )


def _label_column(table: pa.Table, name: str) -> list[dict[str, float] | None]:
    """Labels per trace as {key: gain} (a repeated key keeps its last gain), from flat key and gain columns rather
    than a dict per pair."""
    if name not in table.column_names:
        return [None] * table.num_rows
    column = table.column(name).combine_chunks()
    pairs = column.values  # what the offsets index, whatever the column's own offset
    keys, gains = pairs.field("key").to_pylist(), pairs.field("gain").to_pylist()
    offsets = column.offsets.to_pylist()
    present = column.is_valid().to_pylist()
    return [
        dict(zip(keys[a:b], gains[a:b], strict=True)) if valid else None
        for a, b, valid in zip(offsets, offsets[1:], present, strict=False)
    ]


def _optional_column(table: pa.Table, name: str) -> list[Any] | None:
    return table.column(name).to_pylist() if name in table.column_names else None


def _list_spans(column: pa.ChunkedArray) -> tuple[pa.Array, list[tuple[int, int] | None]]:
    """A list column's flat values and each row's (start, end) in them, None for a null list."""
    combined = column.combine_chunks()
    offsets = combined.offsets.to_pylist()
    present = combined.is_valid().to_pylist()
    spans = [(a, b) if valid else None for a, b, valid in zip(offsets, offsets[1:], present, strict=False)]
    return combined.values, spans


def _fields(values: pa.Array, names: Sequence[str]) -> dict[str, list[Any]]:
    """The named fields of a struct array as Python lists; a field not read is None throughout."""
    kind = values.type
    return {
        name: values.field(name).to_pylist() if kind.get_field_index(name) >= 0 else [None] * len(values)
        for name in names
    }


def _steps_column(table: pa.Table) -> list[list[Step] | None]:
    """The ``steps`` column (whole or the fields ``read_scoring_table`` chose) as each trace's ``Step`` list."""
    values, spans = _list_spans(table.column("steps"))
    fields = _fields(values, ("id", "name", "kind", "query", "parent", "error"))
    if values.type.get_field_index("contexts") >= 0:
        contexts, context_spans = _list_spans(pa.chunked_array([values.field("contexts")]))
        documents = _fields(contexts, ("id", "text"))
    else:
        documents, context_spans = {"id": [], "text": []}, [(0, 0)] * len(values)

    def step(position: int, index: int) -> Step:
        a, b = context_spans[position] or (0, 0)
        return Step(
            index=index,
            id=fields["id"][position],
            name=fields["name"][position],
            kind=fields["kind"][position] or "retriever",
            query=fields["query"][position],
            context_ids=tuple(documents["id"][a:b]),
            context_texts=tuple(documents["text"][a:b]),
            parent=fields["parent"][position],
            error=fields["error"][position],
        )

    return [None if span is None else [step(p, p - span[0]) for p in range(*span)] for span in spans]


def tool_calls_column(table: pa.Table, name: str) -> list[list[ToolCall] | None] | None:
    """A staged tool-call column (``tool_calls``, ``reference_tool_calls``) as each trace's calls, None for a trace
    that logged none; None when the table has no such column."""
    if name not in table.column_names:
        return None
    values, spans = _list_spans(table.column(name))
    fields = _fields(values, ("name", "arguments", "error", "step"))
    calls = [
        ToolCall(name=called, arguments=_arguments(arguments), error=error, step=step)
        for called, arguments, error, step in zip(
            fields["name"], fields["arguments"], fields["error"], fields["step"], strict=True
        )
    ]
    return [None if span is None else calls[span[0] : span[1]] for span in spans]


def _arguments(text: str | None) -> Mapping[str, Any] | str | None:
    """Staged arguments (JSON text) as the source logged them: an object, a string, or the JSON text of anything
    else (a list, a number), which the tool-call metrics compare as text."""
    if text is None:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict | str) else text


def _history_column(table: pa.Table) -> list[tuple[tuple[str, str], ...]]:
    """Each trace's earlier messages as (role, content) pairs; none logged reads as none."""
    values, spans = _list_spans(table.column("history"))
    fields = _fields(values, ("role", "content"))
    messages = list(zip(fields["role"], fields["content"], strict=True))
    return [() if span is None else tuple(messages[span[0] : span[1]]) for span in spans]


def _operations_column(table: pa.Table) -> list[Operations | None] | None:
    """Each trace's latencies, token usage and span errors; None for a trace that logged none of them, and for the
    whole batch when none of their columns was read (or staged: batches staged before they existed)."""
    present = [name for name in OPERATIONS_COLUMNS if name in table.column_names]
    if not present:
        return None
    n = table.num_rows
    latencies = {
        name: table.column(name).to_pylist() if name in present else [None] * n
        for name in ("latency_ms", "retrieval_latency_ms", "generation_latency_ms")
    }
    usage: list[tuple[Usage, ...] | None] = [None] * n
    if "usage" in present:
        values, spans = _list_spans(table.column("usage"))
        fields = _fields(values, ("model", "input_tokens", "output_tokens"))
        calls = [
            Usage(*entry)
            for entry in zip(fields["model"], fields["input_tokens"], fields["output_tokens"], strict=True)
        ]
        usage = [None if span is None else tuple(calls[span[0] : span[1]]) for span in spans]
    errors: list[tuple[SpanError, ...] | None] = [None] * n
    if "errors" in present:
        values, spans = _list_spans(table.column("errors"))
        fields = _fields(values, ("kind", "name", "message"))
        failed = [SpanError(*entry) for entry in zip(fields["kind"], fields["name"], fields["message"], strict=True)]
        errors = [None if span is None else tuple(failed[span[0] : span[1]]) for span in spans]
    rows = zip(
        latencies["latency_ms"],
        latencies["retrieval_latency_ms"],
        latencies["generation_latency_ms"],
        usage,
        errors,
        strict=True,
    )
    return [None if all(value is None for value in row) else Operations(*row) for row in rows]


def _feedback_column(table: pa.Table) -> list[list[Feedback] | None]:
    """Each trace's feedback entries, None for a trace that logged none."""
    values, spans = _list_spans(table.column("feedback"))
    fields = _fields(values, ("name", "value", "label", "source", "comment"))
    entries = [
        Feedback(*entry)
        for entry in zip(
            fields["name"], fields["value"], fields["label"], fields["source"], fields["comment"], strict=True
        )
    ]
    return [None if span is None else entries[span[0] : span[1]] for span in spans]
