"""The content key of a publication: the same rows give the same key whoever runs them; any published change, or a
change of the gate that lets them through, gives another. A re-run of an unchanged day relies on it to publish
nothing (tests/flows/test_evaluate.py takes that path through the flow)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import numpy as np
import pytest

from ragpulse.metrics import MetricResult, Status
from ragpulse.tasks.core.types import (
    BatchRef,
    ConversationScores,
    PartitionScores,
    QuarantinedRecord,
    RunInfo,
    StepScores,
)
from ragpulse.tasks.warehouse.duckdb import DuckDBWarehouse
from ragpulse.tasks.warehouse.publication import build_publication, content_key_of, published_run

DAY = dt.date(2026, 11, 1)


def _scores(**changes: object) -> PartitionScores:
    n = 4
    scores = PartitionScores(
        date=DAY,
        trace_ids=np.array([f"t{i}" for i in range(n)], dtype=object),
        values={"m": np.linspace(0, 1, n)},
        status={"m": np.array([Status.OK, Status.OK, Status.NOT_APPLICABLE, Status.OK], dtype=np.int8)},
        reasons={"m": np.array([None, None, "no_labels", None], dtype=object)},
        versions={"m": "1.0.0"},
        quarantined=[QuarantinedRecord("a.jsonl", 7, None, "<record>", "invalid JSON", "{")],
        n_records=5,
        n_files=1,
        n_batches=1,
        staged_batches=[BatchRef("file:///staged/abc.parquet", "abc", n)],
        steps=(_steps(),),
        conversations=_conversations(),
    )
    return dataclasses.replace(scores, **changes)


def _result(*values: float) -> MetricResult:
    return MetricResult.from_values(np.array(values))


def _steps(**changes: object) -> StepScores:
    """Three steps of t0 and t1, scored against their own queries."""
    steps = StepScores(
        trace_ids=np.array(["t0", "t0", "t1"], dtype=object),
        step_index=np.array([0, 1, 0], dtype=np.int64),
        step_ids=np.array(["s-a", "s-b", "s-c"], dtype=object),
        against="step_query",
        results={"m": _result(0.25, 0.5, 1.0)},
        versions={"m": "1.0.0"},
        prompt_versions={"m": "m/1"},
    )
    return dataclasses.replace(steps, **changes)


def _conversations(**changes: object) -> ConversationScores:
    conversations = ConversationScores(
        conversation_ids=np.array(["会話-1"], dtype=object),
        n_turns=np.array([2], dtype=np.int64),
        first_trace_ids=np.array(["t0"], dtype=object),
        last_trace_ids=np.array(["t1"], dtype=object),
        results={"goal": _result(1.0)},
        versions={"goal": "1.0.0"},
    )
    return dataclasses.replace(conversations, **changes)


def _run(run_id: str, config_hash: str = "cfg") -> RunInfo:
    return RunInfo(run_id, "file:///traces", config_hash, {}, dt.datetime(2026, 11, 2, tzinfo=dt.UTC))


def test_the_key_is_the_content_not_the_run() -> None:
    key = content_key_of(_scores(), ["m"], _run("r1"), "suite-a")
    assert key == content_key_of(_scores(), ["m"], _run("r2"), "suite-a")
    assert len(key) == 32


@pytest.mark.parametrize(
    "change",
    [
        {"values": {"m": np.array([0.0, 0.5, 0.0, 1.0])}},
        {"status": {"m": np.array([Status.OK, Status.FAILED, Status.NOT_APPLICABLE, Status.OK], dtype=np.int8)}},
        {"reasons": {"m": np.array([None, None, "no_relevant_labels", None], dtype=object)}},
        {"trace_ids": np.array(["t0", "t1", "t2", "t9"], dtype=object)},
        {"quarantined": []},
        {"versions": {"m": "1.1.0"}},
        {"judge_model": "gpt-x"},
        {"staged_batches": [BatchRef("file:///staged/abd.parquet", "abd", 4)]},
        {"steps": (_steps(results={"m": _result(0.25, 0.75, 1.0)}),)},
        {"steps": (_steps(step_index=np.array([0, 2, 0], dtype=np.int64)),)},
        {"steps": (_steps(step_ids=np.array(["s-a", "s-b", "s-d"], dtype=object)),)},
        {"steps": (_steps(against="question"),)},
        {"steps": (_steps(prompt_versions={"m": "m/2"}),)},
        {"steps": ()},
        {"conversations": _conversations(results={"goal": _result(0.0)})},
        {"conversations": _conversations(n_turns=np.array([3], dtype=np.int64))},
        {"conversations": _conversations(last_trace_ids=np.array(["t2"], dtype=object))},
        {"conversations": None},
    ],
    ids=[
        "value",
        "status",
        "reason",
        "trace",
        "quarantine",
        "version",
        "judge",
        "staged batch",
        "step value",
        "step index",
        "step id",
        "step against",
        "step prompt",
        "no steps",
        "conversation value",
        "conversation turns",
        "conversation last turn",
        "no conversations",
    ],
)
def test_any_published_change_changes_the_key(change: dict[str, object]) -> None:
    assert content_key_of(_scores(**change), ["m"], _run("r1")) != content_key_of(_scores(), ["m"], _run("r1"))


def test_the_gate_and_the_configuration_are_part_of_the_key() -> None:
    base = content_key_of(_scores(), ["m"], _run("r1"), "suite-a")
    assert content_key_of(_scores(), ["m"], _run("r1"), "suite-b") != base
    assert content_key_of(_scores(), ["m"], _run("r1", config_hash="other"), "suite-a") != base


def test_the_standing_run_is_the_newest_with_the_key(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path}/w.duckdb"
    warehouse = DuckDBWarehouse(url)
    scores, changed = _scores(staged_batches=[]), _scores(staged_batches=[], values={"m": np.zeros(4)})
    key, other = content_key_of(scores, ["m"], _run("r1")), content_key_of(changed, ["m"], _run("r1"))
    assert published_run(url, DAY, key) is None  # nothing published yet
    warehouse.publish(build_publication(scores, _run("r1"), ["m"], n_batches_cached=0, content_key=key))
    assert published_run(url, DAY, key) == "r1"
    assert published_run(url, DAY + dt.timedelta(days=1), key) is None
    warehouse.publish(build_publication(changed, _run("r2"), ["m"], n_batches_cached=0, content_key=other))
    assert published_run(url, DAY, key) is None  # the rows of r1 were replaced
    assert published_run(url, DAY, other) == "r2"
