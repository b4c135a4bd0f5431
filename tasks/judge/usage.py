"""What the judge's calls cost: counters per metric, summed across threads and tasks, priced per model.

Snapshots are plain JSON-serialisable dicts, so a task can return them and a flow can merge them for the
``runs`` table.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ragpulse.metrics.prices import TokenPrice

__all__ = ["MetricUsage", "Spend", "UsageLedger", "fresh_usage", "merge_usage", "usage_spend"]


@dataclass
class MetricUsage:
    """Counters of one metric's judge calls."""

    http_calls: int = 0
    cache_hits: int = 0
    deduplicated: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    failures: int = 0
    budget_refused: int = 0
    """Calls not made: the judge budget could not cover them (their scores are ``budget_exhausted``)."""
    judged: int = 0
    """Traces (conversations) the metric judged: its sample, whether the calls were made or answered by the cache."""


_COUNTERS = tuple(MetricUsage.__dataclass_fields__)


@dataclass(frozen=True)
class Spend:
    """Tokens and USD (None: some of it unpriced)."""

    tokens: int = 0
    usd: float | None = 0.0

    def __add__(self, other: Spend) -> Spend:
        usd = None if self.usd is None or other.usd is None else self.usd + other.usd
        return Spend(self.tokens + other.tokens, usd)


class UsageLedger:
    """Thread-safe usage per metric with estimated cost; snapshots are plain JSON-serialisable dicts."""

    def __init__(self, model: str, price: TokenPrice | None = None) -> None:
        self.model = model
        self._price = price
        self._metrics: dict[str, MetricUsage] = {}
        self._lock = threading.Lock()

    def add(self, metric: str, **counts: int) -> None:
        with self._lock:
            usage = self._metrics.setdefault(metric, MetricUsage())
            for name, amount in counts.items():
                setattr(usage, name, getattr(usage, name) + amount)

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        return None if self._price is None else self._price.cost(prompt_tokens, completion_tokens)

    def _row(self, usage: MetricUsage) -> dict[str, Any]:
        row: dict[str, Any] = {"model": self.model, **asdict(usage)}
        row["estimated_cost_usd"] = self._cost(usage.prompt_tokens, usage.completion_tokens)
        return row

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """``{metric: {model, http_calls, cache_hits, ..., estimated_cost_usd}}``; cost None when unpriced."""
        with self._lock:
            return {metric: self._row(usage) for metric, usage in sorted(self._metrics.items())}

    def totals(self) -> dict[str, Any]:
        with self._lock:
            total = MetricUsage()
            for usage in self._metrics.values():
                for name in _COUNTERS:
                    setattr(total, name, getattr(total, name) + getattr(usage, name))
            return self._row(total)


def merge_usage(*snapshots: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Sum per-metric snapshots (of several tasks); a cost stays None if any part of it is unpriced."""
    merged: dict[str, dict[str, Any]] = {}
    for snapshot in snapshots:
        for metric, row in snapshot.items():
            into = merged.setdefault(metric, {"model": row.get("model"), **dict.fromkeys(_COUNTERS, 0)})
            if into["model"] != row.get("model"):
                into["model"] = "mixed"
            for name in _COUNTERS:
                into[name] += int(row.get(name, 0))
            cost, previous = row.get("estimated_cost_usd"), into.get("estimated_cost_usd", 0.0)
            into["estimated_cost_usd"] = None if cost is None or previous is None else previous + cost
    return merged


def usage_spend(usage: Mapping[str, Mapping[str, Any]]) -> Spend:
    """The tokens and USD (None: some unpriced) a merged usage snapshot spent."""
    tokens = sum(int(u.get("prompt_tokens", 0)) + int(u.get("completion_tokens", 0)) for u in usage.values())
    costs: list[float | None] = [u.get("estimated_cost_usd") for u in usage.values()]
    priced = [cost for cost in costs if cost is not None]
    return Spend(tokens, sum(priced) if len(priced) == len(costs) else None)


def fresh_usage(futures: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Judge usage of this run from the futures of its judge tasks: batches answered from the task cache cost
    nothing now, so they count zero."""
    return merge_usage(*(f.result().usage for f in futures if f.state.name != "Cached"))
