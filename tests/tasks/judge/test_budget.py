"""The judge budget: reservations before each call, settled by what the reply used; a run's and a day's limits; the
price a USD budget needs; the refused call's score; the day's earlier spend read from the warehouse's runs."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
import threading
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from ragpulse.metrics import Status
from ragpulse.metrics.judge import BUDGET_EXHAUSTED, BudgetExhaustedError, JudgeCallError, JudgeRequest, Outcome
from ragpulse.metrics.prices import BUILTIN_PRICES
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.judge.budget import (
    Allowance,
    JudgeBudget,
    check_budget,
    current_budget,
    judge_price,
    spending,
    spent_since,
)
from ragpulse.tasks.judge.client import OpenAIJudge
from ragpulse.tasks.judge.config import JudgeConfig, ModelPrice
from ragpulse.tasks.judge.usage import Spend
from ragpulse.tasks.monitoring.budget_alerts import BUDGET_RULE, budget_rows, run_had_budget
from ragpulse.tasks.warehouse import RUNS_SCHEMA, open_warehouse
from tests.doubles.judge_server import JudgeServer
from tests.doubles.publications import scores_publication

PRICED = JudgeConfig(
    model="house-judge", prices={"house-judge": ModelPrice(prompt_per_million=1.0, completion_per_million=4.0)}
)


def test_a_reservation_holds_the_budget_until_the_reply_settles_it() -> None:
    budget = JudgeBudget.for_run(PRICED.model_copy(update={"run_budget_tokens": 1_000}))
    first = budget.reserve(300, 300)
    second = budget.reserve(200, 100)
    with pytest.raises(BudgetExhaustedError):  # 600 + 300 held, 200 more would pass 1,000
        budget.reserve(150, 50)
    budget.settle(first, 250, 20)
    budget.settle(second, 0, 0)  # no reply: nothing billed
    assert budget.spent == Spend(270, (250 * 1.0 + 20 * 4.0) / 1e6)
    # At the budget the run stops calling, even for a call that would fit what is left.
    assert budget.exhausted
    with pytest.raises(BudgetExhaustedError):
        budget.reserve(1, 1)
    assert budget.refused == 2


def test_usd_and_the_day_limit_with_what_the_day_spent_before() -> None:
    # USD: 1,000 prompt tokens at $1/M and 1,000 completion tokens at $4/M cost $0.005.
    budget = JudgeBudget.for_run(PRICED.model_copy(update={"run_budget_usd": 0.011}))
    budget.reserve(1_000, 1_000)
    budget.reserve(1_000, 1_000)
    with pytest.raises(BudgetExhaustedError, match="exceeds what the judge budget has left"):
        budget.reserve(1_000, 1_000)
    day = JudgeBudget.for_run(PRICED.model_copy(update={"day_budget_tokens": 5_000}), spent_today=Spend(4_000, None))
    day.reserve(500, 400)
    with pytest.raises(BudgetExhaustedError):
        day.reserve(50, 51)


def test_concurrent_reservations_never_overrun() -> None:
    budget = JudgeBudget.for_run(PRICED.model_copy(update={"run_budget_tokens": 10_000}))
    granted: list[int] = []
    lock = threading.Lock()

    def call() -> None:
        for _ in range(50):
            try:
                held = budget.reserve(60, 40)
            except BudgetExhaustedError:
                return
            budget.settle(held, 60, 40)
            with lock:
                granted.append(100)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == budget.spent.tokens == 10_000


def test_a_call_not_made_is_not_applicable_and_others_failed() -> None:
    refused = Outcome.of_call_error(BudgetExhaustedError("no room"))
    assert math.isnan(refused.value) and (refused.status, refused.reason) == (Status.NOT_APPLICABLE, BUDGET_EXHAUSTED)
    failed = Outcome.of_call_error(JudgeCallError("timeout_after_6_retries"))
    assert (failed.status, failed.reason) == (Status.FAILED, "timeout_after_6_retries")


def test_the_price_comes_from_the_settings_else_the_built_in_list() -> None:
    assert judge_price(PRICED) is not None and judge_price(PRICED).input_per_million == 1.0  # type: ignore[union-attr]
    assert judge_price(JudgeConfig(model="gpt-4o-mini-2024-07-18")) == BUILTIN_PRICES["gpt-4o-mini"]
    assert judge_price(JudgeConfig(model="house-judge")) is None


def test_a_usd_budget_needs_a_price() -> None:
    with pytest.raises(ConfigError, match="run_budget_usd: model 'house-judge' has no price"):
        check_budget(JudgeConfig(model="house-judge", run_budget_usd=5))
    check_budget(JudgeConfig(model="house-judge", run_budget_tokens=5))
    check_budget(PRICED.model_copy(update={"day_budget_usd": 5.0}))


def test_allowances_split_what_is_left_and_are_charged_with_what_was_spent() -> None:
    """A Dask worker's judge tasks get allowances: a share of what is left, by their traces, held until charged."""
    budget = JudgeBudget.for_run(PRICED.model_copy(update={"run_budget_tokens": 10_000}))
    budget.settle(budget.reserve(1_000, 1_000), 1_500, 500)  # 2,000 spent, 8,000 left
    held, allowances = budget.allot([300.0, 100.0], share=1 / 2)  # two partitions at once: half each, 3:1
    assert allowances == [Allowance(3_000, None), Allowance(1_000, None)]
    task = JudgeBudget.of_allowance(allowances[1], PRICED)
    task.reserve(500, 400)
    with pytest.raises(BudgetExhaustedError):
        task.reserve(50, 51)
    other_held, other = budget.allot([1.0])  # another partition meanwhile: what the first does not hold
    assert other == [Allowance(4_000, None)]
    budget.charge(held, Spend(2_500, 0.01))
    budget.charge(other_held, Spend(0, 0.0))
    assert budget.spent.tokens == 4_500 and budget.allot([1.0])[1] == [Allowance(5_500, None)]


