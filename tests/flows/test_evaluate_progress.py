"""The evaluate flow's progress events: what a listener (the CLI's progress display) is told, stage by stage."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, RunnerConfig, ScoringConfig, SourceConfig
from ragpulse.tasks.demo.generate import generate_demo_traces
from ragpulse.tasks.reporting.progress import progress_listener

DAY = dt.date(2026, 4, 7)


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.lock = threading.RLock()  # as the CLI's display holds: a listener need not pickle

    def staging(self, day: dt.date, slices: int, of: int, traces: int) -> None:
        self.events.append(("staging", day, slices, of, traces))

    def scoring(self, day: dt.date, batches: int, of: int, cached: int) -> None:
        self.events.append(("scoring", day, batches, of, cached))

    def publishing(self, day: dt.date) -> None:
        self.events.append(("publishing", day))

    def published(self, day: dt.date, rows: Mapping[str, int]) -> None:
        self.events.append(("published", day, dict(rows)))

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [event[2:] for event in self.events if event[0] == kind]


def test_a_listener_is_told_each_stage_with_counts(tmp_path: Path) -> None:
    generate_demo_traces(tmp_path / "traces", start=DAY, days=1, traces_per_day=40, malformed_per_day=2)
    warehouse = tmp_path / "w.duckdb"
    groups: dict[str, Any] = {
        # Slices of about 10 kB: the day's plain JSONL file is staged as a few byte ranges, its gzip file as one.
        "source": SourceConfig(url=str(tmp_path / "traces"), slice_mb=0.01),
        "scoring": ScoringConfig(metrics="document_mrr,answer_f1", batch_size=10),
        "output": OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
    }
    recorder = _Recorder()
    with progress_listener(recorder):
        summary = evaluate_partition(date=DAY, **groups)

    assert {event[1] for event in recorder.events} == {DAY}
    kinds = [event[0] for event in recorder.events]
    assert kinds == sorted(kinds, key=["staging", "scoring", "publishing", "published"].index)  # stage by stage
    staging = recorder.of("staging")
    (slices,) = {of for _, of, _ in staging}
    assert slices > 2  # the plain file's byte ranges and the gzip file
    assert [done for done, _, _ in staging] == list(range(slices + 1))
    traces = [n for _, _, n in staging]
    assert traces[0] == 0 and traces == sorted(traces) and traces[-1] == summary.n_traces == 40
    assert recorder.of("scoring") == [(done, summary.n_batches, 0) for done in range(summary.n_batches + 1)]
    assert summary.n_batches > 1
    assert recorder.of("publishing") == [()]
    with duckdb.connect(str(warehouse), read_only=True) as con:
        scores = con.execute("SELECT count(*) FROM scores").fetchone()
    (published,) = recorder.of("published")
    assert published == ({"scores": scores[0] if scores else -1, "traces": 40, "quarantine": summary.n_quarantined},)

    # Again: every batch from the cache, and nothing published, the day being unchanged.
    again = _Recorder()
    with progress_listener(again):
        evaluate_partition(date=DAY, **groups)
    batches = summary.n_batches
    assert again.of("scoring")[-1] == (batches, batches, batches)
    assert again.of("published") == [({},)]


def test_without_a_listener_the_flow_reports_nothing() -> None:
    from ragpulse.tasks.reporting import progress

    assert progress._listeners == []
    with progress_listener(_Recorder()):
        assert len(progress._listeners) == 1
    assert progress._listeners == []


def test_on_dask_the_flow_reports_what_its_futures_tell(tmp_path: Path) -> None:
    """Dask's workers are other processes: the events come from the flow's thread as futures complete, and the
    listener, which holds a lock, never travels with the flow run to the workers."""
    generate_demo_traces(tmp_path / "traces", start=DAY, days=1, traces_per_day=20, malformed_per_day=0)
    recorder = _Recorder()
    with progress_listener(recorder):
        summary = evaluate_partition(
            date=DAY, source=SourceConfig(url=str(tmp_path / "traces")),
            scoring=ScoringConfig(metrics="document_mrr", batch_size=10),
            runner=RunnerConfig(kind="dask", max_workers=1),
            output=OutputConfig(warehouse=f"duckdb:///{tmp_path}/w.duckdb", work_dir=str(tmp_path / "work")),
        )  # fmt: skip
    assert recorder.of("staging")[-1] == (1, 1, 20)
    assert recorder.of("scoring") == [(done, summary.n_batches, 0) for done in range(summary.n_batches + 1)]
    assert recorder.of("published") == [({"scores": 20, "traces": 20, "quarantine": 0},)]
