"""The data-quality checks with Great Expectations: traces in (rows to quarantine), scores out (failed
expectations that block the publish), without Prefect.

GX costs 6-15 s to import, so it is imported inside the validation functions only. Each suite runs
once per partition on a whole DataFrame (vectorised), never per row: the input suite on a compact
per-trace profile, the output suites on the long score table and a per-metric summary.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ragpulse.metrics import REGISTRY, MetricRequest
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.types import BatchRef, QuarantinedRecord, RunInfo, StagedPartition
from ragpulse.tasks.ingest.batches import read_staged, shared_strings
from ragpulse.tasks.warehouse import VALIDATIONS_SCHEMA, Publication, RowSource

__all__ = [
    "DEFAULT_SUITES",
    "SUITE_DIR",
    "TraceLimits",
    "TraceValidation",
    "batch_profile",
    "check_scores",
    "check_traces",
    "load_suite",
    "per_metric_frame",
    "suite_digest",
    "trace_profile",
]

SUITE_DIR = Path(__file__).parent / "suites"
DEFAULT_SUITES = {
    "traces_in": SUITE_DIR / "traces_in.json",
    "scores_out": SUITE_DIR / "scores_out.json",
    "scores_per_metric": SUITE_DIR / "scores_per_metric.json",
}
_PROFILE_COLUMNS = ["trace_id", "timestamp", "question", "answer", "contexts", "reference", "reference_answers",
                    "source_file", "source_line"]  # fmt: skip
# GX data contexts are not documented as thread-safe; validations of one process take turns.
_GX_LOCK = threading.Lock()


@dataclass(frozen=True)
class TraceLimits:
    """Size bounds of the input suite (characters / contexts per trace)."""

    max_question_chars: int = 8_000
    max_answer_chars: int = 32_000
    max_contexts: int = 200
    max_context_chars: int = 100_000


@dataclass(frozen=True)
class TraceValidation:
    """What the input suite found: rows to quarantine and one result row per expectation."""

    excluded: list[QuarantinedRecord]
    results: pa.Table
    docs_url: str | None = None
    reported: dict[str, int] = field(default_factory=dict)


def suite_digest(path: str | Path | None, kind: str) -> str:
    """SHA-256 of a suite file (the default suite ``kind`` without a path); its path if it cannot be read, since
    running it then fails anyway."""
    suite = Path(path or DEFAULT_SUITES[kind])
    return hashlib.sha256(suite.read_bytes()).hexdigest() if suite.is_file() else str(suite)


def load_suite(path: str | Path) -> dict[str, Any]:
    """A suite file: GX's suite JSON (name, expectations[type, kwargs, meta], meta)."""
    try:
        suite = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read expectation suite {str(path)!r}: {exc}") from exc
    if not isinstance(suite, dict) or not isinstance(suite.get("expectations"), list) or "name" not in suite:
        raise ConfigError(f"expectation suite {str(path)!r} needs a name and a list of expectations")
    return suite


