"""The drift task: after a partition is published, compare it with its baseline and replace its ``drift`` rows
(a re-run never duplicates them). The comparisons themselves are in ``tasks/monitoring/comparison.py``."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ragpulse.tasks.config import DriftConfig
from ragpulse.tasks.core.types import DriftReport
from ragpulse.tasks.monitoring.comparison import SCORE_COLUMNS, alerts_of, drift_rows, metadata_keys, segment_values
from ragpulse.tasks.warehouse import DRIFT_SCHEMA, open_warehouse

__all__ = ["LANGUAGE_SEGMENT", "detect_drift"]

LANGUAGE_SEGMENT = "language"
"""The ``segment_key`` that segments by the traces' language column rather than by a metadata key."""


@task(name="detect-drift", cache_policy=NO_CACHE, persist_result=False)
def detect_drift(
    warehouse_url: str, day: dt.date, settings: DriftConfig | None = None, run_id: str = ""
) -> DriftReport:
    """Compare ``day``'s published scores with the previous partitions and replace its rows in ``drift``."""
    settings = settings or DriftConfig()
    logger = get_run_logger()
    warehouse = open_warehouse(warehouse_url)
    published = warehouse.read("runs", end=day, columns=["partition_date"])["partition_date"].to_pylist()
    window = sorted({d for d in published if d < day})[-settings.baseline_partitions :]
    start = window[0] if window else day
    scores = warehouse.read("scores", start=start, end=day, columns=SCORE_COLUMNS)
    if settings.segment_key is not None:
        by_language = settings.segment_key == LANGUAGE_SEGMENT
        column = "language" if by_language else "metadata"
        traces = warehouse.read("traces", start=start, end=day, columns=["partition_date", "trace_id", column])
        segments = pa.table(
            {
                "partition_date": traces["partition_date"],
                "trace_id": traces["trace_id"],
                "segment": traces[column] if by_language else segment_values(traces[column], settings.segment_key),
            }
        )
        scores = scores.join(segments, ["partition_date", "trace_id"], join_type="left outer")
        _warn_of_an_unmatched_segment_key(traces, segments, day, settings.segment_key, by_language)
    if not pc.any(pc.equal(scores["partition_date"], pa.scalar(day, pa.date32()))).as_py():
        logger.warning("dt=%s: no published scores, so no drift to detect", day)
        return DriftReport(day, DRIFT_SCHEMA.empty_table())
    # The calibrated human means of `ragpulse calibrate`, where the settings compare them instead of raw means.
    estimates = warehouse.read("estimates", start=start, end=day) if settings.estimator == "ppi" else None
    rows = drift_rows(scores, day, window, settings, run_id, estimates)
    warehouse.publish_drift(day, rows)
    report = DriftReport(day, rows, alerts_of(rows))
    logger.info(
        "dt=%s: drift against %d baseline partition(s): %s; %d alert(s)",
        day, len(window), report.verdict_counts(), len(report.alerts),
    )  # fmt: skip
    return report


def _warn_of_an_unmatched_segment_key(
    traces: pa.Table, segments: pa.Table, day: dt.date, segment_key: str, by_language: bool
) -> None:
    """A segment key that no trace of the day has (a typo such as ``metadata.ap``) leaves drift with only the
    ``all`` segment: say so, naming the metadata keys the day's traces do have."""
    on_day = pc.equal(segments["partition_date"], pa.scalar(day, pa.date32()))
    if not pc.any(on_day).as_py() or pc.any(pc.is_valid(pc.filter(segments["segment"], on_day))).as_py():
        return
    if by_language:
        found = "no trace has a language"
    else:
        keys = metadata_keys(pc.filter(traces["metadata"], on_day))
        found = f"the day's traces have metadata keys: {', '.join(keys) if keys else 'none'}"
    get_run_logger().warning(
        "dt=%s: no trace has a value for segment key %r, so drift compares only the whole day (%s)",
        day, segment_key, found,
    )  # fmt: skip
