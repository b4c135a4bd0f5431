"""What a run will cost the judge, before it starts: traces x judged share x calls per judged trace x tokens per
call x price, per judge metric, for the CLI's ``--dry-run`` and a backfill's plan.

Each factor comes from the ``runs`` rows of the warehouse's recent runs with the same judge model where there are
some (``history``): their traces per day, the share of them the judge scored (``judge_usage``'s ``judged``), and per
metric the calls per judged trace (calls made, answered by the cache or joined, so a warm cache does not make the next
run look free) and the tokens per call. Only the ``runs`` table is read, never the scores.
Without history the factors are assumptions (``assumed``) stated in :data:`ASSUMED_CALL`: one call per trace and
metric of 800 prompt and 200 completion tokens, the whole day judged.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragpulse.metrics.registry import build_conversation_metrics, build_judge_metrics, parse_metrics
from ragpulse.tasks.judge.budget import judge_price
from ragpulse.tasks.judge.config import JudgeConfig
from ragpulse.tasks.judge.plan import JudgePlan
from ragpulse.tasks.judge.usage import merge_usage
from ragpulse.tasks.scoring.config import ScoringConfig

__all__ = ["ASSUMED_CALL", "CostForecast", "MetricForecast", "forecast_cost", "llm_metrics"]

ASSUMED_CALL = {"calls_per_trace": 1.0, "prompt_tokens": 800, "completion_tokens": 200}
"""Per judged trace and metric, without history."""
_HISTORY_RUNS = 14


@dataclass(frozen=True)
class MetricForecast:
    metric: str
    calls: float
    prompt_tokens: float
    completion_tokens: float
    usd: float | None


@dataclass(frozen=True)
class CostForecast:
    """The expected judge cost of ``days`` partitions of ``traces_per_day`` traces (None: no published day to size
    them from, so the figures assume 1,000 a day)."""

    judge_model: str
    days: int
    traces_per_day: float | None
    judged_share: float
    basis: Literal["history", "assumed"]
    metrics: list[MetricForecast]

    @property
    def usd(self) -> float | None:
        costs = [m.usd for m in self.metrics]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    @property
    def calls(self) -> float:
        return sum(m.calls for m in self.metrics)

    @property
    def tokens(self) -> float:
        return sum(m.prompt_tokens + m.completion_tokens for m in self.metrics)

    def describe(self) -> str:
        """One line: the judge's expected calls, tokens and cost."""
        scope = (
            f"{self.days} day(s) x ~{self.traces_per_day:,.0f} traces"
            if self.traces_per_day is not None
            else f"{self.days} day(s) x 1,000 traces, no published day to size a day from"
        )
        usd = "unpriced" if self.usd is None else f"${self.usd:,.2f}"
        return (
            f"expected judge cost ({self.judge_model}, {scope}, {self.judged_share:.0%} judged, {self.basis}): "
            f"{self.calls:,.0f} calls, {self.tokens:,.0f} tokens, {usd}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge_model": self.judge_model, "days": self.days, "traces_per_day": self.traces_per_day,
            "judged_share": self.judged_share, "basis": self.basis, "calls": self.calls, "tokens": self.tokens,
            "usd": self.usd, "metrics": [m.__dict__ for m in self.metrics],
        }  # fmt: skip


def llm_metrics(plan: JudgePlan, options: Mapping[str, Any]) -> list[str]:
    """The metrics of ``plan`` that call the LLM judge (not those that only embed)."""
    names = [*plan.judged, *plan.conversations]
    if not names:
        return []
    requests = parse_metrics(names)
    judged = [m.name for m in build_judge_metrics(requests, options) if m.uses_llm]
    return judged + [m.name for m in build_conversation_metrics(requests, options) if m.uses_llm]


def forecast_cost(
    warehouse_url: str, judge: JudgeConfig, scoring: ScoringConfig, judged: Sequence[str], days: int
) -> CostForecast | None:
    """The expected cost of judging ``judged`` (the LLM metrics) over ``days`` partitions; None without a judge."""
    if not judge.model or not judged:
        return None
    runs = _recent_runs(warehouse_url, judge.model)
    totals = _usage_totals(runs)
    price = judge_price(judge)
    n_traces = sum(int(run["n_traces"] or 0) for run in runs)
    traces_per_day = n_traces / len(runs) if runs else None
    if scoring.auto_sample:  # the largest share any metric was judged on lately, all of them without history
        shares = [t["judged"] / t["traces"] for metric, t in totals.items() if metric in judged and t["traces"]]
        share = max(shares, default=1.0)
    else:
        share = float(scoring.sample_rate)
    per_trace = {
        metric: (t["calls"] / t["judged"], t["prompt"] / t["http"], t["completion"] / t["http"])
        for metric, t in totals.items()
        if metric in judged and t["judged"] and t["http"]
    }
    scale = (traces_per_day if traces_per_day is not None else 1_000) * days * share
    metrics = []
    for metric in judged:
        calls, prompt, completion = per_trace.get(metric) or tuple(ASSUMED_CALL.values())
        prompt_tokens, completion_tokens = scale * calls * prompt, scale * calls * completion
        usd = price.cost(int(prompt_tokens), int(completion_tokens)) if price is not None else None
        metrics.append(MetricForecast(metric, scale * calls, prompt_tokens, completion_tokens, usd))
    basis: Literal["history", "assumed"] = "history" if per_trace else "assumed"
    return CostForecast(judge.model, days, traces_per_day, share, basis, metrics)


def _recent_runs(warehouse_url: str, model: str) -> list[dict[str, Any]]:
    """The newest run of ``model`` of each of the latest partitions it judged."""
    from ragpulse.tasks.warehouse import open_warehouse

    columns = ["partition_date", "n_traces", "judge_model", "judge_usage", "started_at"]
    rows = [
        r for r in open_warehouse(warehouse_url).read("runs", columns=columns).to_pylist() if r["judge_model"] == model
    ]
    newest: dict[dt.date, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["started_at"]):
        newest[row["partition_date"]] = row
    return [newest[day] for day in sorted(newest)][-_HISTORY_RUNS:]


def _usage_totals(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per metric over ``runs``: traces it judged and the traces of the runs that judged it, calls (made, answered by
    the cache or joined), HTTP calls, and their prompt and completion tokens."""
    snapshots = [json.loads(run["judge_usage"]) if run["judge_usage"] else {} for run in runs]
    traces: dict[str, int] = {}
    for run, snapshot in zip(runs, snapshots, strict=True):
        for metric, usage in snapshot.items():
            traces[metric] = traces.get(metric, 0) + (int(run["n_traces"] or 0) if usage.get("judged") else 0)
    return {
        metric: {
            "judged": usage["judged"],
            "traces": traces[metric],
            "calls": usage["http_calls"] + usage["cache_hits"] + usage["deduplicated"],
            "http": usage["http_calls"],
            "prompt": usage["prompt_tokens"],
            "completion": usage["completion_tokens"],
        }
        for metric, usage in merge_usage(*snapshots).items()
    }
