"""Assembling a partition's scores from its scored batches: de-duplicated and filtered, per trace in memory (ids and
values only); the traces' excerpts are read from the staged batches when the partition is published."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ragpulse.tasks.core.types import (
    ConversationScores,
    PartitionScores,
    QuarantinedRecord,
    ScoredBatch,
    StagedPartition,
)
from ragpulse.tasks.ingest.quarantine import write_quarantine_copy
from ragpulse.tasks.scoring.step_scores import keep_steps

__all__ = ["assemble_partition", "build_partition_scores"]


def assemble_partition(
    staged: StagedPartition,
    scored: Sequence[ScoredBatch],
    excluded: Sequence[QuarantinedRecord] = (),
    conversations: ConversationScores | None = None,
) -> PartitionScores:
    """Join the batches in source order, dropping ``excluded`` rows (failed the input suite).

    A repeated trace_id keeps its first record; the rest are quarantined. The retrieval steps of a trace not kept
    are dropped with it.
    """
    trace_ids = _concat([b.trace_ids for b in scored], object)
    files = _concat([b.source_files for b in scored], object)
    lines = _concat([b.source_lines for b in scored], np.int64)
    allowed = _not_excluded(files, lines, excluded)
    candidates = np.flatnonzero(allowed)
    # Hashed, not sorted: np.unique over the ids as fixed-width strings took 2 s at 1M traces. pandas is told they
    # are objects: inferring its Arrow string type took 1.9 s more.
    repeated = pd.Series(trace_ids[candidates], dtype=object).duplicated(keep="first").to_numpy()
    keep = np.zeros(len(trace_ids), dtype=bool)
    keep[candidates[~repeated]] = True
    again = candidates[repeated]
    first_seen = _first_locations(trace_ids[again], trace_ids, files, lines, keep)
    duplicates = [
        QuarantinedRecord(
            files[i],
            int(lines[i]),
            trace_ids[i],
            "trace_id",
            f"duplicate trace_id within the partition, first seen at {first_seen[trace_ids[i]]}",
            "",
        )
        for i in again
    ]
    position = np.cumsum(keep) - 1  # a kept trace's row among the kept ones
    kept_rows = np.where(keep, position, -1).astype(np.int64)
    starts = np.cumsum([0, *(len(b.trace_ids) for b in scored)])
    steps = keep_steps([(b.steps, kept_rows[a:z]) for b, a, z in zip(scored, starts, starts[1:], strict=False)])
    names = list(scored[0].results) if scored else []
    versions = scored[0].versions if scored else {}
    prompt_versions = scored[0].prompt_versions if scored else {}
    return PartitionScores(
        date=staged.date,
        trace_ids=trace_ids[keep],
        values={m: _concat([b.results[m].values for b in scored], np.float64)[keep] for m in names},
        status={m: _concat([b.results[m].status for b in scored], np.int8)[keep] for m in names},
        reasons={m: _concat([b.results[m].reasons for b in scored], object)[keep] for m in names},
        versions=versions,
        quarantined=[*staged.quarantined, *excluded, *duplicates],
        n_records=staged.n_valid + len(staged.quarantined),
        n_files=len(staged.files),
        n_batches=len(staged.batches),
        prompt_versions=prompt_versions,
        judge_model=next((b.judge_model for b in scored if b.judge_model), None)
        or (conversations.judge_model if conversations is not None else None),
        staged_batches=list(staged.batches) if scored else [],  # nothing scored, nothing to excerpt
        staging=staged.counts,
        steps=steps,
        conversations=conversations,
    )


def build_partition_scores(
    staged: StagedPartition,
    scored: Sequence[ScoredBatch],
    judged: Sequence[ScoredBatch],
    excluded: Sequence[QuarantinedRecord],
    quarantine_copy_url: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    conversations: ConversationScores | None = None,
) -> PartitionScores:
    """Join retrieval and judge results per batch, de-duplicate, drop excluded rows, copy the quarantine, add the
    day's conversation scores (the body of the ``assemble_scores`` task)."""
    batches = [plain.merged(judge) for plain, judge in zip(scored, judged, strict=True)] if judged else scored
    scores = assemble_partition(staged, batches, excluded, conversations)
    if quarantine_copy_url is not None:
        write_quarantine_copy(quarantine_copy_url, scores.quarantined, storage_options)
    return scores


def _not_excluded(
    files: NDArray[np.object_], lines: NDArray[np.int64], excluded: Sequence[QuarantinedRecord]
) -> NDArray[np.bool_]:
    """Rows whose (file, line) is not an ``excluded`` record's: lines are compared in bulk, files only at the rows
    whose line is excluded somewhere (a Python test per row took 0.5 s of a 1M-trace day, most days excluding none)."""
    allowed = np.ones(len(files), dtype=bool)
    if not excluded:
        return allowed
    dropped = {(q.source_file, q.line) for q in excluded}
    excluded_lines = np.fromiter({line for _, line in dropped}, np.int64)
    for row in np.flatnonzero(np.isin(lines, excluded_lines)):
        allowed[row] = (files[row], int(lines[row])) not in dropped
    return allowed


def _first_locations(
    repeated_ids: NDArray[np.object_],
    trace_ids: NDArray[np.object_],
    files: NDArray[np.object_],
    lines: NDArray[np.int64],
    keep: NDArray[np.bool_],
) -> dict[str, str]:
    """``file:line`` where each of ``repeated_ids`` was kept, looked up for those ids only."""
    if not len(repeated_ids):
        return {}
    kept = np.flatnonzero(keep)
    found = kept[pd.Series(trace_ids[kept], dtype=object).isin(set(repeated_ids)).to_numpy()]
    return {trace_ids[i]: f"{files[i]}:{lines[i]}" for i in found}


def _concat(arrays: Sequence[NDArray[Any]], dtype: Any) -> NDArray[Any]:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.array([], dtype=dtype)
