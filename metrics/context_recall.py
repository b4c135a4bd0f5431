"""Context recall: the share of the reference answer's claims that the retrieved contexts support (ragas)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.metrics._prompting import (
    ReplyReader,
    Trace,
    array_schema,
    data_message,
    object_schema,
    system_prompt,
)
from ragpulse.metrics._request import MetricName
from ragpulse.metrics._spec import MetricSpec
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.judge import JudgeContext, JudgeRequest, Outcome, ask

__all__ = [
    "INSTRUCTIONS",
    "PROMPT_VERSION",
    "SCHEMA",
    "SPEC",
    "ContextRecall",
    "build_request",
    "context_recall",
    "create",
    "parse_claims",
]

SPEC = MetricSpec(
    name="context_recall",
    version="2.0.0",
    summary="Share of the reference answer's claims that an LLM judge can attribute to the retrieved contexts.",
)
PROMPT_VERSION = "context_recall/3"
"""2: claims and reasons are asked for in the trace's language; 3: the inputs are sent as one JSON
object of data, never as instructions."""

INSTRUCTIONS = """\
Split the reference answer ("reference") into its sentences or self-contained claims. For each, \
"attributed" is 1 if the "contexts" support it, else 0. Use no outside knowledge. Give a one-sentence reason \
before each verdict.
Reply with JSON only: {"claims": [{"claim": string, "reason": string, "attributed": 0 or 1}, ...]}"""

SCHEMA = object_schema(
    {
        "claims": array_schema(
            object_schema(
                {
                    "claim": {"type": "string"},
                    "reason": {"type": "string"},
                    "attributed": {"type": "integer", "enum": [0, 1]},
                }
            )
        )
    }
)


def build_request(question: str, reference: str, contexts: Sequence[str], language: str | None = None) -> JudgeRequest:
    """One request splitting the reference into claims and attributing each to the contexts.

    The judge splits: a sentence splitter here would need rules for every script (Chinese and
    Japanese end sentences with "。" and put no space after it)."""
    return JudgeRequest(
        metric=SPEC.name,
        prompt_version=PROMPT_VERSION,
        step="claims",
        messages=(
            (
                "system",
                system_prompt(INSTRUCTIONS, language, "the claims and reasons", fallback="the reference answer"),
            ),
            (
                "user",
                data_message(question=question, reference=reference, contexts=contexts),
            ),
        ),
        schema=SCHEMA,
    )


def parse_claims(raw: str, record_id: str) -> list[int]:
    """The 0/1 attribution verdicts of a reply, one per claim (an empty list is valid).

    >>> parse_claims('{"claims": [{"claim": "c", "reason": "r", "attributed": 1}]}', "q1")
    [1]
    """
    reader = ReplyReader(raw, record_id)
    flags = []
    for position, value in enumerate(reader.items(reader.root(), "claims")):
        field = f"claims[{position}]"
        claim = reader.entry(value, field)
        reader.text(claim, "claim", f"{field}.claim")
        reader.text(claim, "reason", f"{field}.reason", allow_blank=True)
        flags.append(reader.flag(claim, "attributed", f"{field}.attributed"))
    return flags


def context_recall(attributed: Sequence[int]) -> float:
    """CR = (claims attributed to the contexts) / (claims of the reference); needs at least one claim.

    >>> context_recall([1, 0, 1, 1])
    0.75
    """
    return sum(attributed) / len(attributed)


class ContextRecall:
    """Context recall as defined by ragas: did retrieval bring back what the reference answer needs?

    One call: the judge splits the reference answer into sentences or claims and attributes each
    (1) or not (0) to the retrieved contexts; CR = attributed / total. Not applicable without a
    question, contexts or a reference, or when the judge finds no claim in the reference
    (``no_statements``).
    """

    name = SPEC.name
    spec = SPEC
    prompt_version = PROMPT_VERSION
    uses_llm = True

    async def score(self, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome:
        trace = Trace.of(batch, index)
        if (reason := trace.missing("question", "contexts", "reference")) is not None:
            return Outcome.not_applicable(reason)
        (attributed,) = await ask(
            context.judge,
            build_request(trace.question, trace.reference, trace.contexts, trace.language),
            lambda raw: parse_claims(raw, trace.trace_id),
        )
        if not attributed:
            return Outcome.not_applicable("no_statements")
        return Outcome.ok(context_recall(attributed))


def create(request: MetricName, options: Mapping[str, Any]) -> ContextRecall:
    """The registry's factory; context recall takes no options."""
    return ContextRecall()
