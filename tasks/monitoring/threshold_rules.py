"""Threshold rules on a published partition: each rule's statistic per segment, against its levels, as ``drift`` rows
that name the rule (``rule``, ``observed``, ``warning_level``, ``critical_level``; the baseline columns empty).

The statistics and verdicts live in ``ragpulse.metrics.thresholds``; this module picks each rule's score rows and
segments. No Prefect, no warehouse: ``tasks/monitoring/tasks.py`` reads the rows and the segments and publishes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ragpulse.metrics import Status
from ragpulse.metrics.drift import Verdict
from ragpulse.metrics.thresholds import check_threshold
from ragpulse.tasks.monitoring.comparison import ALL_SEGMENTS, largest_segments, scorer_identity
from ragpulse.tasks.monitoring.config import ThresholdRule
from ragpulse.tasks.warehouse import DRIFT_SCHEMA

__all__ = ["rule_segment_keys", "threshold_rows"]

_OK, _FAILED = Status.OK.label, Status.FAILED.label


def rule_segment_keys(rules: Sequence[ThresholdRule]) -> list[str]:
    """The segment keys the rules need (``language``, ``topic``, ``metadata.app``), each once, in rule order."""
    keys = [rule.segment.split("=", 1)[0] for rule in rules if rule.segment != ALL_SEGMENTS]
    return list(dict.fromkeys(keys))


def threshold_rows(
    scores: pa.Table,
    segments: Mapping[str, pa.Table],
    day: dt.date,
    rules: Sequence[ThresholdRule],
    run_id: str,
    max_segments: int,
) -> pa.Table:
    """One ``drift`` row per rule and segment of ``day``: ``scores`` are the day's score rows (``SCORE_COLUMNS``),
    ``segments`` the day's ``trace_id, segment`` per segment key the rules name (``rule_segment_keys``). A rule per
    key checks the ``max_segments`` largest of its values; a rule whose metric or segment has no score on the day
    says so (``insufficient_data``) rather than staying silent."""
    now = dt.datetime.now(dt.UTC)
    frame = scores.select(["trace_id", "metric", "value", "status", "metric_version", "judge_model", "prompt_version"])
    rows = frame.to_pandas()
    records: list[dict[str, Any]] = []
    for rule in rules:
        metric_rows = rows[rows["metric"] == rule.metric]
        for label, selected in _segments_of(rule, metric_rows, segments, max_segments):
            records.append(_row(rule, label, selected, day, run_id, now))
    return pa.Table.from_pylist(records, schema=DRIFT_SCHEMA)


def _segments_of(
    rule: ThresholdRule, metric_rows: pd.DataFrame, segments: Mapping[str, pa.Table], max_segments: int
) -> list[tuple[str, pd.DataFrame]]:
    """(label, score rows) per segment the rule checks: the whole day, one named segment, or a key's largest values
    (``largest_segments``, as drift picks them)."""
    if rule.segment == ALL_SEGMENTS:
        return [(ALL_SEGMENTS, metric_rows)]
    key, _, value = rule.segment.partition("=")
    of_trace = segments[key].to_pandas().dropna(subset=["segment"]).drop_duplicates("trace_id")
    joined = metric_rows.merge(of_trace[["trace_id", "segment"]], on="trace_id", how="inner")
    if value:
        return [(rule.segment, joined[joined["segment"] == value])]
    largest = largest_segments(joined, max_segments)
    if not largest:
        return [(f"{key}=*", joined)]  # no trace of the day has a value for the key: one row says so
    return [(f"{key}={name}", joined[joined["segment"] == name]) for name in largest]


def _row(
    rule: ThresholdRule, label: str, rows: pd.DataFrame, day: dt.date, run_id: str, now: dt.datetime
) -> dict[str, Any]:
    status = rows["status"]
    ok = (status == _OK).to_numpy()
    values = rows["value"].to_numpy(dtype=np.float64)[ok]
    n_failed, n_total = int((status == _FAILED).sum()), len(rows)
    assert rule.direction is not None  # DriftConfig gives every rule its direction
    check = check_threshold(
        rule.statistic, values, n_failed, n_total, direction=rule.direction, warning=rule.warning,
        critical=rule.critical, min_samples=rule.min_samples,
    )  # fmt: skip
    detail = check.detail if n_total else f"no {rule.metric} score on dt={day} in segment {label}"
    judge, prompt, _ = scorer_identity(rows.fillna({"judge_model": "", "prompt_version": ""}))
    return {
        "partition_date": day,
        "metric": rule.metric,
        "segment": label,
        "judge_model": judge or None,
        "prompt_version": prompt or None,
        "baseline_partitions": 0,
        "baseline_n": 0,
        "current_n": len(values),
        "current_mean": float(np.mean(values)) if len(values) else None,
        "current_failure_rate": n_failed / n_total if n_total else None,
        "current_coverage": len(values) / n_total if n_total else None,
        "verdict": Verdict(check.verdict).value,
        "detail": detail,
        "run_id": run_id,
        "computed_at": now,
        "rule": str(rule),
        "observed": None if np.isnan(check.observed) else check.observed,
        "warning_level": rule.warning,
        "critical_level": rule.critical,
    }
