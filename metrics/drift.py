"""Score drift: is one partition's metric different from its baseline window? Pure numpy/scipy, no I/O.

A comparison looks at three things per (metric, segment):

- the **mean of the ok scores**: the difference ``current - baseline`` with a confidence interval (a seeded
  percentile bootstrap while both sides are small, Welch's normal interval above ``bootstrap_limit`` values
  per side, where the bootstrap costs much and adds nothing) and a two-sided Mann-Whitney rank test;
- the **failure rate** (share of traces whose score failed, e.g. a judge call): one-sided two-proportion z-test;
- the **coverage** (share of traces with an ok score): one-sided two-proportion z-test.

A change alerts only when it is both significant and large: trace-level tests on thousands of traces find
differences far too small to matter, so every rule also has a minimum effect size. Too few samples or
baseline partitions give ``insufficient_data``, never an alarm; so does a mean too small to compare when the
failure rate and coverage show nothing (``stable`` says the mean was compared). Definitions: docs/monitoring.md.

**Reproducible.** A comparison depends only on the two multisets of values and its seed, never on the order
the rows arrived in (DuckDB, PostgreSQL and a Parquet scan each return rows in their own order): ``Sample``
keeps its values sorted and ``mean_difference_interval`` sorts its inputs before resampling, so the same
scores give bit-identical means and intervals from any warehouse. The seed is the caller's (the drift task
derives one per partition, metric and segment from SHA-256, see ``tasks/monitoring/comparison.py``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ALERTING",
    "DriftResult",
    "DriftThresholds",
    "Estimate",
    "EstimatedMeans",
    "Sample",
    "Verdict",
    "compare",
    "mean_difference_interval",
    "severity",
]


class Verdict(enum.StrEnum):
    """Outcome of one comparison, most severe first among the alerting ones. ``CRITICAL``, ``WARNING`` and ``WITHIN``
    are a threshold rule's (``metrics.thresholds``): a level the team set, not a baseline. ``SHIFTED`` is a
    significant change in what comes in (the questions, a topic's share) rather than in quality: it needs a look,
    after the quality verdicts, and is neither better nor worse."""

    CRITICAL = "critical"
    DEGRADED = "degraded"
    FAILURE_RATE_UP = "failure_rate_up"
    COVERAGE_DOWN = "coverage_down"
    WARNING = "warning"
    SHIFTED = "shifted"
    IMPROVED = "improved"
    STABLE = "stable"
    WITHIN = "within"
    INSUFFICIENT_DATA = "insufficient_data"
    NO_BASELINE = "no_baseline"


ALERTING = frozenset(
    {Verdict.CRITICAL, Verdict.DEGRADED, Verdict.FAILURE_RATE_UP, Verdict.COVERAGE_DOWN, Verdict.WARNING}
    | {Verdict.SHIFTED}
)

_SEVERITY = {verdict.value: rank for rank, verdict in enumerate(Verdict)}


def severity(verdict: str | None) -> int:
    """Sort key of a verdict, most severe first (the order of ``Verdict``), so that every list of verdicts (the
    comparison's own findings, artifacts, the report) puts what needs attention on top; unknown ones go last."""
    return _SEVERITY.get(str(verdict), len(_SEVERITY))


@dataclass(frozen=True)
class DriftThresholds:
    """When a difference counts. Effect sizes are absolute, in the metric's units (scores lie in [0, 1])."""

    min_samples: int = 30
    min_baseline_partitions: int = 3
    min_delta: float = 0.05
    confidence: float = 0.95
    max_failure_rate_increase: float = 0.05
    max_coverage_drop: float = 0.10
    n_resamples: int = 2000
    bootstrap_limit: int = 5000

    def __post_init__(self) -> None:
        if not 0.5 < self.confidence < 1.0:
            raise ValueError(f"confidence must lie in (0.5, 1), got {self.confidence}")
        if self.min_samples < 2 or self.min_baseline_partitions < 1 or self.n_resamples < 100:
            raise ValueError("min_samples >= 2, min_baseline_partitions >= 1 and n_resamples >= 100 are required")
        for name in ("min_delta", "max_failure_rate_increase", "max_coverage_drop"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {getattr(self, name)}")

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence


@dataclass(frozen=True)
class Sample:
    """One side of a comparison: the ok values (kept sorted, so no statistic depends on the rows' order), how
    many traces failed, how many were scored at all."""

    values: NDArray[np.float64]
    n_failed: int
    n_total: int
    partitions: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", np.sort(np.asarray(self.values, dtype=np.float64)))
        if len(self.values) + self.n_failed > self.n_total:
            raise ValueError(f"{len(self.values)} ok and {self.n_failed} failed scores exceed {self.n_total} traces")

    @property
    def n_ok(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values)) if self.n_ok else math.nan

    @property
    def failure_rate(self) -> float:
        return self.n_failed / self.n_total if self.n_total else math.nan

    @property
    def coverage(self) -> float:
        return self.n_ok / self.n_total if self.n_total else math.nan


@dataclass(frozen=True)
class Estimate:
    """A partition's estimate of the mean human score with its standard error (``metrics.calibration.ppi_mean``)."""

    mean: float
    std_error: float


@dataclass(frozen=True)
class EstimatedMeans:
    """The estimates that replace the raw means in a comparison: one per baseline partition, and the current one."""

    baseline: tuple[Estimate, ...]
    current: Estimate


@dataclass(frozen=True)
class DriftResult:
    verdict: Verdict
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    detail: str


def mean_difference_interval(
    baseline: NDArray[np.float64],
    current: NDArray[np.float64],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    bootstrap_limit: int = 5000,
    seed: int = 0,
) -> tuple[float, float]:
    """Confidence interval of ``mean(current) - mean(baseline)``: seeded, and over each sample sorted first, so
    the same values with the same seed give the same interval bit for bit in whatever order they come."""
    baseline, current = np.sort(baseline), np.sort(current)
    delta = float(np.mean(current) - np.mean(baseline))
    if max(len(baseline), len(current)) > bootstrap_limit:
        spread = math.sqrt(np.var(baseline, ddof=1) / len(baseline) + np.var(current, ddof=1) / len(current))
        from scipy import stats  # here, not at the top: the CLI imports this module for its defaults (0.5 s)

        half = float(stats.norm.ppf(0.5 + confidence / 2)) * spread
        return delta - half, delta + half
    rng = np.random.default_rng(seed)
    # Chunks keep the index matrix near 8 MB whatever the sample sizes.
    chunk = max(1, 1_000_000 // max(len(baseline), len(current)))
    differences = []
    for start in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - start)
        base = baseline[rng.integers(0, len(baseline), size=(rows, len(baseline)))].mean(axis=1)
        cur = current[rng.integers(0, len(current), size=(rows, len(current)))].mean(axis=1)
        differences.append(cur - base)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(np.concatenate(differences), [tail, 100 - tail])
    return float(low), float(high)


def _rank_p_value(baseline: NDArray[np.float64], current: NDArray[np.float64]) -> float:
    """Two-sided Mann-Whitney U; 1.0 when every value is the same (no ranks to compare)."""
    if np.ptp(np.concatenate([baseline, current])) == 0:
        return 1.0
    from scipy import stats

    return float(stats.mannwhitneyu(current, baseline, alternative="two-sided", method="asymptotic").pvalue)


def _increase_p_value(before_k: int, before_n: int, after_k: int, after_n: int) -> float:
    """One-sided two-proportion z-test that the rate went up (pooled variance)."""
    pooled = (before_k + after_k) / (before_n + after_n)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / before_n + 1 / after_n))
    if spread == 0:
        return 1.0
    from scipy import stats

    return float(stats.norm.sf((after_k / after_n - before_k / before_n) / spread))


