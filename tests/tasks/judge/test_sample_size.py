"""``sample_rate = "auto"``'s sizes, worked out by hand from the rule in docs/judge.md, and its choice of traces."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from ragpulse.tasks.judge.sample_size import (
    ALL_TRACES,
    SampleTarget,
    sample_size,
    sampled_by_segment,
    segment_deviations,
    segment_thresholds,
)


@pytest.mark.parametrize(
    ("n_traces", "sd", "target", "expected"),
    [
        # n0 = ceil((1.96 * 0.3 / 0.05)^2) = ceil(138.3) = 139; 139 / (1 + 138 / 10000) = 137.1 -> 138
        (10_000, 0.3, SampleTarget(half_width=0.05), 138),
        # n0 = 139 of 200: 139 / (1 + 138 / 200) = 82.2 -> 83
        (200, 0.3, SampleTarget(half_width=0.05), 83),
        # n0 = ceil((1.96 * 0.1 / 0.05)^2) = 16, below the minimum of 30
        (10_000, 0.1, SampleTarget(half_width=0.05), 30),
        # a language with 12 traces: all of them
        (12, 0.5, SampleTarget(), 12),
        # a drop of 0.05 with power 0.8: n0 = ceil(((1.96 + 0.8416) * 0.25 / 0.05)^2) = ceil(196.2) = 197
        (1_000_000, 0.25, SampleTarget(detect_drop=0.05, power=0.8), 197),
    ],
)
def test_sizes_follow_the_written_rule(n_traces: int, sd: float, target: SampleTarget, expected: int) -> None:
    assert sample_size(n_traces, sd, target) == expected


def test_each_segment_gets_exactly_its_size_and_a_larger_sample_holds_the_smaller() -> None:
    english = [f"en-{i}" for i in range(2_000)]
    thai = [f"th-{i}" for i in range(25)]
    small = segment_thresholds({"en": english, "th": thai}, {"en": 0.2}, SampleTarget(half_width=0.05))
    large = segment_thresholds({"en": english, "th": thai}, {"en": 0.4}, SampleTarget(half_width=0.05))
    assert small["th"] == (ALL_TRACES, 25, 25)  # no baseline for th: sd 0.5, and fewer traces than the minimum
    ids, segments = english + thai, ["en"] * 2_000 + ["th"] * 25
    picked = {
        name: set(np.asarray(ids)[sampled_by_segment(ids, segments, {k: v[0] for k, v in chosen.items()})])
        for name, chosen in (("small", small), ("large", large))
    }
    en_small = {t for t in picked["small"] if t.startswith("en")}
    en_large = {t for t in picked["large"] if t.startswith("en")}
    assert len(en_small) == small["en"][1] == math.ceil(62 / (1 + 61 / 2000))
    assert len(en_large) == large["en"][1] and en_small < en_large


def test_the_spread_is_the_largest_of_the_metrics_per_segment() -> None:
    scores = pa.table(
        {
            "segment": ["en"] * 6 + ["ja"] * 3,
            "metric": ["a", "a", "a", "b", "b", "b", "a", "a", "a"],
            "value": [0.0, 0.5, 1.0, 0.4, 0.5, 0.6, 1.0, 0.0, None],
            "status": ["ok"] * 8 + ["failed"],
        }
    )
    assert segment_deviations(scores) == pytest.approx({"en": 0.5, "ja": math.sqrt(0.5)})
