"""Judge calibration and prediction-powered inference against a known truth: seeded simulations of days whose true
quality is drawn first, judged by a judge that agrees with the truth at a set rate with a known bias, and labelled on
a random subset. The claims of docs/calibration.md are checked here, with the numbers its tables quote.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from ragpulse.metrics.calibration import agreement, ppi_mean

DAYS = 500


@dataclass(frozen=True)
class Judge:
    """A binary judge: says 1 for a good trace with ``sensitivity``, and for a bad one with ``false_positive``."""

    sensitivity: float = 0.95
    false_positive: float = 0.30

    def __call__(self, truth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        says_yes = np.where(truth == 1, self.sensitivity, self.false_positive)
        return (rng.random(len(truth)) < says_yes).astype(np.float64)


def _simulate(
    judge: Judge, *, n_labels: int, n_traces: int = 2000, days: int = DAYS, seed: int = 7
) -> tuple[float, float, float, float]:
    """PPI coverage, naive coverage of the judge's own interval, mean PPI width and mean effective n over ``days``
    days; the truth is each day's population rate of good traces."""
    rng = np.random.default_rng(seed)
    covered = naive = 0
    widths, effective = [], []
    for _ in range(days):
        rate = rng.uniform(0.5, 0.9)
        truth = (rng.random(n_traces) < rate).astype(np.float64)
        verdicts = judge(truth, rng)
        order = rng.permutation(n_traces)
        labelled, judged = order[:n_labels], order[n_labels:]
        estimate = ppi_mean(verdicts[judged], truth[labelled], verdicts[labelled])
        covered += estimate.ci_low <= rate <= estimate.ci_high
        naive += estimate.raw_ci_low <= rate <= estimate.raw_ci_high
        widths.append(estimate.ci_high - estimate.ci_low)
        effective.append(estimate.effective_n)
    return covered / days, naive / days, float(np.mean(widths)), float(np.mean(effective))


def test_the_ppi_interval_covers_the_true_mean_where_the_biased_judges_own_interval_does_not() -> None:
    coverage, naive, _, effective = _simulate(Judge(), n_labels=200)
    assert coverage >= 0.93, coverage
    # The judge says yes to 30 % of bad traces: its mean sits 0.3 x (1 - rate) - 0.05 x rate too high.
    assert naive < 0.5, naive
    assert effective > 200  # the judge's scores are worth more labels than were drawn


def test_an_unbiased_noisy_judge_is_covered_too_and_helps_more_the_better_it_agrees() -> None:
    good, poor = Judge(0.95, 0.05), Judge(0.75, 0.25)
    coverage_good, _, width_good, effective_good = _simulate(good, n_labels=200, days=300)
    coverage_poor, _, width_poor, effective_poor = _simulate(poor, n_labels=200, days=300)
    assert min(coverage_good, coverage_poor) >= 0.92
    assert width_good < width_poor and effective_good > effective_poor


def test_the_width_shrinks_as_one_over_the_root_of_the_labels() -> None:
    widths = {n: _simulate(Judge(), n_labels=n, n_traces=20_000, days=100)[2] for n in (50, 200, 800)}
    # Four times the labels, half the width (the judged traces' own share is small at 20,000).
    assert widths[200] / widths[50] == pytest.approx(0.5, abs=0.06)
    assert widths[800] / widths[200] == pytest.approx(0.5, abs=0.06)


def test_power_tuning_is_never_much_wider_than_the_labels_alone_even_for_a_useless_judge() -> None:
    rng = np.random.default_rng(3)
    truth = (rng.random(2200) < 0.7).astype(np.float64)
    coin = (rng.random(2200) < 0.5).astype(np.float64)  # a judge that ignores the trace
    estimate = ppi_mean(coin[200:], truth[:200], coin[:200])
    classical = 2 * 1.959964 * np.std(truth[:200], ddof=1) / math.sqrt(200)
    assert estimate.tuning < 0.2
    assert estimate.ci_high - estimate.ci_low <= classical * 1.02
    untuned = ppi_mean(coin[200:], truth[:200], coin[:200], power_tuning=False)
    assert untuned.tuning == 1.0 and untuned.ci_high - untuned.ci_low > classical


