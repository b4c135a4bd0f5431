"""Great Expectations gates with real GX: bad traces are quarantined, bad score tables never published; GX is
imported only when a suite runs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from prefect.logging import disable_run_logger

from ragpulse.metrics import Status
from ragpulse.tasks.core.storage import list_partition_files
from ragpulse.tasks.core.types import PartitionScores, RunInfo, StagedPartition
from ragpulse.tasks.ingest.staging import stage_records
from ragpulse.tasks.quality.checks import (
    DEFAULT_SUITES,
    TraceLimits,
    check_scores,
    check_traces,
    load_suite,
    trace_profile,
)
from ragpulse.tasks.quality.config import QualityConfig
from ragpulse.tasks.quality.tasks import OutputValidationError, validate_scores
from ragpulse.tasks.scoring.assemble import assemble_partition
from ragpulse.tasks.warehouse.duckdb import DuckDBWarehouse
from ragpulse.tasks.warehouse.publication import build_publication

DAY = dt.date(2026, 5, 4)
RUN = RunInfo("run-1", "file:///traces", "cfg", {}, dt.datetime(2026, 5, 5, tzinfo=dt.UTC))


def record(trace_id: str, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "trace_id": trace_id,
        "timestamp": f"{DAY.isoformat()}T10:00:00Z",
        "question": "what is the capital of France?",
        "answer": "Paris",
        "contexts": [{"id": "d1", "text": "Paris is the capital of France.", "score": 0.9}],
        "reference": "Paris",
        "relevant_context_ids": ["d1"],
    }
    base.update(changes)
    return base


def staged_partition(tmp_path: Path, records: list[dict[str, Any]]) -> StagedPartition:
    directory = tmp_path / "traces" / f"dt={DAY.isoformat()}"
    directory.mkdir(parents=True)
    (directory / "part-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    files = list_partition_files(str(tmp_path / "traces"), DAY)
    return stage_records(DAY, files, staged_url=str(tmp_path / "staged"), batch_size=3)


def test_suites_in_the_repository_load() -> None:
    for path in DEFAULT_SUITES.values():
        suite = load_suite(path)
        assert suite["meta"]["ragpulse_suite_version"] == "1.0.0"
        assert suite["expectations"]


def test_profile_has_one_row_per_trace_with_exact_counts(tmp_path: Path) -> None:
    staged = staged_partition(
        tmp_path,
        [
            record("a"),
            record("b", answer=None, reference=None, contexts=[]),
            record("c", contexts=[{"id": "x", "text": "", "score": None}, {"id": "x", "text": "abc", "score": 1}]),
            record("d", reference_answers=["", "paris"]),
            # Text without ids (OTel GenAI reference scenarios): neither empty nor duplicate ids.
            record("e", contexts=[{"id": None, "text": "one", "score": None}, {"id": None, "text": "two"}]),
        ],
    )
    profile = trace_profile(staged)
    assert list(profile["trace_id"]) == ["a", "b", "c", "d", "e"]
    assert list(profile["n_contexts"]) == [1, 0, 2, 1, 2]
    assert list(profile["max_context_chars"]) == [31, 0, 3, 31, 3]
    assert list(profile["n_empty_context_ids"]) == [0, 0, 0, 0, 0]
    assert list(profile["n_empty_context_texts"]) == [0, 0, 1, 0, 0]
    assert list(profile["n_duplicate_context_ids"]) == [0, 0, 1, 0, 0]
    assert list(profile["n_empty_reference_answers"]) == [0, 0, 0, 1, 0]
    assert profile["answer_chars"].isna().tolist() == [False, True, False, False, False]
    assert str(profile["timestamp"].dtype) == "datetime64[us, UTC]"


def test_clean_partition_passes_every_quarantine_expectation(tmp_path: Path) -> None:
    staged = staged_partition(tmp_path, [record(f"t{i}") for i in range(7)])
    checked = check_traces(staged, RUN, limits=TraceLimits(), docs_dir=tmp_path / "docs")
    assert checked.excluded == []
    assert all(checked.results.column("success").to_pylist())
    assert checked.results.num_rows == len(load_suite(DEFAULT_SUITES["traces_in"])["expectations"])
    assert checked.docs_url is not None and (tmp_path / "docs" / "index.html").exists()


def test_bad_traces_are_quarantined_with_the_expectation_that_failed(tmp_path: Path) -> None:
    staged = staged_partition(
        tmp_path,
        [
            record("ok-1"),
            record("dup"),
            record("late", timestamp=f"{(DAY + dt.timedelta(days=1)).isoformat()}T00:00:00Z"),
            record("early", timestamp=f"{DAY.isoformat()}T00:30:00+02:00"),
            record("long", question="?" * 101),
            record("empty-text", contexts=[{"id": "d1", "text": "", "score": None}]),
            record("empty-ref", reference=""),
            record("dup"),
            record("hybrid", contexts=[{"id": "d1", "text": "a", "score": 1}, {"id": "d1", "text": "a", "score": 0.5}]),
        ],
    )
    checked = check_traces(staged, RUN, limits=TraceLimits(max_question_chars=100))
    reasons = {(q.trace_id, q.line): (q.field, q.reason) for q in checked.excluded}
    source = staged.files[0].url
    assert reasons == {
        ("dup", 8): ("trace_id", f"duplicate trace_id within the partition, first seen at {source}:2"),
        ("late", 3): ("timestamp", "failed expect_column_values_to_be_between: timestamp = 2026-05-05 00:00:00+00:00"),
        ("early", 4): ("timestamp", "failed expect_column_values_to_be_between: timestamp = 2026-05-03 22:30:00+00:00"),
        ("long", 5): ("question_chars", "failed expect_column_values_to_be_between: question_chars = 101"),
        ("empty-text", 6): (
            "n_empty_context_texts",
            "failed expect_column_values_to_be_in_set: n_empty_context_texts = 1",
        ),
        ("empty-ref", 7): ("reference_chars", "failed expect_column_values_to_be_between: reference_chars = 0"),
    }
    # Duplicate context ids are reported, not quarantined.
    assert checked.reported["expect_column_values_to_be_in_set(n_duplicate_context_ids)"] == 1
    scores = assemble_partition(staged, [], checked.excluded)
    assert len(scores.quarantined) == 6


def _scores(n: int = 6, metrics: tuple[str, ...] = ("document_mrr", "answer_f1")) -> PartitionScores:
    rng = np.random.default_rng(1)
    values = {m: rng.random(n) for m in metrics}
    status = {m: np.zeros(n, dtype=np.int8) for m in metrics}
    reasons = {m: np.full(n, None, dtype=object) for m in metrics}
    values["answer_f1"][0], status["answer_f1"][0], reasons["answer_f1"][0] = np.nan, Status.NOT_APPLICABLE, "no_answer"
    return PartitionScores(
        date=DAY,
        trace_ids=np.array([f"t{i}" for i in range(n)], dtype=object),
        values=values,
        status=status,
        reasons=reasons,
        versions=dict.fromkeys(metrics, "1.0.0"),
        quarantined=[],
        n_records=n,
        n_files=1,
        n_batches=1,
    )


def _check(scores: PartitionScores, metrics: list[str] | None = None, **kwargs: Any) -> list[str]:
    names = metrics or list(scores.values)
    publication = build_publication(scores, RUN, names, n_batches_cached=0)
    _, failures = check_scores(publication, RUN, n_traces=len(scores.trace_ids), max_failure_rate=0.2, **kwargs)
    return failures


def test_clean_score_table_passes() -> None:
    assert _check(_scores()) == []


def test_out_of_range_score_is_caught() -> None:
    scores = _scores()
    scores.values["document_mrr"][2] = 1.5
    (failure,) = _check(scores)
    assert failure.startswith("ragpulse_scores_out: expect_column_values_to_be_between(value) unexpected=1 of 11")


def test_missing_scores_are_caught() -> None:
    scores = _scores()
    publication = build_publication(scores, RUN, list(scores.values), n_batches_cached=0)
    one_row_lost = dataclasses.replace(publication, scores=publication.scores.to_table().slice(1))
    _, failures = check_scores(one_row_lost, RUN, n_traces=6, max_failure_rate=0.2)
    text = "\n".join(failures)
    assert "ragpulse_scores_out: expect_table_row_count_to_equal(table)" in text and '"observed_value": 11' in text
    assert "ragpulse_scores_per_metric: expect_column_values_to_be_between(n) unexpected=1 of 2" in text


def test_failure_rate_above_threshold_is_caught() -> None:
    scores = _scores(10)
    for i in range(3):
        scores.values["document_mrr"][i], scores.status["document_mrr"][i] = np.nan, Status.FAILED
        scores.reasons["document_mrr"][i] = "judge_timeout"
    (failure,) = _check(scores)
    assert failure.startswith(
        "ragpulse_scores_per_metric: expect_column_values_to_be_between(failure_rate) unexpected=1"
    )


def test_a_failed_output_suite_publishes_nothing_but_records_validations(tmp_path: Path, prefect_api: str) -> None:
    url = f"duckdb:///{tmp_path}/w.duckdb"
    good = _scores()
    DuckDBWarehouse(url).publish(build_publication(good, RUN, list(good.values), n_batches_cached=0))
    bad = _scores()
    bad.values["answer_f1"][3] = -0.5
    staged = staged_partition(tmp_path, [record("t0")])
    traces_checked = check_traces(staged, RUN, limits=TraceLimits())
    with disable_run_logger(), pytest.raises(OutputValidationError, match=r"nothing was published[\s\S]*\(value\)"):
        rerun = dataclasses.replace(RUN, run_id="run-2")
        validate_scores.fn(url, bad, rerun, list(bad.values), 0, traces_checked, QualityConfig(max_failure_rate=0.2))
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        assert con.execute("SELECT DISTINCT run_id FROM scores").fetchall() == [("run-1",)]
        assert con.execute("SELECT min(value) FROM scores").fetchall()[0][0] >= 0
        failed = con.execute("SELECT suite, expectation FROM validations WHERE run_id = 'run-2' AND NOT success")
        assert failed.fetchall() == [("ragpulse_scores_out", "expect_column_values_to_be_between")]


@pytest.mark.slow
def test_importing_the_gates_loads_no_great_expectations() -> None:
    """GX takes seconds to import: a flow that imports the gates must not pay for it before a suite runs."""
    code = (
        "import sys\n"
        "import ragpulse.tasks.quality.tasks\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'great_expectations'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
