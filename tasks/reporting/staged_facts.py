"""What the scored traces of a day carry that metrics need (contexts, relevance labels, reference answers, agent
steps, tool calls), counted in their staged batches: the run summary says from these, not by guessing, why a day
scored nothing and which metrics would apply."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ragpulse.tasks.core.types import BatchRef
from ragpulse.tasks.ingest.batches import read_staged
from ragpulse.tasks.ingest.records import STAGED_SCHEMA

__all__ = ["StagedFacts", "count_staged", "facts_of"]

# A nested leaf is read by its Parquet path: the list lengths without the texts, which are most of a batch's bytes.
_BASE = {
    "contexts": "contexts.list.element.id",
    "answer": "answer",
    "reference": "reference",
    "reference_answers": "reference_answers",
    "relevant_context_ids": "relevant_context_ids",
    "relevant_contexts": "relevant_contexts",
}
# The agent fields of the canonical format, read once staging writes them (docs/traces.md).
_AGENT = {"steps": "steps.list.element.kind", "tool_calls": "tool_calls.list.element.name"}


@dataclass(frozen=True)
class StagedFacts:
    """Counts over the scored traces (one per trace id). ``with_steps`` / ``with_tool_calls`` are None when the
    staged batches have no such column; a trace that logged an empty list of steps counts as having steps (it said
    it retrieved nothing, which ``retrieval_steps`` scores 0)."""

    n_traces: int
    with_contexts: int
    with_answers: int
    with_labels: int
    with_references: int
    with_steps: int | None = None
    with_tool_calls: int | None = None


def count_staged(
    batches: Sequence[BatchRef], trace_ids: Iterable[str], storage_options: Mapping[str, Any] | None = None
) -> StagedFacts:
    """Read the few columns the facts need from each staged batch, keep the rows of ``trace_ids`` (the traces that
    were scored: repeated ids and excluded traces are not) and count. Each batch is reduced to a flag per fact as it
    is read, so the day is held as ids and flags, not as its documents' ids."""
    agent = [name for name in _AGENT if name in STAGED_SCHEMA.names]
    columns = ["trace_id", *_BASE.values(), *(_AGENT[name] for name in agent)]
    flags = [_flags(read_staged(batch, storage_options, columns=columns), agent) for batch in batches]
    return _count(pa.concat_tables(flags) if flags else None, list(trace_ids), agent)


def facts_of(table: pa.Table | None, trace_ids: Sequence[str], agent: Sequence[str] = ()) -> StagedFacts:
    """The counts over ``table``'s rows of ``trace_ids``, each id counted once (its first row)."""
    return _count(None if table is None else _flags(table, agent), trace_ids, agent)


def _flags(table: pa.Table, agent: Sequence[str]) -> pa.Table:
    """Per staged row: its trace id and whether it carries each fact."""

    def given(column: str) -> pa.Array:
        return pc.is_valid(table.column(column))

    def non_empty(column: str) -> pa.Array:
        return pc.greater(pc.fill_null(pc.list_value_length(table.column(column)), 0), 0)

    def text(column: str) -> pa.Array:
        return pc.greater(pc.fill_null(pc.utf8_length(table.column(column)), 0), 0)

    flags = {
        "trace_id": table.column("trace_id"),
        "contexts": non_empty("contexts"),
        "answer": text("answer"),
        # A label list given empty says "nothing here is relevant": a label all the same.
        "labels": pc.or_(given("relevant_context_ids"), given("relevant_contexts")),
        "references": pc.or_(text("reference"), non_empty("reference_answers")),
    }
    flags.update({name: given(name) for name in agent})
    return pa.table(flags)


def _count(flags: pa.Table | None, trace_ids: Sequence[str], agent: Sequence[str]) -> StagedFacts:
    if flags is None or not len(trace_ids):
        return StagedFacts(0, 0, 0, 0, 0, *(0 if name in agent else None for name in _AGENT))
    # In Arrow: numpy's isin over object arrays of ids compares every pair (154 s of a 100k-trace day's run).
    positions = pa.table({"trace_id": flags.column("trace_id"), "row": pa.array(np.arange(flags.num_rows))})
    first = positions.group_by("trace_id", use_threads=False).aggregate([("row", "min")])
    kept = first.filter(pc.is_in(first.column("trace_id"), value_set=pa.array(trace_ids, pa.string())))
    rows = flags.take(pa.array(np.sort(kept.column("row_min").to_numpy()), pa.int64()))

    def counted(column: str) -> int:
        return int(pc.sum(rows.column(column).cast(pa.int64())).as_py() or 0)

    return StagedFacts(
        n_traces=rows.num_rows,
        with_contexts=counted("contexts"),
        with_answers=counted("answer"),
        with_labels=counted("labels"),
        with_references=counted("references"),
        with_steps=counted("steps") if "steps" in agent else None,
        with_tool_calls=counted("tool_calls") if "tool_calls" in agent else None,
    )
