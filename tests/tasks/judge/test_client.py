"""The HTTP judge client through the real ``openai`` client against the scripted server on loopback."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
import pytest
from pydantic import ValidationError

from ragpulse.metrics import TraceBatch
from ragpulse.metrics._spec import MetricSpec, Status
from ragpulse.metrics.judge import (
    JudgeCallError,
    JudgeContext,
    JudgeRequest,
    Outcome,
    ask,
    judge_batch,
    load_json_object,
)
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.judge.cache import JudgeCache
from ragpulse.tasks.judge.client import OpenAIJudge, retry_after_seconds
from ragpulse.tasks.judge.config import JudgeConfig
from ragpulse.tasks.judge.credentials import JudgeSecrets
from ragpulse.tasks.judge.ratelimit import ConcurrencyGate, TokenBucket
from ragpulse.tasks.judge.usage import merge_usage
from tests.doubles.judge_server import Fault, JudgeServer, fresh_judge_server

T = TypeVar("T")
KEY = "sk-test-0123456789-SECRET-do-not-log"
SCHEMA = {"type": "object", "properties": {"verdict": {"type": "boolean"}}, "required": ["verdict"]}


@pytest.fixture(autouse=True)
def no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The openai client reads OPENAI_* itself (key, base URL, custom headers): none may leak in."""
    for name in list(os.environ):
        if name.startswith("OPENAI_"):
            monkeypatch.delenv(name)


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    yield from fresh_judge_server()


@pytest.fixture
def model() -> str:
    """A model name of the test's own, so the process-wide limiter of one test never throttles another."""
    return f"judge-{uuid.uuid4().hex[:10]}"


@pytest.fixture(autouse=True)
def judge_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key where a run finds it, in the environment: it is a secret, never part of the judge's settings."""
    monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", KEY)


def settings_for(server: JudgeServer, model: str, **changes: Any) -> JudgeConfig:
    values: dict[str, Any] = {
        "base_url": server.base_url,
        "model": model,
        "timeout_seconds": 2.0,
        "max_retries": 3,
        "backoff_base_seconds": 0.01,
        "backoff_max_seconds": 0.05,
    }
    values.update(changes)
    return JudgeConfig(**values)


def judge_request(
    text: str = "Is the answer supported by the context?",
    *,
    metric: str = "faithfulness",
    step: str = "verify",
    version: str = "1.0.0",
    n: int = 1,
) -> JudgeRequest:
    return JudgeRequest(
        metric=metric,
        prompt_version=version,
        step=step,
        messages=(("system", "You are a strict judge. Reply in JSON."), ("user", text)),
        schema=SCHEMA,
        n=n,
    )


def run(coroutine: Awaitable[T]) -> T:
    async def main() -> T:
        return await coroutine

    return asyncio.run(main())


async def complete(judge: OpenAIJudge, *requests: JudgeRequest) -> list[Any]:
    """Replies per request, or the exception it raised; the judge's client is closed afterwards."""
    try:
        return await asyncio.gather(*(judge.complete(r) for r in requests), return_exceptions=True)
    finally:
        await judge.aclose()


def one(judge: OpenAIJudge, request: JudgeRequest | None = None) -> list[str]:
    (result,) = run(complete(judge, request or judge_request()))
    if isinstance(result, BaseException):
        raise result
    return list(result)


def in_threads(count: int, work: Callable[[int], Awaitable[T]]) -> list[T]:
    """``work(i)`` in ``count`` threads, each running its own event loop (as Prefect's thread-pool runner does)."""
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda i: run(work(i)), range(count)))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the request ------------------------------------------------------------------------------------


def test_request_carries_schema_temperature_seed_and_headers(
    server: JudgeServer, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.api_key = KEY
    server.responder = lambda body: {"verdict": True}
    monkeypatch.setenv("RAGPULSE_JUDGE_EXTRA_HEADERS", json.dumps({"X-Team": "evals"}))
    judge = OpenAIJudge(settings_for(server, model))
    replies = one(judge, judge_request(metric="aspect_critique:harmfulness", step="vote 1"))
    assert replies == ['{"verdict": true}']
    (sent,) = server.chat_requests()
    assert sent.body["model"] == model
    assert sent.body["temperature"] == 0 and sent.body["seed"] == 7 and "n" not in sent.body
    assert sent.body["messages"] == [
        {"role": "system", "content": "You are a strict judge. Reply in JSON."},
        {"role": "user", "content": "Is the answer supported by the context?"},
    ]
    assert sent.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "aspect_critique_harmfulness_vote_1", "schema": SCHEMA, "strict": False},
    }
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["x-team"] == "evals"
    assert sent.headers.get("x-stainless-retry-count", "0") == "0"  # the SDK's own retries are off


