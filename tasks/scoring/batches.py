"""Reading staged batches back: the Parquet file of a ``BatchRef`` and its rows as the metrics' input."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ragpulse.metrics import TraceBatch
from ragpulse.tasks.core.storage import filesystem, storage_errors
from ragpulse.tasks.core.types import BatchRef

__all__ = ["read_staged", "read_trace_batch"]


def read_staged(batch: BatchRef, storage_options: Mapping[str, Any] | None = None) -> pa.Table:
    fs, path = filesystem(batch.url, storage_options)
    with storage_errors(batch.url):
        if not fs.exists(path):
            raise FileNotFoundError(
                f"staged batch {batch.url} was removed while this run was scoring it; re-run the day: a run stages "
                "again whatever staged batches it finds gone"
            )
        with fs.open(path, "rb") as handle:
            return pq.read_table(handle)


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
