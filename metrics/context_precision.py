"""Context precision: are the useful contexts ranked first? Judged against the reference or the answer (ragas)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.metrics._prompting import (
    Input,
    ReplyReader,
    Trace,
    array_schema,
    data_message,
    history_data,
    object_schema,
    system_prompt,
)
from ragpulse.metrics._request import MetricName
from ragpulse.metrics._spec import MetricSpec
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.judge import JudgeContext, JudgeRequest, Outcome, ask

__all__ = [
    "HISTORY_PROMPT_TAG",
    "INSTRUCTIONS_TEMPLATE",
    "PROMPT_VERSION",
    "WITHOUT_REFERENCE",
    "WITH_REFERENCE",
    "ContextPrecision",
    "build_request",
    "context_precision",
    "create_with_reference",
    "create_without_reference",
    "parse_verdicts",
]

WITH_REFERENCE = MetricSpec(
    name="context_precision",
    version="2.0.0",
    summary="Average precision of the contexts an LLM judge finds useful for reaching the reference answer.",
)
WITHOUT_REFERENCE = MetricSpec(
    name="context_precision_without_reference",
    version="2.0.0",
    summary="Average precision of the contexts an LLM judge finds useful for reaching the generated answer.",
)
PROMPT_VERSION = "context_precision/3"
"""2: the reasons are asked for in the trace's language; 3: the inputs are sent as one JSON object of
data, never as instructions. Since 2026-12-05 3 also covers a turn of a conversation sending its earlier
messages (``previous_turns``) so that a follow-up question is understood: not bumped, since a request without
them is byte for byte what it was (docs/metrics.md, Versions)."""
HISTORY_PROMPT_TAG = "context_precision/3+history"
"""What a request with ``previous_turns`` carries instead of :data:`PROMPT_VERSION`, so that it is told apart in
the call cache; never published."""

INSTRUCTIONS_TEMPLATE = """\
Judge each of the "contexts" retrieved for the "question": "useful" is 1 if the context helped to \
reach the given {target} ("{key}"), that is, if it holds information the {target} uses; else 0. Judge \
every context, in order, with a one-sentence reason before the verdict.
Reply with JSON only: {{"verdicts": [{{"reason": string, "useful": 0 or 1}}, ...]}}"""

_VERDICT = object_schema({"reason": {"type": "string"}, "useful": {"type": "integer", "enum": [0, 1]}})
_TARGETS = {True: ("reference answer", "reference"), False: ("answer", "answer")}
"""The instructions' word for the target and its key in the user message."""


def build_request(
    question: str,
    target: str,
    contexts: Sequence[str],
    *,
    with_reference: bool,
    language: str | None = None,
    history: Sequence[tuple[str, str]] = (),
) -> JudgeRequest:
    """One request judging every context of the trace against ``target`` (the reference, or the answer), with the
    conversation's earlier messages when ``history`` has any."""
    word, key = _TARGETS[with_reference]
    spec = WITH_REFERENCE if with_reference else WITHOUT_REFERENCE
    turns = {"previous_turns": history_data(history)} if history else {}
    return JudgeRequest(
        metric=spec.name,
        prompt_version=HISTORY_PROMPT_TAG if history else PROMPT_VERSION,
        step="verdicts",
        messages=(
            (
                "system",
                system_prompt(
                    INSTRUCTIONS_TEMPLATE.format(target=word, key=key),
                    language,
                    "the reasons",
                    history=bool(history),
                ),
            ),
            ("user", data_message(**turns, question=question, **{key: target}, contexts=contexts)),
        ),
        schema=object_schema({"verdicts": array_schema(_VERDICT, len(contexts))}),
    )


def parse_verdicts(raw: str, record_id: str, *, expected: int) -> list[int]:
    """The 0/1 usefulness verdicts of a reply, exactly one per context in rank order.

    >>> parse_verdicts('{"verdicts": [{"reason": "r", "useful": 1}, {"reason": "r", "useful": 0}]}', "q1", expected=2)
    [1, 0]
    """
    reader = ReplyReader(raw, record_id)
    verdicts = reader.items(reader.root(), "verdicts", length=expected)
    flags = []
    for position, value in enumerate(verdicts):
        field = f"verdicts[{position}]"
        verdict = reader.entry(value, field)
        reader.text(verdict, "reason", f"{field}.reason", allow_blank=True)
        flags.append(reader.flag(verdict, "useful", f"{field}.useful"))
    return flags


def context_precision(useful: Sequence[int]) -> float:
    """CP = Σ_k (precision@k · v_k) / Σ_k v_k with precision@k = (Σ_{i≤k} v_i) / k; 0.0 when Σ v_k = 0.

    ragas adds 1e-10 to the denominator instead of special-casing it, so its values are smaller by a
    relative 1e-10; ours are exact, and 0.0 when no context is useful.
    >>> context_precision([1, 0, 1])
    0.8333333333333333
    >>> context_precision([0, 0])
    0.0
    """
    hits, total = 0, 0.0
    for rank, verdict in enumerate(useful, start=1):
        if verdict:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


class ContextPrecision:
    """Context precision as defined by ragas, in one judge call per trace (ragas makes one per context).

    The judge rates each retrieved context useful (v_k = 1) or not for reaching the reference answer
    (``context_precision``) or, without a reference, the generated answer
    (``context_precision_without_reference``, ragas' "context utilization"); the score is the
    average precision of those verdicts, see :func:`context_precision`. Not applicable without a
    question or contexts, or without the reference (``no_reference``) / answer (``no_answer``).
    """

    prompt_version = PROMPT_VERSION
    uses_llm = True

    def __init__(self, *, with_reference: bool) -> None:
        self.with_reference = with_reference
        self.spec = WITH_REFERENCE if with_reference else WITHOUT_REFERENCE
        self.name = self.spec.name

    async def score(self, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome:
        trace = Trace.of(batch, index)
        target: Input = "reference" if self.with_reference else "answer"
        if (reason := trace.missing("question", target, "contexts")) is not None:
            return Outcome.not_applicable(reason)
        request = build_request(
            trace.question,
            trace.reference if self.with_reference else trace.answer,
            trace.contexts,
            with_reference=self.with_reference,
            language=trace.language,
            history=trace.history,
        )
        (useful,) = await ask(
            context.judge, request, lambda raw: parse_verdicts(raw, trace.trace_id, expected=len(trace.contexts))
        )
        return Outcome.ok(context_precision(useful))


def create_with_reference(request: MetricName, options: Mapping[str, Any]) -> ContextPrecision:
    """The registry's factory for ``context_precision``."""
    return ContextPrecision(with_reference=True)


def create_without_reference(request: MetricName, options: Mapping[str, Any]) -> ContextPrecision:
    """The registry's factory for ``context_precision_without_reference``."""
    return ContextPrecision(with_reference=False)
