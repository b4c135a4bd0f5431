"""Each tracing tool's export through the whole evaluate-partition flow into DuckDB."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from prefect.exceptions import ParameterTypeError

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, SourceConfig
from ragpulse.tasks.reporting.run_summary import NothingScoredError
from tests.tasks.ingest.adapters.conftest import FIXTURES, copy_with_mtime, langsmith_parquet

DAY = dt.date(2026, 3, 2)
OTEL = ["5b8efff798038103d269b633813fc60c", "0af7651916cd43dd8448eb211c80319c", "4bf92f3577b34da6a3ce929d0e0e4736"]


def _rows(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()


def _run(tmp_path: Path, source: str, trace_format: str, day: dt.date = DAY, **source_fields: Any) -> tuple[Any, Path]:
    """The day of ``source`` in ``trace_format`` (``source_fields``: the rest of its SourceConfig) into DuckDB.
    The tracing tools' exports carry no relevance labels or reference answers, so the default metrics score nothing:
    the day is published, then the run fails with ``NothingScoredError``, whose summary is returned."""
    warehouse = tmp_path / "w.duckdb"
    try:
        summary = evaluate_partition(
            date=day, source=SourceConfig(url=source, format=trace_format, **source_fields),
            output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
        )  # fmt: skip
    except NothingScoredError as unscored:
        summary = unscored.summary
        assert summary.gaps[:2] == ["no_labels", "no_references"]
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
    # oi-t5's second document has text but no id: it is kept (id null), judged by text.
    _check(summary, warehouse, ["oi-t1", "oi-t2", "oi-t3", "oi-t5"], {(None, "<record>"), ("oi-t4", "question")},
           "openinference")  # fmt: skip
    ((contexts,),) = _rows(warehouse, "SELECT contexts FROM traces WHERE trace_id = 'oi-t5'")
    assert [(c["id"], c["text"]) for c in json.loads(contexts)] == [("doc-rag", "RAG combines retrieval ..."),
                                                                     (None, "an unnamed chunk")]  # fmt: skip
    assert _rows(warehouse, "SELECT status, reason FROM scores WHERE trace_id = 'oi-t5' AND metric = 'recall@5'") == [
        ("not_applicable", "no_relevance_labels")
    ]


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
    source = str(copy_with_mtime(FIXTURES / "langfuse" / "invented", tmp_path / "langfuse"))
    first, warehouse = _run(tmp_path, source, "langfuse", partitioning="event-time", late_arrival_hours=6.0)
    _check(first, warehouse, ["lf-1", "lf-2"], {("lf-5", "observation o-5r output.0.id"), ("lf-6", "question")},
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


BAD_DAY = {
    "ragpulse": ['{"trace_id": "t-1", "timestamp": "2026-03-02T08:00:00Z"}', "{not json"],
    "openinference": ['{"context": {"trace_id": "t-1", "span_id": "s-1"}, "span_kind": "CHAIN"}', "[1, 2]"],
    "otel-genai": ['{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "ab"}]}]}]}', '{"traces": []}'],
    "langsmith": ['{"id": "r-1", "run_type": "chain"}', '{"id": "r-2", "trace_id": "r-2", "inputs": {}}'],
}


@pytest.mark.parametrize("trace_format", sorted(BAD_DAY))
def test_a_day_of_only_bad_records_publishes_its_quarantine_and_run_row(tmp_path: Path, trace_format: str) -> None:
    """No batch was scored, yet nothing crashes and nothing is lost: the quarantine and the run row are published."""
    folder = tmp_path / "traces" / f"dt={DAY}"
    folder.mkdir(parents=True)
    (folder / "part-0.jsonl").write_text("\n".join(BAD_DAY[trace_format]) + "\n")
    summary, warehouse = _run(tmp_path, str(tmp_path / "traces"), trace_format)
    assert (summary.outcome, summary.n_traces, summary.n_quarantined) == ("no_traces", 0, 2)
    assert _rows(warehouse, "SELECT count(*) FROM quarantine WHERE reason <> ''") == [(2,)]
    assert _rows(warehouse, "SELECT n_traces, n_quarantined, n_scores FROM runs") == [(0, 2, 0)]
    assert _rows(warehouse, "SELECT count(*) FROM scores") == [(0,)]


GENERATED_ON = dt.date(2026, 12, 1)
"""The day the real fixtures were generated by the tools' own code (their SOURCES.md): their traces' timestamps,
so their dt= folder, since the input suite quarantines traces stamped outside their partition's day."""


