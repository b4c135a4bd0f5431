"""Process-wide limits on judge calls, shared by every thread and event loop of the process.

Prefect's thread-pool runner gives each task its own thread and event loop, so an ``asyncio.Semaphore``
(bound to one loop) cannot bound a run. These primitives hold their state under a ``threading.Lock``
and wait without blocking any loop: a waiter parks on a future of its own loop and is woken with
``call_soon_threadsafe``; a rate-limited caller reserves tokens (going into debt) and sleeps until its
turn. ``limiter_for`` hands every judge of the process with the same endpoint, model and limits the
same :class:`EndpointLimiter`. Across processes, :class:`GlobalRateLimit` adds Prefect global
concurrency limits (with slot decay) on top.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from ragpulse.tasks.core.exceptions import ConfigError

__all__ = ["ConcurrencyGate", "EndpointLimiter", "GlobalRateLimit", "TokenBucket", "limiter_for"]


class TokenBucket:
    """A thread-safe token bucket: ``rate`` tokens per second, at most ``capacity`` saved up.

    ``reserve(cost)`` takes the tokens at once, going into debt when short, and returns the seconds
    the caller must wait before acting; later callers queue behind the debt (first come, first served).
    """

    def __init__(self, rate: float, capacity: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or capacity <= 0:
            raise ValueError(f"rate and capacity must be positive, got {rate} and {capacity}")
        self.rate = rate
        self.capacity = capacity
        self._clock = clock
        self._tokens = capacity
        self._updated = clock()
        self._lock = threading.Lock()

    @classmethod
    def per_minute(cls, amount: float) -> TokenBucket:
        """``amount`` per minute, with a burst of one second's worth (at least one unit)."""
        return cls(amount / 60.0, max(1.0, amount / 60.0))

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._updated) * self.rate)
        self._updated = now

    def reserve(self, cost: float) -> float:
        with self._lock:
            self._refill()
            self._tokens -= cost
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def refund(self, amount: float) -> None:
        """Give back tokens reserved but not used (a cancelled wait, a smaller reply than budgeted)."""
        if amount <= 0:
            return
        with self._lock:
            self._refill()
            self._tokens = min(self.capacity, self._tokens + amount)

    async def acquire(self, cost: float) -> None:
        wait = self.reserve(cost)
        if wait <= 0:
            return
        try:
            await asyncio.sleep(wait)
        except asyncio.CancelledError:
            self.refund(cost)
            raise


class ConcurrencyGate:
    """At most ``limit`` holders at once across all threads and event loops, granted in arrival order."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._free = limit
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        self._lock = threading.Lock()
        self.max_held = 0

    @property
    def held(self) -> int:
        with self._lock:
            return self.limit - self._free

    def _take(self) -> None:
        self._free -= 1
        self.max_held = max(self.max_held, self.limit - self._free)

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._take()
                return
            waiter: asyncio.Future[None] = loop.create_future()
            entry = (loop, waiter)
            self._waiters.append(entry)
        try:
            await waiter
        except asyncio.CancelledError:
            with self._lock:
                if entry in self._waiters:  # never granted: just leave the queue
                    self._waiters.remove(entry)
                    raise
            if waiter.done() and not waiter.cancelled():  # granted, then cancelled: pass the slot on
                self.release()
            # else the grant callback is still pending on this loop; it sees the cancelled future and passes it on
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                if loop.is_closed():
                    continue
                try:  # the slot moves to the waiter without becoming free
                    loop.call_soon_threadsafe(self._grant, waiter)
                except RuntimeError:  # the loop closed meanwhile
                    continue
                return
            self._free += 1

    def _grant(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():  # cancelled while the grant was on its way
            self.release()
        else:
            waiter.set_result(None)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            self.release()


@dataclass
class EndpointLimiter:
    """The concurrency gate and request/token buckets of one (endpoint, model, limits)."""

    gate: ConcurrencyGate
    requests: TokenBucket | None = None
    tokens: TokenBucket | None = None

    @asynccontextmanager
    async def slot(self, estimated_tokens: int) -> AsyncIterator[None]:
        """Hold a concurrency slot, then wait for the token and request budgets, for one HTTP call."""
        async with self.gate.hold():
            if self.tokens is not None:
                await self.tokens.acquire(estimated_tokens)
            if self.requests is not None:
                await self.requests.acquire(1)
            yield

    def settle_tokens(self, estimated: int, used: int) -> None:
        """Correct the token bucket once the real usage is known (refund or charge the difference)."""
        if self.tokens is None:
            return
        if used < estimated:
            self.tokens.refund(estimated - used)
        elif used > estimated:
            self.tokens.reserve(used - estimated)  # debt: later callers wait for it


_LIMITERS: dict[tuple[object, ...], EndpointLimiter] = {}
_LIMITERS_LOCK = threading.Lock()


def limiter_for(
    endpoint: str,
    model: str,
    *,
    max_concurrency: int,
    requests_per_minute: float | None,
    tokens_per_minute: float | None,
) -> EndpointLimiter:
    """The process's limiter for this endpoint, model and limits (created on first use)."""
    key = (endpoint, model, max_concurrency, requests_per_minute, tokens_per_minute)
    with _LIMITERS_LOCK:
        limiter = _LIMITERS.get(key)
        if limiter is None:
            limiter = EndpointLimiter(
                gate=ConcurrencyGate(max_concurrency),
                requests=TokenBucket.per_minute(requests_per_minute) if requests_per_minute else None,
                tokens=TokenBucket.per_minute(tokens_per_minute) if tokens_per_minute else None,
            )
            _LIMITERS[key] = limiter
        return limiter


@dataclass(frozen=True)
class GlobalRateLimit:
    """Prefect global concurrency limits with slot decay, shared by every process of a deployment.

    ``requests``: one slot per HTTP call; ``kilotokens``: one slot per started 1,000 estimated tokens.
    A limit that does not exist is an error (``strict=True``), not a silent no-op.
    """

    requests: str | None = None
    kilotokens: str | None = None

    async def acquire(self, estimated_tokens: int) -> None:
        if not (self.requests or self.kilotokens):
            return
        from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError, rate_limit

        wanted: Sequence[tuple[str | None, int]] = (
            (self.kilotokens, max(1, math.ceil(estimated_tokens / 1000))),
            (self.requests, 1),
        )
        for name, occupy in wanted:
            if not name:
                continue
            try:
                await rate_limit(name, occupy=occupy, strict=True)
            except ConcurrencySlotAcquisitionError as exc:
                raise ConfigError(
                    f"judge rate limit {name!r}: {exc}. Create it with "
                    f"`prefect gcl create {name} --limit <burst> --slot-decay-per-second <per-second rate>`"
                ) from exc