def test_the_client_asks_no_more_than_the_budget_allows(judge_server: JudgeServer) -> None:
    judge_server.responder = lambda body: {"verdict": 1}
    settings = JudgeConfig(
        model="budget-judge", base_url=judge_server.base_url, completion_token_budget=16, max_concurrency=4,
        run_budget_tokens=100,
    )  # fmt: skip
    budget = JudgeBudget.for_run(settings)
    requests = [
        JudgeRequest(
            metric="m",
            step="s",
            prompt_version="1",
            messages=(("user", f"質問 {i}: 東京は日本の首都ですか？"),),
            schema={},
        )
        for i in range(20)
    ]

    async def ask_all() -> list[object]:
        async with OpenAIJudge(settings, budget=budget) as judge:
            results = await asyncio.gather(*(judge.complete(r) for r in requests), return_exceptions=True)
            assert judge.usage.totals()["budget_refused"] == sum(isinstance(r, BudgetExhaustedError) for r in results)
            return results

    results = asyncio.run(ask_all())
    answered = [r for r in results if isinstance(r, list)]
    assert 0 < len(answered) == judge_server.calls < len(requests)
    assert all(isinstance(r, BudgetExhaustedError) for r in results if not isinstance(r, list))
    assert budget.spent.tokens <= 100


def test_the_run_shares_one_budget_and_the_day_starts_from_the_warehouse(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    warehouse = open_warehouse(url)
    now = dt.datetime.now(dt.UTC)
    usage = json.dumps({"faithfulness": {"prompt_tokens": 700, "completion_tokens": 50}})
    for day, started, cost in (
        (dt.date(2026, 1, 1), now, 0.25),
        (dt.date(2026, 1, 2), now - dt.timedelta(days=1), 9.0),
    ):
        publication = scores_publication(day, f"run-{day}", 1, now=started)
        run = publication.run.to_pylist()[0] | {"judge_usage": usage, "estimated_cost_usd": cost}
        warehouse.publish(replace(publication, run=pa.Table.from_pylist([run], schema=RUNS_SCHEMA)))
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    assert spent_since(url, today) == Spend(750, 0.25)

    settings = PRICED.model_copy(update={"day_budget_usd": 1.0})
    assert current_budget() is None
    with spending(settings, url) as outer:
        assert outer is not None and outer.allot([1.0], share=0.5)[1] == [Allowance(None, (1.0 - 0.25) / 2)]
        with spending(settings.model_copy(update={"run_budget_tokens": 1}), url) as inner:
            assert inner is outer  # a backfill's partitions share the backfill's budget
    assert current_budget() is None
    with spending(JudgeConfig(model="house-judge"), url) as none:
        assert none is None


def test_the_budget_alert_opens_on_a_stopped_day_and_is_within_otherwise() -> None:
    day = dt.date(2026, 7, 1)
    scores = pa.table(
        {
            "metric": ["faithfulness"] * 4 + ["answer_relevancy"] * 2 + ["recall@5"],
            "reason": [None, None, BUDGET_EXHAUSTED, BUDGET_EXHAUSTED, None, None, None],
            "judge_model": ["j"] * 6 + [None],
            "prompt_version": ["1"] * 6 + [None],
        }
    )
    rows = budget_rows(scores, day, "run", budgeted=True).to_pylist()
    assert [(r["metric"], r["verdict"], r["observed"], r["rule"]) for r in rows] == [
        ("answer_relevancy", "within", 0.0, BUDGET_RULE),
        ("faithfulness", "warning", 0.5, BUDGET_RULE),
    ]
    assert budget_rows(scores.slice(4), day, "run", budgeted=False).num_rows == 0
    assert run_had_budget([json.dumps({"judge": {"run_budget_usd": None, "day_budget_tokens": 9}})])
    assert not run_had_budget([json.dumps({"judge": {"run_budget_usd": None}}), None])


def test_a_japanese_prompt_reserves_a_token_a_character(judge_server: JudgeServer) -> None:
    """300 Japanese characters reserve at least 300 tokens, where four characters a token would reserve 75."""
    judge_server.responder = lambda body: {"verdict": 1}
    settings = JudgeConfig(
        model="budget-judge", base_url=judge_server.base_url, completion_token_budget=1, run_budget_tokens=250,
        response_format="text",
    )  # fmt: skip

    async def ask(text: str) -> object:
        async with OpenAIJudge(settings, budget=JudgeBudget.for_run(settings)) as judge:
            request = JudgeRequest(metric="m", step="s", prompt_version="1", messages=(("user", text),), schema={})
            try:
                return await judge.complete(request)
            except BudgetExhaustedError as refused:
                return refused

    assert isinstance(asyncio.run(ask("東京" * 150)), BudgetExhaustedError) and judge_server.calls == 0
    assert asyncio.run(ask("Tokyo " * 50)) == ['{"verdict": 1}'] and judge_server.calls == 1
