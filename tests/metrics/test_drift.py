from __future__ import annotations

import math

import numpy as np
import pytest

from ragpulse.metrics.drift import (
    ALERTING,
    DriftThresholds,
    Estimate,
    EstimatedMeans,
    Sample,
    Verdict,
    compare,
    mean_difference_interval,
    severity,
)


def _scores(rng: np.random.Generator, n: int, mean: float, spread: float = 0.2) -> np.ndarray:
    return np.clip(rng.normal(mean, spread, n), 0.0, 1.0)


def _sample(values: np.ndarray, *, failed: int = 0, missing: int = 0, partitions: int = 1) -> Sample:
    return Sample(values, failed, len(values) + failed + missing, partitions)


@pytest.mark.slow
def test_noise_alone_does_not_alert() -> None:
    rng = np.random.default_rng(1)
    verdicts = []
    for _ in range(60):
        baseline = _sample(_scores(rng, 7 * 300, 0.7), failed=rng.binomial(2100, 0.02), partitions=7)
        current = _sample(_scores(rng, 300, 0.7), failed=rng.binomial(300, 0.02))
        verdicts.append(compare(baseline, current).verdict)
    assert not ALERTING.intersection(verdicts)
    assert verdicts.count(Verdict.STABLE) == len(verdicts)


def test_a_quality_drop_is_degraded_with_an_interval_below_zero() -> None:
    rng = np.random.default_rng(2)
    result = compare(_sample(_scores(rng, 2100, 0.7), partitions=7), _sample(_scores(rng, 300, 0.55)))
    assert result.verdict is Verdict.DEGRADED
    assert result.ci_low < result.delta < result.ci_high < 0
    assert result.delta == pytest.approx(-0.15, abs=0.04)
    assert result.p_value < 1e-6
    assert result.detail.startswith("mean 0.6") and "-> 0.5" in result.detail


def test_direction_follows_the_metric() -> None:
    rng = np.random.default_rng(3)
    baseline, current = _sample(_scores(rng, 2000, 0.2), partitions=5), _sample(_scores(rng, 300, 0.4))
    assert compare(baseline, current).verdict is Verdict.IMPROVED
    assert compare(baseline, current, higher_is_better=False).verdict is Verdict.DEGRADED


def test_a_significant_but_tiny_shift_is_stable() -> None:
    rng = np.random.default_rng(4)
    baseline = _sample(_scores(rng, 200_000, 0.70, 0.1), partitions=7)
    current = _sample(_scores(rng, 50_000, 0.69, 0.1))
    result = compare(baseline, current)
    assert result.p_value < 0.01 and result.ci_high < 0
    assert result.verdict is Verdict.STABLE


def test_failure_rate_and_coverage_changes() -> None:
    rng = np.random.default_rng(5)
    baseline = _sample(_scores(rng, 2000, 0.7), failed=20, partitions=7)
    failing = compare(baseline, _sample(_scores(rng, 270, 0.7), failed=30))
    assert failing.verdict is Verdict.FAILURE_RATE_UP
    assert "failure rate 1.0% -> 10.0%" in failing.detail
    uncovered = compare(baseline, _sample(_scores(rng, 200, 0.7), missing=100))
    assert uncovered.verdict is Verdict.COVERAGE_DOWN
    both = compare(baseline, _sample(_scores(rng, 200, 0.5), failed=100))
    assert both.verdict is Verdict.DEGRADED
    assert "failure rate" in both.detail and "coverage" in both.detail


def test_too_little_data_is_never_an_alarm() -> None:
    rng = np.random.default_rng(6)
    few_days = compare(_sample(_scores(rng, 600, 0.9), partitions=2), _sample(_scores(rng, 300, 0.1)))
    assert few_days.verdict is Verdict.INSUFFICIENT_DATA
    assert "2 baseline partition(s), 3 needed" in few_days.detail
    few_traces = compare(_sample(_scores(rng, 600, 0.9), partitions=3), _sample(_scores(rng, 10, 0.1)))
    assert few_traces.verdict is Verdict.INSUFFICIENT_DATA
    assert math.isnan(few_traces.delta)
    nothing = compare(Sample(np.array([]), 0, 0, 0), _sample(_scores(rng, 300, 0.5)))
    assert nothing.verdict is Verdict.NO_BASELINE


def test_few_ok_scores_still_compare_failure_rates() -> None:
    rng = np.random.default_rng(7)
    baseline = _sample(_scores(rng, 900, 0.8), partitions=3)
    result = compare(baseline, _sample(_scores(rng, 10, 0.8), failed=90))
    assert result.verdict is Verdict.FAILURE_RATE_UP
    assert "mean not compared: 10 ok scores, 30 needed" in result.detail