def test_read_only_schemas_are_sent_and_keyed_as_plain_json(server: JudgeServer, model: str) -> None:
    frozen = MappingProxyType({"type": "object", "properties": MappingProxyType({"ok": {"type": "boolean"}})})
    request = JudgeRequest("faithfulness", "1.0.0", "verify", (("user", "q"),), frozen)
    judge = OpenAIJudge(settings_for(server, model))
    one(judge, request)
    sent = server.chat_requests()[0].body["response_format"]["json_schema"]["schema"]
    assert sent == {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    assert judge.key(request) == judge.key(JudgeRequest("faithfulness", "1.0.0", "verify", (("user", "q"),), sent))


def test_malformed_json_content_is_returned_as_is_for_the_metric_to_parse(server: JudgeServer, model: str) -> None:
    server.responder = lambda body: "verdict: yes (not JSON"
    assert one(OpenAIJudge(settings_for(server, model))) == ["verdict: yes (not JSON"]


# -- retries ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_429_is_retried_after_the_retry_after_seconds(server: JudgeServer, model: str) -> None:
    server.fail_next(Fault.rate_limited(retry_after="1"))
    judge = OpenAIJudge(settings_for(server, model))
    started = time.monotonic()
    assert one(judge) == ['{"ok": true}']
    assert time.monotonic() - started >= 1.0
    assert server.calls == 2
    assert judge.usage.snapshot()["faithfulness"] | {"model": None} == {
        "model": None,
        "http_calls": 2,
        "cache_hits": 0,
        "deduplicated": 0,
        "prompt_tokens": 20,  # (38 + 39 characters) / 4, counted by the server
        "completion_tokens": 3,
        "retries": 1,
        "failures": 0,
        "budget_refused": 0,
        "judged": 0,
        "estimated_cost_usd": None,
    }


def test_retry_after_ms_is_preferred_to_retry_after(server: JudgeServer, model: str) -> None:
    server.fail_next(Fault.rate_limited(retry_after="30", retry_after_ms=300))
    started = time.monotonic()
    one(OpenAIJudge(settings_for(server, model)))
    assert 0.3 <= time.monotonic() - started < 5


def test_retry_after_parsing() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds({"Retry-After": "2"}) == 2.0
    assert retry_after_seconds({"retry-after": "1.5", "retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": email.utils.formatdate(now + 3, usegmt=True)}, now=now) == 3.0
    assert retry_after_seconds({"retry-after": email.utils.formatdate(now - 3, usegmt=True)}, now=now) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_backoff_is_full_jitter_below_a_doubling_capped_ceiling(server: JudgeServer, model: str) -> None:
    judge = OpenAIJudge(settings_for(server, model, backoff_base_seconds=0.5, backoff_max_seconds=4.0))
    for retries, ceiling in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (8, 4.0)]:
        delays = [judge._backoff(retries, None) for _ in range(300)]
        assert all(0 <= d <= ceiling for d in delays) and max(delays) > ceiling * 0.8
    assert 5.0 <= judge._backoff(0, 5.0) <= 5.5
    assert 60.0 <= judge._backoff(0, 3600.0) <= 60.5  # Retry-After capped by max_retry_after_seconds


def test_5xx_then_success(server: JudgeServer, model: str) -> None:
    server.fail_next(Fault.server_error(500), Fault.server_error(503))
    judge = OpenAIJudge(settings_for(server, model))
    assert one(judge) == ['{"ok": true}']
    assert server.calls == 3 and judge.usage.totals()["retries"] == 2


def test_server_errors_past_max_retries_raise_with_the_reason(server: JudgeServer, model: str) -> None:
    server.fault_rule = lambda body: Fault.server_error(502)
    judge = OpenAIJudge(settings_for(server, model, max_retries=2))
    with pytest.raises(JudgeCallError) as failure:
        one(judge)
    assert failure.value.reason == "server_error_after_2_retries"
    assert "HTTP 502" in failure.value.detail
    assert server.calls == 3
    assert judge.usage.totals()["failures"] == 1


