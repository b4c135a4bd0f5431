"""Assemble a partition's scores into the long score table and publish it in one transaction."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import posixpath
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numpy.typing import NDArray
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ragpulse.metrics import Status
from ragpulse.tasks.core.config import RunSettings
from ragpulse.tasks.core.fingerprint import digest
from ragpulse.tasks.core.storage import filesystem, redact_url, storage_errors
from ragpulse.tasks.ingest.stage import QuarantinedRecord, StagedPartition
from ragpulse.tasks.scoring.judged import JudgePlan, judge_settings, load_judge_options, plan_judging
from ragpulse.tasks.scoring.score import ScoredBatch
from ragpulse.tasks.warehouse import (
    QUARANTINE_SCHEMA,
    RUNS_SCHEMA,
    SCORES_SCHEMA,
    TRACES_SCHEMA,
    Publication,
    open_warehouse,
)

if TYPE_CHECKING:
    from ragpulse.tasks.judge.client import JudgeSettings

__all__ = [
    "CONTEXT_EXCERPT_CHARS",
    "EXCERPT_CHARS",
    "TRACE_ROWS_SCHEMA",
    "PartitionScores",
    "RunInfo",
    "RunPlan",
    "assemble_partition",
    "assemble_scores",
    "build_publication",
    "describe_run",
    "plan_run",
    "publish_partition",
    "read_trace_excerpts",
    "write_quarantine_copy",
]

_STATUS_LABELS = np.array([status.label for status in sorted(Status)], dtype=object)

# The traces table keeps question and answer cut to EXCERPT_CHARS characters and each context text to
# CONTEXT_EXCERPT_CHARS: enough to read a trace behind a score and to recognise its passages. Contexts are most of
# a trace's bytes (at 1,000 characters each the table was 4.3 KB a trace and 9x the scores' size on DuckDB, see
# bench/README.md). The full trace stays in object storage at source_file:source_line.
EXCERPT_CHARS = 1_000
CONTEXT_EXCERPT_CHARS = 240
# The traces columns a partition's scores carry; build_publication adds the partition date and run id.
TRACE_ROWS_SCHEMA = pa.schema([f for f in TRACES_SCHEMA if f.name not in ("partition_date", "run_id")])


@dataclass(frozen=True)
class RunInfo:
    """Who published and with which configuration (never secrets)."""

    run_id: str
    source: str
    config_hash: str
    config: dict[str, Any]
    started_at: dt.datetime


@dataclass(frozen=True)
class PartitionScores:
    """One partition's de-duplicated results, metric by metric, plus everything quarantined."""

    date: dt.date
    trace_ids: NDArray[np.object_]
    values: dict[str, NDArray[np.float64]]
    status: dict[str, NDArray[np.int8]]
    reasons: dict[str, NDArray[np.object_]]
    versions: dict[str, str]
    quarantined: list[QuarantinedRecord]
    n_records: int
    n_files: int
    n_batches: int
    prompt_versions: dict[str, str] = field(default_factory=dict)
    judge_model: str | None = None
    traces: pa.Table = field(default_factory=TRACE_ROWS_SCHEMA.empty_table)
    """Excerpts of the kept traces (TRACE_ROWS_SCHEMA), row i for trace_ids[i]; empty when not read."""


def assemble_partition(
    staged: StagedPartition, scored: Sequence[ScoredBatch], excluded: Sequence[QuarantinedRecord] = ()
) -> PartitionScores:
    """Join the batches in source order, dropping ``excluded`` rows (failed the input suite).

    A repeated trace_id keeps its first record; the rest are quarantined.
    """
    trace_ids = _concat([b.trace_ids for b in scored], object)
    files = _concat([b.source_files for b in scored], object)
    lines = _concat([b.source_lines for b in scored], np.int64)
    dropped = {(q.source_file, q.line) for q in excluded}
    allowed = np.fromiter(((f, int(n)) not in dropped for f, n in zip(files, lines, strict=True)), bool, len(files))
    candidates = np.flatnonzero(allowed)
    _, first_of_candidates = np.unique(trace_ids[candidates].astype(str), return_index=True)
    first = candidates[first_of_candidates]
    keep = np.zeros(len(trace_ids), dtype=bool)
    keep[first] = True
    first_seen = {trace_ids[i]: f"{files[i]}:{lines[i]}" for i in first}
    duplicates = [
        QuarantinedRecord(
            files[i],
            int(lines[i]),
            trace_ids[i],
            "trace_id",
            f"duplicate trace_id within the partition, first seen at {first_seen[trace_ids[i]]}",
            "",
        )
        for i in np.flatnonzero(~keep & allowed)
    ]
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
        judge_model=next((b.judge_model for b in scored if b.judge_model), None),
    )


