"""The format registry, format options, settings and the staging cache key."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

import ragpulse.tasks.ingest.adapters as adapters
from ragpulse.metrics import DEFAULT_METRICS, parse_metrics
from ragpulse.tasks.config import RunConfig, ScoringConfig, SourceConfig, load_config
from ragpulse.tasks.core.exceptions import ConfigError, PartitionNotFoundError
from ragpulse.tasks.core.storage import SourceFile, list_partition_files
from ragpulse.tasks.ingest.adapters import FORMATS, adapter_for, parse_options
from ragpulse.tasks.ingest.tasks import _stage_key

DAY = dt.date(2026, 3, 2)


def test_all_is_sorted_and_complete() -> None:
    assert adapters.__all__ == sorted(adapters.__all__, key=lambda n: (not n.isupper(), n))
    assert all(hasattr(adapters, name) for name in adapters.__all__)


def test_formats_and_unknown_format() -> None:
    assert FORMATS == ("ragpulse", "openinference", "otel-genai", "langfuse", "langsmith")
    assert adapter_for("ragpulse") is None
    with pytest.raises(ConfigError, match="unknown trace_format 'jaeger'; use one of ragpulse, openinference"):
        adapter_for("jaeger")


def test_options_are_checked_against_the_format() -> None:
    assert parse_options("langsmith", {"score_key": "metadata.relevance_score"}).score_key == "metadata.relevance_score"
    assert parse_options("otel-genai", {"retriever_names": "kb"}).retriever_names == ("kb",)
    assert parse_options("otel-genai", {"id_key": "metadata.chunk"}).id_key == "metadata.chunk"
    with pytest.raises(ConfigError, match=r"\['documents_path'\] are not read by trace_format 'otel-genai'"):
        parse_options("otel-genai", {"documents_path": "x"})
    with pytest.raises(ConfigError, match="not read by trace_format 'ragpulse'"):
        parse_options("ragpulse", {"question_keys": ["q"]})
    with pytest.raises(ConfigError, match="must be a list of non-empty strings"):
        parse_options("langfuse", {"question_keys": [1]})


def _config(**source: Any) -> RunConfig:
    """A run of s3://b/t with the default metrics; ``source`` sets the rest of its source group."""
    return RunConfig(source=SourceConfig(url="s3://b/t", **source), scoring=ScoringConfig(metrics=DEFAULT_METRICS))


def test_settings_read_format_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no ./ragpulse.toml: only the environment and the defaults
    monkeypatch.setenv("RAGPULSE_SOURCE", "s3://b/t")
    monkeypatch.setenv("RAGPULSE_TRACE_FORMAT", "langfuse")
    monkeypatch.setenv("RAGPULSE_FORMAT_OPTIONS", '{"id_key": "metadata.doc_id"}')
    monkeypatch.setenv("RAGPULSE_PARTITIONING", "event-time")
    monkeypatch.setenv("RAGPULSE_LATE_ARRIVAL_HOURS", "12")
    source = load_config().source
    assert (source.format, source.format_options) == ("langfuse", {"id_key": "metadata.doc_id"})
    assert (source.partitioning, source.late_arrival_hours) == ("event-time", 12.0)
    with pytest.raises(ValueError, match="not read by trace_format 'otel-genai'"):
        SourceConfig(url="s3://b/t", format="otel-genai", format_options={"documents_path": "x"})


def test_fingerprint_covers_format_and_options_and_is_unchanged_for_canonical_traces() -> None:
    versions = sorted((r.name, r.version) for r in parse_metrics(DEFAULT_METRICS))
    assert _config().fingerprint() == hashlib.sha256(json.dumps(versions).encode()).hexdigest()[:16]
    prints = {
        _config().fingerprint(),
        _config(format="langfuse").fingerprint(),
        _config(format="langfuse", format_options={"id_key": "metadata.doc_id"}).fingerprint(),
        _config(format="langfuse", format_options={"tool_documents_path": "hits"}).fingerprint(),
        _config(format="langsmith").fingerprint(),
    }
    assert len(prints) == 5
    # An option added later enters the options only when set: the hashes of runs from before it stay valid.
    assert "tool_documents_path" not in parse_options("langfuse", {}).to_dict()
    assert _config(partitioning="event-time").fingerprint() == _config().fingerprint()  # same scores


