"""The calibration tasks: read the human labels once, then calibrate a partition and publish its ``calibrations``
and ``estimates`` rows. The work is in ``labels`` (reading) and ``estimate`` (pairing and the estimators)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ragpulse.tasks.calibration.estimate import (
    SCORE_COLUMNS,
    CalibrationSettings,
    PartitionCalibration,
    calibration_rows,
)
from ragpulse.tasks.calibration.feedback_labels import (
    FEEDBACK_LABEL_COLUMNS,
    feedback_metrics,
    labels_from_scores,
    parse_labels_from,
)
from ragpulse.tasks.calibration.labels import LabelSet, read_labels
from ragpulse.tasks.warehouse import open_warehouse

__all__ = ["calibrate_partition", "load_feedback_labels", "load_labels"]


@task(name="read-labels", cache_policy=NO_CACHE, persist_result=False)
def load_labels(url: str, storage_options: Mapping[str, Any]) -> LabelSet:
    """The labels, a warning per rejected line (file, line, field, reason)."""
    labels = read_labels(url, storage_options)
    logger = get_run_logger()
    for bad in labels.rejected:
        logger.warning("label rejected: %s line %d, %s: %s", bad.source_file, bad.line, bad.field, bad.reason)
    logger.info(
        "%d label(s) from %d file(s), %d line(s) not labelled yet, %d rejected",
        labels.rows.num_rows, labels.files, labels.unlabelled, len(labels.rejected),
    )  # fmt: skip
    return labels


@task(name="read-feedback-labels", cache_policy=NO_CACHE, persist_result=False)
def load_feedback_labels(warehouse_url: str, start: dt.date, end: dt.date, labels_from: str) -> LabelSet:
    """The published ``user_feedback:<name>`` scores of ``start``..``end`` as labels of the judge metrics
    ``labels_from`` names (``tasks.calibration.feedback_labels``)."""
    mappings = parse_labels_from(labels_from)
    scores = open_warehouse(warehouse_url).read(
        "scores", start=start, end=end, metrics=feedback_metrics(mappings), columns=FEEDBACK_LABEL_COLUMNS
    )
    labels = labels_from_scores(scores, mappings)
    get_run_logger().info("%d label(s) from the traces' feedback (%s)", labels.rows.num_rows, labels_from)
    return labels


@task(name="calibrate-partition", cache_policy=NO_CACHE, persist_result=False)
def calibrate_partition(
    warehouse_url: str, day: dt.date, labels: LabelSet, settings: CalibrationSettings, run_id: str
) -> PartitionCalibration:
    """Read the label window's scores of the labelled metrics, compute ``day``'s calibrations and estimates and
    replace its rows of both tables."""
    logger = get_run_logger()
    metrics: Sequence[str] = sorted(set(labels.rows["metric"].to_pylist()))
    warehouse = open_warehouse(warehouse_url)
    first = day - dt.timedelta(days=settings.window_days - 1)
    scores = warehouse.read("scores", start=first, end=day, metrics=metrics, columns=SCORE_COLUMNS)
    result = calibration_rows(day, labels.rows, scores, settings, run_id=run_id, now=dt.datetime.now(dt.UTC))
    warehouse.publish_calibration(day, result.calibrations, result.estimates)
    estimated = pc.sum(pc.is_valid(result.estimates["ppi_mean"]).cast(pa.int64())).as_py() or 0
    logger.info(
        "dt=%s: %d calibration(s), %d of %d estimate(s) with labels; %d label(s) matched no score in the window",
        day, result.calibrations.num_rows, estimated, result.estimates.num_rows, result.unmatched_labels,
    )  # fmt: skip
    return result
