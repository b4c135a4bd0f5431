"""The LLM judge over HTTP: any OpenAI-compatible chat endpoint, through the official ``openai`` client.

:class:`OpenAIJudge` implements ``ragpulse.metrics.judge.JudgeClient``, configured by
:class:`~ragpulse.tasks.judge.config.JudgeConfig`. Per call it:

1. answers from the call-level cache (:mod:`ragpulse.tasks.judge.cache`) when it can, and joins an identical
   call already in flight in this process instead of sending a duplicate; only replies the metric's parser
   accepts are cached (and a cached entry it rejects is asked again), and ``refresh_cache`` skips the reads;
2. waits for a slot of the process-wide limiter (concurrency, requests/min, tokens/min; shared by
   every thread and event loop) and, when configured, Prefect global rate limits across processes;
3. sends one request (temperature 0, fixed seed, JSON-schema response format), retrying 429, 5xx,
   timeouts and connection errors with exponential backoff and full jitter, honouring Retry-After;
4. falls back to JSON mode, then plain text, when the server rejects a response format, and to
   separate requests when it returns fewer than ``n`` choices (both remembered by the judge);
5. records calls, cache hits, tokens, retries, failures and estimated cost per metric in ``usage``
   (a :class:`~ragpulse.tasks.judge.usage.UsageLedger`).

A call that fails for good raises ``JudgeCallError(reason)``, e.g. ``rate_limited_after_6_retries``,
``timeout_after_6_retries``, ``bad_request``, ``empty_reply``, ``truncated_reply``; the metric turns it
into a NaN score with that reason. Misconfiguration (no model, no key for OpenAI, a missing Prefect
limit) raises ``ConfigError``. The API key and header values never reach logs, errors, the cache or
settings dumps.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import functools
import json
import logging
import math
import os
import random
import re
import ssl
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import SecretStr

from ragpulse.metrics.judge import BudgetExhaustedError, JudgeCallError, JudgeRequest, VerdictParseError
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.storage import redact_url
from ragpulse.tasks.judge.budget import JudgeBudget, Reservation, judge_price
from ragpulse.tasks.judge.cache import CachedCall, JudgeCache, cache_key, plain_json
from ragpulse.tasks.judge.config import JudgeConfig
from ragpulse.tasks.judge.credentials import JudgeSecrets
from ragpulse.tasks.judge.ratelimit import EndpointLimiter, GlobalRateLimit, limiter_for
from ragpulse.tasks.judge.usage import UsageLedger

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion

__all__ = ["OpenAIJudge", "ResponseFormat", "retry_after_seconds"]

ResponseFormat = Literal["json_schema", "json_object", "text"]
"""What the judge asks the server to reply in; it falls back along this order when one is rejected."""
_FORMAT_FALLBACK: dict[ResponseFormat, ResponseFormat] = {"json_schema": "json_object", "json_object": "text"}
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "structured output", "response format")
_OPTIONAL_PARAMS = ("temperature", "seed")  # dropped, once, by a server that refuses them (reasoning models)
_REFUSAL_WORDS = ("unsupported", "not supported", "does not support", "unrecognized", "unknown", "not allowed")
_NO_KEY_PLACEHOLDER = "no-key"  # what a self-hosted server without auth receives as the bearer token


@dataclass(frozen=True)
class _Reply:
    replies: list[str]
    prompt_tokens: int
    completion_tokens: int


class _Retryable(Exception):
    def __init__(self, kind: str, detail: str, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.retry_after = retry_after


class _LeaderGone(Exception):
    """The call this one was waiting on was cancelled; the follower makes its own call."""


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``Retry-After`` as seconds or an HTTP date."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if (millis := lowered.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _schema_name(request: JudgeRequest) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{request.metric}_{request.step}")[:64]


def _estimate_tokens(text: str) -> int:
    """Tokens of ``text`` before a server counts them: four ASCII characters a token, and one token for every other
    character (a Chinese or Japanese character is a token or more in the common tokenizers), so that a Japanese
    prompt's reservation against the rate and spend limits is not a quarter of its real cost."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars / 4) + len(text) - ascii_chars


