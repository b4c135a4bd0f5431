"""A day mixing good traces with the hostile corpus (tests/tasks/ingest/test_hostile_records.py) through the
evaluate-partition flow into DuckDB: the good traces are scored, each hostile record is quarantined once with its
field and reason, the runs row's counts add up, and a re-run gives the same rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.metrics import DEFAULT_EMBEDDING_METRICS, DEFAULT_METRICS
from ragpulse.tasks.config import OutputConfig, ScoringConfig, SourceConfig
from tests.tasks.ingest.test_hostile_records import CANONICAL, DAY, STAGED, good

GOOD = 30
COUNT_COLUMNS = (
    "n_records, n_traces, n_quarantined, n_records_quarantined, n_traces_read, n_traces_quarantined, n_staged, "
    "n_other_days, n_spans_quarantined, n_duplicate_spans"
)


def _query(warehouse: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()


def test_a_day_of_good_and_hostile_records_scores_the_good_quarantines_the_rest_and_reruns_identically(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "traces" / f"dt={DAY}"
    folder.mkdir(parents=True)
    goods = [json.dumps(good(f"g{i}", question=f"What is item {i} made of?")).encode() for i in range(GOOD)]
    # A repeated trace id: staged twice, scored once, its second line quarantined after scoring.
    lines = [*goods, goods[0], *(record for _, record, _, _ in CANONICAL)]
    (folder / "day.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    warehouse = tmp_path / "w.duckdb"
    kwargs: dict[str, Any] = {
        "date": DAY,
        "source": SourceConfig(url=str(tmp_path / "traces"), language="en"),
        "output": OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
        "scoring": ScoringConfig(batch_size=16),
    }
    first = evaluate_partition(**kwargs)

    hostile_at = {GOOD + 2 + i: (name, field, reason) for i, (name, _, field, reason) in enumerate(CANONICAL)}
    quarantine = _query(warehouse, "SELECT line, field, reason, trace_id FROM quarantine WHERE partition_date = ?", DAY)
    by_line: dict[int, list[tuple[Any, ...]]] = {}
    for row in quarantine:
        by_line.setdefault(row[0], []).append(row)
    for number, (name, field, reason) in hostile_at.items():
        if field is not STAGED:
            assert [(f, reason in r) for _, f, r, _ in by_line.get(number, [])] == [(field, True)], name
    assert [row[1:] for row in by_line[GOOD + 1]] == [("trace_id", f"duplicate trace_id within the partition, "
                                                       f"first seen at {folder / 'day.jsonl'}:1", "g0")]  # fmt: skip

    scored = _query(
        warehouse,
        "SELECT count(*), count(DISTINCT (trace_id, metric)), count(DISTINCT trace_id) FROM scores "
        "WHERE partition_date = ?",
        DAY,
    )[0]
    day_metrics = (*DEFAULT_METRICS, *DEFAULT_EMBEDDING_METRICS)  # the defaults on a day without feedback
    assert scored == (first.n_traces * len(day_metrics),) * 2 + (first.n_traces,)
    ids = {row[0] for row in _query(warehouse, "SELECT DISTINCT trace_id FROM scores")}
    assert {f"g{i}" for i in range(GOOD)} <= ids
    # Every line is in exactly one place: scored (once per trace id) or quarantined.
    located = _query(
        warehouse,
        "SELECT source_line FROM traces WHERE partition_date = ? UNION ALL "
        "SELECT line FROM quarantine WHERE partition_date = ?",
        DAY,
        DAY,
    )
    assert sorted(line for (line,) in located) == list(range(1, len(lines) + 1))

    (run,) = _query(warehouse, f"SELECT {COUNT_COLUMNS} FROM runs")
    counts = dict(zip([c.strip() for c in COUNT_COLUMNS.split(",")], run, strict=True))
    assert counts["n_records"] == len(lines) == counts["n_records_quarantined"] + counts["n_traces_read"]
    assert counts["n_traces_read"] == counts["n_staged"] + counts["n_traces_quarantined"] + counts["n_other_days"]
    dropped_after_staging = counts["n_staged"] - counts["n_traces"]  # the repeated id, any excluded by the suite
    assert dropped_after_staging >= 1
    assert counts["n_quarantined"] == counts["n_records_quarantined"] + counts["n_traces_quarantined"] + (
        dropped_after_staging
    )
    assert counts["n_quarantined"] == len(quarantine) and counts["n_traces"] == first.n_traces
    assert (counts["n_other_days"], counts["n_spans_quarantined"], counts["n_duplicate_spans"]) == (0, None, None)
    assert (first.n_records, first.n_quarantined) == (len(lines), len(quarantine))

    every_row = {
        "scores": "SELECT trace_id, metric, value, status, reason FROM scores ORDER BY ALL",
        "quarantine": "SELECT source_file, line, trace_id, field, reason, raw FROM quarantine ORDER BY ALL",
        "traces": "SELECT trace_id, question, source_line, language FROM traces ORDER BY ALL",
    }
    before = {table: _query(warehouse, sql) for table, sql in every_row.items()}
    # The same hostile day again is the same content: its rows stand and nothing is published; republished, the
    # rows are the same again and the run counts the same records.
    assert evaluate_partition(**kwargs).unchanged_since == first.run_id
    assert _query(warehouse, f"SELECT {COUNT_COLUMNS} FROM runs") == [run]
    evaluate_partition(**{**kwargs, "output": kwargs["output"].model_copy(update={"republish": True})})
    assert {table: _query(warehouse, sql) for table, sql in every_row.items()} == before
    runs = _query(warehouse, f"SELECT {COUNT_COLUMNS} FROM runs")
    assert runs == [run, run]
