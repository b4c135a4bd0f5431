"""Threshold rules' statistics and verdicts, against values worked out by hand from the definitions in
docs/monitoring.md ("Threshold rules")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragpulse.metrics.drift import Verdict
from ragpulse.metrics.thresholds import check_threshold, statistic_value, valid_statistic

# Ten latencies in ms, as a day of ten ok traces would log them (unsorted, as a warehouse returns them).
LATENCIES = np.array([900.0, 120.0, 300.0, 450.0, 2000.0, 150.0, 700.0, 210.0, 1300.0, 520.0])


@pytest.mark.parametrize(
    ("statistic", "expected"),
    [
        ("mean", 665.0),  # 6650 / 10
        # percentile_cont: position (n - 1) q = 9 * 0.5 = 4.5 between the sorted 5th (450) and 6th (520) values
        ("p50", 485.0),
        # 9 * 0.95 = 8.55: between 1300 and 2000, 0.55 of the way: 1300 + 0.55 * 700
        ("p95", 1685.0),
        # 9 * 0.1 = 0.9: 120 + 0.9 * (150 - 120)
        ("p10", 147.0),
    ],
)
def test_statistics_of_the_ok_values(statistic: str, expected: float) -> None:
    assert statistic_value(statistic, LATENCIES, n_failed=0, n_total=10) == pytest.approx(expected, abs=1e-9)


def test_rates_count_the_traces_not_the_ok_scores() -> None:
    ok = np.array([1.0, 0.0, 1.0])  # 3 ok of 5 traces, 1 failed, 1 not applicable
    assert statistic_value("failure_rate", ok, n_failed=1, n_total=5) == pytest.approx(0.2)
    assert statistic_value("coverage", ok, n_failed=1, n_total=5) == pytest.approx(0.6)
    assert math.isnan(statistic_value("mean", np.array([]), n_failed=2, n_total=2))
    assert math.isnan(statistic_value("failure_rate", np.array([]), n_failed=0, n_total=0))


@pytest.mark.parametrize("statistic", ["mean", "p95", "p99.9", "p1", "failure_rate", "coverage"])
def test_valid_statistics(statistic: str) -> None:
    assert valid_statistic(statistic)


@pytest.mark.parametrize("statistic", ["median", "p0", "p100", "p", "p-5", "P95", "failure-rate"])
def test_invalid_statistics(statistic: str) -> None:
    assert not valid_statistic(statistic)


def _check(statistic: str, values: np.ndarray, **levels: object) -> Verdict:
    settings: dict = {"direction": "below", "warning": None, "critical": None, "min_samples": 3, **levels}
    return check_threshold(statistic, values, 0, len(values), **settings).verdict


def test_levels_below() -> None:
    scores = np.array([0.5, 0.6, 0.7])  # mean 0.6
    assert _check("mean", scores, warning=0.8, critical=0.5) is Verdict.WARNING
    assert _check("mean", scores, warning=0.8, critical=0.6) is Verdict.CRITICAL  # a level reached is passed
    assert _check("mean", scores, warning=0.6, critical=0.4) is Verdict.WARNING
    assert _check("mean", scores, warning=0.59, critical=0.4) is Verdict.WITHIN
    assert _check("mean", scores, critical=0.7) is Verdict.CRITICAL  # a critical level alone


def test_levels_above_for_latency() -> None:
    # p95 of LATENCIES is 1685
    assert _check("p95", LATENCIES, direction="above", warning=1500, critical=2000) is Verdict.WARNING
    assert _check("p95", LATENCIES, direction="above", warning=1000, critical=1600) is Verdict.CRITICAL
    assert _check("p95", LATENCIES, direction="above", warning=1700) is Verdict.WITHIN


def test_too_few_scores_is_insufficient_data_never_an_alarm() -> None:
    check = check_threshold(
        "mean", np.array([0.0, 0.0]), 0, 40, direction="below", warning=0.9, critical=0.5, min_samples=3
    )
    assert check.verdict is Verdict.INSUFFICIENT_DATA and check.n == 2
    assert "2 ok score(s), fewer than the rule's 3" in check.detail
    # A rate counts the traces: 40 scored traces are enough even with 2 ok scores.
    rate = check_threshold(
        "coverage", np.array([0.0, 0.0]), 0, 40, direction="below", warning=0.9, critical=0.5, min_samples=3
    )
    assert rate.verdict is Verdict.CRITICAL and rate.observed == pytest.approx(0.05) and rate.n == 40


def test_detail_names_the_statistic_the_direction_and_the_level() -> None:
    check = check_threshold("p95", LATENCIES, 0, 10, direction="above", warning=1000, critical=1600, min_samples=5)
    assert check.detail == "p95 1685, above the critical level 1600; n=10"
    within = check_threshold("mean", LATENCIES, 0, 10, direction="above", warning=1000, critical=None, min_samples=5)
    assert within.detail == "mean 665, not above warning 1000; n=10"
