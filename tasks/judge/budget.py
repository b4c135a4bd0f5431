"""The judge's spend limits: a budget per run and per UTC day, in USD (priced models) or tokens, enforced before each
call.

Every HTTP request to the judge first reserves what it may cost: its prompt's estimated tokens plus
``completion_token_budget`` per choice, priced by the model's price. A request the remaining budget cannot cover is
not sent: its score becomes ``not_applicable`` with reason ``budget_exhausted`` (``BudgetExhaustedError``), and a later
run with more budget fills it, as failed calls heal. When the reply comes, the reservation is replaced by the tokens
the server reports; a request that got no reply is assumed unbilled. So calls in flight can never overrun the budget
together, only by what a prompt's estimate falls short of its real count.

One budget covers a whole run: the partitions of a backfill and every judge task of the process share it, through a
context variable that Prefect hands on to subflows and to its task threads (``spending``). The day's budget starts
from what the runs recorded in the warehouse that started the same UTC day have spent. A judge task on a Dask worker
cannot reach it: there the partition holds what is left (its share when a backfill runs several partitions at once)
and gives each judge task an allowance in proportion to its traces (``allot``), charged with what they spent when
they end. The calls then stop per task, so a task may stop while another leaves some of its allowance unspent.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ragpulse.metrics.judge import BudgetExhaustedError
from ragpulse.metrics.prices import TokenPrice, merged_prices, price_of
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.judge.config import JudgeConfig
from ragpulse.tasks.judge.usage import Spend, usage_spend

__all__ = [
    "Allowance",
    "JudgeBudget",
    "Reservation",
    "check_budget",
    "current_budget",
    "judge_price",
    "spending",
    "spent_since",
]


def judge_price(judge: JudgeConfig) -> TokenPrice | None:
    """The judge model's price: ``judge.prices`` first, else the built-in price list (``metrics/prices.py``)."""
    if not judge.model:
        return None
    own = {model: TokenPrice(p.prompt_per_million, p.completion_per_million) for model, p in judge.prices.items()}
    return price_of(judge.model, merged_prices(own))


@dataclass(frozen=True)
class Reservation:
    """What one request (or one task's allowance) holds of the budget until it is settled."""

    tokens: float
    usd: float


@dataclass(frozen=True)
class Allowance:
    """What a judge task that cannot reach the run's budget (on a Dask worker) may spend: tokens and USD, None where
    the budget sets no limit of that kind."""

    tokens: float | None
    usd: float | None