def test_graded_scores_are_covered() -> None:
    """A 1-5 grade scaled to [0, 1], judged with noise and a lean towards the top."""
    rng = np.random.default_rng(11)
    covered = 0
    for _ in range(300):
        centre = rng.uniform(0.3, 0.8)
        truth = np.clip(np.round((centre + rng.normal(0, 0.25, 1500)) * 4) / 4, 0, 1)
        judged = np.clip(truth + 0.1 + rng.normal(0, 0.15, 1500), 0, 1)
        estimate = ppi_mean(judged[150:], truth[:150], judged[:150])
        population = float(np.mean(np.clip(np.round((centre + rng.normal(0, 0.25, 200_000)) * 4) / 4, 0, 1)))
        covered += estimate.ci_low <= population <= estimate.ci_high
    assert covered / 300 >= 0.92


def test_the_estimator_matches_its_formula_on_a_small_case() -> None:
    judged = np.array([1, 1, 0, 1, 1, 0, 1, 1], dtype=float)
    human = np.array([1, 0, 0, 1], dtype=float)
    judged_labelled = np.array([1, 1, 0, 1], dtype=float)
    estimate = ppi_mean(judged, human, judged_labelled, power_tuning=False)
    rectifier = human - judged_labelled
    assert estimate.mean == pytest.approx(judged.mean() + rectifier.mean())
    se = math.sqrt(judged.var(ddof=1) / 8 + rectifier.var(ddof=1) / 4)
    assert estimate.std_error == pytest.approx(se)
    assert estimate.ci_high - estimate.mean == pytest.approx(stats.norm.ppf(0.975) * se)
    assert estimate.effective_n == pytest.approx(human.var(ddof=1) / se**2)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ppi_mean([1, 0], [1], [1]), "at least 2 labelled"),
        (lambda: ppi_mean([1, 0, 1], [1, 0], [1]), "must pair up"),
        (lambda: ppi_mean([1, math.nan], [1, 0], [1, 0]), "NaN"),
        (lambda: agreement([], []), "no labelled traces"),
        (lambda: agreement([1, 0], [1]), "must pair up"),
    ],
)
def test_bad_inputs_are_refused_with_a_reason(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_binary_agreement_is_cohens_kappa_of_the_textbook_table() -> None:
    """50 items: both yes 20, human yes / judge no 5, human no / judge yes 10, both no 15: p_o 0.7, p_e 0.5."""
    human = np.array([1] * 25 + [0] * 25, dtype=float)
    judge = np.array([1] * 20 + [0] * 5 + [1] * 10 + [0] * 15, dtype=float)
    found = agreement(human, judge)
    assert found.kind == "binary" and found.accuracy == pytest.approx(0.7)
    assert found.cohen_kappa == pytest.approx(0.4)
    assert found.confusion == ((15, 10), (5, 20))
    assert found.mean_bias == pytest.approx((30 - 25) / 50)


def test_graded_agreement_has_mae_spearman_and_the_confusion_over_the_label_levels() -> None:
    human = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.0])
    judge = np.array([0.1, 0.2, 0.7, 0.7, 0.9, 0.6])
    found = agreement(human, judge)
    assert found.kind == "graded" and found.accuracy is None and found.cohen_kappa is None
    assert found.mae == pytest.approx(np.mean(np.abs(judge - human)))
    assert found.spearman == pytest.approx(stats.spearmanr(human, judge).statistic)
    assert found.levels == (0.0, 0.25, 0.5, 0.75, 1.0)
    # The human 0.5 judged 0.7 (nearest 0.75); the two humans 1.0 judged 0.9 (nearest 1.0) and 0.6 (nearest 0.5).
    assert found.confusion[2] == (0, 0, 0, 1, 0) and found.confusion[4] == (0, 0, 1, 0, 1)
