"""Invented Langfuse export (tests/fixtures/adapters/langfuse/invented) -> canonical traces.

The invented project covers what the real fixture (test_langfuse_real.py) lacks: overlapping windows,
a run still being written (no manifest yet), a trace of another day, a broken document, a lost parent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.storage import SourceFile, list_partition_files
from ragpulse.tasks.ingest.adapters import AdapterOptions
from ragpulse.tasks.ingest.adapters.langfuse import select_files, spans
from tests.tasks.ingest.adapters.conftest import DAY, FIXTURES, MIDDAY, Staged, copy_with_mtime, quarantined


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return copy_with_mtime(FIXTURES / "langfuse" / "invented", tmp_path / "langfuse")


def test_only_files_of_complete_runs_are_read(export: Path) -> None:
    listed = list_partition_files(str(export), DAY, partitioning="event-time", suffixes=(".jsonl", ".json"))
    names = sorted(Path(f.url).relative_to(export).as_posix() for f in select_files(listed, None))
    assert names == [
        "p-1/observations/2026-03-02T12-00-00.jsonl",
        "p-1/observations/2026-03-02T13-00-00.jsonl",
        "p-1/scores/2026-03-02T13-00-00.jsonl",
        "p-1/traces/2026-03-02T12-00-00.jsonl",
        "p-1/traces/2026-03-02T13-00-00.jsonl",
    ]  # scores (the traces' feedback) too; nothing of the 2026-03-03 window (its manifest is not written yet)


def test_a_manifest_listing_a_missing_file_is_a_clear_error(export: Path) -> None:
    _write_manifest(export, "broken.json", [{"key": "p-1/traces/gone.jsonl", "table": "traces"}])
    with pytest.raises(ConfigError, match=r"broken.json lists .*/p-1/traces/gone.jsonl, which does not exist"):
        select_files(_listed(export), None)


@pytest.mark.parametrize(
    "entries",
    [["p-1/traces/a.jsonl"], [{"path": "traces/a.jsonl", "table": "traces"}], [{"key": "other/traces/a.jsonl",
     "table": "traces"}]],
)  # fmt: skip
def test_a_manifest_not_in_langfuse_layout_is_a_clear_error(export: Path, entries: list[object]) -> None:
    _write_manifest(export, "odd.json", entries)
    with pytest.raises(
        ConfigError, match=r"odd.json has an entry that is not a \{prefix\}p-1/<table>/<file> object key"
    ):
        select_files(_listed(export), None)


def test_csv_exports_are_a_clear_error(export: Path) -> None:
    (export / "p-1" / "traces" / "2026-03-02T14-00-00.csv").write_text('"id"\n"lf-1"\n')
    _write_manifest(export, "csv.json", [{"key": "p-1/traces/2026-03-02T14-00-00.csv", "table": "traces"}])
    with pytest.raises(ConfigError, match=r"set the blob storage integration's file type to JSONL or Parquet"):
        select_files(_listed(export), None)


def _write_manifest(export: Path, name: str, files: list[object]) -> None:
    manifest = export / "p-1" / "manifests" / name
    manifest.write_text(json.dumps({"version": 1, "projectId": "p-1", "files": files}))
    os.utime(manifest, (MIDDAY, MIDDAY))


def _listed(export: Path) -> list[SourceFile]:
    return list_partition_files(str(export), DAY, partitioning="event-time", suffixes=(".jsonl", ".json", ".csv"))


def test_export_becomes_traces_deduplicated_across_windows(export: Path, stager: Callable[..., Staged]) -> None:
    staged, rows = stager(export, "langfuse", partitioning="event-time")
    assert sorted(rows) == ["lf-1", "lf-2"]
    lf1 = rows["lf-1"]
    assert (lf1["question"], lf1["answer"]) == ("Which plan includes SSO?", "SSO is part of the Enterprise plan.")
    assert [(c["id"], c["text"], c["score"]) for c in lf1["contexts"]] == [
        ("plan-ent", "Enterprise includes SSO and audit logs.", 0.89),
        ("plan-pro", "Pro includes API access.", 0.55),
    ]
    assert lf1["metadata"]["source"] == {
        "format": "langfuse", "trace_id": "lf-1", "root_span_id": "trace:lf-1", "retriever_span_ids": ["o-1r"],
        "contexts_from": "all_steps",  # no LLM call logged its input
        "latency_from": "span_extent",  # two top-level observations: from the first start to the last end
    }  # fmt: skip
    assert lf1["metadata"]["token_counts"] == {"input": 512, "output": 12, "total": 524}
    assert lf1["latency_ms"] == 200.0  # 08:15:00.100 to 08:15:00.300
    assert lf1["usage"] == [{"model": "gpt-4o-mini", "input_tokens": 512, "output_tokens": 12}]
    assert [c["id"] for c in rows["lf-2"]["contexts"]] == ["d-exp", "faq-exp"]  # two retrievers, one copy each
    assert staged.n_duplicate_spans == 2  # lf-2's trace row and first retriever came in both windows
    assert staged.n_other_days == 1  # lf-4 happened on 2026-03-01


def test_broken_traces_are_quarantined_naming_trace_and_field(export: Path, stager: Callable[..., Staged]) -> None:
    staged, _ = stager(export, "langfuse", partitioning="event-time")
    assert quarantined(staged) == {("lf-5", "observation o-5r output.0.id"), ("lf-6", "question")}
    reasons = {q.trace_id: q.reason for q in staged.quarantined}
    assert "neither" in reasons["lf-5"] and "o-6-missing-parent" in reasons["lf-6"]


def test_document_mapping_is_configurable() -> None:
    observation = {
        "id": "o", "trace_id": "t", "type": "SPAN", "parent_observation_id": "root", "name": "kb-search",
        "start_time": "2026-03-02 10:00:00.000000",
        "output": json.dumps({"hits": [{"body": "text", "meta": {"doc_id": "k-1", "similarity": 0.3}}]}),
    }  # fmt: skip
    options = AdapterOptions(retriever_names=("kb-search",), documents_path="hits", id_key="meta.doc_id",
                             text_key="body", score_key="meta.similarity")  # fmt: skip
    (span,) = list(spans(observation, options))
    assert span.kind == "retriever"
    assert [(d.id, d.text, d.score) for d in span.documents or ()] == [("k-1", "text", 0.3)]
    (default,) = list(spans(observation, AdapterOptions()))
    assert default.kind == "other" and default.documents is None


def test_score_rows_are_the_traces_feedback_and_text_scores_are_left_out() -> None:
    (score,) = spans({"id": "s", "trace_id": "t", "name": "feedback", "value": 1.0}, AdapterOptions())
    assert score.kind == "feedback" and score.trace_id == "t"
    assert score.feedback == {"name": "feedback", "value": 1.0, "label": None, "source": "api", "comment": None}
    text = {"id": "s2", "trace_id": "t", "name": "note", "value": 0, "data_type": "TEXT", "string_value": "ok"}
    assert list(spans(text, AdapterOptions())) == []
