"""A partition's calibrations and estimates from labels and scores, without I/O: judge identities never mixed,
the label window, labellers averaged, labelled traces kept off the judged side, and too few labels said so."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from ragpulse.metrics.calibration import ppi_mean
from ragpulse.tasks.calibration.estimate import CalibrationSettings, calibration_rows
from ragpulse.tasks.calibration.labels import LABELS_SCHEMA

DAY = dt.date(2026, 11, 10)
NOW = dt.datetime(2026, 11, 11, tzinfo=dt.UTC)


def _scores(rows: list[tuple[dt.date, str, str, float | None, str, str | None]]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "partition_date": d,
                "trace_id": t,
                "metric": m,
                "value": v,
                "status": s,
                "judge_model": j,
                "prompt_version": f"{m}/1" if j else None,
            }
            for d, t, m, v, s, j in rows
        ]
    )


def _labels(rows: list[tuple[dt.date | None, str, str, float, str]]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "partition_date": d,
                "trace_id": t,
                "metric": m,
                "value": v,
                "labeller": who,
                "labelled_at": None,
                "source_file": "labels.jsonl",
                "source_line": i,
            }
            for i, (d, t, m, v, who) in enumerate(rows, start=1)
        ],
        schema=LABELS_SCHEMA,
    )


def _run(labels: pa.Table, scores: pa.Table, **settings: Any) -> Any:
    return calibration_rows(DAY, labels, scores, CalibrationSettings(**settings), run_id="r", now=NOW)


def test_each_judge_identity_is_calibrated_on_its_own_traces_and_estimated_without_them() -> None:
    rng = np.random.default_rng(1)
    rows, labels = [], []
    for judge in ("judge-a", "judge-b"):
        for i in range(60):
            truth = float(rng.random() < 0.6)
            said = truth if rng.random() < 0.8 else 1 - truth
            rows.append((DAY, f"{judge}-{i}", "faith", said, "ok", judge))
            if i < 40:
                labels.append((DAY, f"{judge}-{i}", "faith", truth, "ann"))
    rows.append((DAY, "failed-1", "faith", None, "failed", "judge-a"))
    found = _run(_labels(labels), _scores(rows), min_labels=30)
    estimates = {r["judge_model"]: r for r in found.estimates.to_pylist()}
    assert sorted(estimates) == ["judge-a", "judge-b"]
    for judge, row in estimates.items():
        judged = np.array(
            [v for d, t, m, v, s, j in rows if j == judge and s == "ok" and int(t.rsplit("-", 1)[1]) >= 40]
        )
        truth = np.array([v for d, t, m, v, who in labels if t.startswith(judge)])
        said = np.array([v for d, t, m, v, s, j in rows if j == judge and s == "ok" and int(t.rsplit("-", 1)[1]) < 40])
        expected = ppi_mean(judged, truth, said)
        assert (row["n_judged"], row["n_labels"]) == (20, 40)
        assert row["ppi_mean"] == pytest.approx(expected.mean) and row["std_error"] == pytest.approx(expected.std_error)
    calibrations = {r["judge_model"]: r for r in found.calibrations.to_pylist()}
    assert calibrations["judge-a"]["labels_key"] != calibrations["judge-b"]["labels_key"]


def test_labels_of_the_window_count_labellers_average_and_unknown_traces_are_counted() -> None:
    earlier = DAY - dt.timedelta(days=2)
    rows = [(DAY, f"t{i}", "m", float(i % 2), "ok", "j") for i in range(10)]
    rows += [(earlier, "old-1", "m", 1.0, "ok", "j"), (earlier, "old-2", "m", 0.0, "ok", "j")]
    labels = _labels(
        [
            (DAY, "t1", "m", 1.0, "a"), (DAY, "t1", "m", 0.0, "b"),  # two labellers: 0.5
            (earlier, "old-1", "m", 1.0, "a"), (None, "old-2", "m", 1.0, "a"),  # dated, and found by its id
            (DAY, "nowhere", "m", 1.0, "a"), (DAY - dt.timedelta(days=5), "t2", "m", 1.0, "a"),
        ]
    )  # fmt: skip
    narrow = _run(labels, _scores(rows), min_labels=2)
    (calibration,) = narrow.calibrations.to_pylist()
    assert calibration["n_labels"] == 1 and calibration["kind"] == "graded"  # t1 alone, its mean 0.5
    assert narrow.estimates["reason"].to_pylist() == ["1 labelled trace(s), 2 needed"]
    assert narrow.estimates["ppi_mean"].to_pylist() == [None] and narrow.estimates["n_judged"].to_pylist() == [9]
    wide = _run(labels, _scores(rows), window_days=3, min_labels=2)
    (calibration,) = wide.calibrations.to_pylist()
    assert (calibration["n_labels"], calibration["labels_start"], calibration["labels_end"]) == (3, earlier, DAY)
    assert wide.unmatched_labels == 1  # "nowhere"; the label five days back is outside the window
    assert wide.estimates["ppi_mean"].to_pylist()[0] is not None and wide.estimates["n_judged"].to_pylist() == [9]


def test_a_metric_without_a_judge_is_calibrated_as_its_own_identity() -> None:
    rows = [(DAY, f"t{i}", "answer_f1", i / 10, "ok", None) for i in range(10)]
    labels = _labels([(DAY, f"t{i}", "answer_f1", min(1.0, i / 10 + 0.1), "a") for i in range(5)])
    found = _run(labels, _scores(rows), min_labels=5)
    (row,) = found.estimates.to_pylist()
    assert row["judge_model"] is None and row["n_labels"] == 5 and row["ppi_mean"] is not None
    (calibration,) = found.calibrations.to_pylist()
    assert calibration["mean_bias"] == pytest.approx(-0.1) and calibration["mae"] == pytest.approx(0.1)
