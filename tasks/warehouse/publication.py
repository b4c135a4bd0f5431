"""The tables one run publishes for a partition, the excerpts of its traces, and a copy of its quarantine."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import posixpath
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ragpulse.metrics import Status
from ragpulse.tasks.core.storage import filesystem, storage_errors
from ragpulse.tasks.core.types import (
    TRACE_ROWS_SCHEMA,
    PartitionScores,
    QuarantinedRecord,
    RunInfo,
    StagedPartition,
    StagingCounts,
)
from ragpulse.tasks.warehouse import QUARANTINE_SCHEMA, RUNS_SCHEMA, SCORES_SCHEMA, TRACES_SCHEMA, Publication
from ragpulse.tasks.warehouse._schema import STAGING_RUN_COLUMNS

__all__ = [
    "CONTEXT_EXCERPT_CHARS",
    "EXCERPT_CHARS",
    "MAX_CHUNK_BYTES",
    "build_publication",
    "read_trace_excerpts",
    "take_in_chunks",
    "write_quarantine_copy",
]

_STATUS_LABELS = np.array([status.label for status in sorted(Status)], dtype=object)

# The traces table keeps question and answer cut to EXCERPT_CHARS characters and each context text to
# CONTEXT_EXCERPT_CHARS: enough to read a trace behind a score and to recognise its passages. Contexts are most of
# a trace's bytes (at 1,000 characters each the table was 4.3 KB a trace and 9x the scores' size on DuckDB, see
# bench/README.md). The full trace stays in object storage at source_file:source_line.
EXCERPT_CHARS = 1_000
CONTEXT_EXCERPT_CHARS = 240


def _judge_of(scores: PartitionScores, metric: str) -> str | None:
    """The judge model behind a metric's scores: only metrics with a prompt were judged by it."""
    return scores.judge_model if metric in scores.prompt_versions else None


def _total_cost(usage: Mapping[str, Mapping[str, Any]] | None) -> float | None:
    """Estimated USD of the run's judge calls; None without calls or when any model is unpriced."""
    costs = [u.get("estimated_cost_usd") for u in (usage or {}).values()]
    return None if not costs or any(c is None for c in costs) else float(sum(costs))


def _staging_columns(counts: StagingCounts | None) -> dict[str, int | None]:
    """Where the run's records went, as runs columns; NULL for scores assembled without staging counts."""
    if counts is None:
        return dict.fromkeys(STAGING_RUN_COLUMNS)
    return {
        "n_records_quarantined": counts.records_quarantined,
        "n_traces_read": counts.traces_read,
        "n_traces_quarantined": counts.traces_quarantined,
        "n_staged": counts.staged,
        "n_other_days": counts.other_days,
        "n_spans_quarantined": counts.spans_quarantined,
        "n_duplicate_spans": counts.duplicate_spans,
    }


