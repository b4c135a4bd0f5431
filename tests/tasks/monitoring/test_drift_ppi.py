"""Drift on calibrated human means (``drift_estimator = "ppi"``): a judge that starts scoring higher is no quality
change, a real drop is; simulated with a known truth, judged by a binary judge, labelled on a sample, calibrated
with ragpulse's own estimator and published to a real DuckDB warehouse, then checked by the drift task itself."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from prefect.logging import disable_run_logger

from ragpulse.tasks.calibration.estimate import CalibrationSettings, calibration_rows
from ragpulse.tasks.calibration.labels import LABELS_SCHEMA
from ragpulse.tasks.config import DriftConfig
from ragpulse.tasks.monitoring.tasks import detect_drift
from ragpulse.tasks.warehouse import SCORES_SCHEMA, STEP_SCORES_SCHEMA, open_warehouse
from tests.tasks.warehouse.test_warehouse_contract import publication

pytestmark = pytest.mark.slow  # a simulated week of 3,000 judged traces a day

DAYS = [dt.date(2026, 7, 1) + dt.timedelta(days=i) for i in range(8)]
NOW = dt.datetime(2026, 7, 9, tzinfo=dt.UTC)


def _day(day: dt.date, rate: float, false_positive: float, rng: np.random.Generator) -> tuple[pa.Table, pa.Table]:
    """A day of 3,000 judged traces at true rate ``rate`` (the judge says yes to 95 % of good traces and to
    ``false_positive`` of bad ones), and human labels of 300 of them."""
    n = 3000
    truth = (rng.random(n) < rate).astype(float)
    said = (rng.random(n) < np.where(truth == 1, 0.95, false_positive)).astype(float)
    ids = [f"{day}-{i}" for i in range(n)]
    scores = pa.table(
        {
            "partition_date": pa.array([day] * n, pa.date32()),
            "trace_id": ids,
            "metric": ["faithfulness"] * n,
            "value": said,
            "status": ["ok"] * n,
            "reason": pa.nulls(n, pa.string()),
            "metric_version": ["2.0.0"] * n,
            "run_id": [f"r-{day}"] * n,
            "computed_at": pa.array([NOW] * n, pa.timestamp("us", tz="UTC")),
            "judge_model": ["judge-1"] * n,
            "prompt_version": ["faithfulness/3"] * n,
        },
        schema=SCORES_SCHEMA,
    )
    labelled = rng.choice(n, 300, replace=False)
    labels = pa.table(
        {
            "partition_date": pa.array([day] * 300, pa.date32()),
            "trace_id": [ids[i] for i in labelled],
            "metric": ["faithfulness"] * 300,
            "value": truth[labelled],
            "labeller": ["ann"] * 300,
            "labelled_at": pa.nulls(300, pa.timestamp("us", tz="UTC")),
            "source_file": ["labels.jsonl"] * 300,
            "source_line": list(range(300)),
        },
        schema=LABELS_SCHEMA,
    )
    return scores, labels


def _warehouse(tmp_path: Path, last_false_positive: float, last_rate: float) -> str:
    """Seven baseline days at true rate 0.7 with a judge that says yes to 20 % of bad traces, then the last day."""
    rng = np.random.default_rng(5)
    url = f"duckdb:///{tmp_path}/w.duckdb"
    warehouse = open_warehouse(url)
    for day in DAYS:
        last = day == DAYS[-1]
        scores, labels = _day(day, last_rate if last else 0.7, last_false_positive if last else 0.2, rng)
        warehouse.publish(
            dataclasses.replace(
                publication(day, f"r-{day}", n=1),
                metrics=["faithfulness"],
                scores=scores,
                step_scores=STEP_SCORES_SCHEMA.empty_table(),  # the contract's made-up step metrics are not drift's
            )
        )
        found = calibration_rows(day, labels, scores, CalibrationSettings(min_labels=30), run_id="c", now=NOW)
        warehouse.publish_calibration(day, found.calibrations, found.estimates)
    return url


def _faithfulness(rows: pa.Table) -> list[dict[str, Any]]:
    """The judge metric's drift rows (the traces' questions have input drift rows of their own)."""
    return [row for row in rows.to_pylist() if row["metric"] == "faithfulness"]


@pytest.mark.parametrize(
    ("last_false_positive", "last_rate", "raw", "ppi"),
    [
        # The judge starts saying yes to half of the bad traces; the traffic is as good as before.
        (0.5, 0.7, "improved", "stable"),
        # The traffic gets worse (0.7 -> 0.55 good) while the judge stays the same.
        (0.2, 0.55, "degraded", "degraded"),
    ],
)
def test_a_judge_bias_shift_is_no_drift_on_calibrated_means_and_a_real_drop_still_is(
    tmp_path: Path, last_false_positive: float, last_rate: float, raw: str, ppi: str
) -> None:
    url = _warehouse(tmp_path, last_false_positive, last_rate)
    with disable_run_logger():
        by_raw = detect_drift.fn(url, DAYS[-1], DriftConfig(), run_id="d1")
        by_ppi = detect_drift.fn(url, DAYS[-1], DriftConfig(estimator="ppi"), run_id="d2")
    (raw_row,) = _faithfulness(by_raw.rows)
    (ppi_row,) = _faithfulness(by_ppi.rows)
    assert (raw_row["verdict"], ppi_row["verdict"]) == (raw, ppi)
    assert "prediction-powered" in ppi_row["detail"] and "prediction-powered" not in raw_row["detail"]
    estimates = open_warehouse(url).read("estimates", start=DAYS[-1], end=DAYS[-1]).to_pylist()
    assert ppi_row["current_mean"] == pytest.approx(estimates[0]["ppi_mean"])
    assert abs(ppi_row["current_mean"] - last_rate) < 0.05


def test_a_partition_without_an_estimate_falls_back_to_raw_means_and_says_so(tmp_path: Path) -> None:
    url = _warehouse(tmp_path, 0.2, 0.7)
    later = DAYS[-1] + dt.timedelta(days=1)
    scores, _ = _day(later, 0.7, 0.2, np.random.default_rng(9))
    open_warehouse(url).publish(
        dataclasses.replace(
            publication(later, "r-later", n=1),
            metrics=["faithfulness"],
            scores=scores,
            step_scores=STEP_SCORES_SCHEMA.empty_table(),
        )
    )
    with disable_run_logger():
        (row,) = _faithfulness(detect_drift.fn(url, later, DriftConfig(estimator="ppi"), run_id="d3").rows)
    assert "raw judge means compared" in row["detail"] and row["verdict"] == "stable"
