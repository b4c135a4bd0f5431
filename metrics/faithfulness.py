"""Faithfulness: the share of the answer's statements that the retrieved contexts support (ragas)."""

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
from ragpulse.metrics._statements import answer_statements
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.judge import JudgeContext, JudgeRequest, Outcome, ask

__all__ = [
    "PROMPT_VERSION",
    "SPEC",
    "VERDICTS_INSTRUCTIONS",
    "Faithfulness",
    "build_verdicts_request",
    "create",
    "faithfulness",
    "parse_verdicts",
]

SPEC = MetricSpec(
    name="faithfulness",
    version="2.0.0",
    summary="Share of the answer's atomic statements that the retrieved contexts support (LLM judge).",
)
PROMPT_VERSION = "faithfulness/3"
"""Covers both steps: the shared statement prompt (``answer_statements/3``) and the verdict prompt;
2 names the trace's language in both; 3 sends the inputs, and the statements of step 1 (they derive
from the answer), as one JSON object of data, never as instructions. Since 2026-12-05 3 also covers a turn of a
conversation sending its earlier messages to the statement step (``previous_turns``, tagged
``answer_statements/3+history``), so that "it" in a follow-up answer becomes what it names: not bumped, since a
request without them is byte for byte what it was, and the verdict request is unchanged (docs/metrics.md,
Versions)."""

VERDICTS_INSTRUCTIONS = """\
Check each of the "statements" against the "contexts". "supported" is true only if the \
statement can be directly inferred from the contexts; it is false if the contexts contradict it or do \
not mention it. Use no outside knowledge. Give one verdict per statement, in order, with a \
one-sentence reason before the verdict.
Reply with JSON only: {"verdicts": [{"statement": string, "reason": string, "supported": boolean}, ...]}"""

_VERDICT = object_schema(
    {"statement": {"type": "string"}, "reason": {"type": "string"}, "supported": {"type": "boolean"}}
)


def build_verdicts_request(
    contexts: Sequence[str], statements: Sequence[str], language: str | None = None
) -> JudgeRequest:
    """One request verifying every statement against all contexts; the reasons in ``language``."""
    return JudgeRequest(
        metric=SPEC.name,
        prompt_version=PROMPT_VERSION,
        step="verdicts",
        messages=(
            ("system", system_prompt(VERDICTS_INSTRUCTIONS, language, "the reasons", fallback="the statements")),
            (
                "user",
                data_message(contexts=contexts, statements=statements),
            ),
        ),
        schema=object_schema({"verdicts": array_schema(_VERDICT, len(statements))}),
    )


def parse_verdicts(raw: str, record_id: str, *, expected: int) -> list[bool]:
    """The ``supported`` flags of a reply, which must hold exactly ``expected`` verdicts.

    >>> parse_verdicts('{"verdicts": [{"statement": "a", "reason": "r", "supported": true}]}', "q1", expected=1)
    [True]
    """
    reader = ReplyReader(raw, record_id)
    verdicts = reader.items(reader.root(), "verdicts", length=expected)
    flags = []
    for position, value in enumerate(verdicts):
        field = f"verdicts[{position}]"
        verdict = reader.entry(value, field)
        reader.text(verdict, "statement", f"{field}.statement", allow_blank=True)
        reader.text(verdict, "reason", f"{field}.reason", allow_blank=True)
        flags.append(reader.boolean(verdict, "supported", f"{field}.supported"))
    return flags


def faithfulness(supported: Sequence[bool]) -> float:
    """F = (number of supported statements) / (number of statements); needs at least one statement.

    >>> faithfulness([True, False, True, True])
    0.75
    """
    return sum(supported) / len(supported)


class Faithfulness:
    """Faithfulness of the answer to the retrieved contexts, as defined by ragas.

    F = |{s in S : the contexts support s}| / |S|, where S are the atomic statements of the answer.
    Two calls: the answer's statements (given the question; shared with ``answer_correctness``),
    then one call verifying all statements against all contexts at once. Not applicable without a
    question, an answer or contexts, or when the answer holds no statement (``no_statements``).
    Reference: Es et al., "RAGAS: Automated Evaluation of Retrieval Augmented Generation", 2023.
    """

    name = SPEC.name
    spec = SPEC
    prompt_version = PROMPT_VERSION
    uses_llm = True

    async def score(self, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome:
        trace = Trace.of(batch, index)
        if (reason := trace.missing("question", "answer", "contexts")) is not None:
            return Outcome.not_applicable(reason)
        statements = await answer_statements(context.judge, trace, with_history=True)
        if not statements:
            return Outcome.not_applicable("no_statements")
        (supported,) = await ask(
            context.judge,
            build_verdicts_request(trace.contexts, statements, trace.language),
            lambda raw: parse_verdicts(raw, trace.trace_id, expected=len(statements)),
        )
        return Outcome.ok(faithfulness(supported))


def create(request: MetricName, options: Mapping[str, Any]) -> Faithfulness:
    """The registry's factory; faithfulness takes no options."""
    return Faithfulness()
