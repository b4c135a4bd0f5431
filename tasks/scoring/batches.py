"""Reading staged batches back: the Parquet file of a ``BatchRef`` and its rows as the metrics' input."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numpy.typing import NDArray

from ragpulse.metrics import TraceBatch
from ragpulse.tasks.core.storage import filesystem, storage_errors
from ragpulse.tasks.core.types import BatchRef

__all__ = ["read_staged", "read_trace_batch", "shared_strings"]


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
            table = pq.read_table(handle, columns=columns)
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


def read_trace_batch(table: pa.Table) -> TraceBatch:
    """Staged Arrow rows -> the metrics' input, converting column by column rather than row by row."""
    contexts = table.column("contexts").combine_chunks()
    offsets = contexts.offsets.to_numpy()
    flat = contexts.flatten()
    ids = flat.field("id").to_pylist()
    texts = flat.field("text").to_pylist()
    spans = list(zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True))
    references = [
        [r for r in dict.fromkeys([ref, *(alts or [])]) if r is not None]
        for ref, alts in zip(
            table.column("reference").to_pylist(), table.column("reference_answers").to_pylist(), strict=True
        )
    ]
    return TraceBatch(
        trace_ids=table.column("trace_id").to_pylist(),
        context_ids=[ids[a:b] for a, b in spans],
        context_texts=[texts[a:b] for a, b in spans],
        relevant_ids=[_labels(pairs) for pairs in table.column("relevant_context_ids").to_pylist()],
        relevant_texts=[_labels(pairs) for pairs in table.column("relevant_contexts").to_pylist()],
        answers=table.column("answer").to_pylist(),
        references=references,
        questions=table.column("question").to_pylist(),
        languages=table.column("language").to_pylist(),
    )


def _labels(pairs: list[dict[str, Any]] | None) -> dict[str, float] | None:
    return None if pairs is None else {pair["key"]: pair["gain"] for pair in pairs}
