"""Test doubles for the judge metrics: a scripted :class:`FakeJudge`, a fixed-vector embedder and a pair scorer.

Like httpx's ``MockTransport``: the metric under test talks to the real ``JudgeClient`` interface and
the test decides every reply. ``FakeJudge`` records each request, so tests can assert what was sent
(count, content, prompt size) as well as what was scored.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics import Status, TraceBatch
from ragpulse.metrics.judge import (
    Embedder,
    JudgeClient,
    JudgeContext,
    JudgeMetric,
    JudgeRequest,
    Outcome,
    VerdictParseError,
    judge_batch,
)

__all__ = ["FakeEmbedder", "FakeJudge", "FakePairScorer", "prompt_chars", "reply", "run", "traces"]

Reply = str | BaseException
"""A scripted raw reply text, or an exception the call raises (e.g. ``JudgeCallError``)."""
Responder = Callable[[JudgeRequest], Sequence[Reply]]


def reply(**fields: Any) -> str:
    """A reply object as JSON text: ``reply(statements=["a"])``."""
    return json.dumps(fields)


class FakeJudge:
    """A ``JudgeClient`` answering from a script keyed by ``(request.metric, request.step)``.

    Each key holds raw reply texts (or exceptions) consumed in order; a request with ``n`` completions
    takes the next ``n`` of them, and an exception at the head of the queue is raised instead. A
    repair request has its own key, ``(metric, "<step>:repair")``. ``responder`` answers requests the
    script has no key for (content-based replies for whole batches). With ``cache=True`` an identical
    request is answered from memory without consuming the script, as the real client's call cache
    does (keeping only replies the metric's ``accept`` parser takes); ``requests`` then still lists only the
    calls that reached the "server".
    """

    def __init__(
        self,
        script: Mapping[tuple[str, str], Iterable[Reply]] | None = None,
        *,
        responder: Responder | None = None,
        cache: bool = False,
    ) -> None:
        self.script = {key: deque(replies) for key, replies in (script or {}).items()}
        self.responder = responder
        self.cache: dict[str, list[str]] | None = {} if cache else None
        self.requests: list[JudgeRequest] = []

    async def complete(self, request: JudgeRequest, *, accept: Callable[[str], object] | None = None) -> list[str]:
        key = json.dumps(request.cache_material(), sort_keys=True)
        if self.cache is not None and key in self.cache:
            return list(self.cache[key])
        self.requests.append(request)
        replies = self._take(request)
        if self.cache is not None and _accepted(replies, accept):
            self.cache[key] = list(replies)
        return replies

    def _take(self, request: JudgeRequest) -> list[str]:
        queue = self.script.get((request.metric, request.step))
        if queue is None and self.responder is not None:
            queue = deque(self.responder(request))
        if queue is None:
            raise AssertionError(f"FakeJudge has no script for {(request.metric, request.step)}")
        replies: list[str] = []
        for _ in range(request.n):
            if not queue:
                raise AssertionError(f"FakeJudge ran out of replies for {(request.metric, request.step)}")
            item = queue.popleft()
            if isinstance(item, BaseException):
                raise item
            replies.append(item)
        return replies

    def steps(self) -> list[tuple[str, str]]:
        """(metric, step) of every request that reached the judge, in order."""
        return [(r.metric, r.step) for r in self.requests]

    def unused(self) -> dict[tuple[str, str], int]:
        """Scripted replies left over (a test expecting every reply to be used asserts this is empty)."""
        return {key: len(queue) for key, queue in self.script.items() if queue}


def _accepted(replies: list[str], accept: Callable[[str], object] | None) -> bool:
    """The real client's rule: keep replies only when the metric's parser takes every one."""
    try:
        for raw in replies:
            if accept is not None:
                accept(raw)
    except VerdictParseError:
        return False
    return True


def prompt_chars(requests: Iterable[JudgeRequest]) -> int:
    """Characters of every message sent (each request's prompt counted once, whatever its ``n``)."""
    return sum(len(content) for request in requests for _, content in request.messages)


class FakeEmbedder:
    """An ``Embedder`` returning fixed vectors by text; an unknown text is a test bug. Records calls."""

    def __init__(self, vectors: Mapping[str, Sequence[float]]) -> None:
        self.vectors = {text: np.asarray(vector, dtype=np.float64) for text, vector in vectors.items()}
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float64]:
        self.calls.append(list(texts))
        missing = [text for text in texts if text not in self.vectors]
        if missing:
            raise AssertionError(f"FakeEmbedder has no vector for {missing}")
        return np.stack([self.vectors[text] for text in texts])


class FakePairScorer:
    """A cross-encoder ``PairScorer`` returning fixed scores by (answer, reference) pair."""

    def __init__(self, scores: Mapping[tuple[str, str], float]) -> None:
        self.scores = dict(scores)
        self.calls: list[list[tuple[str, str]]] = []

    def score(self, pairs: Sequence[tuple[str, str]]) -> NDArray[np.float64]:
        self.calls.append(list(pairs))
        return np.array([self.scores[pair] for pair in pairs], dtype=np.float64)


def traces(*records: Mapping[str, Any]) -> TraceBatch:
    """A batch from trace dicts whose ``contexts`` are plain texts; ids default to t1, t2, ... and c1, c2, ..."""
    full = []
    for position, record in enumerate(records, start=1):
        trace = {"trace_id": f"t{position}", **record}
        trace["contexts"] = [{"id": f"c{k}", "text": t} for k, t in enumerate(trace.get("contexts", []), start=1)]
        full.append(trace)
    return TraceBatch.from_records(full)


def run(
    metric: JudgeMetric,
    batch: TraceBatch,
    judge: JudgeClient,
    *,
    embedder: Embedder | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[Outcome]:
    """Score every trace of ``batch`` through ``judge_batch`` (so failures become outcomes, as in a run)."""
    context = JudgeContext(judge, embedder, options or {})
    result = asyncio.run(judge_batch(batch, [metric], context))[metric.name]
    return [
        Outcome(float(value), Status(int(status)), reason)
        for value, status, reason in zip(result.values, result.status, result.reasons, strict=True)
    ]