class JudgeBudget:
    """Limits on tokens and USD (None: no limit of that kind) and what is spent and held against them; thread-safe."""

    def __init__(self, tokens: float | None, usd: float | None, price: TokenPrice | None) -> None:
        self.price = price
        self._limit = Allowance(tokens, usd)
        self._spent = Reservation(0, 0.0)
        self._held = Reservation(0, 0.0)
        self.refused = 0
        self._exhausted = False
        self._lock = threading.Lock()
        self.partitions_at_once = 1
        """Partitions evaluated at once against this budget (a backfill's concurrency): each allots its share."""

    @classmethod
    def for_run(cls, judge: JudgeConfig, *, spent_today: Spend | None = None) -> JudgeBudget:
        """The tighter of the run's limits (``run_*``) and what the UTC day's (``day_*``) leave after
        ``spent_today``."""
        spent_today = spent_today or Spend()

        def tighter(run: float | None, day: float | None, spent: float) -> float | None:
            limits = [limit for limit in (run, None if day is None else day - spent) if limit is not None]
            return min(limits) if limits else None

        tokens = tighter(judge.run_budget_tokens, judge.day_budget_tokens, spent_today.tokens)
        usd = tighter(judge.run_budget_usd, judge.day_budget_usd, spent_today.usd or 0.0)
        return cls(tokens, usd, judge_price(judge))

    @classmethod
    def of_allowance(cls, allowance: Allowance, judge: JudgeConfig) -> JudgeBudget:
        return cls(allowance.tokens, allowance.usd, judge_price(judge))

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return self.price.cost(prompt_tokens, completion_tokens) if self.price is not None else 0.0

    def _headroom(self) -> tuple[float, float]:
        """Tokens and USD that may still be committed (what is held included)."""
        tokens, usd = self._limit.tokens, self._limit.usd
        return (
            math.inf if tokens is None else tokens - self._spent.tokens - self._held.tokens,
            math.inf if usd is None else usd - self._spent.usd - self._held.usd,
        )

    def _hold(self, want: Reservation) -> None:
        self._held = Reservation(self._held.tokens + want.tokens, self._held.usd + want.usd)

    def reserve(self, prompt_tokens: int, completion_tokens: int) -> Reservation:
        """Hold the most a request of these estimated tokens may cost, or raise BudgetExhaustedError. Once one
        request is refused every later one is: at the budget the run stops calling, rather than slipping smaller
        calls into what is left."""
        want = Reservation(prompt_tokens + completion_tokens, self._cost(prompt_tokens, completion_tokens))
        with self._lock:
            tokens, usd = self._headroom()
            if self._exhausted or want.usd > usd or want.tokens > tokens:
                self._exhausted = True
                self.refused += 1
                raise BudgetExhaustedError(
                    f"a call reserving {want.tokens:g} tokens (${want.usd:.6f}) exceeds what the judge budget has "
                    f"left ({tokens:g} tokens, ${usd:.6f})"
                )
            self._hold(want)
        return want

    def settle(self, reservation: Reservation, prompt_tokens: int, completion_tokens: int) -> None:
        """Replace ``reservation`` by what the reply used (0 and 0 for a request that got no reply)."""
        self.charge(reservation, Spend(prompt_tokens + completion_tokens, self._cost(prompt_tokens, completion_tokens)))

    def charge(self, reservation: Reservation, spent: Spend) -> None:
        """Replace ``reservation`` by what was ``spent`` under it."""
        with self._lock:
            self._held = Reservation(self._held.tokens - reservation.tokens, self._held.usd - reservation.usd)
            self._spent = Reservation(self._spent.tokens + spent.tokens, self._spent.usd + (spent.usd or 0.0))

    def allot(self, weights: Sequence[float], share: float = 1.0) -> tuple[Reservation, list[Allowance]]:
        """Hold ``share`` of what is left and split it by ``weights``: one allowance per task that runs where this
        budget cannot be reached (a Dask worker). ``charge`` the hold with what the tasks spent once they end."""
        with self._lock:
            tokens, usd = self._headroom()
            tokens, usd = max(tokens, 0.0) * share, max(usd, 0.0) * share
            total = sum(weights) or 1.0
            allowances = [
                Allowance(
                    None if math.isinf(tokens) else tokens * weight / total,
                    None if math.isinf(usd) else usd * weight / total,
                )
                for weight in weights
            ]
            held = Reservation(0 if math.isinf(tokens) else tokens, 0.0 if math.isinf(usd) else usd)
            self._hold(held)
        return held, allowances

    @property
    def exhausted(self) -> bool:
        """Whether a call has been refused: no more are made against this budget."""
        return self._exhausted

    @property
    def spent(self) -> Spend:
        """What the settled calls used."""
        with self._lock:
            return Spend(int(self._spent.tokens), self._spent.usd if self.price is not None else None)


def check_budget(judge: JudgeConfig) -> None:
    """A USD budget needs a priced model. ConfigError in one line."""
    usd = [name for name in ("run_budget_usd", "day_budget_usd") if getattr(judge, name) is not None]
    if usd and judge.enabled and judge_price(judge) is None:
        raise ConfigError(
            f"judge {', '.join(usd)}: model {judge.model!r} has no price; give it one in judge.prices or set a "
            "token budget (run_budget_tokens, day_budget_tokens) instead"
        )


def spent_since(warehouse_url: str, since: dt.datetime) -> Spend:
    """What the runs recorded in the warehouse that started at or after ``since`` spent on the judge."""
    from ragpulse.tasks.warehouse import open_warehouse

    runs = open_warehouse(warehouse_url).read("runs", columns=["started_at", "judge_usage", "estimated_cost_usd"])
    total = Spend()
    for row in runs.to_pylist():
        if row["started_at"] is not None and row["started_at"] >= since and row["judge_usage"]:
            tokens = usage_spend(json.loads(row["judge_usage"])).tokens
            total += Spend(tokens, row["estimated_cost_usd"])
    return total


_budget: ContextVar[JudgeBudget | None] = ContextVar("ragpulse_judge_budget", default=None)


def current_budget() -> JudgeBudget | None:
    """The budget of the run this code is part of, if it has one."""
    return _budget.get()


@contextmanager
def spending(judge: JudgeConfig, warehouse_url: str) -> Iterator[JudgeBudget | None]:
    """Within the block, the judge calls of this run (its subflows' and tasks' included) share one budget: the
    enclosing run's when there is one (a backfill's partitions), else a new one when ``judge`` sets a limit."""
    known = _budget.get()
    if known is not None or not judge.has_budget:
        yield known
        return
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    spent = spent_since(warehouse_url, today) if judge.has_day_budget else Spend()
    token = _budget.set(JudgeBudget.for_run(judge, spent_today=spent))
    try:
        yield _budget.get()
    finally:
        _budget.reset(token)