def _compare_estimates(
    estimates: EstimatedMeans, t: DriftThresholds, higher_is_better: bool
) -> tuple[float, float, float, float, Verdict | None, str]:
    """The mean part of a comparison on prediction-powered estimates: the current estimate against the mean of the
    baseline partitions' estimates, with a normal interval of the difference from their standard errors."""
    nan = math.nan
    k = len(estimates.baseline)
    if k < t.min_baseline_partitions:
        needed = t.min_baseline_partitions
        return (
            nan,
            nan,
            nan,
            nan,
            None,
            f"human mean not compared: {k} baseline partition(s) estimated, {needed} needed",
        )
    from scipy import stats

    base = float(np.mean([e.mean for e in estimates.baseline]))
    spread = math.sqrt(estimates.current.std_error**2 + sum(e.std_error**2 for e in estimates.baseline) / k**2)
    delta = estimates.current.mean - base
    half = float(stats.norm.ppf(0.5 + t.confidence / 2)) * spread
    p_value = float(2 * stats.norm.sf(abs(delta) / spread)) if spread > 0 else (0.0 if delta else 1.0)
    change = (
        f"human mean (prediction-powered) {base:.3f} -> {estimates.current.mean:.3f} ({delta:+.3f}, "
        f"{t.confidence:.0%} CI [{delta - half:+.3f}, {delta + half:+.3f}], p={p_value:.2g})"
    )
    significant = (delta - half > 0 or delta + half < 0) and abs(delta) >= t.min_delta
    verdict = (Verdict.DEGRADED if (delta < 0) == higher_is_better else Verdict.IMPROVED) if significant else None
    return delta, delta - half, delta + half, p_value, verdict, change


