"""The judge interface: what LLM-judge metrics send, what they get back, and how one batch is judged.

Metrics build :class:`JudgeRequest` objects and parse the replies; a :class:`JudgeClient` does the
I/O (``tasks/judge/client.py`` over HTTP, a fake in unit tests). Nothing here retries, sleeps, caches or
reads settings: a failed call arrives as :class:`JudgeCallError` and becomes a NaN with a reason.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._spec import MetricResult, MetricSpec, Status
from ragpulse.metrics.batch import StepAgainst, TraceBatch
from ragpulse.metrics.errors import RagpulseError

__all__ = [
    "BUDGET_EXHAUSTED",
    "PARSE_ERROR",
    "BudgetExhaustedError",
    "Embedder",
    "JudgeCallError",
    "JudgeClient",
    "JudgeContext",
    "JudgeMetric",
    "JudgeRequest",
    "Outcome",
    "StepJudgeMetric",
    "VerdictParseError",
    "ask",
    "judge_batch",
    "load_json_object",
    "result_of",
]

_T = TypeVar("_T")
PARSE_ERROR = "judge_parse_error"
BUDGET_EXHAUSTED = "budget_exhausted"
"""The reason of a judge score whose call the budget did not allow (status not_applicable; a later run fills it)."""


@dataclass(frozen=True)
class JudgeRequest:
    """One chat request to the judge. Everything that can change the reply is in here (the cache key).

    ``messages`` are (role, content) pairs; ``schema`` is the JSON Schema of the expected reply
    object; ``n`` asks for that many completions of the same prompt (sampled votes, generations).
    """

    metric: str
    prompt_version: str
    step: str
    messages: tuple[tuple[str, str], ...]
    schema: Mapping[str, Any]
    n: int = 1

    def repair(self, raw: str, problem: str) -> JudgeRequest:
        """The same request with the bad reply and what was wrong with it, asking for a corrected one."""
        return replace(
            self,
            step=f"{self.step}:repair",
            n=1,
            messages=(
                *self.messages,
                ("assistant", raw),
                ("user", f"That reply is not usable: {problem}. Reply again with only a JSON object that "
                         "follows the requested schema."),
            ),
        )  # fmt: skip

    def cache_material(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "prompt_version": self.prompt_version,
            "step": self.step,
            "messages": [list(m) for m in self.messages],
            "schema": self.schema,
            "n": self.n,
        }


class JudgeClient(Protocol):
    """Sends a request and returns ``request.n`` raw replies (JSON text), or raises JudgeCallError.

    ``accept(raw)`` is the metric's parser: it raises VerdictParseError for a reply it cannot use. A client that
    keeps replies (the call cache) keeps only those every one of which ``accept`` takes, so an unusable reply is
    asked again next time instead of being served forever; the replies are returned either way (``ask`` repairs).
    """

    async def complete(self, request: JudgeRequest, *, accept: Callable[[str], object] | None = None) -> list[str]: ...


class Embedder(Protocol):
    """Encodes texts into rows of an array (any norm); cosine similarity is taken by the metric.

    Async so that a local model can encode off the event loop while the judge's calls go on."""

    async def embed(self, texts: Sequence[str]) -> NDArray[np.floating[Any]]: ...


class JudgeCallError(RagpulseError):
    """A judge call failed for good (after the client's retries); ``reason`` becomes the score's reason."""

    #: What the score becomes: failed, so a re-run asks again.
    status: Status = Status.FAILED

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class BudgetExhaustedError(JudgeCallError):
    """A judge call the client did not make because the run's or the day's judge budget could not cover it. Nothing
    went wrong with the trace: its score is not applicable (reason ``budget_exhausted``), and a run with more budget
    fills it."""

    status: Status = Status.NOT_APPLICABLE

    def __init__(self, detail: str = "") -> None:
        super().__init__(BUDGET_EXHAUSTED, detail)


class VerdictParseError(RagpulseError, ValueError):
    """A judge reply is not a JSON object with the expected keys, types and ranges."""

    def __init__(self, record_id: str, field: str, raw: str, problem: str = "") -> None:
        self.record_id = record_id
        self.field = field
        self.raw = raw
        self.problem = problem
        super().__init__(
            f"record {record_id!r}, field {field!r}: {problem or 'unexpected reply'}; raw reply {raw[:200]!r}"
        )


