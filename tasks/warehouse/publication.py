"""The tables one run publishes for a partition and the excerpts of its traces."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ragpulse.metrics import MetricResult, Status
from ragpulse.tasks.core.duckdb_limits import connect_duckdb
from ragpulse.tasks.core.types import (
    TRACE_ROWS_SCHEMA,
    BatchRef,
    PartitionScores,
    RunInfo,
    StagingCounts,
)
from ragpulse.tasks.ingest.batches import read_staged
from ragpulse.tasks.ingest.records import STAGED_SCHEMA
from ragpulse.tasks.warehouse._schema import PUBLISHED_AT, STAGING_RUN_COLUMNS
from ragpulse.tasks.warehouse.factory import open_warehouse
from ragpulse.tasks.warehouse.protocol import Publication
from ragpulse.tasks.warehouse.rows import RowSource
from ragpulse.tasks.warehouse.tables import (
    CONVERSATION_SCORES_SCHEMA,
    QUARANTINE_SCHEMA,
    RUNS_SCHEMA,
    SCORES_SCHEMA,
    STEP_SCORES_SCHEMA,
    STEPS_SCHEMA,
    TRACES_SCHEMA,
)

__all__ = [
    "CONTEXT_EXCERPT_CHARS",
    "EXCERPT_CHARS",
    "SCORE_CHUNK_TRACES",
    "STEP_ROWS_SCHEMA",
    "build_publication",
    "content_key_of",
    "published_run",
    "retrieval_steps",
    "trace_excerpts",
]

_STATUS_LABELS = np.array([status.label for status in sorted(Status)], dtype=object)

# The traces table keeps question and answer cut to EXCERPT_CHARS characters and each context text to
# CONTEXT_EXCERPT_CHARS: enough to read a trace behind a score and to recognise its passages. Contexts are most of
# a trace's bytes (at 1,000 characters each the table was 4.3 KB a trace and 9x the scores' size on DuckDB, see
# bench/README.md). The full trace stays in object storage at source_file:source_line.
EXCERPT_CHARS = 1_000
CONTEXT_EXCERPT_CHARS = 240


def _total_cost(usage: Mapping[str, Mapping[str, Any]] | None) -> float | None:
    """Estimated USD of the run's judge calls; None without calls or when any model is unpriced."""
    costs: list[float | None] = [u.get("estimated_cost_usd") for u in (usage or {}).values()]
    priced = [cost for cost in costs if cost is not None]
    return float(sum(priced)) if costs and len(priced) == len(costs) else None


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


SCORE_CHUNK_TRACES = 5_000
"""Traces per record batch of score rows a publication yields (the default staging batch): chunks stay small."""

# The steps rows of the staged traces, before the partition date and run id are added.
STEP_ROWS_SCHEMA = pa.schema([f for f in STEPS_SCHEMA if f.name not in ("partition_date", "run_id")])


def build_publication(
    scores: PartitionScores,
    run: RunInfo,
    metrics: Sequence[str],
    *,
    n_batches_cached: int,
    judge_usage: Mapping[str, Mapping[str, Any]] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    content_key: str | None = None,
) -> Publication:
    """The tables one run publishes. Judge-made scores carry the judge model and prompt version, so a change
    of judge is never mistaken for a change of quality; the run row carries the judge's usage and cost.

    Score rows, step score rows, trace excerpts and retrieval steps are row sources, produced a chunk at a time
    as the warehouse reads them (excerpts and steps from the staged batches, with ``storage_options``): a day is
    never whole in memory, and nothing is read before the publish.
    ``content_key`` (see ``content_key_of``) is stamped on the run row, so that a re-run can recognise it."""
    now = dt.datetime.now(dt.UTC)
    n = len(scores.trace_ids)
    published = list(metrics) if n else []  # a day without valid traces publishes its run row and quarantine
    score_rows = RowSource(
        SCORES_SCHEMA,
        n * len(published),
        lambda: _score_batches(scores, published, run.run_id, now),
        compact=lambda names: _score_columns(scores, published, names),
    )
    excerpts = trace_excerpts(scores, storage_options)
    stamp = {"partition_date": pa.scalar(scores.date, pa.date32()), "run_id": pa.scalar(run.run_id, pa.string())}
    traces = RowSource(
        TRACES_SCHEMA, excerpts.num_rows, lambda: (_stamped(b, stamp, TRACES_SCHEMA) for b in excerpts.batches())
    )
    step_rows = retrieval_steps(scores, storage_options)
    steps = RowSource(
        STEPS_SCHEMA,
        lambda: step_rows.num_rows,
        lambda: (_stamped(b, stamp, STEPS_SCHEMA) for b in step_rows.batches()),
    )
    step_scores = RowSource(
        STEP_SCORES_SCHEMA,
        sum(len(unit.trace_ids) * len(unit.results) for unit in scores.steps),
        lambda: _step_score_batches(scores, run.run_id, now),
    )
    # The step and conversation metrics' rows are replaced like the turns': a metric the run's list misses would
    # otherwise add its rows again on every re-run.
    unit_metrics = {m for unit in scores.steps for m in unit.results}
    unit_metrics |= set(scores.conversations.results if scores.conversations is not None else ())
    replaced = [*metrics, *sorted(unit_metrics - set(metrics))]
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
                "n_scores": score_rows.num_rows,
                "started_at": run.started_at,
                "finished_at": now,
                "judge_model": scores.judge_model,
                "judge_usage": json.dumps(judge_usage, sort_keys=True) if judge_usage else None,
                "estimated_cost_usd": _total_cost(judge_usage),
                **_staging_columns(scores.staging),
                "content_key": content_key,
            }
        ],
        schema=RUNS_SCHEMA,
    )
    return Publication(
        scores.date,
        replaced,
        score_rows,
        quarantine,
        run_row,
        traces=traces,
        steps=steps,
        step_scores=step_scores,
        conversation_scores=_conversation_rows(scores, run.run_id, now),
    )


