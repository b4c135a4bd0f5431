"""Calibration: read the human labels once, then calibrate each partition of a date range and publish its
``calibrations`` and ``estimates`` rows (docs/calibration.md)."""

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from prefect import flow
from prefect.runtime import flow_run

from ragpulse.tasks.calibration.estimate import CalibrationSettings
from ragpulse.tasks.calibration.tasks import calibrate_partition, load_feedback_labels, load_labels
from ragpulse.tasks.config import CalibrationConfig, OutputConfig
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.warehouse.probe import probe_warehouse

__all__ = ["CalibrationResult", "calibrate"]


@dataclass(frozen=True)
class CalibrationResult:
    """Per partition: the estimates made (metric -> PPI mean, or the reason there is none); and the labels read."""

    labels: int
    rejected: list[dict[str, Any]]
    unlabelled: int
    estimates: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": self.labels,
            "rejected": self.rejected,
            "unlabelled": self.unlabelled,
            "estimates": self.estimates,
        }


def _run_name() -> str:
    parameters = flow_run.parameters
    return f"calibrate dt={parameters['start']}..{parameters['end']}"


@flow(name="calibrate", flow_run_name=_run_name, log_prints=False)
def calibrate(
    start: dt.date,
    end: dt.date,
    calibration: CalibrationConfig,
    output: OutputConfig = OutputConfig(),
    storage_options: dict[str, Any] | None = None,
) -> CalibrationResult:
    """Calibrate every partition from ``start`` to ``end`` on the labels at ``calibration.labels`` (or the traces'
    human feedback, ``calibration.labels_from``): each judge
    identity's agreement with them, and its prediction-powered estimate of the mean human score beside the judge's
    raw mean. ``monitor`` and ``backfill`` run it for each day before its drift check when labels are set."""
    if not calibration.labels and not calibration.labels_from:
        raise ConfigError(
            "no labels to calibrate with: set --labels (a labels file) or --labels-from (the traces' feedback)"
        )
    settings = CalibrationSettings(
        window_days=calibration.window_days, confidence=calibration.confidence, min_labels=calibration.min_labels
    )
    probe_warehouse(output.warehouse)  # before any task: an unreachable or read-only warehouse fails here
    label_set = load_labels(calibration.labels, storage_options or {}) if calibration.labels else None
    if calibration.labels_from:  # the window's labels: the earliest partition's window starts before it
        first = start - dt.timedelta(days=calibration.window_days - 1)
        from_feedback = load_feedback_labels(output.warehouse, first, end, calibration.labels_from)
        label_set = from_feedback if label_set is None else label_set.with_rows_of(from_feedback)
    assert label_set is not None  # one of the two is set (checked above)
    run_id = str(flow_run.id or "local")
    estimates: dict[str, dict[str, Any]] = {}
    day = start
    while day <= end:
        done = calibrate_partition(output.warehouse, day, label_set, settings, run_id)
        estimates[day.isoformat()] = {
            f"{row['metric']} ({row['judge_model'] or 'no judge'})": row["ppi_mean"]
            if row["ppi_mean"] is not None
            else row["reason"]
            for row in done.estimates.to_pylist()
        }
        day += dt.timedelta(days=1)
    rejected = [
        {"file": bad.source_file, "line": bad.line, "field": bad.field, "reason": bad.reason}
        for bad in label_set.rejected
    ]
    return CalibrationResult(label_set.rows.num_rows, rejected, label_set.unlabelled, estimates)
