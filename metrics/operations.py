"""What a turn cost to serve and how it went, read from the trace alone (no labels, no judge): latencies, the
application's own token usage and its estimated cost, span errors, empty retrievals and the answer's length.

Each is a number per turn (latencies in milliseconds, tokens, USD, 0/1 flags, words). A turn whose source did not
log what a metric reads is ``not_applicable`` with a reason saying what was missing, never 0: 0 means "logged, and
none". docs/metrics.md, "Operational metrics", gives every definition and reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ragpulse.metrics._spec import MetricResult, MetricSpec
from ragpulse.metrics._text import words
from ragpulse.metrics.batch import Operations, Step, TraceBatch, Usage
from ragpulse.metrics.prices import PriceTable, price_of

__all__ = [
    "ANSWER_LENGTH",
    "COST_USD",
    "EMPTY_RETRIEVAL",
    "ERROR",
    "GENERATION_LATENCY_MS",
    "INPUT_TOKENS",
    "LATENCY_MS",
    "NO_ANSWER",
    "NO_GENERATION_LATENCY",
    "NO_LATENCY",
    "NO_MODEL_NAME",
    "NO_RETRIEVAL",
    "NO_RETRIEVAL_LATENCY",
    "NO_SPAN_STATUS",
    "NO_TOKEN_COUNTS",
    "NO_USAGE",
    "OUTPUT_TOKENS",
    "RETRIEVAL_LATENCY_MS",
    "UNPRICED_MODEL",
    "answer_length",
    "cost_usd",
    "empty_retrieval",
    "score_answer_length",
    "score_cost_usd",
    "score_empty_retrieval",
    "score_error",
    "score_generation_latency",
    "score_input_tokens",
    "score_latency",
    "score_output_tokens",
    "score_retrieval_latency",
]

NO_LATENCY = "no_latency"
NO_RETRIEVAL_LATENCY = "no_retrieval_latency"
NO_GENERATION_LATENCY = "no_generation_latency"
NO_USAGE = "no_usage"
NO_TOKEN_COUNTS = "no_token_counts"
NO_MODEL_NAME = "no_model_name"
UNPRICED_MODEL = "unpriced_model"
"""Followed by ``:<model>``, the first model (in call order) the price table has no price for."""
NO_SPAN_STATUS = "no_span_status"
NO_RETRIEVAL = "no_retrieval"
NO_ANSWER = "no_answer"


def _lower_is_better(name: str, version: str, summary: str, upper: float = math.inf) -> MetricSpec:
    return MetricSpec(name=name, version=version, summary=summary, upper=upper, higher_is_better=False)


LATENCY_MS = _lower_is_better("latency_ms", "1.0.0", "End-to-end time of the turn (root span), in milliseconds.")
RETRIEVAL_LATENCY_MS = _lower_is_better(
    "retrieval_latency_ms", "1.0.0", "Wall time of the turn's retrieval spans (union of their intervals), in ms."
)
GENERATION_LATENCY_MS = _lower_is_better(
    "generation_latency_ms", "1.0.0", "Wall time of the turn's LLM spans (union of their intervals), in ms."
)
INPUT_TOKENS = _lower_is_better("input_tokens", "1.0.0", "Input tokens over the application's model calls.")
OUTPUT_TOKENS = _lower_is_better("output_tokens", "1.0.0", "Output tokens over the application's model calls.")
COST_USD = _lower_is_better(
    "cost_usd", "1.0.0", "Estimated USD of the application's model calls: tokens times the price table."
)
ERROR = _lower_is_better("error", "1.0.0", "1 if the root or any span of the turn ended in error, else 0.", upper=1.0)
EMPTY_RETRIEVAL = _lower_is_better(
    "empty_retrieval", "1.0.0", "1 if a retrieval of the turn returned no document, else 0.", upper=1.0
)
ANSWER_LENGTH = MetricSpec(
    name="answer_length",
    version="2.0.0",
    summary="Words of the answer (NFKC, punctuation left out; each Han, kana or hangul character and each Thai, "
    "Lao, Khmer or Burmese character cluster one word).",
    upper=math.inf,
)
"""Higher is better only in the sense drift needs: answers that suddenly get shorter (truncated, refusing, empty)
are the regression to flag; a rise is reported as a change that does not alert."""


def _per_trace(batch: TraceBatch, value: Callable[[Operations | None], float | str]) -> MetricResult:
    """One value per trace from its operations: a float, or a string saying why the metric does not apply."""
    entries: Sequence[Operations | None] = [None] * len(batch) if batch.operations is None else batch.operations
    outcomes = [value(entry) for entry in entries]
    values = np.array([o if isinstance(o, float) else 0.0 for o in outcomes], dtype=np.float64)
    reasons = np.array([o if isinstance(o, str) else None for o in outcomes], dtype=object)
    return MetricResult.from_values(values, reasons)


def _latency(field: str, reason: str) -> Callable[[Operations | None], float | str]:
    def read(operations: Operations | None) -> float | str:
        found = None if operations is None else getattr(operations, field)
        return reason if found is None else float(found)

    return read


def score_latency(batch: TraceBatch, prices: PriceTable) -> MetricResult:
    """The turn's end-to-end latency in ms; ``no_latency`` where it was not logged."""
    return _per_trace(batch, _latency("latency_ms", NO_LATENCY))