def _score_batches(
    scores: PartitionScores, metrics: Sequence[str], run_id: str, now: dt.datetime
) -> Iterator[pa.RecordBatch]:
    """The long score rows: one record batch per metric and chunk of SCORE_CHUNK_TRACES traces."""
    n = len(scores.trace_ids)
    for start in range(0, n, SCORE_CHUNK_TRACES):
        rows = slice(start, min(start + SCORE_CHUNK_TRACES, n))
        size = rows.stop - rows.start
        trace_ids = pa.array(scores.trace_ids[rows], pa.string())
        for metric in metrics:
            constant = _scored_constants(
                scores.date, metric, scores.versions, scores.prompt_versions, scores.judge_model, run_id, now
            )
            result = MetricResult(scores.values[metric], scores.status[metric], scores.reasons[metric])
            columns = {
                **{name: _repeat(value, size) for name, value in constant.items()},
                "trace_id": trace_ids,
                **_result_columns(result, rows),
            }
            yield pa.RecordBatch.from_arrays([columns[name] for name in SCORES_SCHEMA.names], schema=SCORES_SCHEMA)


def _result_columns(result: MetricResult, rows: slice | None = None) -> dict[str, pa.Array]:
    """A metric's value, status and reason columns (of ``rows``, or every row)."""
    part = slice(None) if rows is None else rows
    status = result.status[part]
    return {
        "value": pa.array(result.values[part], pa.float64(), mask=status != Status.OK),
        "status": pa.array(_STATUS_LABELS[status], pa.string()),
        "reason": pa.array(result.reasons[part], pa.string()),
    }


def _scored_constants(
    day: dt.date, metric: str, versions: Mapping[str, str], prompt_versions: Mapping[str, str],
    judge_model: str | None, run_id: str, now: dt.datetime,
) -> dict[str, pa.Scalar]:  # fmt: skip
    """The columns of a metric's rows that hold one value: judge-made ones name the judge and the prompt."""
    return {
        "partition_date": pa.scalar(day, pa.date32()),
        "metric": pa.scalar(metric, pa.string()),
        "metric_version": pa.scalar(versions[metric], pa.string()),
        "run_id": pa.scalar(run_id, pa.string()),
        "computed_at": pa.scalar(now, pa.timestamp("us", tz="UTC")),
        "judge_model": pa.scalar(judge_model if metric in prompt_versions else None, pa.string()),
        "prompt_version": pa.scalar(prompt_versions.get(metric), pa.string()),
    }


def _step_score_batches(scores: PartitionScores, run_id: str, now: dt.datetime) -> Iterator[pa.RecordBatch]:
    """The step score rows: one record batch per (against, metric) and chunk of SCORE_CHUNK_TRACES steps."""
    for unit in scores.steps:
        n = len(unit.trace_ids)
        for start in range(0, n, SCORE_CHUNK_TRACES):
            rows = slice(start, min(start + SCORE_CHUNK_TRACES, n))
            size = rows.stop - rows.start
            identity = {
                "trace_id": pa.array(unit.trace_ids[rows], pa.string()),
                "step_index": pa.array(unit.step_index[rows], pa.int64()),
                "step_id": pa.array(unit.step_ids[rows], pa.string()),
                "against": _repeat(pa.scalar(unit.against, pa.string()), size),
            }
            for metric, result in unit.results.items():
                constant = _scored_constants(
                    scores.date, metric, unit.versions, unit.prompt_versions, scores.judge_model, run_id, now
                )
                columns = {
                    **{name: _repeat(value, size) for name, value in constant.items()},
                    **identity,
                    **_result_columns(result, rows),
                }
                yield pa.RecordBatch.from_arrays(
                    [columns[name] for name in STEP_SCORES_SCHEMA.names], schema=STEP_SCORES_SCHEMA
                )


