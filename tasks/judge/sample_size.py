"""``sample_rate = "auto"``: how many traces of each segment the judge scores, sized by statistics rather than a fixed
share. Plain library, no Prefect: the judge room's task reads the day's traces; ``baseline_deviations`` reads the
baseline's scores from the warehouse.

Per segment (the trace's language; ``unknown`` when none was identified) of ``N`` traces whose judge scores had the
standard deviation ``sd`` over the baseline, the sample answers one of two questions:

- **the day's mean to +-h** (``sample_half_width``) at 95 %: ``n0 = ceil((z * sd / h)^2)``, z = 1.96;
- **a drop of d detected** (``sample_detect_drop``) with power ``1 - beta`` (``sample_power``) by a two-sided test at
  5 %: ``n0 = ceil(((z + z_power) * sd / d)^2)``.

Sampling without replacement from ``N`` needs fewer: ``n = ceil(n0 / (1 + (n0 - 1) / N))`` (the finite population
correction). A segment gets at least ``min(sample_min_per_segment, N)``, so a language with few traces is judged
whole rather than vanishing. Without a baseline (or fewer than two ok scores of a segment in it) ``sd`` is 0.5, the
largest a score in [0, 1] can have: the sample is then never too small. Of all judge metrics of a trace the largest
``sd`` decides, since they are sampled together.

The traces are chosen by the same hash of the trace id as a fixed rate (``plan.sampled``), a threshold per segment:
the ``n`` smallest hashes of the segment. So the choice is exact, the same in every run and process, and a larger
sample holds the smaller one. docs/judge.md has a worked example.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from ragpulse.tasks.scoring.config import ScoringConfig

__all__ = [
    "ALL_TRACES",
    "BASELINE_PARTITIONS",
    "NO_BASELINE_SD",
    "UNKNOWN_SEGMENT",
    "JudgeSample",
    "SampleTarget",
    "baseline_deviations",
    "hash_of",
    "sample_size",
    "sampled_by_segment",
    "segment_deviations",
    "segment_thresholds",
]

NO_BASELINE_SD = 0.5
"""The standard deviation assumed without a baseline: the largest a score bounded by [0, 1] can have."""
UNKNOWN_SEGMENT = "unknown"
"""The segment of a trace whose language was not identified."""
ALL_TRACES = 2**64
"""A threshold above every hash: the whole segment."""
BASELINE_PARTITIONS = 14
"""The published partitions before the day whose judge scores give each segment's standard deviation."""
_CONFIDENCE = 0.95


@dataclass(frozen=True)
class JudgeSample:
    """A day's ``auto`` sample: the hash threshold per segment, and the share of the day's traces it judges (what
    the day's conversations are sampled at)."""

    thresholds: dict[str, int]
    share: float


@dataclass(frozen=True)
class SampleTarget:
    """What a segment's sample must achieve: the mean to ``half_width``, or with ``detect_drop`` a drop of that size
    found with ``power``; at least ``min_per_segment`` traces (or the whole segment)."""

    half_width: float = 0.05
    min_per_segment: int = 30
    detect_drop: float | None = None
    power: float = 0.8

    @classmethod
    def of(cls, scoring: ScoringConfig) -> SampleTarget:
        """The target the ``sample_*`` settings of ``scoring`` set."""
        return cls(
            half_width=scoring.sample_half_width, min_per_segment=scoring.sample_min_per_segment,
            detect_drop=scoring.sample_detect_drop, power=scoring.sample_power,
        )  # fmt: skip

    def unbounded_size(self, sd: float) -> int:
        """``n0``: the sample of an infinite segment."""
        z = NormalDist().inv_cdf(0.5 + _CONFIDENCE / 2)
        if self.detect_drop is not None:
            return math.ceil(((z + NormalDist().inv_cdf(self.power)) * sd / self.detect_drop) ** 2)
        return math.ceil((z * sd / self.half_width) ** 2)


