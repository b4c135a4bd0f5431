"""Context relevance: do the retrieved contexts hold anything relevant to the question? (Haystack)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.metrics._prompting import (
    DATA_RULE,
    ReplyReader,
    Trace,
    array_schema,
    data_message,
    language_name,
    object_schema,
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
    "ContextRelevance",
    "build_request",
    "context_relevance",
    "create",
    "language_line",
    "parse_relevant_statements",
]

SPEC = MetricSpec(
    name="context_relevance",
    version="2.0.0",
    summary="1 if an LLM judge finds any statement in the retrieved contexts relevant to the question, else 0.",
)
PROMPT_VERSION = "context_relevance/3"
"""2: names the trace's language and forbids translating the copied sentences; 3: the inputs are sent
as one JSON object of data, never as instructions."""

INSTRUCTIONS = """\
Copy from the "contexts", word for word, the sentences that are relevant and needed to answer \
the "question". If there are none, or the question cannot be answered from the contexts, return an \
empty list.
Reply with JSON only: {"relevant_statements": [string, ...]}"""

SCHEMA = object_schema({"relevant_statements": array_schema({"type": "string"})})


def language_line(language: str | None) -> str:
    """The system prompt's language line. Unlike the other metrics' it asks for no text in the trace's
    language: the sentences are copies, and the contexts of a Japanese question may well be English.

    >>> print(language_line("zh-TW"))
    Language: Chinese (zh-TW). Copy the sentences in the language of the contexts, without translating them, \
and keep the JSON keys as given.
    """
    name = language_name(language)
    head = f"Language: {name}. " if name else ""
    return (
        f"{head}Copy the sentences in the language of the contexts, without translating them, "
        "and keep the JSON keys as given."
    )


def build_request(question: str, contexts: Sequence[str], language: str | None = None) -> JudgeRequest:
    """One request over all contexts of the trace (Haystack also sends a question's contexts together)."""
    return JudgeRequest(
        metric=SPEC.name,
        prompt_version=PROMPT_VERSION,
        step="relevant_statements",
        messages=(
            ("system", f"{INSTRUCTIONS}\n{DATA_RULE}\n{language_line(language)}"),
            ("user", data_message(question=question, contexts=contexts)),
        ),
        schema=SCHEMA,
    )


def parse_relevant_statements(raw: str, record_id: str) -> list[str]:
    """The relevant statements of a reply; an empty list is valid (nothing relevant).

    >>> parse_relevant_statements('{"relevant_statements": []}', "q1")
    []
    """
    reader = ReplyReader(raw, record_id)
    return reader.texts(reader.root(), "relevant_statements")


def context_relevance(relevant_statements: Sequence[str]) -> float:
    """CRel = 1.0 if at least one relevant statement was extracted, else 0.0 (Haystack).

    >>> context_relevance(["Rome is the capital of Italy."]), context_relevance([])
    (1.0, 0.0)
    """
    return 1.0 if relevant_statements else 0.0


class ContextRelevance:
    """Context relevance as defined by Haystack's ``ContextRelevanceEvaluator``.

    One call: the judge copies the sentences of the contexts that are relevant to the question; the
    score is 1 when it finds any, else 0. Not applicable without a question or contexts.
    """

    name = SPEC.name
    spec = SPEC
    prompt_version = PROMPT_VERSION
    uses_llm = True

    async def score(self, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome:
        trace = Trace.of(batch, index)
        if (reason := trace.missing("question", "contexts")) is not None:
            return Outcome.not_applicable(reason)
        (statements,) = await ask(
            context.judge,
            build_request(trace.question, trace.contexts, trace.language),
            lambda raw: parse_relevant_statements(raw, trace.trace_id),
        )
        return Outcome.ok(context_relevance(statements))


def create(request: MetricName, options: Mapping[str, Any]) -> ContextRelevance:
    """The registry's factory; context relevance takes no options."""
    return ContextRelevance()
