"""The operational metrics (metrics/operations.py) and the price table (metrics/prices.py): every expected value is
worked out by hand from the definitions in docs/metrics.md, "Operational metrics"."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ragpulse.metrics import DEFAULT_METRICS, MetricRequest, Status, Step, TraceBatch, compute
from ragpulse.metrics.batch import Operations, SpanError, Usage
from ragpulse.metrics.prices import (
    BUILTIN_PRICES,
    PRICE_SOURCE,
    TokenPrice,
    merged_prices,
    price_of,
    prices_digest,
)
from ragpulse.tasks.warehouse._views import LOWER_IS_BETTER

OPERATIONAL = (
    "latency_ms",
    "retrieval_latency_ms",
    "generation_latency_ms",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "error",
    "empty_retrieval",
    "answer_length",
)


def _batch(n: int, **fields: Any) -> TraceBatch:
    defaults: dict[str, Any] = {
        "trace_ids": [f"t{i}" for i in range(n)],
        "context_ids": [[] for _ in range(n)],
        "context_texts": [[] for _ in range(n)],
        "relevant_ids": [None] * n,
        "relevant_texts": [None] * n,
        "answers": [None] * n,
        "references": [[] for _ in range(n)],
    }
    return TraceBatch(**{**defaults, **fields})


def _values(batch: TraceBatch, name: str, prices: Any = BUILTIN_PRICES) -> list[Any]:
    """Each trace's value, or (status, reason) where it has none."""
    result = compute(batch, [MetricRequest.parse(name)], prices=prices)[name]
    return [
        float(v) if s == Status.OK else (Status(int(s)).label, r)
        for v, s, r in zip(result.values, result.status, result.reasons, strict=True)
    ]


def test_latencies_are_read_as_logged_and_not_applicable_where_missing() -> None:
    batch = _batch(
        3,
        operations=[
            Operations(latency_ms=1234.5, retrieval_latency_ms=80.0, generation_latency_ms=None),
            None,
            Operations(latency_ms=0.0, retrieval_latency_ms=None, generation_latency_ms=700.25),
        ],
    )
    assert _values(batch, "latency_ms") == [1234.5, ("not_applicable", "no_latency"), 0.0]
    assert _values(batch, "retrieval_latency_ms") == [
        80.0,
        ("not_applicable", "no_retrieval_latency"),
        ("not_applicable", "no_retrieval_latency"),
    ]
    assert _values(batch, "generation_latency_ms") == [
        ("not_applicable", "no_generation_latency"),
        ("not_applicable", "no_generation_latency"),
        700.25,
    ]
    # A batch built without operations at all (a canonical trace without the fields): every turn says why.
    assert _values(_batch(2), "latency_ms") == [("not_applicable", "no_latency")] * 2


def test_tokens_sum_the_applications_calls_and_a_call_without_counts_leaves_the_sum_unknown() -> None:
    calls = (Usage("gpt-4o-mini", 1200, 80), Usage("claude-3-5-haiku-20241022", 300, 20))
    batch = _batch(
        4,
        operations=[
            Operations(usage=calls),
            Operations(usage=()),  # no model call in the turn (a cached answer): 0, not unknown
            Operations(usage=(Usage("gpt-4o", 10, None),)),
            Operations(latency_ms=5.0),  # usage not logged
        ],
    )
    assert _values(batch, "input_tokens") == [1500.0, 0.0, 10.0, ("not_applicable", "no_usage")]
    assert _values(batch, "output_tokens") == [
        100.0,
        0.0,
        ("not_applicable", "no_token_counts"),
        ("not_applicable", "no_usage"),
    ]


def test_cost_multiplies_each_calls_tokens_by_its_models_price() -> None:
    batch = _batch(
        6,
        operations=[
            # gpt-4o-mini 0.15/0.60 and claude-3-5-haiku 0.80/4.00 USD per million tokens (the table below).
            Operations(usage=(Usage("gpt-4o-mini", 1200, 80), Usage("claude-3-5-haiku-20241022", 300, 20))),
            Operations(usage=()),
            Operations(usage=(Usage("gpt-4o-mini", 100, 10), Usage("qwen2.5-7b", 100, 10))),
            Operations(usage=(Usage(None, 100, 10),)),
            Operations(usage=(Usage("gpt-4o", None, 10),)),
            Operations(errors=()),
        ],
    )
    prices = merged_prices({"gpt-4o-mini": TokenPrice(0.15, 0.60), "claude-3-5-haiku": TokenPrice(0.80, 4.0)})
    by_hand = (1200 * 0.15 + 80 * 0.60 + 300 * 0.80 + 20 * 4.0) / 1e6
    got = _values(batch, "cost_usd", prices)
    assert math.isclose(got[0], by_hand, rel_tol=1e-12)
    assert got[1:] == [
        0.0,
        ("not_applicable", "unpriced_model:qwen2.5-7b"),
        ("not_applicable", "no_model_name"),
        ("not_applicable", "no_token_counts"),
        ("not_applicable", "no_usage"),
    ]
    # The run's own prices price a self-hosted model and override a built-in one.
    own = merged_prices({"qwen2.5-7b": TokenPrice(0.05, 0.10), "gpt-4o-mini": TokenPrice(1.0, 1.0)})
    assert math.isclose(_values(batch, "cost_usd", own)[2], (100 * 1.0 + 10 * 1.0 + 100 * 0.05 + 10 * 0.10) / 1e6)