def compare(
    baseline: Sample,
    current: Sample,
    thresholds: DriftThresholds | None = None,
    *,
    higher_is_better: bool = True,
    seed: int = 0,
    estimates: EstimatedMeans | None = None,
) -> DriftResult:
    """Compare ``current`` with ``baseline`` and give the most severe verdict, with every finding in ``detail``.
    With ``estimates``, the mean is compared on them (the human mean the labels calibrate) instead of on the raw
    judge scores; failure rate and coverage still come from the scores."""
    t = thresholds or DriftThresholds()
    nan = math.nan
    if baseline.partitions == 0 or baseline.n_total == 0:
        return DriftResult(Verdict.NO_BASELINE, nan, nan, nan, nan, "no earlier partition to compare with")
    if baseline.partitions < t.min_baseline_partitions:
        return DriftResult(
            Verdict.INSUFFICIENT_DATA, nan, nan, nan, nan,
            f"{baseline.partitions} baseline partition(s), {t.min_baseline_partitions} needed",
        )  # fmt: skip
    findings: list[tuple[Verdict, str]] = []
    notes: list[str] = []
    delta = ci_low = ci_high = p_value = nan
    if estimates is not None:
        delta, ci_low, ci_high, p_value, verdict, change = _compare_estimates(estimates, t, higher_is_better)
        if verdict is None:
            notes.append(change)
        else:
            findings.append((verdict, change))
    elif min(baseline.n_ok, current.n_ok) >= t.min_samples:
        delta = current.mean - baseline.mean
        ci_low, ci_high = mean_difference_interval(
            baseline.values, current.values, confidence=t.confidence, n_resamples=t.n_resamples,
            bootstrap_limit=t.bootstrap_limit, seed=seed,
        )  # fmt: skip
        p_value = _rank_p_value(baseline.values, current.values)
        change = (
            f"mean {baseline.mean:.3f} -> {current.mean:.3f} ({delta:+.3f}, {t.confidence:.0%} CI "
            f"[{ci_low:+.3f}, {ci_high:+.3f}], rank test p={p_value:.2g})"
        )
        significant = p_value < t.alpha and (ci_high < 0 or ci_low > 0) and abs(delta) >= t.min_delta
        worse = (delta < 0) == higher_is_better
        if significant:
            findings.append((Verdict.DEGRADED if worse else Verdict.IMPROVED, change))
        else:
            notes.append(change)
    else:
        notes.append(f"mean not compared: {min(baseline.n_ok, current.n_ok)} ok scores, {t.min_samples} needed")
    if min(baseline.n_total, current.n_total) >= t.min_samples:
        failure_p = _increase_p_value(baseline.n_failed, baseline.n_total, current.n_failed, current.n_total)
        rise = current.failure_rate - baseline.failure_rate
        if rise >= t.max_failure_rate_increase and failure_p < t.alpha:
            findings.append(
                (
                    Verdict.FAILURE_RATE_UP,
                    f"failure rate {baseline.failure_rate:.1%} -> {current.failure_rate:.1%} (p={failure_p:.2g})",
                )
            )
        base_missing, cur_missing = baseline.n_total - baseline.n_ok, current.n_total - current.n_ok
        coverage_p = _increase_p_value(base_missing, baseline.n_total, cur_missing, current.n_total)
        drop = baseline.coverage - current.coverage
        if drop >= t.max_coverage_drop and coverage_p < t.alpha:
            findings.append(
                (
                    Verdict.COVERAGE_DOWN,
                    f"coverage {baseline.coverage:.1%} -> {current.coverage:.1%} (p={coverage_p:.2g})",
                )
            )
        if not findings and math.isnan(delta):
            notes.append(
                f"failure rate {baseline.failure_rate:.1%} -> {current.failure_rate:.1%}, coverage "
                f"{baseline.coverage:.1%} -> {current.coverage:.1%}: no significant change"
            )
    elif math.isnan(delta):
        return DriftResult(
            Verdict.INSUFFICIENT_DATA, nan, nan, nan, nan,
            f"{min(baseline.n_total, current.n_total)} scored traces, {t.min_samples} needed",
        )  # fmt: skip
    findings.sort(key=lambda finding: severity(finding[0]))
    # Stable is a claim about the mean: one that was not compared gives no evidence either way.
    unchanged = Verdict.INSUFFICIENT_DATA if math.isnan(delta) else Verdict.STABLE
    verdict = findings[0][0] if findings else unchanged
    detail = "; ".join([text for _, text in findings] + notes)
    return DriftResult(verdict, delta, ci_low, ci_high, p_value, detail)