@dataclass
class VerdictMetric:
    """A minimal judge metric: asks whether the trace's question holds, scores 1.0 or 0.0."""

    name: str = "verdict"
    spec: MetricSpec = field(default_factory=lambda: MetricSpec(name="verdict", version="1.0.0", summary="test"))
    prompt_version: str = "1"

    async def score(self, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome:
        question = (batch.questions or [])[index] or ""
        request = judge_request(question, metric=self.name, version=self.prompt_version)
        (verdict,) = await ask(context.judge, request, lambda raw: load_json_object(raw, record_id="x")["verdict"])
        return Outcome.ok(1.0 if verdict else 0.0)


def test_rate_limited_trace_becomes_nan_with_reason_while_the_batch_completes(server: JudgeServer, model: str) -> None:
    server.responder = lambda body: {"verdict": True}
    poisoned = "question 3 (poison)"
    server.fault_rule = lambda body: (
        Fault.rate_limited(retry_after_ms=20) if "poison" in body["messages"][-1]["content"] else None
    )
    questions = [poisoned if i == 3 else f"question {i}" for i in range(8)]
    batch = TraceBatch.from_records(
        [{"trace_id": f"t{i}", "question": q, "contexts": []} for i, q in enumerate(questions)]
    )
    judge = OpenAIJudge(settings_for(server, model, max_retries=2))

    async def score() -> Any:
        try:
            return await judge_batch(batch, [VerdictMetric()], JudgeContext(judge))
        finally:
            await judge.aclose()

    result = run(score())["verdict"]
    expected = np.ones(8)
    expected[3] = np.nan
    np.testing.assert_array_equal(result.values, expected)
    assert result.status[3] == Status.FAILED and result.reasons[3] == "rate_limited_after_2_retries"
    assert list(result.reasons[:3]) == [None] * 3
    assert server.calls == 7 + 3


def test_a_hanging_call_times_out_and_is_retried(server: JudgeServer, model: str) -> None:
    server.fail_next(Fault.hang_up(10))
    judge = OpenAIJudge(settings_for(server, model, timeout_seconds=0.3))
    started = time.monotonic()
    assert one(judge) == ['{"ok": true}']
    assert 0.3 <= time.monotonic() - started < 2
    assert server.calls == 2


def test_timeouts_past_max_retries_raise_timeout_reason(server: JudgeServer, model: str) -> None:
    server.fault_rule = lambda body: Fault.hang_up(10)
    with pytest.raises(JudgeCallError, match="timeout_after_1_retries"):
        one(OpenAIJudge(settings_for(server, model, timeout_seconds=0.2, max_retries=1)))


def test_unreachable_server_raises_connection_error_reason(model: str) -> None:
    settings = JudgeConfig(
        base_url=f"http://127.0.0.1:{closed_port()}/v1", model=model, max_retries=2, backoff_base_seconds=0.01
    )
    with pytest.raises(JudgeCallError) as failure:
        one(OpenAIJudge(settings))
    assert failure.value.reason == "connection_error_after_2_retries"


def test_other_4xx_fail_at_once_as_bad_request(server: JudgeServer, model: str) -> None:
    server.fail_next(Fault.bad_request("This model's maximum context length is 8192 tokens"))
    judge = OpenAIJudge(settings_for(server, model))
    with pytest.raises(JudgeCallError) as failure:
        one(judge)
    assert failure.value.reason == "bad_request"
    assert failure.value.detail.startswith("HTTP 400: This model's maximum context length")
    assert server.calls == 1


def test_broken_bodies_are_retried_as_invalid_responses(server: JudgeServer, model: str) -> None:
    server.fail_next(Fault.malformed_json(), Fault.truncated_json())
    assert one(OpenAIJudge(settings_for(server, model))) == ['{"ok": true}']
    assert server.calls == 3
    server.fault_rule = lambda body: Fault.malformed_json()
    with pytest.raises(JudgeCallError, match="invalid_response_after_3_retries"):
        one(OpenAIJudge(settings_for(server, model), cache=None))


@pytest.mark.parametrize(
    ("fault", "reason"), [(Fault.empty_reply(), "empty_reply"), (Fault.truncated_reply(), "truncated_reply")]
)
def test_empty_and_truncated_replies_fail_without_retry_and_are_not_cached(
    server: JudgeServer, model: str, tmp_path: Path, fault: Fault, reason: str
) -> None:
    server.fail_next(fault)
    judge = OpenAIJudge(settings_for(server, model, cache_url=str(tmp_path)))
    with pytest.raises(JudgeCallError) as failure:
        one(judge)
    assert failure.value.reason == reason and server.calls == 1
    assert list(tmp_path.rglob("*.json")) == []
    assert judge.usage.totals()["completion_tokens"] >= 0 and judge.usage.totals()["failures"] == 1


# -- response format and n --------------------------------------------------------------------------


def test_json_schema_rejected_falls_back_to_json_object_and_remembers(server: JudgeServer, model: str) -> None:
    server.json_schema_supported = False
    judge = OpenAIJudge(settings_for(server, model))
    assert one(judge) == ['{"ok": true}']
    assert judge.response_format == "json_object"
    one(judge, judge_request("another question"))
    formats = [r.body.get("response_format", {}).get("type") for r in server.chat_requests()]
    assert formats == ["json_schema", "json_object", "json_object"]
    system = server.chat_requests()[-1].body["messages"][0]
    assert system["role"] == "system" and "follows this JSON Schema" in system["content"]
    assert json.dumps(SCHEMA, sort_keys=True) in system["content"]
    assert judge.usage.totals()["retries"] == 0 and judge.usage.totals()["http_calls"] == 3


def test_no_json_mode_at_all_falls_back_to_plain_text(server: JudgeServer, model: str) -> None:
    server.json_schema_supported = server.json_object_supported = False
    judge = OpenAIJudge(settings_for(server, model))
    one(judge)
    assert judge.response_format == "text"
    assert "response_format" not in server.chat_requests()[-1].body and server.calls == 3


def test_an_explicit_format_is_never_downgraded(server: JudgeServer, model: str) -> None:
    server.json_schema_supported = False
    with pytest.raises(JudgeCallError, match="bad_request"):
        one(OpenAIJudge(settings_for(server, model, response_format="json_schema")))
    assert server.calls == 1


def test_a_refused_temperature_is_dropped_once_and_remembered(server: JudgeServer, model: str) -> None:
    server.fail_next(Fault.bad_request("Unsupported value: 'temperature' does not support 0 with this model."))
    judge = OpenAIJudge(settings_for(server, model))
    one(judge)
    one(judge, judge_request("another"))
    sent = [r.body for r in server.chat_requests()]
    assert "temperature" in sent[0] and all("temperature" not in body for body in sent[1:]) and len(sent) == 3
    assert all(body["seed"] == 7 for body in sent) and judge.usage.totals()["retries"] == 0


def test_an_unrelated_400_does_not_change_the_format(server: JudgeServer, model: str) -> None:
    server.fail_next(Fault.bad_request("messages: too many"))
    judge = OpenAIJudge(settings_for(server, model))
    with pytest.raises(JudgeCallError, match="bad_request"):
        one(judge)
    assert judge.response_format == "json_schema"


def test_fewer_choices_than_n_are_topped_up_and_n_is_then_sent_no_more(server: JudgeServer, model: str) -> None:
    server.max_choices = 1
    server.responder = lambda body: [f"reply seed={body.get('seed')}"] * int(body.get("n") or 1)
    judge = OpenAIJudge(settings_for(server, model))
    assert one(judge, judge_request(n=3)) == ["reply seed=7", "reply seed=8", "reply seed=9"]
    assert judge.supports_n is False
    first, *rest = server.chat_requests()
    assert first.body["n"] == 3 and all("n" not in r.body for r in rest) and len(rest) == 2
    one(judge, judge_request("another", n=2))
    assert server.calls == 5 and all("n" not in r.body for r in server.chat_requests()[3:])


def test_a_server_that_honours_n_gets_one_request(server: JudgeServer, model: str) -> None:
    server.responder = lambda body: [f"vote {i}" for i in range(body["n"])]
    judge = OpenAIJudge(settings_for(server, model))
    assert one(judge, judge_request(n=4)) == ["vote 0", "vote 1", "vote 2", "vote 3"]
    assert judge.supports_n is True and server.calls == 1


def test_samples_can_use_their_own_temperature(server: JudgeServer, model: str, tmp_path: Path) -> None:
    judge = OpenAIJudge(settings_for(server, model, sample_temperature=0.7, supports_n=False, cache_url=str(tmp_path)))
    one(judge, judge_request(n=2))
    one(judge)
    assert [r.body["temperature"] for r in server.chat_requests()] == [0.7, 0.7, 0.0]
    plain = OpenAIJudge(settings_for(server, model, cache_url=str(tmp_path)))
    assert plain.key(judge_request(n=2)) != judge.key(judge_request(n=2))
    assert plain.key(judge_request()) == judge.key(judge_request())


def test_supports_n_false_sends_separate_requests(server: JudgeServer, model: str) -> None:
    judge = OpenAIJudge(settings_for(server, model, supports_n=False))
    assert len(one(judge, judge_request(n=3))) == 3
    assert server.calls == 3 and all("n" not in r.body for r in server.chat_requests())


# -- limits -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_requests_per_minute_hold_across_threads_and_event_loops(server: JudgeServer, model: str) -> None:
    # 1,200/min = 20/s with a burst of 20: 60 requests need at least (60 - 20) / 20 = 2 s.
    settings = settings_for(server, model, requests_per_minute=1200)
    one(OpenAIJudge(settings_for(server, f"{model}-warm-up")))  # one-time imports out of the measured part
    server.reset()

    async def work(thread: int) -> list[Any]:
        judge = OpenAIJudge(settings)  # a judge per task, as each Prefect task builds its own
        return await complete(judge, *(judge_request(f"thread {thread} question {i}") for i in range(20)))

    started = time.monotonic()
    results = in_threads(3, work)
    elapsed = time.monotonic() - started
    assert all(isinstance(r, list) for thread in results for r in thread)
    assert server.calls == 60
    assert elapsed >= 1.9
    # Server-side times bunch at the start (the first calls of three new clients contend for the GIL with
    # the in-process server), so the steady rate is checked on the last second: 20/s, not all that was left.
    starts = sorted(r.started for r in server.chat_requests())
    assert len([t for t in starts if t > starts[-1] - 1.0]) <= 22


def test_concurrency_gate_holds_across_threads_and_event_loops(server: JudgeServer, model: str) -> None:
    server.latency = 0.05
    settings = settings_for(server, model, max_concurrency=4)
    shared = OpenAIJudge(settings)

    async def work(thread: int) -> list[Any]:
        # two threads share one judge, two build their own: all four share the process's gate
        judge = shared if thread < 2 else OpenAIJudge(settings)
        return await complete(judge, *(judge_request(f"thread {thread} question {i}") for i in range(12)))

    started = time.monotonic()
    in_threads(4, work)
    assert server.max_in_flight == 4
    assert time.monotonic() - started >= 48 / 4 * 0.05 * 0.9
    assert server.calls == 48 and shared.usage.totals()["http_calls"] == 24


@pytest.mark.slow
def test_tokens_per_minute_throttle_big_prompts(server: JudgeServer, model: str) -> None:
    # 60,000/min = 1,000 tokens/s, burst 1,000; each call reserves ~20 prompt + 500 completion tokens.
    judge = OpenAIJudge(settings_for(server, model, tokens_per_minute=60_000, completion_token_budget=500))
    started = time.monotonic()
    results = run(complete(judge, *(judge_request(f"question {i}") for i in range(4))))
    assert all(isinstance(r, list) for r in results)
    assert time.monotonic() - started >= 0.8  # (4 x ~530 - 1,000) / 1,000 s


def test_prefect_global_rate_limits_are_taken_per_http_call_strictly(
    server: JudgeServer, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[tuple[str, int, bool]] = []

    async def rate_limit(
        names: str, occupy: int = 1, timeout_seconds: float | None = None, strict: bool = False
    ) -> None:
        taken.append((names, occupy, strict))

    monkeypatch.setattr("prefect.concurrency.asyncio.rate_limit", rate_limit)
    server.fail_next(Fault.server_error())
    settings = settings_for(
        server, model, rate_limit_name="judge-rpm", token_rate_limit_name="judge-ktpm", completion_token_budget=1500
    )
    one(OpenAIJudge(settings))
    assert taken == [("judge-ktpm", 2, True), ("judge-rpm", 1, True)] * 2


def test_a_missing_prefect_limit_is_a_config_error(
    server: JudgeServer, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError

    async def rate_limit(
        names: str, occupy: int = 1, timeout_seconds: float | None = None, strict: bool = False
    ) -> None:
        raise ConcurrencySlotAcquisitionError(f"Concurrency limits {[names]!r} must be created before acquiring slots")

    monkeypatch.setattr("prefect.concurrency.asyncio.rate_limit", rate_limit)
    with pytest.raises(ConfigError, match="prefect gcl create judge-rpm"):
        one(OpenAIJudge(settings_for(server, model, rate_limit_name="judge-rpm")))
    assert server.calls == 0


def test_token_bucket_reserves_in_arrival_order_and_refunds() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=1.0, capacity=2.0, clock=lambda: now[0])
    assert [bucket.reserve(1) for _ in range(4)] == [0.0, 0.0, 1.0, 2.0]
    now[0] = 2.0
    assert bucket.reserve(1) == 1.0
    bucket.refund(10)
    assert bucket.reserve(2) == 0.0  # refunds never exceed the capacity
    assert TokenBucket.per_minute(30).capacity == 1.0 and TokenBucket.per_minute(600).capacity == 10.0


def test_concurrency_gate_across_threads_and_after_cancellation() -> None:
    gate = ConcurrencyGate(2)
    lock = threading.Lock()
    holding = [0, 0]  # now, max

    async def hold() -> None:
        async with gate.hold():
            with lock:
                holding[0] += 1
                holding[1] = max(holding[1], holding[0])
            await asyncio.sleep(0.005)
            with lock:
                holding[0] -= 1

    async def many(_: int) -> None:
        await asyncio.gather(*(hold() for _ in range(10)))

    in_threads(4, many)
    assert holding[1] == 2 and gate.held == 0

    async def cancelled_waiters() -> None:
        await gate.acquire()
        await gate.acquire()
        waiters = [asyncio.ensure_future(gate.acquire()) for _ in range(3)]
        await asyncio.sleep(0)
        waiters[0].cancel()
        gate.release()  # granted to waiters[1] (waiters[0] left the queue)
        waiters[1].cancel()  # granted, then cancelled before it ran: the slot passes on to waiters[2]
        await asyncio.gather(*waiters, return_exceptions=True)
        assert waiters[2].done() and not waiters[2].cancelled()
        gate.release()
        gate.release()

    run(cancelled_waiters())
    assert gate.held == 0


# -- cache ------------------------------------------------------------------------------------------


def test_second_identical_call_is_served_from_the_cache(server: JudgeServer, model: str, tmp_path: Path) -> None:
    server.responder = lambda body: {"verdict": True}
    settings = settings_for(server, model, cache_url=str(tmp_path / "judge-cache"))
    judge = OpenAIJudge(settings)
    first = one(judge)
    assert one(judge) == first and server.calls == 1
    assert one(OpenAIJudge(settings)) == first and server.calls == 1  # a fresh judge reads the same store
    assert judge.usage.totals()["cache_hits"] == 1
    key = judge.key(judge_request())
    (stored,) = list((tmp_path / "judge-cache").rglob("*.json"))
    assert stored == tmp_path / "judge-cache" / key[:2] / f"{key}.json"
    entry = json.loads(stored.read_text())
    assert entry["replies"] == ['{"verdict": true}'] and entry["usage"] == {"prompt_tokens": 20, "completion_tokens": 5}
    assert entry["model"] == model and entry["metric"] == "faithfulness" and entry["prompt_version"] == "1.0.0"
    assert [p.name for p in (tmp_path / "judge-cache").rglob("*") if p.is_file()] == [stored.name]  # no temp files


def test_another_process_reads_the_same_cache(server: JudgeServer, model: str, tmp_path: Path) -> None:
    settings = settings_for(server, model, cache_url=str(tmp_path))
    one(OpenAIJudge(settings))
    script = """
import asyncio, json, sys
from ragpulse.metrics.judge import JudgeRequest
from ragpulse.tasks.judge.client import OpenAIJudge
from ragpulse.tasks.judge.config import JudgeConfig
settings = JudgeConfig.model_validate_json(sys.argv[1])
request = JudgeRequest(**json.loads(sys.argv[2]))
judge = OpenAIJudge(settings)
replies = asyncio.run(judge.complete(request))
print(json.dumps({"replies": replies, "usage": judge.usage.totals()}))
"""
    request = judge_request()
    payload = {**request.cache_material(), "messages": [list(m) for m in request.messages]}
    child_settings = settings.model_dump(mode="json")  # the child needs no key: it never calls
    output = subprocess.run(
        [sys.executable, "-c", script, json.dumps(child_settings), json.dumps(payload)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(output.stdout)
    assert result["replies"] == ['{"ok": true}']
    assert result["usage"]["cache_hits"] == 1 and result["usage"]["http_calls"] == 0
    assert server.calls == 1


@pytest.mark.parametrize(
    "change",
    [
        {"model": "other-judge"},
        {"seed": 8},
        {"temperature": 0.5},
        {"response_format": "json_object"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_settings_that_change_replies_miss_the_cache(
    server: JudgeServer, model: str, tmp_path: Path, change: dict[str, Any]
) -> None:
    settings = settings_for(server, model, cache_url=str(tmp_path))
    one(OpenAIJudge(settings))
    one(OpenAIJudge(JudgeConfig(**{**settings.model_dump(), **change})))
    assert server.calls == 2


@pytest.mark.parametrize(
    "request_change",
    [{"version": "2.0.0"}, {"text": "another question"}, {"n": 2}, {"step": "extract"}, {"metric": "answer_relevancy"}],
    ids=lambda c: next(iter(c)),
)
def test_requests_that_differ_miss_the_cache(
    server: JudgeServer, model: str, tmp_path: Path, request_change: dict[str, Any]
) -> None:
    judge = OpenAIJudge(settings_for(server, model, cache_url=str(tmp_path)))
    one(judge)
    one(judge, judge_request(**request_change))
    assert server.calls == 2 and judge.usage.totals()["cache_hits"] == 0


def test_a_damaged_cache_entry_is_a_miss_and_is_rewritten(server: JudgeServer, model: str, tmp_path: Path) -> None:
    judge = OpenAIJudge(settings_for(server, model, cache_url=str(tmp_path)))
    key = judge.key(judge_request())
    damaged = tmp_path / key[:2] / f"{key}.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_text('{"replies": ["half')
    assert one(judge) == ['{"ok": true}'] and server.calls == 1
    assert json.loads(damaged.read_text())["replies"] == ['{"ok": true}']


def test_cache_on_s3(server: JudgeServer, model: str, s3: Any) -> None:
    settings = settings_for(
        server,
        model,
        cache_url=f"s3://{s3.name}/judge-cache",
        cache_storage_options={"endpoint_url": s3.endpoint.url},
    )
    first = one(OpenAIJudge(settings))
    again = OpenAIJudge(settings)
    assert one(again) == first and server.calls == 1 and again.usage.totals()["cache_hits"] == 1
    key = again.key(judge_request())
    s3.fs.invalidate_cache()
    assert s3.fs.exists(f"{s3.name}/judge-cache/{key[:2]}/{key}.json")
    assert "judge-cache" in repr(JudgeCache(settings.cache_url or ""))


def test_identical_calls_in_flight_are_sent_once(server: JudgeServer, model: str) -> None:
    server.latency = 0.2
    judge = OpenAIJudge(settings_for(server, model))

    async def work(_: int) -> list[Any]:
        return await complete(judge, judge_request(), judge_request())

    results = in_threads(2, work)
    assert [r for thread in results for r in thread] == [['{"ok": true}']] * 4
    assert server.calls == 1 and judge.usage.totals()["deduplicated"] == 3


# -- usage and cost ---------------------------------------------------------------------------------


def test_usage_per_metric_with_cost_and_merge(server: JudgeServer, model: str) -> None:
    prices = {model: {"prompt_per_million": 2.0, "completion_per_million": 8.0}}
    judge = OpenAIJudge(settings_for(server, model, prices=prices))
    run(
        complete(
            judge, judge_request(), judge_request(metric="context_recall"), judge_request("x", metric="context_recall")
        )
    )
    snapshot = judge.usage.snapshot()
    assert sorted(snapshot) == ["context_recall", "faithfulness"]
    recall = snapshot["context_recall"]
    assert recall["http_calls"] == 2 and recall["prompt_tokens"] == 20 + 10 and recall["completion_tokens"] == 6
    assert math.isclose(recall["estimated_cost_usd"], (30 * 2.0 + 6 * 8.0) / 1e6)
    totals = judge.usage.totals()
    assert totals["http_calls"] == 3 and totals["model"] == model
    json.dumps(snapshot)
    merged = merge_usage(
        snapshot, snapshot, {"faithfulness": {"model": model, "http_calls": 1, "estimated_cost_usd": None}}
    )
    assert merged["context_recall"]["http_calls"] == 4
    assert math.isclose(merged["context_recall"]["estimated_cost_usd"], 2 * recall["estimated_cost_usd"])
    assert merged["faithfulness"]["http_calls"] == 3 and merged["faithfulness"]["estimated_cost_usd"] is None


# -- settings and secrets ---------------------------------------------------------------------------


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "gpt-judge")
    monkeypatch.setenv("RAGPULSE_JUDGE_BASE_URL", "http://vllm:8000/v1/")
    monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("RAGPULSE_JUDGE_EXTRA_HEADERS", json.dumps({"api-key": KEY}))
    monkeypatch.setenv("RAGPULSE_JUDGE_SUPPORTS_N", "false")
    monkeypatch.setenv("RAGPULSE_JUDGE_REQUESTS_PER_MINUTE", "500")
    monkeypatch.setenv(
        "RAGPULSE_JUDGE_PRICES", json.dumps({"gpt-judge": {"prompt_per_million": 1, "completion_per_million": 4}})
    )
    settings = JudgeConfig().in_run_environment()
    assert settings.enabled and settings.model == "gpt-judge" and settings.base_url == "http://vllm:8000/v1"
    secrets = JudgeSecrets()
    assert secrets.api_key is not None and secrets.api_key.get_secret_value() == KEY
    assert {name: value.get_secret_value() for name, value in secrets.extra_headers.items()} == {"api-key": KEY}
    assert settings.supports_n is False and settings.requests_per_minute == 500
    assert settings.prices["gpt-judge"].completion_per_million == 4
    assert (settings.timeout_seconds, settings.max_retries, settings.max_concurrency, settings.seed) == (30, 6, 16, 7)
    assert settings.temperature == 0 and settings.response_format == "auto"
    assert not JudgeConfig(model=None).enabled
    assert settings.with_default_cache("s3://bucket/ragpulse/").cache_url == "s3://bucket/ragpulse/judge-cache"
    explicit = JudgeConfig(model="m", cache_url="/shared/cache")
    assert explicit.with_default_cache(".ragpulse").cache_url == "/shared/cache"


def test_secrets_never_reach_repr_dumps_logs_errors_or_the_cache(
    server: JudgeServer, model: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    header_secret = "azure-header-secret-42"
    monkeypatch.setenv("RAGPULSE_JUDGE_EXTRA_HEADERS", json.dumps({"api-key": header_secret}))
    settings = settings_for(server, model, cache_url=str(tmp_path))
    judge = OpenAIJudge(settings)
    server.fail_next(Fault.rate_limited(retry_after_ms=10))
    one(judge)
    server.fail_next(Fault(status=401, message=f"Incorrect API key provided: {KEY} / {header_secret}"))
    with pytest.raises(JudgeCallError) as failure:
        one(judge, judge_request("another"))
    assert server.chat_requests()[0].headers["authorization"] == f"Bearer {KEY}"  # it is sent, only to the server
    assert server.chat_requests()[0].headers["api-key"] == header_secret
    dumps = [
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        json.dumps(settings.model_dump(mode="json")),
        repr(settings.model_dump()),
        repr(judge),
        repr(judge.secrets),
        str(judge.secrets),
        repr(judge.secrets.model_dump()),
        str(failure.value),
        repr(failure.value),
        caplog.text,
        json.dumps(judge.usage.snapshot()),
        *(p.read_text() for p in tmp_path.rglob("*") if p.is_file()),
    ]
    for text in dumps:
        assert KEY not in text and header_secret not in text
    assert "HTTP 401: Incorrect API key provided: *** / ***" in str(failure.value)
    assert "retry" in caplog.text  # the retry was logged, without the key


def test_base_url_with_a_password_is_refused() -> None:
    with pytest.raises(ValidationError, match="must not carry a password"):
        JudgeConfig(model="m", base_url="https://user:hunter2@proxy.example/v1")


def test_key_falls_back_to_a_prefect_secret_block_then_openai_api_key(
    server: JudgeServer, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.blocks.system import Secret

    loaded: list[str] = []

    class FakeBlock:
        def get(self) -> str:
            return "sk-from-block-0000"

    async def aload(name: str, **kwargs: Any) -> FakeBlock:
        loaded.append(name)
        return FakeBlock()

    monkeypatch.setattr(Secret, "aload", aload)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-0000")
    monkeypatch.delenv("RAGPULSE_JUDGE_API_KEY")
    one(OpenAIJudge(settings_for(server, model, api_key_block="judge-key")))
    one(OpenAIJudge(settings_for(server, model)), judge_request("2"))
    monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", KEY)
    one(OpenAIJudge(settings_for(server, model, api_key_block="judge-key")), judge_request("3"))
    keys = [r.headers["authorization"] for r in server.chat_requests()]
    assert keys == ["Bearer sk-from-block-0000", "Bearer sk-from-env-0000", f"Bearer {KEY}"]
    assert loaded == ["judge-key"]


def test_missing_model_or_openai_key_are_config_errors(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGPULSE_JUDGE_API_KEY")
    with pytest.raises(ConfigError, match="RAGPULSE_JUDGE_MODEL"):
        OpenAIJudge(JudgeConfig())
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        one(OpenAIJudge(JudgeConfig(model=model)))