def _conversation_rows(scores: PartitionScores, run_id: str, now: dt.datetime) -> pa.Table:
    """The conversation score rows, metric by metric: a day's conversations are few, so one table."""
    unit = scores.conversations
    if unit is None:
        return CONVERSATION_SCORES_SCHEMA.empty_table()
    n = len(unit.conversation_ids)
    identity = {
        "conversation_id": pa.array(unit.conversation_ids, pa.string()),
        "n_turns": pa.array(unit.n_turns, pa.int64()),
        "first_trace_id": pa.array(unit.first_trace_ids, pa.string()),
        "last_trace_id": pa.array(unit.last_trace_ids, pa.string()),
    }
    judge = unit.judge_model or scores.judge_model
    parts = []
    for metric, result in unit.results.items():
        constant = _scored_constants(scores.date, metric, unit.versions, unit.prompt_versions, judge, run_id, now)
        columns = {
            **{name: _repeat(value, n) for name, value in constant.items()},
            **identity,
            **_result_columns(result),
        }
        parts.append(pa.table([columns[name] for name in CONVERSATION_SCORES_SCHEMA.names],
                              schema=CONVERSATION_SCORES_SCHEMA))  # fmt: skip
    return pa.concat_tables(parts) if parts else CONVERSATION_SCORES_SCHEMA.empty_table()


def _score_columns(scores: PartitionScores, metrics: Sequence[str], names: Sequence[str]) -> pa.Table:
    """Columns of the same score rows as ``_score_batches`` (metric by metric), built from the per-trace arrays:
    the text columns as dictionaries whose codes come from positions, so no string is repeated per row."""
    n, m = len(scores.trace_ids), len(metrics)

    def coded(codes: np.ndarray, dictionary: pa.Array) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), dictionary)

    def joined(per_metric: Mapping[str, np.ndarray], dtype: Any) -> np.ndarray:
        return np.concatenate([per_metric[k] for k in metrics]) if m else np.zeros(0, dtype)

    status = joined(scores.status, np.int8)
    builders = {
        "partition_date": lambda: coded(np.zeros(n * m), pa.array([scores.date], pa.date32())),
        "trace_id": lambda: coded(np.tile(np.arange(n), m), pa.array(scores.trace_ids, pa.string())),
        "metric": lambda: coded(np.repeat(np.arange(m), n), pa.array(metrics, pa.string())),
        "value": lambda: pa.array(joined(scores.values, np.float64), pa.float64(), mask=status != Status.OK),
        "status": lambda: coded(status, pa.array(_STATUS_LABELS, pa.string())),
        "reason": lambda: pa.array(joined(scores.reasons, object), pa.string()).dictionary_encode(),
    }
    return pa.table({name: builders[name]() for name in names})


def _repeat(value: pa.Scalar, size: int) -> pa.Array:
    return pa.repeat(value, size) if value.is_valid else pa.nulls(size, value.type)


def _stamped(batch: pa.RecordBatch, stamp: Mapping[str, pa.Scalar], schema: pa.Schema) -> pa.RecordBatch:
    """A batch of excerpt rows as rows of a table of ``schema``: the partition date and run id added."""
    columns = {name: batch.column(name) for name in batch.schema.names}
    columns.update({name: _repeat(value, batch.num_rows) for name, value in stamp.items()})
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