def _concat(arrays: Sequence[NDArray[Any]], dtype: Any) -> NDArray[Any]:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.array([], dtype=dtype)


def _judge_of(scores: PartitionScores, metric: str) -> str | None:
    """The judge model behind a metric's scores: only metrics with a prompt were judged by it."""
    return scores.judge_model if metric in scores.prompt_versions else None


def _total_cost(usage: Mapping[str, Mapping[str, Any]] | None) -> float | None:
    """Estimated USD of the run's judge calls; None without calls or when any model is unpriced."""
    costs = [u.get("estimated_cost_usd") for u in (usage or {}).values()]
    return None if not costs or any(c is None for c in costs) else float(sum(costs))


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
    for metric in metrics:
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
                "n_records": scores.n_records,
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
            }
        ],
        schema=RUNS_SCHEMA,
    )
    return Publication(scores.date, list(metrics), score_table, quarantine, run_row, traces=traces)


@task(name="assemble-partition", cache_policy=NO_CACHE, persist_result=False)
def assemble_scores(
    staged: StagedPartition,
    scored: list[ScoredBatch],
    judged: list[ScoredBatch],
    excluded: list[QuarantinedRecord],
    quarantine_copy_url: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> PartitionScores:
    """Join retrieval and judge results per batch, de-duplicate, drop excluded rows, read the kept traces'
    excerpts, copy the quarantine."""
    batches = [plain.merged(judge) for plain, judge in zip(scored, judged, strict=True)] if judged else scored
    scores = assemble_partition(staged, batches, excluded)
    scores = dataclasses.replace(scores, traces=read_trace_excerpts(staged, scores, storage_options))
    if quarantine_copy_url is not None:
        write_quarantine_copy(quarantine_copy_url, scores.quarantined, storage_options)
    return scores


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
    return excerpts.take(positions)


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
                   metadata, source_file, source_line
            FROM staged_rows
            """
        ).to_arrow_table()
    return excerpts.cast(TRACE_ROWS_SCHEMA)


def write_quarantine_copy(
    url: str, records: Sequence[QuarantinedRecord], storage_options: Mapping[str, Any] | None = None
) -> None:
    fs, path = filesystem(url, storage_options)
    lines = "".join(json.dumps(dataclasses.asdict(record)) + "\n" for record in records)
    with storage_errors(url):
        fs.makedirs(posixpath.dirname(path), exist_ok=True)
        fs.pipe_file(path, lines.encode())


@task(name="publish-partition", cache_policy=NO_CACHE, persist_result=False)
def publish_partition(warehouse_url: str, publication: Publication) -> int:
    """Publish atomically (replace the partition's rows for these metrics); returns the score rows written."""
    open_warehouse(warehouse_url).publish(publication)
    get_run_logger().info(
        "dt=%s: published %d score rows, %d traces, %d quarantined records and %d validation results to %s",
        publication.partition_date, publication.scores.num_rows, publication.traces.num_rows,
        publication.quarantine.num_rows, publication.validations.num_rows, redact_url(warehouse_url),
    )  # fmt: skip
    return publication.scores.num_rows


def describe_run(source: str, config: dict[str, Any], config_hash: str, judge: dict[str, Any] | None = None) -> RunInfo:
    """Identity of this run (the Prefect flow run id when there is one) and everything that shapes its scores.

    The judge model and prompt versions are part of the configuration hash: scores of another judge
    are never taken for the same configuration.
    """
    from prefect.runtime import flow_run

    judge = judge or {}
    return RunInfo(
        run_id=str(flow_run.id or uuid.uuid4()),
        source=redact_url(source),
        config_hash=digest(config_hash, json.dumps(judge, sort_keys=True))[:16] if judge else config_hash,
        config={**config, "judge": judge} if judge else config,
        started_at=dt.datetime.now(dt.UTC),
    )


@dataclass(frozen=True)
class RunPlan:
    """What a run of some settings will do with the judge, and the run's identity and configuration hash."""

    judge: JudgeSettings
    options: dict[str, Any]
    judging: JudgePlan
    run: RunInfo


def plan_run(settings: RunSettings, *, judge_model: str | None = None, judge_base_url: str | None = None) -> RunPlan:
    """The judge and run description of ``settings``: the one computation behind a run's configuration hash, so a
    backfill deciding what is already published agrees with the run that published it."""
    judge = judge_settings(settings.work_dir, model=judge_model, base_url=judge_base_url)
    options = load_judge_options(settings.judge_config)
    judging = plan_judging(settings.metrics, judge.model, options)
    config = settings.model_dump(mode="json")
    run = describe_run(settings.source or "", config, settings.fingerprint(), judging.describe())
    return RunPlan(judge, options, judging, run)
