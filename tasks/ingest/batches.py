"""Reading staged batches back: the Parquet file of a ``BatchRef`` and its rows as the metrics' input."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numpy.typing import NDArray

from ragpulse.metrics import MetricRequest, TraceBatch
from ragpulse.tasks.core.storage import filesystem, storage_errors
from ragpulse.tasks.core.types import BatchRef

__all__ = ["read_scoring_table", "read_staged", "read_trace_batch", "shared_strings"]

# What each kind of metric reads from a staged batch (a nested leaf is named by its Parquet path). Context texts are
# most of a batch's bytes; ranking metrics read them only for traces labelled by text (``read_scoring_table``).
_LOCATION_COLUMNS = ("trace_id", "source_file", "source_line")
_COLUMNS_READ_BY = {
    "ranking": ("contexts.list.element.id", "relevant_context_ids", "relevant_contexts"),
    "answers": ("answer", "reference", "reference_answers", "language"),
}


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
    trace is labelled by text, since only those are matched to contexts by text."""
    kinds = {request.definition.needs for request in requests}
    columns = [*_LOCATION_COLUMNS, *(column for kind in sorted(kinds) for column in _COLUMNS_READ_BY[kind])]
    table = read_staged(batch, storage_options, columns=columns)
    if "ranking" in kinds and table.column("relevant_contexts").null_count < table.num_rows:
        texts = read_staged(batch, storage_options, columns=["contexts.list.element.text"]).column(0)
        index = table.column_names.index("contexts")
        table = table.set_column(index, "contexts", _zip_contexts(table.column(index), texts))
    return table


def _zip_contexts(ids: pa.ChunkedArray, texts: pa.ChunkedArray) -> pa.Array:
    """The two one-field context columns of one batch (same offsets) as one list of {id, text} structs."""
    ids_list, texts_list = ids.combine_chunks(), texts.combine_chunks()
    fields = [ids_list.values.field(0), texts_list.values.field(0)]
    values = pa.StructArray.from_arrays(fields, names=["id", "text"])
    return pa.ListArray.from_arrays(ids_list.offsets, values, mask=ids_list.is_null())


def read_trace_batch(table: pa.Table) -> TraceBatch:
    """Staged Arrow rows -> the metrics' input, converting column by column rather than row by row. Columns left
    out (``read_scoring_table``) read as absent: no context texts, answers, references, questions or languages."""
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
