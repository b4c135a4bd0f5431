"""The tables of docs/calibration.md: how wide a prediction-powered interval is, and how often it covers the truth,
for a number of human labels, a judge's quality and a day's size. Seeded simulations with ragpulse's own estimator
(``ragpulse.metrics.calibration.ppi_mean``); each simulated day draws its true rate of good traces in [0.5, 0.9],
judges every trace with a binary judge of the given sensitivity and false-positive rate, and labels a random subset.

    python bench/calibration_simulation.py            # about a minute on 2 cores
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[1]))

from ragpulse.metrics.calibration import ppi_mean

JUDGES = {"good (95 % / 5 %)": (0.95, 0.05), "biased (95 % / 30 %)": (0.95, 0.30), "poor (75 % / 25 %)": (0.75, 0.25)}


def simulate(sensitivity: float, false_positive: float, n_labels: int, n_traces: int, days: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    covered = naive = 0
    widths, classical, effective = [], [], []
    for _ in range(days):
        rate = rng.uniform(0.5, 0.9)
        truth = (rng.random(n_traces) < rate).astype(float)
        said = (rng.random(n_traces) < np.where(truth == 1, sensitivity, false_positive)).astype(float)
        order = rng.permutation(n_traces)
        labelled, judged = order[:n_labels], order[n_labels:]
        found = ppi_mean(said[judged], truth[labelled], said[labelled])
        covered += found.ci_low <= rate <= found.ci_high
        naive += found.raw_ci_low <= rate <= found.raw_ci_high
        widths.append(found.ci_high - found.ci_low)
        classical.append(2 * 1.959964 * np.std(truth[labelled], ddof=1) / math.sqrt(n_labels))
        effective.append(found.effective_n)
    return {
        "coverage": covered / days,
        "naive_coverage": naive / days,
        "width": float(np.mean(widths)),
        "labels_only_width": float(np.mean(classical)),
        "effective_n": float(np.median(effective)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=300)
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"{args.traces} judged traces a day, {args.days} simulated days per row, 95 % intervals")
    print(
        "| judge (says yes to good / to bad traces) | labels | PPI width | labels-only width "
        "| effective labels (median) | PPI coverage | judge-only coverage |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (sensitivity, false_positive) in JUDGES.items():
        for n in (50, 100, 200, 400, 800):
            r = simulate(sensitivity, false_positive, n, args.traces + n, args.days, args.seed)
            print(
                f"| {name} | {n} | ±{r['width'] / 2:.3f} | ±{r['labels_only_width'] / 2:.3f} | "
                f"{r['effective_n']:.0f} | {r['coverage']:.1%} | {r['naive_coverage']:.1%} |"
            )


if __name__ == "__main__":
    main()