def build_publication(
    scores: PartitionScores,
    run: RunInfo,
    metrics: Sequence[str],
    *,
    n_batches_cached: int,
    judge_usage: Mapping[str, Mapping[str, Any]] | None = None,
) -> Publication:
    """The tables one run publishes. Judge-made scores carry the judge model and prompt version, so a change
    of judge is never mistaken for a change of quality; the run row carries the judge's usage and cost."""
    now = dt.datetime.now(dt.UTC)
    n = len(scores.trace_ids)
    tables = []
    for metric in metrics if n else ():  # a day without valid traces publishes its run row and quarantine
        ok = scores.status[metric] == Status.OK
        tables.append(
            pa.table(
                {
                    "partition_date": pa.array([scores.date] * n, pa.date32()),
                    "trace_id": pa.array(scores.trace_ids, pa.string()),
                    "metric": pa.array([metric] * n, pa.string()),
                    "value": pa.array(scores.values[metric], pa.float64(), mask=~ok),
                    "status": pa.array(_STATUS_LABELS[scores.status[metric]], pa.string()),
                    "reason": pa.array(scores.reasons[metric], pa.string()),
                    "metric_version": pa.array([scores.versions[metric]] * n, pa.string()),
                    "run_id": pa.array([run.run_id] * n, pa.string()),
                    "computed_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
                    "judge_model": pa.array([_judge_of(scores, metric)] * n, pa.string()),
                    "prompt_version": pa.array([scores.prompt_versions.get(metric)] * n, pa.string()),
                },
                schema=SCORES_SCHEMA,
            )
        )
    score_table = pa.concat_tables(tables) if tables else SCORES_SCHEMA.empty_table()
    rows = scores.traces.num_rows
    traces = (
        scores.traces.append_column("partition_date", pa.array([scores.date] * rows, pa.date32()))
        .append_column("run_id", pa.array([run.run_id] * rows, pa.string()))
        .select(TRACES_SCHEMA.names)
        .cast(TRACES_SCHEMA)
    )
    quarantine = pa.Table.from_pylist(
        [
            {
                "partition_date": scores.date,
                "run_id": run.run_id,
                "source_file": q.source_file,
                "line": q.line,
                "trace_id": q.trace_id,
                "field": q.field,
                "reason": q.reason,
                "raw": q.raw,
                "quarantined_at": now,
            }
            for q in scores.quarantined
        ],
        schema=QUARANTINE_SCHEMA,
    )
    run_row = pa.Table.from_pylist(
        [
            {
                "run_id": run.run_id,
                "partition_date": scores.date,
                "source": run.source,
                "config_hash": run.config_hash,
                "config": json.dumps(run.config, sort_keys=True),
                "metrics": ",".join(metrics),
                "n_files": scores.n_files,
                "n_records": scores.records_read,
                "n_traces": n,
                "n_quarantined": len(scores.quarantined),
                "n_batches": scores.n_batches,
                "n_batches_cached": n_batches_cached,
                "n_scores": score_table.num_rows,
                "started_at": run.started_at,
                "finished_at": now,
                "judge_model": scores.judge_model,
                "judge_usage": json.dumps(judge_usage, sort_keys=True) if judge_usage else None,
                "estimated_cost_usd": _total_cost(judge_usage),
                **_staging_columns(scores.staging),
            }
        ],
        schema=RUNS_SCHEMA,
    )
    return Publication(scores.date, list(metrics), score_table, quarantine, run_row, traces=traces)


def read_trace_excerpts(
    staged: StagedPartition, scores: PartitionScores, storage_options: Mapping[str, Any] | None = None
) -> pa.Table:
    """Excerpts of the traces ``scores`` kept, row for row with ``scores.trace_ids`` (TRACE_ROWS_SCHEMA).

    The staged batches are read one at a time, only the columns needed, and cut to excerpts before the next.
    Rows the partition dropped (repeated trace ids, traces that failed the input suite) are in its quarantine
    list, so they are recognised by their source location.
    """
    dropped = {(q.source_file, q.line) for q in scores.quarantined}
    dropped_lines = pa.array(sorted({line for _, line in dropped}), pa.int64())
    parts = []
    for ref in staged.batches:
        fs, path = filesystem(ref.url, storage_options)
        with storage_errors(ref.url):
            rows = pq.read_table(path, filesystem=fs, columns=TRACE_ROWS_SCHEMA.names)
        suspects = pc.is_in(rows["source_line"], value_set=dropped_lines)
        if pc.any(suspects).as_py():
            locations = zip(rows["source_file"].to_pylist(), rows["source_line"].to_pylist(), strict=True)
            rows = rows.filter(pa.array([location not in dropped for location in locations]))
        parts.append(_excerpts(rows))
    excerpts = pa.concat_tables(parts) if parts else TRACE_ROWS_SCHEMA.empty_table()
    positions = pc.index_in(pa.array(scores.trace_ids, pa.string()), value_set=excerpts["trace_id"])
    if positions.null_count:
        raise ValueError(
            f"dt={scores.date}: {positions.null_count} scored trace(s) are missing from the staged batches, "
            "which do not belong to these scores"
        )
    return take_in_chunks(excerpts, positions)


