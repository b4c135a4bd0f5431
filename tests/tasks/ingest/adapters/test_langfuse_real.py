"""Real Langfuse blob-storage exports (tests/fixtures/adapters/langfuse/real, see SOURCES.md) -> canonical traces.

The bucket holds three integrations over the same LangChain traces, as Langfuse lays them out under the
prefix ``langfuse-exports/``: legacy ``traces/`` + ``observations/`` (JSONL), enriched ``observations_v2/``
(JSONL) and enriched ``observations_v2/`` (Parquet), each with its run manifest. Expected values come from
the fixture files (read here with json/pyarrow) or from the inputs of generate.py, never from ragpulse.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from ragpulse.tasks.core.types import StagedPartition
from ragpulse.tasks.ingest.batches import read_staged
from ragpulse.tasks.ingest.staging import select_source_files, stage_records
from tests.tasks.ingest.adapters.conftest import FIXTURES, copy_with_mtime, quarantined

BUCKET = FIXTURES / "langfuse" / "real" / "bucket"
PREFIX = "langfuse-exports"
LEGACY, EVENTS, PARQUET = "cmrag0legacy0000000000001", "cmrag0events0000000000002", "cmrag0parquet000000000003"
JA_QUESTION = "請求書はどこで確認できますか？"
JA_ANSWER = "請求書は「設定 > 請求」で確認できます。"
JA_CONTEXTS = [
    ("billing-ja", "請求書は「設定 > 請求」から確認できます。"),
    ("billing-en", "Invoices are under Settings > Billing."),
]


def _manifest(project: str) -> dict[str, Any]:
    (path,) = (BUCKET / PREFIX / project / "manifests").glob("*.json")
    return json.loads(path.read_text())


DAY = dt.date.fromisoformat(_manifest(LEGACY)["maxTimestamp"][:10])
NOON = dt.datetime.combine(DAY, dt.time(12), tzinfo=dt.UTC).timestamp()


@pytest.fixture
def bucket(tmp_path: Path) -> Path:
    return copy_with_mtime(BUCKET, tmp_path / "bucket", NOON)


def _stage(source: Path, tmp_path: Path) -> tuple[StagedPartition, dict[str, dict[str, Any]]]:
    files = select_source_files(str(source), DAY, trace_format="langfuse", partitioning="event-time")
    staged = stage_records(DAY, files, staged_url=str(tmp_path / "staged"), batch_size=2, trace_format="langfuse",
                           partitioning="event-time")  # fmt: skip
    rows = {}
    for batch in staged.batches:
        for row in read_staged(batch).to_pylist():
            row["metadata"] = json.loads(row["metadata"])
            rows[row["trace_id"]] = row
    return staged, rows


def _jsonl(project: str, table: str) -> list[dict[str, Any]]:
    (path,) = (BUCKET / PREFIX / project / table).glob("*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _trace_ids_in_files(project: str) -> set[str]:
    """Traces in the export, counted from the files themselves."""
    if project == LEGACY:
        return {row["id"] for row in _jsonl(project, "traces")}
    if project == EVENTS:
        return {row["trace_id"] for row in _jsonl(project, "observations_v2")}
    (path,) = (BUCKET / PREFIX / project / "observations_v2").glob("*.parquet")
    return set(pc.unique(pq.read_table(path, columns=["trace_id"])["trace_id"]).to_pylist())


def _ja_trace_id() -> str:
    (row,) = [
        r for r in _jsonl(EVENTS, "observations_v2") if r["parent_observation_id"] == "" and r["input"] == JA_QUESTION
    ]
    return str(row["trace_id"])


def test_manifest_keys_resolve_below_the_prefix_from_the_bucket_root(bucket: Path) -> None:
    files = select_source_files(str(bucket), DAY, trace_format="langfuse", partitioning="event-time")
    expected = sorted(
        str(bucket / entry["key"]) for project in (LEGACY, EVENTS, PARQUET) for entry in _manifest(project)["files"]
    )
    assert [f.url for f in files] == expected
    assert len(expected) == 7  # traces + observations, observations_v2 (JSONL), observations_v2 (Parquet), scores


@pytest.mark.parametrize("project", [LEGACY, EVENTS, PARQUET])
def test_every_trace_in_the_export_is_read(project: str, bucket: Path, tmp_path: Path) -> None:
    staged, rows = _stage(bucket / PREFIX / project, tmp_path)
    assert len(_trace_ids_in_files(project)) == 3
    assert set(rows) == _trace_ids_in_files(project)
    assert quarantined(staged) == set()


@pytest.mark.parametrize("project", [LEGACY, EVENTS, PARQUET])
def test_the_japanese_trace_field_by_field(project: str, bucket: Path, tmp_path: Path) -> None:
    _, rows = _stage(bucket / PREFIX / project, tmp_path)
    trace = rows[_ja_trace_id()]
    assert (trace["question"], trace["answer"]) == (JA_QUESTION, JA_ANSWER)
    assert [(c["id"], c["text"], c["score"]) for c in trace["contexts"]] == [(i, t, None) for i, t in JA_CONTEXTS]
    assert trace["metadata"]["token_counts"] == {"input": 52, "output": 11, "total": 63}
    retriever = [r["id"] for r in _jsonl(EVENTS, "observations_v2")
                 if r["trace_id"] == trace["trace_id"] and r["type"] == "RETRIEVER"]  # fmt: skip
    assert trace["metadata"]["source"]["retriever_span_ids"] == retriever
    assert not any(key.startswith(("resourceAttributes", "scope")) for key in trace["metadata"])


@pytest.mark.parametrize("project", [LEGACY, EVENTS])
def test_the_failed_retrieval_is_a_trace_without_answer_or_contexts(project: str, bucket: Path, tmp_path: Path) -> None:
    _, rows = _stage(bucket / PREFIX / project, tmp_path)
    (failed,) = [r for r in _jsonl(EVENTS, "observations_v2") if r["level"] == "ERROR" and r["type"] == "RETRIEVER"]
    trace = rows[failed["trace_id"]]
    assert (trace["question"], trace["answer"], trace["contexts"]) == ("What is the uptime SLA?", None, [])


def test_a_project_folder_copied_out_of_the_bucket_still_resolves(bucket: Path, tmp_path: Path) -> None:
    moved = tmp_path / "downloads" / "langfuse"
    shutil.copytree(bucket / PREFIX / EVENTS, moved)
    copy_with_mtime(moved, moved, NOON)
    _, rows = _stage(moved, tmp_path)
    assert set(rows) == _trace_ids_in_files(EVENTS)


def test_a_prefix_without_slash_is_part_of_the_key(bucket: Path, tmp_path: Path) -> None:
    """Langfuse concatenates prefix and project id (its own tests use prefix = project id): derived edge case."""
    root = tmp_path / "glued"
    shutil.copytree(bucket / PREFIX / EVENTS, root / f"{EVENTS}{EVENTS}")
    (manifest,) = (root / f"{EVENTS}{EVENTS}" / "manifests").glob("*.json")
    manifest.write_text(manifest.read_text().replace(f"{PREFIX}/{EVENTS}/", f"{EVENTS}{EVENTS}/"))
    copy_with_mtime(root, root, NOON)
    _, rows = _stage(root, tmp_path)
    assert set(rows) == _trace_ids_in_files(EVENTS)


def test_without_a_root_input_the_question_is_the_retriever_query_then_the_user_message(
    bucket: Path, tmp_path: Path
) -> None:
    """Derived from the real events file: an app whose root span logs no input (not LangChain's chain)."""
    (path,) = (bucket / PREFIX / EVENTS / "observations_v2").glob("*.jsonl")
    events = [r for r in _jsonl(EVENTS, "observations_v2") if r["trace_id"] == _ja_trace_id()]
    for row in events:
        if row["parent_observation_id"] == "":
            row["input"] = ""
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in events))
    copy_with_mtime(path.parent, path.parent, NOON)
    assert _stage(bucket / PREFIX / EVENTS, tmp_path / "a")[1][_ja_trace_id()]["question"] == JA_QUESTION

    no_retriever = [r for r in events if r["type"] == "GENERATION" or r["parent_observation_id"] == ""]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in no_retriever))
    copy_with_mtime(path.parent, path.parent, NOON)
    trace = _stage(bucket / PREFIX / EVENTS, tmp_path / "b")[1][_ja_trace_id()]
    assert (trace["question"], trace["contexts"]) == (JA_QUESTION, [])


@pytest.mark.parametrize("project", [LEGACY, EVENTS, PARQUET])
def test_an_export_written_before_manifests_existed_is_read_whole(
    project: str, bucket: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Langfuse versions without export manifests: the same files, no manifests/ folder, and a warning."""
    shutil.rmtree(bucket / PREFIX / project / "manifests")
    staged, rows = _stage(bucket / PREFIX / project, tmp_path)
    assert set(rows) == _trace_ids_in_files(project) and not staged.quarantined
    assert any("/scores/" in f.url for f in staged.files)  # the traces' feedback
    assert "without manifests/" in caplog.text