def content_key_of(scores: PartitionScores, metrics: Sequence[str], run: RunInfo, *extra: object) -> str:
    """A digest of everything a publication of ``scores`` holds but the run's own identity (run id, times): the
    metrics and the configuration hash behind them, the staged batches the excerpts come from, the quarantine, the
    counts and every score. Two runs with the same key publish the same rows; ``extra`` adds what else decides
    whether they may (the quality settings and the output suite)."""
    hasher = hashlib.sha256()

    def add(*parts: object) -> None:
        hasher.update(json.dumps(parts, sort_keys=True, default=str).encode())

    def add_strings(values: Any) -> None:
        strings = pa.array(values, pa.string())
        for buffer in strings.buffers():
            hasher.update(b"" if buffer is None else memoryview(buffer))

    add(scores.date, list(metrics), run.config_hash, extra, scores.versions, scores.prompt_versions)
    add(scores.judge_model, scores.staged_batches, scores.staging, scores.n_records, scores.n_files, scores.n_batches)
    add([dataclasses.astuple(record) for record in scores.quarantined])

    def add_result(result: MetricResult) -> None:
        hasher.update(np.ascontiguousarray(result.values).tobytes())
        hasher.update(np.ascontiguousarray(result.status).tobytes())
        add_strings(result.reasons)

    add_strings(scores.trace_ids)
    for metric in metrics if len(scores.trace_ids) else ():
        add_result(MetricResult(scores.values[metric], scores.status[metric], scores.reasons[metric]))
    # The steps' and conversations' scores: their rows come from here (the steps' own rows from the staged batches).
    for unit in scores.steps:
        add("steps", unit.against, list(unit.results), unit.versions, unit.prompt_versions)
        add_strings(unit.trace_ids)
        add_strings(unit.step_ids)
        hasher.update(np.ascontiguousarray(unit.step_index, np.int64).tobytes())
        for result in unit.results.values():
            add_result(result)
    if scores.conversations is not None:
        conversations = scores.conversations
        add("conversations", list(conversations.results), conversations.versions, conversations.prompt_versions)
        add(conversations.judge_model)
        for strings in (conversations.conversation_ids, conversations.first_trace_ids, conversations.last_trace_ids):
            add_strings(strings)
        hasher.update(np.ascontiguousarray(conversations.n_turns, np.int64).tobytes())
        for result in conversations.results.values():
            add_result(result)
    return hasher.hexdigest()[:32]


def published_run(warehouse_url: str, date: dt.date, key: str) -> str | None:
    """The run whose publication of ``date`` stands in the warehouse with content ``key``: the newest published
    run of the date, if its key is ``key``; else None (never published, changed since, or before schema v7)."""
    runs = open_warehouse(warehouse_url).read(
        "runs", start=date, end=date, columns=["run_id", "content_key", PUBLISHED_AT]
    )
    if not runs.num_rows:
        return None
    newest = max(runs.to_pylist(), key=lambda row: row[PUBLISHED_AT])
    return newest["run_id"] if newest["content_key"] == key else None


def trace_excerpts(scores: PartitionScores, storage_options: Mapping[str, Any] | None = None) -> RowSource:
    """Excerpts of the traces ``scores`` kept (TRACE_ROWS_SCHEMA), read from its staged batches one at a time.

    Rows the partition dropped (repeated trace ids, traces that failed the input suite) are in its quarantine
    list, so they are recognised by their source location. Rows come in staged order. Staged batches that keep
    another number of traces than were scored (batches of another partition) fail the read, and so the publish.
    Scores assembled without staged batches (built by hand) have no excerpts."""
    if not scores.staged_batches:
        return RowSource.empty(TRACE_ROWS_SCHEMA)
    return RowSource(TRACE_ROWS_SCHEMA, len(scores.trace_ids), lambda: _excerpt_batches(scores, storage_options))


def _excerpt_batches(scores: PartitionScores, storage_options: Mapping[str, Any] | None) -> Iterator[pa.RecordBatch]:
    # One in-memory database for the day's batches: opening one took a fifth of a batch's excerpt time.
    with connect_duckdb() as con:
        for rows in _kept_rows(scores, _reader(storage_options, TRACE_ROWS_SCHEMA.names)):
            yield from _excerpts(con, rows).to_batches()


def retrieval_steps(scores: PartitionScores, storage_options: Mapping[str, Any] | None = None) -> RowSource:
    """The retrieval steps of the traces ``scores`` kept (STEP_ROWS_SCHEMA), one row per step in staged order then
    step order, cut to excerpts as the traces are; read from the staged batches one at a time like
    ``trace_excerpts``, so a dropped trace has no steps. Counted when first asked, from the steps' kinds alone."""
    if not scores.staged_batches:
        return RowSource.empty(STEP_ROWS_SCHEMA)

    def count() -> int:
        kinds = _reader(storage_options, ["trace_id", "steps.list.element.kind"])
        return sum(pc.sum(pc.list_value_length(rows["steps"])).as_py() or 0 for rows in _kept_rows(scores, kinds))

    def steps() -> Iterator[pa.RecordBatch]:
        with connect_duckdb() as con:
            for rows in _kept_rows(scores, _reader(storage_options, ["trace_id", "steps"])):
                yield from _steps(con, rows).to_batches()

    return RowSource(STEP_ROWS_SCHEMA, count, steps)