def load_json_object(raw: str, *, record_id: str) -> dict[str, Any]:
    """Parse a reply into a JSON object, tolerating code fences and text around one object."""
    text = raw.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    candidates = [text]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise VerdictParseError(record_id, "<reply>", raw, "not a JSON object")


async def ask(judge: JudgeClient, request: JudgeRequest, parse: Callable[[str], _T]) -> list[_T]:
    """Send ``request`` and parse every completion; an unparsable one gets one repair round trip.

    ``parse`` goes with each request, so the client caches a reply only when it parses (a repaired reply is cached
    under its repair request, the bad original not at all)."""
    replies = await judge.complete(request, accept=parse)
    parsed: list[_T] = []
    for raw in replies:
        try:
            parsed.append(parse(raw))
        except VerdictParseError as first:
            (repaired,) = await judge.complete(request.repair(raw, first.problem or str(first)), accept=parse)
            try:
                parsed.append(parse(repaired))
            except VerdictParseError as second:
                raise second from first
    return parsed


@dataclass(frozen=True)
class Outcome:
    """One metric on one trace: a value, or NaN with a status and a reason."""

    value: float
    status: Status = Status.OK
    reason: str | None = None

    @classmethod
    def ok(cls, value: float) -> Outcome:
        return cls(float(value))

    @classmethod
    def not_applicable(cls, reason: str) -> Outcome:
        return cls(math.nan, Status.NOT_APPLICABLE, reason)

    @classmethod
    def failed(cls, reason: str) -> Outcome:
        return cls(math.nan, Status.FAILED, reason)

    @classmethod
    def of_call_error(cls, error: JudgeCallError) -> Outcome:
        """The score of a call that was not answered: failed, or not applicable when it was never made (budget)."""
        return cls(math.nan, error.status, error.reason)


def result_of(outcomes: Sequence[Outcome]) -> MetricResult:
    """One metric's outcomes, row by row, as its result arrays."""
    return MetricResult(
        values=np.array([o.value for o in outcomes], dtype=np.float64),
        status=np.array([o.status for o in outcomes], dtype=np.int8),
        reasons=np.array([o.reason for o in outcomes], dtype=object),
    )


@dataclass(frozen=True)
class JudgeContext:
    """What a judge metric may use: the judge, an embedder for similarity, and per-run options."""

    judge: JudgeClient
    embedder: Embedder | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


class JudgeMetric(Protocol):
    """A metric that needs a model. ``name`` is the full name (``aspect_critique:harmfulness``);
    ``uses_llm`` is False for metrics that need only an embedding model (no judge calls)."""

    name: str
    spec: MetricSpec
    prompt_version: str
    uses_llm: bool

    async def score(self, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome: ...


@runtime_checkable
class StepJudgeMetric(JudgeMetric, Protocol):
    """A judge metric that scores all retrieval steps of one turn together (fewer calls than one per step row of
    ``TraceBatch.step_batch``): one outcome per step of trace ``index``, in step order, none when it has no steps.
    Failures come back as failed outcomes, never as exceptions."""

    async def score_steps(
        self, batch: TraceBatch, index: int, context: JudgeContext, *, against: StepAgainst = "step_query"
    ) -> list[Outcome]: ...


async def _guarded(metric: JudgeMetric, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome:
    try:
        return await metric.score(batch, index, context)
    except JudgeCallError as exc:
        return Outcome.of_call_error(exc)
    except VerdictParseError:
        return Outcome.failed(PARSE_ERROR)


async def judge_batch(
    batch: TraceBatch, metrics: Sequence[JudgeMetric], context: JudgeContext
) -> dict[str, MetricResult]:
    """Judge every (trace, metric) pair concurrently; the client bounds concurrency and rate.

    A failed call or an unparsable reply fails that one score (NaN, status failed, reason) and
    never the batch; any other exception is a bug and propagates.
    """
    outcomes = await asyncio.gather(
        *(_guarded(metric, batch, index, context) for metric in metrics for index in range(len(batch)))
    )
    n = len(batch)
    return {metric.name: result_of(outcomes[i * n : (i + 1) * n]) for i, metric in enumerate(metrics)}