def _real_export_day(tmp_path: Path, trace_format: str) -> tuple[Path, set[str]]:
    """Every real fixture of ``trace_format`` generated on GENERATED_ON (tests/fixtures/adapters/<format>/real,
    see its SOURCES.md) in one dt= folder, and the trace ids in those files, counted here from the files."""
    import pyarrow.parquet as pq

    real = FIXTURES / trace_format / "real"
    day = tmp_path / "source" / f"dt={GENERATED_ON}"
    if trace_format == "langfuse":
        shutil.copytree(real / "bucket", day)
        ids = {json.loads(line)["id"] for line in _lines(day.rglob("traces/*.jsonl"))}
        ids |= {json.loads(line)["trace_id"] for line in _lines(day.rglob("observations_v2/*.jsonl"))}
        ids |= {t for p in day.rglob("observations_v2/*.parquet") for t in pq.read_table(p)["trace_id"].to_pylist()}
        return day.parent, ids
    # LangSmith's own recorded runs date from 2024 (their sdk-test-data); they are read in the adapter tests.
    files = [p for p in real.rglob("*") if p.suffix in (".jsonl", ".parquet") and "sdk-test-data" not in p.parts]
    day.mkdir(parents=True)
    ids: set[str] = set()
    for index, path in enumerate(sorted(files)):
        shutil.copy(path, day / f"{index}-{path.name}")  # one folder: file names differ per fixture
        if trace_format == "langsmith":
            ids |= {json.loads(line)["trace_id"] for line in _lines([path])}
        elif trace_format == "otel-genai":
            for line in _lines([path]):
                request = json.loads(line)
                for resource in request.get("resourceSpans", []) + request.get("resourceLogs", []):
                    for scope in resource.get("scopeSpans", []) + resource.get("scopeLogs", []):
                        ids |= {r["traceId"].lower() for r in scope.get("spans", []) + scope.get("logRecords", [])}
        elif path.suffix == ".parquet":
            table = pq.read_table(path)
            column = "context.trace_id" if "context.trace_id" in table.column_names else "context"
            values = table[column].to_pylist()
            ids |= {v["trace_id"] if isinstance(v, dict) else v for v in values}
        else:
            for line in _lines([path]):
                span = json.loads(line)
                ids.add(span.get("context.trace_id") or span["context"]["trace_id"])
    return day.parent, ids


def _lines(paths: Any) -> list[str]:
    return [line for path in paths for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("trace_format", ["openinference", "otel-genai", "langfuse", "langsmith"])
def test_every_real_export_through_the_flow_lands_once_in_sql(tmp_path: Path, trace_format: str) -> None:
    """The tools' own exports, all of a format's in one day, default options: every trace in the files is either
    scored once per metric or quarantined with a reason, never both, never lost, never duplicated."""
    source, in_files = _real_export_day(tmp_path, trace_format)
    summary, warehouse = _run(tmp_path, str(source), trace_format, GENERATED_ON)
    scored = {t for (t,) in _rows(warehouse, "SELECT DISTINCT trace_id FROM scores")}
    held = {t for (t,) in _rows(warehouse, "SELECT trace_id FROM quarantine WHERE trace_id IS NOT NULL")}
    assert scored | held == in_files and not scored & held
    assert summary.n_traces == len(scored) > len(in_files) / 2
    assert _rows(warehouse, "SELECT count(*) FROM quarantine WHERE reason = '' OR field IS NULL") == [(0,)]
    repeated = "SELECT count(*) FROM (SELECT trace_id, metric FROM scores GROUP BY 1, 2 HAVING count(*) > 1)"
    assert _rows(warehouse, repeated) == [(0,)]
    # Every real fixture set has a Chinese or Japanese trace, and its question arrives whole.
    kana_or_han = "[\\x{3040}-\\x{30ff}\\x{4e00}-\\x{9fff}]"
    cjk = _rows(warehouse, f"SELECT question FROM traces WHERE regexp_matches(question, '{kana_or_han}')")
    assert cjk, "no CJK question reached the traces table"
    answered = _rows(warehouse, "SELECT count(*) FROM scores WHERE metric = 'answer_f1' AND reason = 'no_answer'")
    assert answered[0][0] < summary.n_traces  # answers are found on real runs, not lost to no_answer