def _reader(storage_options: Mapping[str, Any] | None, columns: Sequence[str]) -> Callable[[BatchRef], pa.Table]:
    """Reads ``columns`` (and the source location) of a staged batch. A column that batches staged before it
    existed lack (``conversation_id``, ``steps``: schema v10) reads as NULL; a nested column path reads as its
    top-level column holding only that field."""
    wanted = list(dict.fromkeys(["source_file", "source_line", *columns]))

    def read(ref: BatchRef) -> pa.Table:
        rows = read_staged(ref, storage_options, columns=wanted)
        for name in dict.fromkeys(column.split(".")[0] for column in wanted):
            if name not in rows.column_names:
                rows = rows.append_column(
                    STAGED_SCHEMA.field(name), pa.nulls(rows.num_rows, STAGED_SCHEMA.field(name).type)
                )
        return rows

    return read


def _kept_rows(scores: PartitionScores, read: Callable[[BatchRef], pa.Table]) -> Iterator[pa.Table]:
    """The staged batches' rows of the traces ``scores`` kept, a batch at a time; fails when they are not the
    scored traces' number (batches of another partition)."""
    dropped = {(q.source_file, q.line) for q in scores.quarantined}
    dropped_lines = pa.array(sorted({line for _, line in dropped}), pa.int64())
    expected, produced = len(scores.trace_ids), 0
    for ref in scores.staged_batches:
        rows = read(ref)
        suspects = pc.is_in(rows["source_line"], value_set=dropped_lines)
        if pc.any(suspects).as_py():
            locations = zip(rows["source_file"].to_pylist(), rows["source_line"].to_pylist(), strict=True)
            rows = rows.filter(pa.array([location not in dropped for location in locations]))
        produced += rows.num_rows
        if produced > expected:
            break
        yield rows
    if produced != expected:
        raise ValueError(
            f"dt={scores.date}: the staged batches hold {'more than ' * (produced > expected)}{produced} kept traces "
            f"where {expected} were scored: they do not belong to these scores"
        )


def _excerpts(con: duckdb.DuckDBPyConnection, rows: pa.Table) -> pa.Table:
    """Staged rows as traces rows: texts cut, contexts as JSON text. DuckDB builds the JSON column by column;
    a json.dumps per trace took 3.6 s of 5.5 s at 100k traces."""
    con.register("staged_rows", rows)
    try:
        excerpts = con.sql(
            f"""
            SELECT trace_id, timestamp,
                   left(question, {EXCERPT_CHARS}) AS question,
                   left(answer, {EXCERPT_CHARS}) AS answer,
                   {_contexts_json("contexts")} AS contexts,
                   metadata, source_file, source_line, language, conversation_id
            FROM staged_rows
            """
        ).to_arrow_table()
    finally:
        con.unregister("staged_rows")
    return excerpts.cast(TRACE_ROWS_SCHEMA)


def _contexts_json(column: str) -> str:
    """SQL for a list of contexts as JSON text, each text cut to CONTEXT_EXCERPT_CHARS."""
    return (
        f"to_json(list_transform({column}, lambda c: {{"
        f"'id': c.id, 'text': left(c.text, {CONTEXT_EXCERPT_CHARS}), 'score': c.score}}))::VARCHAR"
    )


def _steps(con: duckdb.DuckDBPyConnection, rows: pa.Table) -> pa.Table:
    """Staged rows' steps as steps rows: flattened by Arrow (each step's position in its trace's list is its
    index), then cut and turned into JSON by DuckDB as the excerpts are."""
    lists = rows["steps"].combine_chunks()
    flat = pc.list_flatten(lists)
    traces = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    starts = np.cumsum(lengths) - lengths
    flattened = pa.table(
        {
            "trace_id": rows["trace_id"].take(pa.array(traces)),
            "step_index": pa.array(np.arange(len(flat), dtype=np.int64) - starts[traces]),
            "step": flat,
        }
    )
    con.register("staged_steps", flattened)
    try:
        steps = con.sql(
            f"""
            SELECT trace_id, step_index, step.id AS step_id, step.parent AS parent_index, step.name AS name,
                   step.kind AS kind, left(step.query, {EXCERPT_CHARS}) AS query,
                   {_contexts_json("step.contexts")} AS contexts,
                   coalesce(len(step.contexts), 0) AS n_contexts, step.error AS error
            FROM staged_steps
            """
        ).to_arrow_table()
    finally:
        con.unregister("staged_steps")
    return steps.cast(STEP_ROWS_SCHEMA)