@pytest.mark.parametrize(
    ("logged", "table_name"),
    [
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("GPT-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("openai/gpt-4.1-nano", "gpt-4.1-nano"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
        ("models/gemini-2.5-flash", "gemini-2.5-flash"),
        ("mistral-large-2411", "mistral-large"),
        ("mistral-small-latest", "mistral-small"),
    ],
)
def test_a_logged_model_name_finds_its_models_price(logged: str, table_name: str) -> None:
    # A table of its own: the built-in list follows the providers (retired models leave it), the lookup rules do not.
    names = ("gpt-4o-mini", "gpt-4o", "gpt-4.1-nano", "claude-sonnet-4-5", "claude-3-5-sonnet", "gemini-2.5-flash")
    table = {name: TokenPrice(i, 2 * i) for i, name in enumerate((*names, "mistral-large", "mistral-small"), 1)}
    assert price_of(logged, table) == table[table_name]


def test_the_built_in_prices_are_litellms_list_as_read() -> None:
    assert PRICE_SOURCE.startswith("LiteLLM ") and "read 20" in PRICE_SOURCE
    assert BUILTIN_PRICES["gpt-4o-mini"] == TokenPrice(0.15, 0.6)
    assert all(p.input_per_million >= 0 and p.output_per_million >= 0 for p in BUILTIN_PRICES.values())


@pytest.mark.parametrize("logged", ["gpt-4o-audio-preview", "my-finetune", "llama-3.1-8b", "gpt-4o-mini-tts"])
def test_a_variant_or_unknown_model_is_not_priced_as_another(logged: str) -> None:
    assert price_of(logged, BUILTIN_PRICES) is None


def test_a_changed_price_changes_the_tables_digest() -> None:
    base = prices_digest(merged_prices())
    assert prices_digest(merged_prices({"gpt-4o": TokenPrice(2.5, 10.0)})) == base  # the same price again
    assert prices_digest(merged_prices({"gpt-4o": TokenPrice(2.5, 11.0)})) != base
    assert prices_digest(merged_prices({"new-model": TokenPrice(1.0, 1.0)})) != base


def test_error_is_one_when_any_span_failed_and_needs_the_spans_statuses() -> None:
    batch = _batch(
        4,
        operations=[
            Operations(errors=(SpanError("tool", "search_docs", "HTTP 503"),)),
            Operations(errors=(SpanError("root", "agent", "boom"), SpanError("llm", "chat", "timeout"))),
            Operations(errors=()),
            Operations(latency_ms=12.0),
        ],
    )
    assert _values(batch, "error") == [1.0, 1.0, 0.0, ("not_applicable", "no_span_status")]


def _step(index: int, documents: int, kind: str = "retriever") -> Step:
    ids = tuple(f"d{index}-{j}" for j in range(documents))
    return Step(index, None, None, kind, "q", ids, ids, parent=0 if kind == "reranker" else None)


def test_empty_retrieval_flags_any_step_that_returned_nothing_but_not_a_reranker() -> None:
    batch = _batch(
        6,
        context_ids=[[], [], [], [], ["a"], []],
        context_texts=[[], [], [], [], ["A"], []],
        steps=[
            [_step(0, 0, "tool"), _step(1, 4)],  # the first search came back empty, the second made up for it
            [_step(0, 3), _step(1, 0, "reranker")],  # a reranker's output is no retrieval of its own
            [_step(0, 2), _step(1, 5, "tool")],
            [],  # the agent answered without retrieving
            None,  # the ragpulse format without steps: its contexts were the one retrieval
            None,
        ],
    )
    assert _values(batch, "empty_retrieval") == [1.0, 0.0, 0.0, ("not_applicable", "no_retrieval"), 0.0, 1.0]


def test_answer_length_counts_words_and_each_cjk_character() -> None:
    answers = [
        "Larry Page and Sergey Brin.",  # 5 words
        "ラリー・ページとセルゲイ・ブリンです。",  # 16 kana, the middle dots and the full stop left out
        "拉里·佩奇和谢尔盖·布林",  # 10 Han characters
        "서울 타워",  # 4 hangul syllables
        "Die \uff2d\uff41\uff55\uff45\uff52 fiel 1989!",  # NFKC folds the full-width letters: 4 words
        "",
        None,
    ]
    assert _values(_batch(7, answers=answers), "answer_length") == [
        5.0,
        16.0,
        10.0,
        4.0,
        4.0,
        0.0,
        ("not_applicable", "no_answer"),
    ]


def test_operational_metrics_are_defaults_and_point_the_right_way() -> None:
    assert set(OPERATIONAL) | {"retrieval_steps"} <= set(DEFAULT_METRICS)
    lower = {"latency_ms", "retrieval_latency_ms", "generation_latency_ms", "input_tokens", "output_tokens"}
    lower |= {"cost_usd", "error", "empty_retrieval"}
    assert lower <= set(LOWER_IS_BETTER)
    assert "answer_length" not in LOWER_IS_BETTER and "retrieval_steps" not in LOWER_IS_BETTER
    for name in lower:
        assert not MetricRequest.parse(name).definition.spec.higher_is_better


def test_the_default_set_on_a_batch_with_operations_scores_every_operational_metric() -> None:
    batch = _batch(
        1,
        context_ids=[["d1"]],
        context_texts=[["東京の人口は約1400万人。"]],
        answers=["約1400万人です。"],
        steps=[[_step(0, 1)]],
        operations=[
            Operations(
                latency_ms=900.0,
                retrieval_latency_ms=120.0,
                generation_latency_ms=700.0,
                usage=(Usage("gpt-4o-mini", 1000, 20),),
                errors=(),
            )
        ],
    )
    results = compute(batch, [MetricRequest.parse(name) for name in (*OPERATIONAL, "retrieval_steps")])
    assert {name for name, result in results.items() if result.status[0] == Status.OK} == {
        *OPERATIONAL,
        "retrieval_steps",
    }
    # 約 1400 万 人 で す: the digits are one word between the characters.
    assert results["answer_length"].values[0] == 6.0
