"""``sample_rate = "auto"`` against fixed rates (docs/judge.md, "Sample sizing"): judge calls, and whether the stated
interval holds its 95 %. A seeded simulation with ragpulse's own sizing and choice of traces
(``ragpulse.tasks.judge.sample_size``): each simulated day has a large English, a mid-sized Japanese and a small Thai
segment whose judge scores are drawn from a Beta distribution (a spread like faithfulness's); the baseline's spread
is the previous simulated day's, as a run reads it from the warehouse. Trace ids are fresh each day, so the hash
picks a new sample.

For each day and segment it records the traces judged and whether the 95 % interval of the sampled mean (normal, with
the finite population correction) covers the segment's true mean of the day (all its traces). "fixed, same width"
is the fixed rate at which every segment's interval is as narrow as auto's target: the rate its smallest segment
needs.

    python bench/auto_sample_simulation.py          # a few seconds
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[1]))

from ragpulse.tasks.judge.sample_size import SampleTarget, hash_of, sample_size, segment_thresholds

SEGMENTS = {"en": (12_000, (2.0, 1.0)), "ja": (300, (1.2, 1.2)), "th": (40, (3.0, 2.0))}
"""Traces a day and the Beta(a, b) the scores are drawn from."""
Z95 = 1.959963984540054


def _interval_covers(values: np.ndarray, picked: np.ndarray) -> tuple[bool, float]:
    n, total = int(picked.sum()), len(values)
    sample = values[picked]
    fpc = math.sqrt((total - n) / (total - 1)) if total > 1 else 0.0
    half = Z95 * sample.std(ddof=1) / math.sqrt(n) * fpc if n > 1 else math.inf
    return abs(sample.mean() - values.mean()) <= half, half


def simulate(days: int, target: SampleTarget, fixed_rate: float, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    sds: dict[str, float] = {}
    auto_calls = fixed_calls = 0
    covered = {name: 0 for name in SEGMENTS}
    fixed_covered = {name: 0 for name in SEGMENTS}
    halves: dict[str, list[float]] = {name: [] for name in SEGMENTS}
    fixed_halves: dict[str, list[float]] = {name: [] for name in SEGMENTS}
    for day in range(days):
        ids = {name: [f"d{seed}-{day}-{name}-{i}" for i in range(n)] for name, (n, _) in SEGMENTS.items()}
        values = {name: rng.beta(*shape, size=n) for name, (n, shape) in SEGMENTS.items()}
        chosen = segment_thresholds(ids, sds, target)
        for name in SEGMENTS:
            hashes = np.array([hash_of(t) for t in ids[name]], dtype=np.uint64)
            picked = hashes < np.uint64(min(chosen[name][0], 2**64 - 1))
            ok, half = _interval_covers(values[name], picked)
            covered[name] += ok
            halves[name].append(half)
            auto_calls += int(picked.sum())
            fixed = hashes < np.uint64(int(fixed_rate * 2**64))
            if fixed.sum() > 1:
                ok, half = _interval_covers(values[name], fixed)
                fixed_covered[name] += ok
                fixed_halves[name].append(half)
            fixed_calls += int(fixed.sum())
            sds[name] = float(values[name][picked].std(ddof=1))
    same_width = max(sample_size(n, 0.5, target) / n for n, _ in SEGMENTS.values())
    traces = sum(n for n, _ in SEGMENTS.values()) * days
    return {
        "days": days,
        "traces": traces,
        "calls": {
            "auto": auto_calls,
            f"fixed {fixed_rate:.0%}": fixed_calls,
            "fixed, same width (no baseline)": round(same_width * traces),
        },
        "auto": {
            name: {"coverage": covered[name] / days, "median_half_width": float(np.median(halves[name]))}
            for name in SEGMENTS
        },
        f"fixed {fixed_rate:.0%}": {
            name: {
                "coverage": fixed_covered[name] / max(len(fixed_halves[name]), 1),
                "median_half_width": float(np.median(fixed_halves[name])) if fixed_halves[name] else None,
            }
            for name in SEGMENTS
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=400)
    parser.add_argument("--half-width", type=float, default=0.05)
    parser.add_argument("--fixed-rate", type=float, default=0.10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "auto-sample.json")
    args = parser.parse_args()
    result = simulate(args.days, SampleTarget(half_width=args.half_width), args.fixed_rate, args.seed)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