def sample_size(n_traces: int, sd: float, target: SampleTarget) -> int:
    """How many of a segment's ``n_traces`` to judge for ``target``, given the baseline's ``sd``.

    >>> sample_size(5000, 0.5, SampleTarget(half_width=0.05))  # n0 = ceil((1.96 * 0.5 / 0.05)^2) = 385
    358
    >>> sample_size(12, 0.5, SampleTarget(half_width=0.05))  # fewer than the minimum: all of them
    12
    """
    if n_traces <= 0:
        return 0
    n0 = max(target.unbounded_size(sd), 1)
    corrected = math.ceil(n0 / (1 + (n0 - 1) / n_traces))
    return min(n_traces, max(corrected, target.min_per_segment))


def hash_of(trace_id: str) -> int:
    """The 64-bit hash a trace is sampled by, the fixed rate's (``plan.sampled``) too."""
    return int.from_bytes(hashlib.sha256(trace_id.encode()).digest()[:8], "big")


def segment_thresholds(
    segments: Mapping[str, Sequence[str]], sds: Mapping[str, float], target: SampleTarget
) -> dict[str, tuple[int, int, int]]:
    """Per segment (its trace ids in ``segments``): ``(threshold, n, N)``, the traces whose hash is below
    ``threshold`` being its ``n`` of ``N`` (``sds`` missing a segment: ``NO_BASELINE_SD``)."""
    chosen: dict[str, tuple[int, int, int]] = {}
    for segment, ids in segments.items():
        hashes = sorted({hash_of(t) for t in ids})
        n = sample_size(len(hashes), sds.get(segment, NO_BASELINE_SD), target)
        threshold = ALL_TRACES if n >= len(hashes) else hashes[n - 1] + 1 if n else 0
        chosen[segment] = (threshold, n, len(hashes))
    return chosen


def sampled_by_segment(
    trace_ids: Sequence[str], segments: Sequence[str | None], thresholds: Mapping[str, int]
) -> NDArray[np.bool_]:
    """Which traces the judge scores: those whose hash lies below their segment's threshold (a segment without one,
    a trace staged after the plan was made: judged)."""
    return np.fromiter(
        (
            hash_of(t) < thresholds.get(s or UNKNOWN_SEGMENT, ALL_TRACES)
            for t, s in zip(trace_ids, segments, strict=True)
        ),
        dtype=bool,
        count=len(trace_ids),
    )


def segment_deviations(scores: pa.Table) -> dict[str, float]:
    """The largest standard deviation (ddof 1) of any metric's ok values per ``segment`` of ``scores`` (``segment``,
    ``metric``, ``value``, ``status``); segments with fewer than two ok values of every metric are left out."""
    ok = scores.filter(pc.equal(scores["status"], "ok")).to_pandas()
    if ok.empty:
        return {}
    spread = ok.groupby(["segment", "metric"])["value"].agg(["std", "count"])
    spread = spread[spread["count"] >= 2]
    return {str(segment): float(sd) for segment, sd in spread.groupby(level=0)["std"].max().items()}


def baseline_deviations(
    warehouse_url: str, day: dt.date, metrics: Sequence[str]
) -> tuple[dict[str, float], list[dt.date]]:
    """Per language, the spread of ``metrics``' scores over the ``BASELINE_PARTITIONS`` published partitions before
    ``day`` (``segment_deviations``), and those partitions."""
    from ragpulse.tasks.warehouse import open_warehouse

    warehouse = open_warehouse(warehouse_url)
    published = warehouse.read("runs", end=day - dt.timedelta(days=1), columns=["partition_date"])
    window = sorted(set(published["partition_date"].to_pylist()))[-BASELINE_PARTITIONS:]
    if not window:
        return {}, []
    scores = warehouse.read(
        "scores", start=window[0], end=window[-1], columns=["partition_date", "trace_id", "metric", "value", "status"],
        metrics=list(metrics),
    )  # fmt: skip
    traces = warehouse.read(
        "traces", start=window[0], end=window[-1], columns=["partition_date", "trace_id", "language"]
    )
    joined = scores.join(traces, ["partition_date", "trace_id"], join_type="left outer")
    segment = pc.fill_null(joined["language"], UNKNOWN_SEGMENT)
    return segment_deviations(joined.append_column("segment", segment)), window
