"""Backfill planning: configuration hashes and the newest published run per partition."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from ragpulse.tasks.config import JudgeConfig, OutputConfig, RunConfig, RunnerConfig, ScoringConfig, SourceConfig
from ragpulse.tasks.planning.tasks import config_hash, published_config_hashes
from ragpulse.tasks.warehouse import QUARANTINE_SCHEMA, RUNS_SCHEMA, SCORES_SCHEMA, Publication, open_warehouse

DAY = dt.date(2026, 7, 1)


def _config(tmp_path: Path, **groups: Any) -> RunConfig:
    """A run of s3://b/t with its work dir in ``tmp_path``; ``groups`` replace those groups."""
    return RunConfig(
        **{"source": SourceConfig(url="s3://b/t"), "output": OutputConfig(work_dir=str(tmp_path)), **groups}
    )


def test_the_hash_follows_what_can_change_a_score(tmp_path: Path) -> None:
    base = _config(tmp_path)
    same = config_hash(
        _config(
            tmp_path, scoring=ScoringConfig(batch_size=10), runner=RunnerConfig(max_workers=1),
            output=OutputConfig(work_dir=str(tmp_path), warehouse="x.duckdb"),
        )
    )  # fmt: skip
    assert same == config_hash(base)
    changed = [
        _config(tmp_path, scoring=ScoringConfig(metrics=("document_mrr",))),
        _config(tmp_path, scoring=ScoringConfig(sample_rate=0.5)),
    ]
    hashes = {config_hash(base), *(config_hash(config) for config in changed)}
    assert len(hashes) == 3
    judged = ScoringConfig(metrics=("faithfulness",))
    assert config_hash(_config(tmp_path, scoring=judged, judge=JudgeConfig(model="gpt-a"))) != config_hash(
        _config(tmp_path, scoring=judged, judge=JudgeConfig(model="gpt-b"))
    )


def _run(run_id: str, day: dt.date, config: str) -> pa.Table:
    now = dt.datetime.now(dt.UTC)
    row = {name: None for name in RUNS_SCHEMA.names}
    row |= {"run_id": run_id, "partition_date": day, "source": "s", "config_hash": config, "config": "{}"}
    row |= {"metrics": "", "started_at": now, "finished_at": now}
    row |= {name: 0 for name in ("n_files", "n_records", "n_traces", "n_quarantined", "n_batches")}
    row |= {"n_batches_cached": 0, "n_scores": 0}
    return pa.Table.from_pylist([row], schema=RUNS_SCHEMA)


def test_the_newest_publish_of_a_partition_decides(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path}/w.duckdb"
    assert published_config_hashes(url, DAY, DAY) == {}
    warehouse = open_warehouse(url)
    empty = dict(metrics=[], scores=SCORES_SCHEMA.empty_table(), quarantine=QUARANTINE_SCHEMA.empty_table())
    for run_id, config in (("r1", "old"), ("r2", "new")):
        warehouse.publish(Publication(DAY, run=_run(run_id, DAY, config), **empty))
        time.sleep(0.01)
    warehouse.publish(Publication(DAY + dt.timedelta(days=1), run=_run("r3", DAY + dt.timedelta(days=1), "x"), **empty))
    assert published_config_hashes(url, DAY, DAY + dt.timedelta(days=5)) == {DAY: "new", DAY + dt.timedelta(1): "x"}
    assert published_config_hashes(url, DAY + dt.timedelta(days=1), DAY + dt.timedelta(days=1)) == {
        DAY + dt.timedelta(days=1): "x"
    }


def test_the_hash_of_a_configuration_stays_what_warehouses_hold(tmp_path: Path) -> None:
    """Published runs rows hold these hashes and a backfill compares against them: a refactoring must not change
    them (these were computed by the code before the rooms of issue 30). A metric's new version changes them on
    purpose, and then this test with them: the default one changed with issue 32's default metrics (the label-free
    set) and with issue 35's versions of answer_f1, answer_exact_match_normalized and answer_length; the explicit
    one did not."""
    judged = ScoringConfig(metrics=("faithfulness", "document_mrr"), sample_rate=0.5)
    adapter = SourceConfig(url="s3://b/t", format="langfuse")
    assert config_hash(_config(tmp_path)) == "0a1e3ddffdd4a04b"
    assert config_hash(_config(tmp_path, source=adapter, scoring=judged, judge=JudgeConfig(model="gpt-x"))) == (
        "5968a1c952f2feee"
    )