def score_retrieval_latency(batch: TraceBatch, prices: PriceTable) -> MetricResult:
    """The turn's retrieval time in ms; ``no_retrieval_latency`` where it was not logged (or did not retrieve)."""
    return _per_trace(batch, _latency("retrieval_latency_ms", NO_RETRIEVAL_LATENCY))


def score_generation_latency(batch: TraceBatch, prices: PriceTable) -> MetricResult:
    """The turn's generation time in ms; ``no_generation_latency`` where it was not logged."""
    return _per_trace(batch, _latency("generation_latency_ms", NO_GENERATION_LATENCY))


def _tokens(field: str) -> Callable[[Operations | None], float | str]:
    """The sum of one token count over the turn's model calls: a call that did not log it leaves the sum unknown
    (a partial sum would understate the turn), and a turn without calls sums to 0."""

    def read(operations: Operations | None) -> float | str:
        if operations is None or operations.usage is None:
            return NO_USAGE
        counts = [getattr(call, field) for call in operations.usage]
        return NO_TOKEN_COUNTS if any(count is None for count in counts) else float(sum(counts))

    return read


def score_input_tokens(batch: TraceBatch, prices: PriceTable) -> MetricResult:
    """Input tokens of the turn's model calls; ``no_usage`` / ``no_token_counts`` where not logged."""
    return _per_trace(batch, _tokens("input_tokens"))


def score_output_tokens(batch: TraceBatch, prices: PriceTable) -> MetricResult:
    """Output tokens of the turn's model calls; ``no_usage`` / ``no_token_counts`` where not logged."""
    return _per_trace(batch, _tokens("output_tokens"))


def cost_usd(usage: Sequence[Usage], prices: PriceTable) -> float | str:
    """USD of a turn's model calls, or why it cannot be estimated: a call without its model's name
    (``no_model_name``) or token counts (``no_token_counts``), or a model the table does not price
    (``unpriced_model:<name>``). No calls cost 0.

    >>> from ragpulse.metrics.prices import merged_prices
    >>> calls = [Usage("gpt-4o-mini", 1_000, 200), Usage("gpt-4o-mini-2024-07-18", 3_000, 300)]
    >>> round(cost_usd(calls, merged_prices()), 8), cost_usd([Usage("in-house-7b", 10, 5)], merged_prices())
    (0.0009, 'unpriced_model:in-house-7b')
    """
    total = 0.0
    for call in usage:
        if call.model is None or not call.model.strip():
            return NO_MODEL_NAME
        if call.input_tokens is None or call.output_tokens is None:
            return NO_TOKEN_COUNTS
        price = price_of(call.model, prices)
        if price is None:
            return f"{UNPRICED_MODEL}:{call.model}"
        total += price.cost(call.input_tokens, call.output_tokens)
    return total