def trace_profile(
    staged: StagedPartition,
    storage_options: Mapping[str, Any] | None = None,
    profiles: Sequence[pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """One row per staged trace with the columns the input suite checks: ``profiles`` (one ``batch_profile`` per
    staged batch, in order) joined, or computed here batch by batch when not given."""
    frames = list(profiles) if profiles is not None else [batch_profile(ref, storage_options) for ref in staged.batches]
    if not frames:
        return _batch_profile(pa.Table.from_pylist([], schema=_staged_profile_schema()))
    return pd.concat(frames, ignore_index=True)


def batch_profile(batch: BatchRef, storage_options: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The profile rows of one staged batch, computed with Arrow kernels from the columns they need."""
    return _batch_profile(read_staged(batch, storage_options, columns=_PROFILE_COLUMNS))


def _staged_profile_schema() -> pa.Schema:
    from ragpulse.tasks.ingest.records import STAGED_SCHEMA

    return pa.schema([STAGED_SCHEMA.field(name) for name in _PROFILE_COLUMNS])


def _per_list(values: pa.Array, lists: pa.ListArray, aggregation: str) -> np.ndarray:
    """Aggregate ``values`` (aligned with the flattened ``lists``) per list; 0 for empty lists."""
    out = np.zeros(len(lists), dtype=np.int64)
    if len(values):
        grouped = (
            pa.table({"parent": pc.list_parent_indices(lists), "v": values})
            .group_by("parent")
            .aggregate([("v", aggregation)])
        )
        out[grouped.column("parent").to_numpy()] = grouped.column(f"v_{aggregation}").to_numpy()
    return out


def _batch_profile(table: pa.Table) -> pd.DataFrame:
    contexts = table.column("contexts").combine_chunks()
    flat = contexts.flatten()
    ids = flat.field("id")
    text_chars = pc.utf8_length(flat.field("text"))
    n_contexts = pc.list_value_length(contexts).to_numpy(zero_copy_only=False)
    references = table.column("reference_answers").combine_chunks()
    reference_chars = pc.utf8_length(table.column("reference"))
    return pd.DataFrame(
        {
            "trace_id": table.column("trace_id").to_pandas(),
            "timestamp": table.column("timestamp").to_pandas(),
            "question_chars": pc.utf8_length(table.column("question")).to_numpy(zero_copy_only=False).astype(np.int64),
            "answer_chars": pc.utf8_length(table.column("answer")).to_pandas().astype("Int64"),
            "n_contexts": n_contexts.astype(np.int64),
            # A null text (a source that logs ids and scores only) is neither long nor empty.
            "max_context_chars": _per_list(pc.fill_null(text_chars, 0), contexts, "max"),
            # A null id (a source that logs text only) is not an empty one; an all-null sum would be null.
            "n_empty_context_ids": _per_list(pc.fill_null(pc.equal(pc.utf8_length(ids), 0), False), contexts, "sum"),
            "n_empty_context_texts": _per_list(pc.fill_null(pc.equal(text_chars, 0), False), contexts, "sum"),
            # Contexts logged without an id are neither empty nor duplicate ids.
            "n_duplicate_context_ids": _per_list(ids, contexts, "count") - _per_list(ids, contexts, "count_distinct"),
            "reference_chars": reference_chars.to_pandas().astype("Int64"),
            "n_empty_reference_answers": _per_list(
                pc.equal(pc.utf8_length(references.flatten()), 0), references, "sum"
            ),
            "source_file": pd.Series(shared_strings(table.column("source_file")), dtype=object),
            "source_line": table.column("source_line").to_numpy(zero_copy_only=False).astype(np.int64),
        }
    )


@dataclass(frozen=True)
class _SuiteRun:
    suite: str
    results: list[Any]
    success: bool


def _run_suite(
    suite_spec: Mapping[str, Any],
    frame: pd.DataFrame,
    parameters: Mapping[str, Any],
    *,
    extra_expectations: Sequence[dict[str, Any]] = (),
    docs_dir: Path | None = None,
) -> _SuiteRun:
    """Validate ``frame`` against the suite in an ephemeral GX context; optionally write HTML data docs."""
    import great_expectations as gx
    from great_expectations.checkpoint.actions import UpdateDataDocsAction, ValidationAction
    from great_expectations.core.expectation_suite import ExpectationSuite
    from great_expectations.data_context.types.base import ProgressBarsConfig

    with _GX_LOCK:
        _quiet_gx_loggers()
        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        name = str(suite_spec["name"])
        batch = (
            context.data_sources.add_pandas(name)
            .add_dataframe_asset("frame")
            .add_batch_definition_whole_dataframe("whole")
        )
        suite = context.suites.add(
            ExpectationSuite(
                name=name,
                expectations=[*suite_spec["expectations"], *extra_expectations],
                meta=dict(suite_spec.get("meta") or {}),
            )
        )
        definition = context.validation_definitions.add(gx.ValidationDefinition(data=batch, suite=suite, name=name))
        actions: list[ValidationAction] = []
        if docs_dir is not None:
            context.add_data_docs_site(
                site_name="ragpulse",
                site_config={
                    "class_name": "SiteBuilder",
                    "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
                    "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
                },
            )
            actions.append(UpdateDataDocsAction(name="data-docs", site_names=["ragpulse"]))
        checkpoint = context.checkpoints.add(
            gx.Checkpoint(
                name=name,
                validation_definitions=[definition],
                actions=actions,
                result_format={"result_format": "COMPLETE", "include_unexpected_rows": False},
            )
        )
        outcome = checkpoint.run(batch_parameters={"dataframe": frame}, expectation_parameters=dict(parameters))
    validation = next(iter(outcome.run_results.values()))
    return _SuiteRun(name, list(validation.results), bool(validation.success))


def _quiet_gx_loggers() -> None:
    """GX pins some module loggers at INFO (e.g. one line per temporary docs directory): lift them to WARNING."""
    for name in list(logging.root.manager.loggerDict):
        if name == "great_expectations" or name.startswith("great_expectations."):
            logging.getLogger(name).setLevel(logging.WARNING)


def _result_rows(run: RunInfo, date: dt.date, suite_run: _SuiteRun) -> list[dict[str, Any]]:
    now = dt.datetime.now(dt.UTC)
    rows = []
    for result in suite_run.results:
        config = result.expectation_config
        kwargs = {k: v for k, v in config.kwargs.items() if k not in ("batch_id",)}
        error = (result.exception_info or {}).get("exception_message")
        details = {"kwargs": kwargs, "observed_value": result.result.get("observed_value")}
        if error:
            details["error"] = error
        rows.append(
            {
                "run_id": run.run_id,
                "partition_date": date,
                "suite": suite_run.suite,
                "expectation": config.type,
                "column_name": kwargs.get("column") or ",".join(kwargs.get("column_list") or []) or None,
                "success": bool(result.success),
                "element_count": result.result.get("element_count"),
                "unexpected_count": result.result.get("unexpected_count"),
                "details": json.dumps(details, default=str)[:4000],
                "validated_at": now,
            }
        )
    return rows


def _day_bounds(date: dt.date) -> tuple[pd.Timestamp, pd.Timestamp]:
    start = pd.Timestamp(date.isoformat(), tz="UTC")
    return start, start + pd.Timedelta(days=1) - pd.Timedelta(microseconds=1)


def check_traces(
    staged: StagedPartition,
    run: RunInfo,
    *,
    limits: TraceLimits,
    suite_path: str | Path | None = None,
    docs_dir: Path | None = None,
    storage_options: Mapping[str, Any] | None = None,
    profiles: Sequence[pd.DataFrame] | None = None,
) -> TraceValidation:
    """Run the input suite on the partition's trace profile (``profiles`` per staged batch, else computed here);
    failing rows of action=quarantine are excluded."""
    suite = load_suite(suite_path or DEFAULT_SUITES["traces_in"])
    profile = trace_profile(staged, storage_options, profiles)
    start, end = _day_bounds(staged.date)
    parameters = {"partition_start": start, "partition_end": end, **vars(limits)}
    suite_run = _run_suite(suite, profile, parameters, docs_dir=docs_dir)
    excluded: dict[int, QuarantinedRecord] = {}
    reported: dict[str, int] = {}
    for result in suite_run.results:
        meta = result.expectation_config.meta or {}
        column = result.expectation_config.kwargs.get("column", "<table>")
        label = f"{result.expectation_config.type}({column})"
        if result.success:
            continue
        reported[label] = int(result.result.get("unexpected_count") or 0)
        if meta.get("action") != "quarantine":
            continue
        rows = [int(i) for i in result.result.get("unexpected_index_list") or []]
        if meta.get("keep") == "first":
            for row, first in _repeats(profile, column, rows):
                excluded.setdefault(row, _duplicate(profile, row, first, column, result.expectation_config.type))
            continue
        for row in rows:
            excluded.setdefault(row, _quarantined(profile, row, column, result.expectation_config.type))
    docs = docs_dir / "index.html" if docs_dir is not None else None
    return TraceValidation(
        excluded=[excluded[row] for row in sorted(excluded)],
        results=pa.Table.from_pylist(_result_rows(run, staged.date, suite_run), schema=VALIDATIONS_SCHEMA),
        docs_url=docs.as_uri() if docs is not None and docs.exists() else None,
        reported=reported,
    )


def _repeats(profile: pd.DataFrame, column: str, rows: list[int]) -> list[tuple[int, int]]:
    """For a uniqueness failure, each later occurrence with its first one: the first is kept."""
    first_row: dict[Any, int] = {}
    later = []
    for row in sorted(rows):
        value = profile.at[row, column]
        if value in first_row:
            later.append((row, first_row[value]))
        first_row.setdefault(value, row)
    return later


def _duplicate(profile: pd.DataFrame, row: int, first: int, column: str, expectation: str) -> QuarantinedRecord:
    seen_at = f"{profile.at[first, 'source_file']}:{profile.at[first, 'source_line']}"
    record = _quarantined(profile, row, column, expectation)
    return dataclasses.replace(record, reason=f"duplicate {column} within the partition, first seen at {seen_at}")


def _quarantined(profile: pd.DataFrame, row: int, column: str, expectation: str) -> QuarantinedRecord:
    value = profile.at[row, column] if column in profile.columns else None
    return QuarantinedRecord(
        source_file=str(profile.at[row, "source_file"]),
        line=int(profile.at[row, "source_line"]),
        trace_id=str(profile.at[row, "trace_id"]),
        field=column,
        reason=f"failed {expectation}: {column} = {value}",
        raw="",
    )


def _range_expectations(metrics: Sequence[str]) -> list[dict[str, Any]]:
    """One value-range expectation per distinct declared range, over that range's metrics."""
    by_range: dict[tuple[float, float], list[str]] = {}
    for name in metrics:
        spec = REGISTRY[MetricRequest.parse(name).family].spec
        by_range.setdefault((spec.lower, spec.upper), []).append(name)
    return [
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {
                "column": "value",
                "min_value": lower,
                "max_value": upper,
                "row_condition": {
                    "type": "and",
                    "conditions": [
                        {"type": "comparison", "column": {"name": "status"}, "operator": "==", "parameter": "ok"},
                        {"type": "comparison", "column": {"name": "metric"}, "operator": "IN", "parameter": names},
                    ],
                },
            },
            "meta": {"metrics": names},
        }
        for (lower, upper), names in by_range.items()
    ]


def per_metric_frame(scores: pa.Table) -> pd.DataFrame:
    """One row per metric with its score and failure counts: the frame the per-metric suite checks."""
    grouped = (
        pa.table({"metric": scores.column("metric"), "failed": pc.equal(scores.column("status"), "failed")})
        .group_by("metric")
        .aggregate([("failed", "count"), ("failed", "sum")])
    )
    frame = pd.DataFrame(
        {"metric": grouped.column("metric").to_pandas(), "n": grouped.column("failed_count").to_numpy(),
         "n_failed": grouped.column("failed_sum").to_numpy()}
    )  # fmt: skip
    frame["failure_rate"] = frame["n_failed"] / frame["n"].where(frame["n"] > 0, 1)
    return frame


_SCORE_FRAME_COLUMNS = ["partition_date", "trace_id", "metric", "value", "status", "reason"]


def _score_frame(rows: RowSource) -> pd.DataFrame:
    """The score rows' checked columns with every text column as a category: a day's 5M rows are then codes
    and one dictionary per column, not 5M strings each. Categories also make GX's filter per row condition
    cheap: pandas 3's Arrow-backed strings were copied by each (2.2-2.7x faster on 1M rows, see bench/)."""
    return rows.columns(_SCORE_FRAME_COLUMNS).to_pandas()


def check_scores(
    publication: Publication,
    run: RunInfo,
    *,
    n_traces: int,
    max_failure_rate: float,
    suite_path: str | Path | None = None,
    docs_dir: Path | None = None,
) -> tuple[pa.Table, list[str]]:
    """Run the output suites; returns their result rows and a description of each failed expectation."""
    frame = _score_frame(publication.scores)
    # The scores table holds the turn metrics; a conversation's are in conversation_scores, one row a conversation.
    per_trace = [name for name in publication.metrics if not MetricRequest.parse(name).is_conversation]
    runs = [
        _run_suite(
            load_suite(suite_path or DEFAULT_SUITES["scores_out"]),
            frame,
            {
                "expected_rows": n_traces * len(per_trace),
                # A day without valid traces has no score rows, so no metric appears in them.
                "requested_metrics": per_trace if n_traces else [],
            },
            extra_expectations=_range_expectations(per_trace),
            docs_dir=docs_dir / "scores_out" if docs_dir else None,
        ),
        _run_suite(
            load_suite(DEFAULT_SUITES["scores_per_metric"]),
            per_metric_frame(pa.Table.from_pandas(frame[["metric", "status"]], preserve_index=False)),
            {"max_failure_rate": max_failure_rate, "n_traces": n_traces},
            docs_dir=docs_dir / "scores_per_metric" if docs_dir else None,
        ),
    ]
    rows = [row for suite_run in runs for row in _result_rows(run, publication.partition_date, suite_run)]
    failures = [
        f"{row['suite']}: {row['expectation']}({row['column_name'] or 'table'}) "
        f"unexpected={row['unexpected_count']} of {row['element_count']} {row['details'][:300]}"
        for row in rows
        if not row["success"]
    ]
    return pa.Table.from_pylist(rows, schema=VALIDATIONS_SCHEMA), failures
