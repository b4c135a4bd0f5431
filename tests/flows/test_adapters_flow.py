"""Each tracing tool's export through the whole evaluate-partition flow into DuckDB."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from prefect.exceptions import ParameterTypeError

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, SourceConfig
from tests.tasks.ingest.adapters.conftest import FIXTURES, copy_with_mtime, langsmith_parquet

DAY = dt.date(2026, 3, 2)
OTEL = ["5b8efff798038103d269b633813fc60c", "0af7651916cd43dd8448eb211c80319c", "4bf92f3577b34da6a3ce929d0e0e4736"]


def _rows(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()


def _run(tmp_path: Path, source: str, trace_format: str, **source_fields: Any) -> tuple[Any, Path]:
    """The day of ``source`` in ``trace_format`` (``source_fields``: the rest of its SourceConfig) into DuckDB."""
    warehouse = tmp_path / "w.duckdb"
    summary = evaluate_partition(
        date=DAY, source=SourceConfig(url=source, format=trace_format, **source_fields),
        output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
    )  # fmt: skip
    return summary, warehouse


def _check(
    summary: Any, warehouse: Path, trace_ids: list[str], quarantined: set[tuple[str | None, str]], trace_format: str
) -> None:
    assert summary.n_traces == len(trace_ids)
    assert summary.n_quarantined == len(quarantined)
    assert sorted(t for (t,) in _rows(warehouse, "SELECT DISTINCT trace_id FROM scores")) == sorted(trace_ids)
    assert set(_rows(warehouse, "SELECT trace_id, field FROM quarantine")) == quarantined
    (config,) = _rows(warehouse, "SELECT config FROM runs")[0]
    assert json.loads(config)["source"]["format"] == trace_format


def test_openinference_spans_in_dt_folders(tmp_path: Path) -> None:
    summary, warehouse = _run(tmp_path, str(FIXTURES / "openinference"), "openinference")
    _check(summary, warehouse, ["oi-t1", "oi-t2", "oi-t3"],
           {(None, "<record>"), ("oi-t4", "question"), ("oi-t5", "span s5-ret retrieval.documents.1.document.id")},
           "openinference")  # fmt: skip


def test_otel_genai_lines_on_s3(tmp_path: Path, s3) -> None:  # type: ignore[no-untyped-def]
    s3.fs.put(str(FIXTURES / "otel-genai") + "/", f"{s3.name}/otlp/", recursive=True)
    summary, warehouse = _run(tmp_path, f"{s3.url}/otlp", "otel-genai", storage_options=s3.endpoint.storage_options)
    quarantined = {
        (None, "resourceSpans"),
        (None, "resourceSpans[0].scopeSpans[0].spans[0].traceId"),
        ("a3ce929d0e0e47364bf92f3577b34da6", "question"),
    }
    _check(summary, warehouse, OTEL, quarantined, "otel-genai")
    files = {f for (f,) in _rows(warehouse, "SELECT DISTINCT source_file FROM quarantine")}
    assert all(f.startswith(f"s3://{s3.name}/otlp/dt={DAY}/") for f in files)


def test_langfuse_export_by_event_time_reruns_from_cache(tmp_path: Path) -> None:
    source = str(copy_with_mtime(FIXTURES / "langfuse", tmp_path / "langfuse"))
    first, warehouse = _run(tmp_path, source, "langfuse", partitioning="event-time", late_arrival_hours=6.0)
    _check(first, warehouse, ["lf-1", "lf-2"], {("lf-5", "observation o-5r output.0.id"), ("lf-6", "root span")},
           "langfuse")  # fmt: skip
    again, _ = _run(tmp_path, source, "langfuse", partitioning="event-time", late_arrival_hours=6.0)
    assert again.n_batches_cached == again.n_batches == first.n_batches
    # Another mapping changes the traces, so nothing comes from the cache and the config hash differs.
    remapped, _ = _run(
        tmp_path, source, "langfuse", partitioning="event-time", format_options={"id_key": "metadata.source"}
    )
    assert remapped.n_batches_cached == 0
    hashes = {h for (h,) in _rows(warehouse, "SELECT config_hash FROM runs")}
    assert len(hashes) == 2


def test_langsmith_bulk_export_with_score_key(tmp_path: Path) -> None:
    source = str(langsmith_parquet(tmp_path / "langsmith"))
    summary, warehouse = _run(
        tmp_path, source, "langsmith", partitioning="event-time",
        format_options={"score_key": "metadata.relevance_score"},
    )  # fmt: skip
    ids = ["00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000010"]
    _check(summary, warehouse, ids, {("00000000-0000-4000-8000-000000000020", "question")}, "langsmith")
    answers = _rows(warehouse, "SELECT DISTINCT trace_id, reason FROM scores WHERE metric = 'answer_f1'")
    assert ("00000000-0000-4000-8000-000000000010", "no_answer") in answers  # the root run had no outputs


def test_unknown_format_is_refused_before_reading(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="SourceConfig\nformat\n  Input should be 'ragpulse'"):
        _run(tmp_path, str(FIXTURES / "openinference"), "jaeger")
    # As a deployment passes it: a plain mapping, refused by the flow's parameter validation.
    with pytest.raises(ParameterTypeError, match=r"source\.format: Input should be 'ragpulse'"):
        evaluate_partition(date=DAY, source={"url": str(FIXTURES / "openinference"), "format": "jaeger"})
