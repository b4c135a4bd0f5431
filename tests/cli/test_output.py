"""What the command line prints: exit codes by error kind, one-line errors, drift tables."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pyarrow as pa
import pytest
import typer

from ragpulse.cli.output import (
    ExitCode,
    fail,
    outcome_exit,
    print_alerts,
    print_drift,
    print_verdicts,
    verdict_summary,
)
from ragpulse.metrics.aspect_critique import UnknownAspectError
from ragpulse.metrics.errors import RagpulseError, UnknownMetricError
from ragpulse.tasks.core.exceptions import (
    ConfigError,
    PartitionNotFoundError,
    StorageError,
    WarehouseError,
    WarehouseLockedError,
)
from ragpulse.tasks.core.storage import NoTraceFilesError
from ragpulse.tasks.quality.tasks import OutputValidationError
from ragpulse.tasks.reporting.run_summary import MetricSummary, RunSummary

DAY = dt.date(2026, 6, 3)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ConfigError("batch_size: Input should be greater than or equal to 1"), 2),
        (UnknownMetricError("ndcg", ["document_ndcg"]), 2),
        (UnknownAspectError("tone", ["coherence"]), 2),  # a subclass: an unknown aspect is an unknown metric
        (PartitionNotFoundError("traces", "2026-06-09", ["2026-06-03"]), 3),
        (NoTraceFilesError("traces", DAY, "none was modified that day"), 3),
        (WarehouseLockedError("another process holds the file"), 1),
        (WarehouseError("publish failed"), 1),
        (OutputValidationError("team_scores_out: expect_column_mean_to_be_between(value)"), 1),
        (StorageError("timeout"), 1),
        (RagpulseError("anything else"), 1),
    ],
)
def test_each_kind_of_error_has_its_exit_code(error: RagpulseError, code: int) -> None:
    assert ExitCode.of(error) == code


def test_an_error_is_one_line_whatever_its_length_or_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    message = "config file 'x.toml': unknown setting(s) in [drift]: " + ", ".join(f"key_{i}" for i in range(40))
    exit_ = fail(message + "\nsecond line", ExitCode.USAGE)
    assert isinstance(exit_, typer.Exit) and exit_.exit_code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"error: {message} second line"]


def test_every_exit_code_is_in_the_documented_table() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    section = doc.split("## 8. Exit codes", 1)[1].split("\n## ", 1)[0]
    assert [int(code) for code in re.findall(r"^\| (\d+) \|", section, re.M)] == [int(c) for c in ExitCode]


def _run_summary(n_ok: int, gaps: list[str]) -> RunSummary:
    metric = MetricSummary("answer_f1", "1.0.0", 4, n_ok, n_ok / 4, float("nan"), 0.0, 0.0, 0.0, {"no_reference": 4})
    return RunSummary(
        run_id="r", partition_date=DAY, warehouse="duckdb:///w", n_records=4, n_traces=4, n_quarantined=0,
        n_batches=1, n_batches_cached=0, metrics=[metric], quarantine_reasons={}, gaps=gaps,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("n_ok", "gaps", "code", "warned"),
    [
        (0, ["no_references", "no_judge"], ExitCode.NOTHING_SCORED, "nothing scored: 0 ok scores of 4"),
        (2, ["no_contexts"], ExitCode.NOTHING_SCORED, "no trace of 4 has contexts"),  # no retrieval read: no success
        (2, ["no_judge"], None, None),
    ],
)
def test_a_day_that_scored_nothing_exits_4_and_warns(
    capsys: pytest.CaptureFixture[str], n_ok: int, gaps: list[str], code: ExitCode | None, warned: str | None
) -> None:
    exit_ = outcome_exit(_run_summary(n_ok, gaps))
    assert (exit_.exit_code if exit_ is not None else None) == code
    err = " ".join(capsys.readouterr().err.split())
    assert (warned in err) if warned else err == ""
    assert err.startswith(f"warning: dt={DAY}: ") or not warned


def _drift_warehouse(tmp_path: Path, **values: object) -> str:
    from ragpulse.tasks.warehouse import DRIFT_SCHEMA, open_warehouse

    url = f"duckdb:///{tmp_path}/w.duckdb"
    row = {name: None for name in DRIFT_SCHEMA.names} | {
        "partition_date": DAY, "metric": "faithfulness", "segment": "all", "baseline_partitions": 0, "baseline_n": 0,
        "current_n": 40, "verdict": "coverage_down", "run_id": "run-1", "computed_at": dt.datetime.now(dt.UTC),
    } | values  # fmt: skip
    open_warehouse(url).publish_drift(DAY, pa.Table.from_pylist([row], DRIFT_SCHEMA))
    return url


def test_drift_without_a_baseline_shows_dashes_not_zeros(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    print_drift(_drift_warehouse(tmp_path, current_mean=0.5), DAY)
    row = next(line for line in capsys.readouterr().out.splitlines() if "faithfulness" in line)
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    dash = "\N{EN DASH}"
    assert cells == ["all", "judge", "faithfulness", "coverage_down", dash, "0.500", dash]


def test_drift_with_numbers_shows_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    print_drift(_drift_warehouse(tmp_path, baseline_mean=0.8, current_mean=0.5, delta=-0.3), DAY)
    row = next(line for line in capsys.readouterr().out.splitlines() if "faithfulness" in line)
    assert [cell.strip() for cell in row.strip("│ ").split("│")][4:] == ["0.800", "0.500", "-0.300"]


def test_alerts_are_shown_as_incidents_most_severe_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragpulse.tasks.warehouse import DRIFT_SCHEMA, open_warehouse

    url = f"duckdb:///{tmp_path}/w.duckdb"
    base = {name: None for name in DRIFT_SCHEMA.names} | {
        "partition_date": DAY, "baseline_partitions": 7, "baseline_n": 700, "current_n": 100, "run_id": "r",
        "computed_at": dt.datetime.now(dt.UTC), "baseline_mean": 0.8, "current_mean": 0.6, "delta": -0.2,
    }  # fmt: skip
    found = [("document_mrr", "degraded"), ("hit_rate@5", "coverage_down"), ("latency_ms", "critical")]
    rows = [base | {"metric": m, "segment": "metadata.app=検索", "verdict": v} for m, v in found]
    rows[2] |= {"rule": "latency_ms p95 above 2000/5000 per all min 30", "observed": 6150.0}
    open_warehouse(url).publish_drift(DAY, pa.Table.from_pylist(rows, DRIFT_SCHEMA))
    print_drift(url, DAY)
    out = capsys.readouterr().out
    assert "3 in 2 incident(s)" in " ".join(out.split())
    lines = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    assert [line[:4] for line in lines if len(line) == 7] == [
        ["metadata.app=検索", "operational", "latency_ms", "critical"],  # a rule's critical level first
        ["metadata.app=検索", "retrieval", "document_mrr", "degraded"],
        ["", "", "hit_rate@5", "coverage_down"],
    ]
    assert lines[0][5] == "6150.000"  # a rule's row shows the statistic it observed


def test_verdicts_and_alerts_are_tables(capsys: pytest.CaptureFixture[str]) -> None:
    print_verdicts(DAY, {"stable": 4, "degraded": 1})
    print_alerts({"sent": [f"{DAY}|document_mrr|metadata.app=support-bot"], "already_sent": [], "failed": []})
    printed = capsys.readouterr().out
    assert "{" not in printed
    rows = [line for line in printed.splitlines() if "│" in line]
    assert [r.split("│")[1].strip() for r in rows[:2]] == ["degraded", "stable"]  # alerting verdicts first
    assert "document_mrr" in rows[2] and "metadata.app=support-bot" in rows[2] and "sent" in rows[2]
    assert verdict_summary({"stable": 4, "insufficient_data": 2}) == "2 insufficient_data, 4 stable"
    assert verdict_summary({}) == "no comparisons"