def _run_logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """Prefect's run logger inside a flow or task run, else ``ragpulse.judge``.

    Without ``prefect.context`` loaded there can be no run, so Prefect is not imported just to find that out.
    """
    if "prefect.context" in sys.modules:
        from prefect.exceptions import MissingContextError
        from prefect.logging import get_run_logger

        try:
            return get_run_logger()
        except MissingContextError:
            pass
    return logging.getLogger("ragpulse.judge")


@functools.cache
def _ssl_context() -> ssl.SSLContext | bool:
    """The HTTP library's default TLS context, built once: loading the CA store costs ~0.1-0.2 s of CPU, and
    every event loop (each Prefect task thread) needs a client of its own. ``True`` (build per client) when
    the library offers no ``create_ssl_context``."""
    from openai import DefaultAsyncHttpxClient

    base = next((cls for cls in DefaultAsyncHttpxClient.__mro__ if cls.__name__ == "AsyncClient"), None)
    http = sys.modules.get(base.__module__.split(".")[0]) if base is not None else None  # httpx, or httpx2
    create = getattr(http, "create_ssl_context", None)
    if create is None:
        return True
    context: ssl.SSLContext = create()
    return context


class OpenAIJudge:
    """A ``JudgeClient`` for any OpenAI-compatible endpoint; safe to share between threads and event loops.

    One ``AsyncOpenAI`` client is kept per event loop (its connection pool belongs to that loop);
    limits are process-wide per (endpoint, model, limits); ``usage`` counts this judge's calls. With
    ``refresh_cache`` every call goes to the server and overwrites its cache entry (``--rescore all``).
    """

    def __init__(
        self,
        settings: JudgeConfig,
        *,
        secrets: JudgeSecrets | None = None,
        cache: JudgeCache | None = None,
        refresh_cache: bool = False,
        budget: JudgeBudget | None = None,
    ) -> None:
        if not settings.model:
            raise ConfigError(
                "no judge model configured: set RAGPULSE_JUDGE_MODEL (and RAGPULSE_JUDGE_BASE_URL for a server "
                "other than OpenAI) to enable the judge metrics"
            )
        self.settings = settings
        self.secrets = secrets if secrets is not None else JudgeSecrets()  # this process's environment
        self.model: str = settings.model
        self.usage = UsageLedger(self.model, judge_price(settings))
        self.budget = budget
        if cache is None and settings.cache_url:
            cache = JudgeCache(settings.cache_url, settings.cache_storage_options)
        self.cache = cache
        self.refresh_cache = refresh_cache
        self._limiter: EndpointLimiter = limiter_for(
            settings.endpoint,
            self.model,
            max_concurrency=settings.max_concurrency,
            requests_per_minute=settings.requests_per_minute,
            tokens_per_minute=settings.tokens_per_minute,
        )
        self._global = GlobalRateLimit(settings.rate_limit_name, settings.token_rate_limit_name)
        self._response_format: ResponseFormat = (
            "json_schema" if settings.response_format == "auto" else settings.response_format
        )
        self._supports_n: bool | None = None if settings.supports_n == "auto" else settings.supports_n
        self._dropped: set[str] = set()
        self._api_key: SecretStr | None = None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncOpenAI] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._inflight: dict[str, concurrent.futures.Future[list[str]]] = {}

    def __repr__(self) -> str:
        return f"OpenAIJudge(model={self.model!r}, endpoint={redact_url(self.settings.endpoint)!r})"

    @property
    def response_format(self) -> ResponseFormat:
        """The response format in use (after any fallback)."""
        return self._response_format

    @property
    def supports_n(self) -> bool | None:
        """Whether the server honours ``n`` (None: not known yet)."""
        return self._supports_n

    # -- secrets and clients ----------------------------------------------------------------------

    async def _resolve_api_key(self) -> SecretStr | None:
        if self._api_key is not None:
            return self._api_key
        key = self.secrets.api_key
        if key is None and self.settings.api_key_block:
            key = await self._load_block(self.settings.api_key_block)
        if key is None and os.environ.get("OPENAI_API_KEY"):
            key = SecretStr(os.environ["OPENAI_API_KEY"])
        if key is None and self.settings.base_url is None:
            raise ConfigError(
                "no API key for the OpenAI API: set RAGPULSE_JUDGE_API_KEY or OPENAI_API_KEY, or name a Prefect "
                "Secret block in RAGPULSE_JUDGE_API_KEY_BLOCK"
            )
        self._api_key = key
        return key

    @staticmethod
    async def _load_block(name: str) -> SecretStr:
        from prefect.blocks.system import Secret

        try:
            block: Any = await Secret.aload(name)
        except Exception as exc:
            raise ConfigError(f"cannot load the Prefect Secret block {name!r} holding the judge API key") from exc
        value = block.get()
        if not isinstance(value, str) or not value:
            raise ConfigError(f"the Prefect Secret block {name!r} does not hold a non-empty string")
        return SecretStr(value)

    def _secrets(self) -> list[str]:
        keys = [self.secrets.api_key, self._api_key, *self.secrets.extra_headers.values()]
        values = [key.get_secret_value() for key in keys if key is not None]
        return [value for value in values if len(value) >= 4]

    def _redact(self, text: str) -> str:
        """``text`` without any secret (a server may echo a header back) and without URL passwords."""
        return redact_url(text, self._secrets())

    async def _client(self) -> AsyncOpenAI:
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
        if client is not None:
            return client
        key = await self._resolve_api_key()
        client = AsyncOpenAI(
            base_url=self.settings.base_url,
            api_key=key.get_secret_value() if key is not None else _NO_KEY_PLACEHOLDER,
            default_headers={name: value.get_secret_value() for name, value in self.secrets.extra_headers.items()},
            max_retries=0,
            timeout=self.settings.timeout_seconds,
            http_client=DefaultAsyncHttpxClient(verify=_ssl_context()),
        )
        with self._lock:
            return self._clients.setdefault(loop, client)

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop (clients of other loops close with their loop)."""
        with self._lock:
            client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    async def __aenter__(self) -> OpenAIJudge:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- the JudgeClient interface ----------------------------------------------------------------

    def key(self, request: JudgeRequest) -> str:
        """The cache key of ``request`` with this judge's model and settings."""
        return cache_key(
            request,
            model=self.model,
            temperature=self._temperature(request),
            seed=self.settings.seed,
            response_format=self.settings.response_format,
        )

    async def complete(self, request: JudgeRequest, *, accept: Callable[[str], object] | None = None) -> list[str]:
        """``request.n`` raw replies: from the cache, from an identical call in flight, or over HTTP.

        ``accept`` (the metric's parser) decides what may be cached: see ``metrics.judge.JudgeClient``."""
        if request.n < 1:
            raise ValueError(f"request.n must be at least 1, got {request.n}")
        key = self.key(request)
        while True:
            with self._lock:
                leader = self._inflight.get(key)
                if leader is None:
                    mine: concurrent.futures.Future[list[str]] = concurrent.futures.Future()
                    self._inflight[key] = mine
            if leader is None:
                break
            try:
                replies = await asyncio.wrap_future(leader)
            except _LeaderGone:
                continue
            except JudgeCallError:
                self.usage.add(request.metric, deduplicated=1, failures=1)
                raise
            self.usage.add(request.metric, deduplicated=1)
            return list(replies)
        try:
            replies = await self._complete(request, key, accept)
        except asyncio.CancelledError:
            mine.set_exception(_LeaderGone())
            raise
        except BaseException as exc:
            mine.set_exception(exc)
            raise
        else:
            mine.set_result(replies)
            return replies
        finally:
            with self._lock:
                self._inflight.pop(key, None)

    async def _complete(self, request: JudgeRequest, key: str, accept: Callable[[str], object] | None) -> list[str]:
        cache = self.cache
        # An entry that must not answer again: refreshed (``--rescore all``) or one the parser rejects.
        stale = self.refresh_cache
        if cache is not None and not self.refresh_cache:
            hit = await self._cache_get(cache, key)
            if hit is not None and len(hit.replies) >= request.n:
                replies = list(hit.replies[: request.n])
                if _accepted(replies, accept):
                    self.usage.add(request.metric, cache_hits=1)
                    return replies
                # Written before replies were checked, or by a parser since made stricter: ask again.
                _run_logger().debug("cached judge reply for %s %s does not parse; asking again", request.metric, key)
                stale = True
        try:
            reply = await self._fetch(request)
        except JudgeCallError:
            self.usage.add(request.metric, failures=1)
            if cache is not None and stale:
                await self._cache_discard(cache, key)
            raise
        if cache is not None:
            if _accepted(reply.replies, accept):
                await self._cache_put(cache, key, request, reply)
            elif stale:
                await self._cache_discard(cache, key)
        return reply.replies

    async def _cache_get(self, cache: JudgeCache, key: str) -> CachedCall | None:
        try:
            return await asyncio.to_thread(cache.get, key)
        except Exception as exc:  # an unreachable cache costs money, not the run
            _run_logger().warning("judge cache read failed (%s); calling the judge", self._redact(str(exc)))
            return None

    async def _cache_put(self, cache: JudgeCache, key: str, request: JudgeRequest, reply: _Reply) -> None:
        call = CachedCall(tuple(reply.replies), reply.prompt_tokens, reply.completion_tokens)
        try:
            await asyncio.to_thread(cache.put, key, call, request=request, model=self.model)
        except Exception as exc:
            _run_logger().warning("judge cache write failed (%s)", self._redact(str(exc)))

    async def _cache_discard(self, cache: JudgeCache, key: str) -> None:
        """Drop an entry this call could not replace, so no later run is answered by it."""
        try:
            await asyncio.to_thread(cache.discard, key)
        except Exception as exc:
            _run_logger().warning("judge cache delete failed (%s)", self._redact(str(exc)))

    # -- HTTP -------------------------------------------------------------------------------------

    async def _fetch(self, request: JudgeRequest) -> _Reply:
        """All ``n`` replies: one request with ``n``, topped up with single requests where ``n`` is not honoured."""
        n = request.n
        if n == 1 or self._supports_n is not False:
            first = await self._chat(request, n=n, seed=self.settings.seed)
            if n > 1 and self._supports_n is None:
                self._supports_n = len(first.replies) >= n
                if not self._supports_n:
                    _run_logger().info(
                        "judge server returned %d of %d choices; asking separately from now on", len(first.replies), n
                    )
        else:
            first = _Reply([], 0, 0)
        missing = n - len(first.replies)
        if missing <= 0:
            return first
        seed = self.settings.seed
        extra = await asyncio.gather(
            *(
                self._chat(request, n=1, seed=None if seed is None else seed + len(first.replies) + i)
                for i in range(missing)
            )
        )
        parts = [first, *extra]
        return _Reply(
            [r for part in parts for r in part.replies][:n],
            sum(p.prompt_tokens for p in parts),
            sum(p.completion_tokens for p in parts),
        )

    def _messages(self, request: JudgeRequest, response_format: ResponseFormat) -> list[dict[str, str]]:
        messages = [{"role": role, "content": content} for role, content in request.messages]
        if response_format != "json_schema" and request.schema:
            note = "Reply with only a JSON object that follows this JSON Schema: " + json.dumps(
                plain_json(request.schema), sort_keys=True
            )
            if messages and messages[0]["role"] == "system":
                messages[0] = {"role": "system", "content": f"{messages[0]['content']}\n\n{note}"}
            else:
                messages.insert(0, {"role": "system", "content": note})
        return messages

    def _temperature(self, request: JudgeRequest) -> float:
        if request.n > 1 and self.settings.sample_temperature is not None:
            return self.settings.sample_temperature
        return self.settings.temperature

    def _params(self, request: JudgeRequest, *, n: int, seed: int | None) -> tuple[dict[str, Any], int]:
        response_format = self._response_format
        params: dict[str, Any] = {"model": self.model, "messages": self._messages(request, response_format)}
        if "temperature" not in self._dropped:
            params["temperature"] = self._temperature(request)
        if seed is not None and "seed" not in self._dropped:
            params["seed"] = seed
        if n > 1:
            params["n"] = n
        if response_format == "json_schema":
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(request), "schema": plain_json(request.schema), "strict": False},
            }
        elif response_format == "json_object":
            params["response_format"] = {"type": "json_object"}
        prompt = [m["content"] for m in params["messages"]]
        if "response_format" in params:
            prompt.append(json.dumps(params["response_format"]))
        estimate = _estimate_tokens("".join(prompt)) + n * self.settings.completion_token_budget
        return params, estimate

    async def _chat(self, request: JudgeRequest, *, n: int, seed: int | None) -> _Reply:
        """One chat request with retries; at most ``n`` replies (fewer if the server ignores ``n``)."""
        retries = 0
        while True:
            params, estimate = self._params(request, n=n, seed=seed)
            try:
                completion = await self._send(request, params, estimate)
            except _Retryable as problem:
                if retries >= self.settings.max_retries:
                    reason = f"{problem.kind}_after_{self.settings.max_retries}_retries"
                    _run_logger().debug("judge call for %s failed: %s (%s)", request.metric, reason, problem.detail)
                    raise JudgeCallError(reason, problem.detail) from None
                delay = self._backoff(retries, problem.retry_after)
                retries += 1
                self.usage.add(request.metric, retries=1)
                _run_logger().debug("judge %s; retry %d in %.2f s", problem.kind, retries, delay)
                await asyncio.sleep(delay)
                continue
            except _FormatRejected as rejected:
                self._downgrade(rejected.format)
                continue
            except _ParamRejected as rejected:
                self._drop(rejected.param)
                continue
            return self._replies(request, completion, n, estimate)

    def _downgrade(self, rejected: ResponseFormat) -> None:
        with self._lock:
            if self._response_format == rejected and rejected in _FORMAT_FALLBACK:
                self._response_format = _FORMAT_FALLBACK[rejected]
                _run_logger().info(
                    "judge server rejected response_format %s; using %s from now on", rejected, self._response_format
                )

    def _drop(self, param: str) -> None:
        with self._lock:
            if param not in self._dropped:
                self._dropped.add(param)
                _run_logger().info("judge server refused %r; sending it no more", param)

    def _backoff(self, retries: int, retry_after: float | None) -> float:
        base = self.settings.backoff_base_seconds
        if retry_after is not None:
            return min(retry_after, self.settings.max_retry_after_seconds) + random.uniform(0, min(base, 1.0))
        ceiling = min(self.settings.backoff_max_seconds, base * 2**retries)
        return random.uniform(0, ceiling)

    async def _send(self, request: JudgeRequest, params: dict[str, Any], estimate: int) -> ChatCompletion:
        import openai

        client = await self._client()
        async with self._limiter.slot(estimate):
            await self._global.acquire(estimate)
            held = self._reserve(request, params, estimate)
            self.usage.add(request.metric, http_calls=1)
            used = (0, 0)  # what the budget is charged: a request without a reply is assumed unbilled
            try:
                async with asyncio.timeout(self.settings.timeout_seconds + 1.0):
                    completion: ChatCompletion = await client.chat.completions.create(**params)
                usage = completion.usage
                used = (usage.prompt_tokens, usage.completion_tokens) if usage is not None else (estimate, 0)
                return completion
            except (TimeoutError, openai.APITimeoutError) as exc:
                raise _Retryable("timeout", f"no reply within {self.settings.timeout_seconds:g} s") from exc
            except openai.APIConnectionError as exc:
                raise _Retryable("connection_error", self._redact(f"{exc} {exc.__cause__ or ''}".strip())) from exc
            except openai.APIStatusError as exc:
                raise self._status_problem(exc, params) from exc
            except (openai.APIResponseValidationError, json.JSONDecodeError) as exc:  # a body that is no completion
                raise _Retryable("invalid_response", self._redact(f"{type(exc).__name__}: {exc}")[:300]) from exc
            finally:
                if held is not None and self.budget is not None:
                    self.budget.settle(held, *used)

    def _reserve(self, request: JudgeRequest, params: Mapping[str, Any], estimate: int) -> Reservation | None:
        """Hold this request's most likely cost in the budget, or raise BudgetExhaustedError (the call is not made)."""
        if self.budget is None:
            return None
        completion = params.get("n", 1) * self.settings.completion_token_budget
        try:
            return self.budget.reserve(estimate - completion, completion)
        except BudgetExhaustedError:
            self.usage.add(request.metric, budget_refused=1)
            raise

    def _status_problem(self, exc: Any, params: Mapping[str, Any]) -> Exception:
        status = int(exc.status_code)
        message = re.sub(r"^Error code: \d+ - ", "", self._redact(str(getattr(exc, "message", "") or exc)))[:300]
        headers = exc.response.headers
        should_retry = headers.get("x-should-retry")
        sent_format = (params.get("response_format") or {}).get("type")
        if (
            status in (400, 422)
            and self.settings.response_format == "auto"
            and sent_format in _FORMAT_FALLBACK
            and any(word in message.lower() for word in _FORMAT_WORDS)
        ):
            return _FormatRejected(sent_format)
        if status in (400, 422):
            lowered = message.lower()
            for param in _OPTIONAL_PARAMS:
                if param in params and param in lowered and any(word in lowered for word in _REFUSAL_WORDS):
                    return _ParamRejected(param)
        retryable = status in (408, 409, 429) or status >= 500
        if should_retry in ("true", "false"):
            retryable = should_retry == "true"
        if not retryable:
            return JudgeCallError("bad_request", f"HTTP {status}: {message}")
        kind = {429: "rate_limited", 408: "timeout"}.get(status, "server_error")
        return _Retryable(kind, f"HTTP {status}: {message}", retry_after_seconds(headers))

    def _replies(self, request: JudgeRequest, completion: ChatCompletion, n: int, estimate: int) -> _Reply:
        choices = sorted(completion.choices or [], key=lambda c: c.index)[:n]
        contents = [choice.message.content if choice.message is not None else None for choice in choices]
        usage = completion.usage
        prompt_tokens = (
            usage.prompt_tokens if usage is not None else estimate - n * self.settings.completion_token_budget
        )
        completion_tokens = (
            usage.completion_tokens if usage is not None else sum(_estimate_tokens(c or "") for c in contents)
        )
        self.usage.add(request.metric, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        self._limiter.settle_tokens(estimate, prompt_tokens + completion_tokens)
        for choice, content in zip(choices, contents, strict=True):
            if choice.finish_reason == "content_filter":
                raise JudgeCallError("content_filtered", "the server's content filter withheld the reply")
            if not content or not content.strip():
                raise JudgeCallError("empty_reply", f"finish_reason={choice.finish_reason}")
            if choice.finish_reason == "length":
                raise JudgeCallError("truncated_reply", "the reply hit the completion token limit")
        if not choices:
            raise JudgeCallError("empty_reply", "no choices in the reply")
        return _Reply([c for c in contents if c], prompt_tokens, completion_tokens)


def _accepted(replies: list[str], accept: Callable[[str], object] | None) -> bool:
    """Whether the metric's parser takes every reply (no parser: every reply is kept, as before)."""
    if accept is None:
        return True
    try:
        for raw in replies:
            accept(raw)
    except VerdictParseError:
        return False
    return True


class _FormatRejected(Exception):
    def __init__(self, rejected: ResponseFormat) -> None:
        super().__init__(rejected)
        self.format: ResponseFormat = rejected


class _ParamRejected(Exception):
    def __init__(self, param: str) -> None:
        super().__init__(param)
        self.param = param
