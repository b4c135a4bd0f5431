"""Calibrating a partition's judge scores against human labels, and its prediction-powered estimates.

For one partition date, per metric and judge identity (judge model and prompt version, never mixed): the labels of
the partitions in the label window are paired with the same traces' ok scores of that identity; their agreement is
the calibration row, and the partition's ok scores with those pairs give the estimate row (the judge's raw mean
beside the prediction-powered mean of the human score, ``metrics.calibration.ppi_mean``). Several labels of one
trace (several labellers) count as their mean. Labelled traces of the partition itself are left out of its judged
set, so no trace counts on both sides.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ragpulse.metrics.calibration import agreement, ppi_mean
from ragpulse.tasks.calibration.labels import labels_key
from ragpulse.tasks.warehouse import CALIBRATIONS_SCHEMA, ESTIMATES_SCHEMA

__all__ = ["SCORE_COLUMNS", "CalibrationSettings", "PartitionCalibration", "calibration_rows"]

# (metric, judge model, prompt version): scores of different identities are never calibrated together.
_Identity = tuple[str, str | None, str | None]
SCORE_COLUMNS = ["partition_date", "trace_id", "metric", "value", "status", "judge_model", "prompt_version"]


@dataclass(frozen=True)
class CalibrationSettings:
    """``window_days``: labels of the partition and the days before it, this many in all (1: the partition alone;
    more assumes the judge errs the same way on those days, docs/calibration.md); ``min_labels``: fewer labelled
    traces of an identity and its estimate is NULL with a reason."""

    window_days: int = 1
    confidence: float = 0.95
    min_labels: int = 30

    def __post_init__(self) -> None:
        if not 1 <= self.window_days <= 366:
            raise ValueError(f"window_days must lie in [1, 366], got {self.window_days}")
        if not 0.5 < self.confidence < 1:
            raise ValueError(f"confidence must lie in (0.5, 1), got {self.confidence}")
        if self.min_labels < 2:
            raise ValueError(f"min_labels must be at least 2, got {self.min_labels}")


@dataclass(frozen=True)
class PartitionCalibration:
    """What one partition's calibration published."""

    partition_date: dt.date
    calibrations: pa.Table
    estimates: pa.Table
    unmatched_labels: int


def calibration_rows(
    day: dt.date,
    labels: pa.Table,
    scores: pa.Table,
    settings: CalibrationSettings,
    *,
    run_id: str,
    now: dt.datetime,
) -> PartitionCalibration:
    """The calibrations and estimates rows of ``day`` from ``labels`` (LABELS_SCHEMA) and the ok or other score
    rows of the label window (``SCORE_COLUMNS``). Pure: no I/O, no clock."""
    first = day - dt.timedelta(days=settings.window_days - 1)
    ok = scores.filter(pc.equal(scores["status"], "ok"))
    # Each identity's judge scores by (date, trace), and where each (metric, trace) was scored.
    judged: dict[_Identity, dict[tuple[dt.date, str], float]] = defaultdict(dict)
    scored_at: dict[tuple[str, str], list[tuple[_Identity, dt.date]]] = defaultdict(list)
    for r in ok.to_pylist():
        identity = (r["metric"], r["judge_model"], r["prompt_version"])
        judged[identity][(r["partition_date"], r["trace_id"])] = r["value"]
        scored_at[(r["metric"], r["trace_id"])].append((identity, r["partition_date"]))
    human: dict[_Identity, dict[tuple[dt.date, str], list[float]]] = defaultdict(lambda: defaultdict(list))
    unmatched = 0
    for label in labels.to_pylist():
        date = label["partition_date"]
        if date is not None and not first <= date <= day:
            continue
        found = [
            (identity, when)
            for identity, when in scored_at.get((label["metric"], label["trace_id"]), [])
            if (date is None and first <= when <= day) or when == date
        ]
        if len({when for _, when in found}) != 1:
            unmatched += 1  # no ok score of that trace and metric in the window, or a trace id on several dates
            continue
        for identity, when in found:
            human[identity][(when, label["trace_id"])].append(label["value"])
    calibrations, estimates = [], []
    identities = sorted(
        (identity for identity, values in judged.items() if any(when == day for when, _ in values)),
        key=lambda identity: tuple(str(part) for part in identity),
    )
    for metric, judge, prompt in identities:
        scores_of = judged[(metric, judge, prompt)]
        labelled = sorted((where, float(np.mean(values))) for where, values in human[(metric, judge, prompt)].items())
        y = np.array([value for _, value in labelled])
        f_labelled = np.array([scores_of[where] for where, _ in labelled])
        seen = {where for where, _ in labelled}
        today = np.array([value for where, value in scores_of.items() if where[0] == day and where not in seen])
        about = {"partition_date": day, "metric": metric, "judge_model": judge, "prompt_version": prompt}
        stamp = {"run_id": run_id, "computed_at": now}
        key = labels_key((when, trace, metric, value) for (when, trace), value in labelled) if labelled else None
        if labelled:
            agreed = agreement(y, f_labelled)
            calibrations.append(
                {
                    **about,
                    "labels_key": key,
                    "labels_start": labelled[0][0][0],
                    "labels_end": labelled[-1][0][0],
                    "n_labels": agreed.n,
                    "kind": agreed.kind,
                    "accuracy": agreed.accuracy,
                    "cohen_kappa": _finite_or_none(agreed.cohen_kappa),
                    "mae": agreed.mae,
                    "spearman": _finite_or_none(agreed.spearman),
                    "mean_bias": agreed.mean_bias,
                    "confusion": json.dumps(
                        {"levels": list(agreed.levels), "counts": [list(r) for r in agreed.confusion]}
                    ),
                    **stamp,
                }
            )
        estimates.append({**about, **stamp, **_estimate(today, y, f_labelled, settings), "labels_key": key})
    return PartitionCalibration(
        day,
        pa.Table.from_pylist(calibrations, schema=CALIBRATIONS_SCHEMA),
        pa.Table.from_pylist(estimates, schema=ESTIMATES_SCHEMA),
        unmatched,
    )


def _estimate(
    judged: np.ndarray, human: np.ndarray, judged_labelled: np.ndarray, settings: CalibrationSettings
) -> dict[str, object]:
    """The estimate columns: the raw mean always, the prediction-powered one with enough labels and traces."""
    row: dict[str, object] = {"n_judged": len(judged), "n_labels": len(human), "confidence": settings.confidence}
    if len(judged) >= 2:
        from scipy import stats

        half = (
            float(stats.norm.ppf(0.5 + settings.confidence / 2))
            * float(np.std(judged, ddof=1))
            / math.sqrt(len(judged))
        )
        mean = float(np.mean(judged))
        row.update(raw_mean=mean, raw_ci_low=mean - half, raw_ci_high=mean + half)
    if len(human) < settings.min_labels:
        return {**row, "reason": f"{len(human)} labelled trace(s), {settings.min_labels} needed"}
    if len(judged) < 2:
        return {**row, "reason": f"{len(judged)} judged trace(s) besides the labelled ones, 2 needed"}
    found = ppi_mean(judged, human, judged_labelled, confidence=settings.confidence)
    return {
        **row,
        "ppi_mean": found.mean,
        "ppi_ci_low": found.ci_low,
        "ppi_ci_high": found.ci_high,
        "std_error": found.std_error,
        "effective_n": found.effective_n if math.isfinite(found.effective_n) else None,
        "tuning": found.tuning,
        "reason": None,
    }


def _finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