def _key(date: dt.date = DAY, **source: Any) -> str:
    """The staging task's cache key for a day of one file, the source group given as ``source``."""
    params = {
        "date": date, "files": [SourceFile("s3://b/x.jsonl", 10, "etag")], "batch_size": 100, "staged_url": "w",
        "source": SourceConfig(**{"url": "s3://b/t", **source}),
    }  # fmt: skip
    return _stage_key(None, params)  # type: ignore[arg-type]


def test_stage_cache_key_covers_format_options_and_event_day() -> None:
    plain = _key()
    assert _key(format="ragpulse", format_options={}, partitioning="dt") == plain  # defaults, same key
    assert _key(url="s3://elsewhere/t", slice_mb=1.0) == plain  # the files' identities are the day, not the root
    assert _key(format="langfuse") != plain
    assert _key(format="langfuse", format_options={"id_key": "metadata.x"}) != _key(format="langfuse")
    # dt: the files are the day; event-time: one file can feed two days
    assert _key(date=DAY + dt.timedelta(days=1)) == plain
    event = _key(partitioning="event-time")
    assert event != plain and _key(partitioning="event-time", date=DAY + dt.timedelta(days=1)) != event


def _touch(path: Path, when: dt.datetime) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}\n")
    os.utime(path, (when.timestamp(), when.timestamp()))


def test_event_time_lists_files_modified_within_the_late_arrival_window(tmp_path: Path) -> None:
    midnight = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
    _touch(tmp_path / "a" / "early.jsonl", midnight - dt.timedelta(hours=7))  # before the window
    _touch(tmp_path / "a" / "lead-in.jsonl", midnight - dt.timedelta(hours=5))
    _touch(tmp_path / "b" / "noon.jsonl", midnight + dt.timedelta(hours=12))
    _touch(tmp_path / "b" / "late.jsonl", midnight + dt.timedelta(hours=29))
    _touch(tmp_path / "b" / "too-late.jsonl", midnight + dt.timedelta(hours=31))
    files = list_partition_files(str(tmp_path), DAY, partitioning="event-time", late_arrival_hours=6)
    assert [Path(f.url).name for f in files] == ["lead-in.jsonl", "late.jsonl", "noon.jsonl"]
    with pytest.raises(PartitionNotFoundError, match="none was modified between 2026-03-08 18:00 and 2026-03-10 06:00"):
        list_partition_files(str(tmp_path), dt.date(2026, 3, 9), partitioning="event-time", late_arrival_hours=6)
    with pytest.raises(ConfigError, match="unknown partitioning 'hourly'"):
        list_partition_files(str(tmp_path), DAY, partitioning="hourly")


def test_canonical_traces_are_selected_by_timestamp_under_event_time(tmp_path: Path) -> None:
    from ragpulse.tasks.ingest.staging import stage_records

    lines = [
        {"trace_id": "in-day", "timestamp": "2026-03-02T23:59:59Z", "question": "q?"},
        {"trace_id": "next-day", "timestamp": "2026-03-03T00:00:00Z", "question": "q?"},
        {"trace_id": "no-question", "timestamp": "2026-03-02T10:00:00Z"},
    ]
    path = tmp_path / "src" / "log.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    os.utime(path, (dt.datetime(2026, 3, 3, 1, tzinfo=dt.UTC).timestamp(),) * 2)  # arrived an hour late
    files = list_partition_files(str(path.parent), DAY, partitioning="event-time", late_arrival_hours=2)
    staged = stage_records(DAY, files, staged_url=str(tmp_path / "w"), batch_size=10, partitioning="event-time")
    assert (staged.n_valid, staged.n_other_days) == (1, 1)
    assert [(q.trace_id, q.field) for q in staged.quarantined] == [("no-question", "question")]