def score_cost_usd(batch: TraceBatch, prices: PriceTable) -> MetricResult:
    """Estimated USD per turn (:func:`cost_usd`); ``no_usage`` where token usage was not logged."""
    return _per_trace(batch, lambda ops: NO_USAGE if ops is None or ops.usage is None else cost_usd(ops.usage, prices))


def score_error(batch: TraceBatch, prices: PriceTable) -> MetricResult:
    """1.0 where a span of the turn (the root included) ended in error, 0.0 where the source logged span statuses and
    none did; ``no_span_status`` where it logged none."""
    return _per_trace(
        batch, lambda ops: NO_SPAN_STATUS if ops is None or ops.errors is None else float(len(ops.errors) > 0)
    )


def empty_retrieval(steps: Sequence[Step]) -> float | None:
    """1.0 if any retrieval of the turn returned no document, 0.0 if each returned some, None if it did not retrieve.

    A retrieval is a step that fetched documents (a retriever or a tool); a reranker only reorders another step's
    documents, so its output is not a retrieval of its own. One empty step is enough: an index or filter that
    stopped answering shows there even when another step of the turn made up for it.
    >>> def step(i, n, kind="retriever"):
    ...     return Step(i, None, None, kind, "q", ("d",) * n, ("t",) * n)
    >>> empty_retrieval([step(0, 3), step(1, 0, "tool")]), empty_retrieval([step(0, 2), step(1, 0, "reranker")])
    (1.0, 0.0)
    >>> empty_retrieval([]) is None
    True
    """
    retrievals = [step for step in steps if step.kind != "reranker"]
    if not retrievals:
        return None
    return float(any(not step.context_ids for step in retrievals))


def score_empty_retrieval(batch: TraceBatch, prices: PriceTable) -> MetricResult:
    """:func:`empty_retrieval` per turn; ``no_retrieval`` where the turn did not retrieve. A trace without steps
    (the ragpulse format without ``steps``) retrieved once, its ``contexts``: empty is an empty retrieval."""
    steps: Sequence[Sequence[Step] | None] = [None] * len(batch) if batch.steps is None else batch.steps
    values = np.zeros(len(batch), dtype=np.float64)
    reasons = np.full(len(batch), None, dtype=object)
    for row, turn in enumerate(steps):
        flag = float(not batch.context_ids[row]) if turn is None else empty_retrieval(turn)
        if flag is None:
            reasons[row] = NO_RETRIEVAL
        else:
            values[row] = flag
    return MetricResult.from_values(values, reasons)


def answer_length(answer: str) -> int:
    """The answer's words (:func:`ragpulse.metrics._text.words`): comparable across languages where characters are
    not (an English sentence has about four times the characters of its Chinese translation, and about as many
    words as the translation has characters).

    >>> answer_length("Larry Page and Sergey Brin."), answer_length("ラリー・ページとセルゲイ・ブリンです。")
    (5, 16)
    >>> answer_length("拉里·佩奇和谢尔盖·布林"), answer_length("")
    (10, 0)
    """
    return len(words(answer))


def score_answer_length(batch: TraceBatch, k: int | None) -> MetricResult:
    """:func:`answer_length` per turn; ``no_answer`` where the trace has none (an empty answer is 0 words)."""
    values = np.array([0.0 if a is None else float(answer_length(a)) for a in batch.answers], dtype=np.float64)
    reasons = np.array([NO_ANSWER if a is None else None for a in batch.answers], dtype=object)
    return MetricResult.from_values(values, reasons)