def test_a_mean_too_small_to_compare_is_insufficient_data_not_stable() -> None:
    """The issue's day: 20 ok scores of 40 traces each side (the rest not applicable), a large drop of the mean,
    failure rate and coverage unchanged; nothing was compared that could say the segment is stable."""
    rng = np.random.default_rng(9)
    baseline = _sample(_scores(rng, 60, 0.7), missing=60, partitions=3)
    result = compare(baseline, _sample(_scores(rng, 20, 0.39), missing=20))
    assert result.verdict is Verdict.INSUFFICIENT_DATA
    assert math.isnan(result.delta) and math.isnan(result.ci_low)
    assert result.detail.startswith("mean not compared: 20 ok scores, 30 needed; ")
    assert "failure rate 0.0% -> 0.0%, coverage 50.0% -> 50.0%: no significant change" in result.detail


def test_a_human_mean_too_young_to_compare_is_insufficient_data_not_stable() -> None:
    """Prediction-powered estimates on one baseline partition of the three needed: the raw scores are plentiful,
    but the mean the comparison is about was not compared."""
    rng = np.random.default_rng(10)
    baseline, current = _sample(_scores(rng, 900, 0.7), partitions=3), _sample(_scores(rng, 300, 0.7))
    estimates = EstimatedMeans((Estimate(0.7, 0.02),), Estimate(0.4, 0.02))
    result = compare(baseline, current, estimates=estimates)
    assert result.verdict is Verdict.INSUFFICIENT_DATA
    assert result.detail.startswith("human mean not compared: 1 baseline partition(s) estimated, 3 needed; ")
    assert "no significant change" in result.detail


def test_bootstrap_and_normal_intervals_agree_on_large_samples() -> None:
    rng = np.random.default_rng(8)
    baseline, current = _scores(rng, 3000, 0.6), _scores(rng, 2000, 0.55)
    boot = mean_difference_interval(baseline, current, bootstrap_limit=10_000, seed=3)
    normal = mean_difference_interval(baseline, current, bootstrap_limit=100)
    assert boot == pytest.approx(normal, abs=0.004)
    assert boot == mean_difference_interval(baseline, current, bootstrap_limit=10_000, seed=3)


def test_bootstrap_interval_covers_a_zero_difference_at_about_its_level() -> None:
    rng = np.random.default_rng(9)
    covered = 0
    for trial in range(200):
        low, high = mean_difference_interval(_scores(rng, 60, 0.5), _scores(rng, 40, 0.5), n_resamples=500, seed=trial)
        covered += low <= 0 <= high
    assert 0.88 <= covered / 200 <= 0.99


def test_constant_scores_compare_without_errors() -> None:
    result = compare(_sample(np.ones(100), partitions=4), _sample(np.ones(50)))
    assert result.verdict is Verdict.STABLE
    assert result.p_value == 1.0 and result.delta == 0.0


@pytest.mark.parametrize("bad", [{"confidence": 1.0}, {"min_samples": 1}, {"min_delta": -0.1}])
def test_thresholds_are_checked(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        DriftThresholds(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bootstrap_limit", [5000, 100])  # the bootstrap, and Welch's interval above the limit
def test_intervals_do_not_depend_on_the_order_of_the_values(bootstrap_limit: int) -> None:
    rng = np.random.default_rng(10)
    baseline, current = _scores(rng, 700, 0.6), _scores(rng, 300, 0.55)
    expected = mean_difference_interval(baseline, current, bootstrap_limit=bootstrap_limit, seed=42)
    for _ in range(3):
        shuffled = rng.permutation(baseline), rng.permutation(current)
        assert mean_difference_interval(*shuffled, bootstrap_limit=bootstrap_limit, seed=42) == expected


def test_a_comparison_does_not_depend_on_the_order_of_the_values() -> None:
    rng = np.random.default_rng(11)
    baseline, current = _scores(rng, 2100, 0.7), _scores(rng, 300, 0.62)
    expected = compare(_sample(baseline, partitions=7), _sample(current), seed=7)
    for _ in range(3):
        shuffled = compare(_sample(rng.permutation(baseline), partitions=7), _sample(rng.permutation(current)), seed=7)
        assert shuffled == expected  # every float bit for bit, the detail text included


def test_verdicts_sort_most_severe_first() -> None:
    mixed = [
        "stable", "no_baseline", "improved", "shifted", "coverage_down", "insufficient_data", "degraded", "within",
        "warning", "failure_rate_up", "critical",
    ]  # fmt: skip
    assert sorted(mixed, key=severity) == [v.value for v in Verdict]
    # A threshold rule's critical level comes first, its warning after drift's quality verdicts; a shift of the
    # inputs alerts after every quality verdict, and before anything that does not alert.
    order = list(Verdict)
    assert order[0] is Verdict.CRITICAL and order[4] is Verdict.WARNING
    assert order[5] is Verdict.SHIFTED and set(order[:6]) == ALERTING
    assert severity("something_new") > severity(Verdict.NO_BASELINE)