MAX_CHUNK_BYTES = 2**30
"""Most string bytes one output chunk of :func:`take_in_chunks` holds: Arrow's ``string`` offsets are 32-bit."""


def take_in_chunks(table: pa.Table, positions: pa.Array, max_chunk_bytes: int = MAX_CHUNK_BYTES) -> pa.Table:
    """``table.take(positions)`` as a table of chunks of at most ``max_chunk_bytes`` of string data each.

    Arrow's take over a chunked column first concatenates its chunks into one array, and a day's excerpts pass
    2 GiB of text near a million traces (``ArrowInvalid: offset overflow``). So the positions are cut into slices
    by the cumulative size of the rows they pick; each slice takes from every source chunk on its own, joins the
    pieces (under the bound) and puts them back in the order asked."""
    batches = table.to_batches()
    wanted = np.asarray(positions, dtype=np.int64)
    if len(batches) <= 1 or not len(wanted):
        return table.take(positions)
    starts = np.cumsum([0, *(batch.num_rows for batch in batches)])
    strings = [name for name, kind in zip(table.column_names, table.schema.types, strict=True) if kind == pa.string()]
    row_bytes = sum(
        (pc.fill_null(pc.binary_length(table[name]), 0).to_numpy().astype(np.int64) for name in strings),
        start=np.zeros(table.num_rows, dtype=np.int64),
    )
    cumulative = np.cumsum(row_bytes[wanted])
    cuts = np.searchsorted(cumulative, np.arange(max_chunk_bytes, cumulative[-1], max_chunk_bytes))
    parts = []
    # A slice holds at most max_chunk_bytes plus one row (records are at most 16 MiB): under 2 GiB.
    for first, last in pairwise([0, *cuts.tolist(), len(wanted)]):
        rows = wanted[first:last]
        source = np.searchsorted(starts, rows, side="right") - 1
        order = np.argsort(source, kind="stable")
        pieces = [
            batches[chunk].take(pa.array(rows[order][source[order] == chunk] - starts[chunk]))
            for chunk in np.unique(source)
        ]
        grouped = pa.Table.from_batches(pieces, schema=table.schema).combine_chunks()
        parts.append(grouped.take(pa.array(np.argsort(order, kind="stable"))))
    return pa.concat_tables(parts)


def _excerpts(rows: pa.Table) -> pa.Table:
    """Staged rows as traces rows: texts cut, contexts as JSON text. DuckDB builds the JSON column by column;
    a json.dumps per trace took 3.6 s of 5.5 s at 100k traces."""
    with duckdb.connect() as con:
        con.register("staged_rows", rows)
        excerpts = con.sql(
            f"""
            SELECT trace_id, timestamp,
                   left(question, {EXCERPT_CHARS}) AS question,
                   left(answer, {EXCERPT_CHARS}) AS answer,
                   to_json(list_transform(contexts, lambda c: {{
                       'id': c.id, 'text': left(c.text, {CONTEXT_EXCERPT_CHARS}), 'score': c.score
                   }}))::VARCHAR AS contexts,
                   metadata, source_file, source_line, language
            FROM staged_rows
            """
        ).to_arrow_table()
    return excerpts.cast(TRACE_ROWS_SCHEMA)


def write_quarantine_copy(
    url: str, records: Sequence[QuarantinedRecord], storage_options: Mapping[str, Any] | None = None
) -> None:
    """The partition's quarantine as JSON lines at ``url``, for whoever triages bad records."""
    fs, path = filesystem(url, storage_options)
    lines = "".join(json.dumps(dataclasses.asdict(record)) + "\n" for record in records)
    with storage_errors(url):
        fs.makedirs(posixpath.dirname(path), exist_ok=True)
        fs.pipe_file(path, lines.encode())
