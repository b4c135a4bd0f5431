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
from what the runs recorded in the warehouse that started the same UTC day have spent.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ragpulse.metrics.judge import BudgetExhaustedError
from ragpulse.metrics.prices import TokenPrice, merged_prices, price_of
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.judge.config import JudgeConfig

__all__ = [
    "JudgeBudget",
    "Reservation",
    "Spend",
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
class Spend:
    """Tokens and USD (None: some of it unpriced)."""

    tokens: int = 0
    usd: float | None = 0.0

    def __add__(self, other: Spend) -> Spend:
        usd = None if self.usd is None or other.usd is None else self.usd + other.usd
        return Spend(self.tokens + other.tokens, usd)


@dataclass(frozen=True)
class Reservation:
    """What one request holds of the budget until its reply is settled."""

    tokens: int
    usd: float


class JudgeBudget:
    """The limits of one run (``run_*``) and of its UTC day (``day_*``, on top of ``spent_today``); thread-safe."""

    def __init__(self, judge: JudgeConfig, *, spent_today: Spend = Spend()) -> None:
        self.price = judge_price(judge)
        self._limits_usd = [limit for limit in (judge.run_budget_usd,) if limit is not None]
        self._limits_tokens = [limit for limit in (judge.run_budget_tokens,) if limit is not None]
        self._day_usd, self._day_tokens = judge.day_budget_usd, judge.day_budget_tokens
        self.spent_today = spent_today
        self._spent = Reservation(0, 0.0)
        self._held = Reservation(0, 0.0)
        self.refused = 0
        self._exhausted = False
        self._lock = threading.Lock()

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return self.price.cost(prompt_tokens, completion_tokens) if self.price is not None else 0.0

    def _headroom(self) -> tuple[float, float]:
        """USD and tokens this run may still commit (reservations included)."""
        committed = Reservation(self._spent.tokens + self._held.tokens, self._spent.usd + self._held.usd)
        usd = [limit - committed.usd for limit in self._limits_usd]
        tokens = [limit - committed.tokens for limit in self._limits_tokens]
        if self._day_usd is not None:
            usd.append(self._day_usd - (self.spent_today.usd or 0.0) - committed.usd)
        if self._day_tokens is not None:
            tokens.append(self._day_tokens - self.spent_today.tokens - committed.tokens)
        return min(usd, default=math.inf), min(tokens, default=math.inf)

    def reserve(self, prompt_tokens: int, completion_tokens: int) -> Reservation:
        """Hold the most a request of these estimated tokens may cost, or raise BudgetExhaustedError. Once one
        request is refused every later one is: at the budget the run stops calling, rather than slipping smaller
        calls into what is left."""
        want = Reservation(prompt_tokens + completion_tokens, self._cost(prompt_tokens, completion_tokens))
        with self._lock:
            usd, tokens = self._headroom()
            if self._exhausted or want.usd > usd or want.tokens > tokens:
                self._exhausted = True
                self.refused += 1
                raise BudgetExhaustedError(
                    f"a call reserving {want.tokens} tokens (${want.usd:.6f}) exceeds what the judge budget has "
                    f"left ({tokens:g} tokens, ${usd:.6f})"
                )
            self._held = Reservation(self._held.tokens + want.tokens, self._held.usd + want.usd)
        return want

    def settle(self, reservation: Reservation, prompt_tokens: int, completion_tokens: int) -> None:
        """Replace ``reservation`` by what the reply used (0 and 0 for a request that got no reply)."""
        used = Reservation(prompt_tokens + completion_tokens, self._cost(prompt_tokens, completion_tokens))
        with self._lock:
            self._held = Reservation(self._held.tokens - reservation.tokens, self._held.usd - reservation.usd)
            self._spent = Reservation(self._spent.tokens + used.tokens, self._spent.usd + used.usd)

    @property
    def exhausted(self) -> bool:
        """Whether a call has been refused: no more are made in this run."""
        return self._exhausted

    @property
    def spent(self) -> Spend:
        """What this run's settled calls used."""
        with self._lock:
            return Spend(self._spent.tokens, self._spent.usd if self.price is not None else None)


def check_budget(judge: JudgeConfig, *, shared_by_threads: bool) -> None:
    """A USD budget needs a priced model, and any budget a run whose judge calls share one process. ConfigError."""
    usd = [name for name in ("run_budget_usd", "day_budget_usd") if getattr(judge, name) is not None]
    if usd and judge.enabled and judge_price(judge) is None:
        raise ConfigError(
            f"judge {', '.join(usd)}: model {judge.model!r} has no price; give it one in judge.prices or set a "
            "token budget (run_budget_tokens, day_budget_tokens) instead"
        )
    if judge.has_budget and not shared_by_threads:
        raise ConfigError(
            "a judge budget is kept by the process that makes the calls: it needs the thread runner, not dask"
        )


def spent_since(warehouse_url: str, since: dt.datetime) -> Spend:
    """What the runs recorded in the warehouse that started at or after ``since`` spent on the judge."""
    from ragpulse.tasks.warehouse import open_warehouse

    runs = open_warehouse(warehouse_url).read("runs", columns=["started_at", "judge_usage", "estimated_cost_usd"])
    total = Spend()
    for row in runs.to_pylist():
        if row["started_at"] is None or row["started_at"] < since or not row["judge_usage"]:
            continue
        usage = json.loads(row["judge_usage"])
        tokens = sum(int(u.get("prompt_tokens", 0)) + int(u.get("completion_tokens", 0)) for u in usage.values())
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
    token = _budget.set(JudgeBudget(judge, spent_today=spent))
    try:
        yield _budget.get()
    finally:
        _budget.reset(token)
