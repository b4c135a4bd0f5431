"""Context relevance: do the retrieved contexts hold anything relevant to the question? (Haystack).

Also judged per retrieval step of an agent's turn: :meth:`ContextRelevance.score_steps` asks about every step of
one turn in one request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.metrics._prompting import (
    DATA_RULE,
    HISTORY_RULE,
    ReplyReader,
    Trace,
    array_schema,
    data_message,
    history_data,
    language_name,
    object_schema,
)
from ragpulse.metrics._request import MetricName
from ragpulse.metrics._spec import MetricSpec
from ragpulse.metrics.batch import StepAgainst, TraceBatch
from ragpulse.metrics.judge import (
    PARSE_ERROR,
    JudgeCallError,
    JudgeContext,
    JudgeRequest,
    Outcome,
    VerdictParseError,
    ask,
)

__all__ = [
    "HISTORY_PROMPT_TAG",
    "INSTRUCTIONS",
    "PROMPT_VERSION",
    "SCHEMA",
    "SPEC",
    "STEPS_INSTRUCTIONS",
    "ContextRelevance",
    "build_request",
    "build_steps_request",
    "context_relevance",
    "create",
    "language_line",
    "parse_relevant_statements",
    "parse_steps",
]

SPEC = MetricSpec(
    name="context_relevance",
    version="2.0.0",
    summary="1 if an LLM judge finds any statement in the retrieved contexts relevant to the question, else 0.",
)
PROMPT_VERSION = "context_relevance/3"
"""2: names the trace's language and forbids translating the copied sentences; 3: the inputs are sent
as one JSON object of data, never as instructions. Since 2026-12-05 3 also covers a turn of a conversation
sending its earlier messages (``previous_turns``), and the retrieval steps of one turn judged in one request
(:data:`STEPS_INSTRUCTIONS`, step ``relevant_statements_by_step``): not bumped, since a one-question request
without history is byte for byte what it was (docs/metrics.md, Versions)."""
HISTORY_PROMPT_TAG = "context_relevance/3+history"
"""What a request with ``previous_turns`` carries instead of :data:`PROMPT_VERSION`, so that it is told apart in
the call cache; never published."""

INSTRUCTIONS = """\
Copy from the "contexts", word for word, the sentences that are relevant and needed to answer \
the "question". If there are none, or the question cannot be answered from the contexts, return an \
empty list.
Reply with JSON only: {"relevant_statements": [string, ...]}"""

SCHEMA = object_schema({"relevant_statements": array_schema({"type": "string"})})

STEPS_INSTRUCTIONS = """\
Each of the "steps" is one retrieval an agent made: the "query" it sent and the "contexts" it got back. For \
every step, on its own and in order, copy from that step's "contexts", word for word, the sentences that are \
relevant and needed to answer that step's "query". If there are none, or the query cannot be answered from its \
contexts, give that step an empty list.
Reply with JSON only, one entry per step: {"steps": [{"relevant_statements": [string, ...]}, ...]}"""


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


def _system(instructions: str, language: str | None, history: bool) -> str:
    rules = f"{DATA_RULE}\n{HISTORY_RULE}" if history else DATA_RULE
    return f"{instructions}\n{rules}\n{language_line(language)}"


def build_request(
    question: str, contexts: Sequence[str], language: str | None = None, history: Sequence[tuple[str, str]] = ()
) -> JudgeRequest:
    """One request over all contexts of the trace (Haystack also sends a question's contexts together), with the
    conversation's earlier messages when ``history`` has any."""
    turns = {"previous_turns": history_data(history)} if history else {}
    return JudgeRequest(
        metric=SPEC.name,
        prompt_version=HISTORY_PROMPT_TAG if history else PROMPT_VERSION,
        step="relevant_statements",
        messages=(
            ("system", _system(INSTRUCTIONS, language, bool(history))),
            ("user", data_message(**turns, question=question, contexts=contexts)),
        ),
        schema=SCHEMA,
    )


def build_steps_request(
    steps: Sequence[tuple[str, Sequence[str]]], language: str | None = None, history: Sequence[tuple[str, str]] = ()
) -> JudgeRequest:
    """One request over several retrieval steps of a turn, given as (query, contexts): one call per turn instead
    of one per step, the instructions sent once."""
    turns = {"previous_turns": history_data(history)} if history else {}
    data = [{"query": query.strip(), "contexts": [text.strip() for text in texts]} for query, texts in steps]
    return JudgeRequest(
        metric=SPEC.name,
        prompt_version=HISTORY_PROMPT_TAG if history else PROMPT_VERSION,
        step="relevant_statements_by_step",
        messages=(
            ("system", _system(STEPS_INSTRUCTIONS, language, bool(history))),
            ("user", data_message(**turns, steps=data)),
        ),
        schema=object_schema({"steps": array_schema(SCHEMA, len(steps))}),
    )


def parse_relevant_statements(raw: str, record_id: str) -> list[str]:
    """The relevant statements of a reply; an empty list is valid (nothing relevant).

    >>> parse_relevant_statements('{"relevant_statements": []}', "q1")
    []
    """
    reader = ReplyReader(raw, record_id)
    return reader.texts(reader.root(), "relevant_statements")


def parse_steps(raw: str, record_id: str, *, expected: int) -> list[list[str]]:
    """The relevant statements of each step, exactly ``expected`` entries in step order.

    >>> parse_steps('{"steps": [{"relevant_statements": ["罗马是意大利的首都。"]}, {"relevant_statements": []}]}',
    ...             "t1", expected=2)
    [['罗马是意大利的首都。'], []]
    """
    reader = ReplyReader(raw, record_id)
    found = []
    for position, value in enumerate(reader.items(reader.root(), "steps", length=expected)):
        entry = reader.entry(value, f"steps[{position}]")
        found.append(reader.texts(entry, "relevant_statements"))
    return found


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
    Per retrieval step (:meth:`score_steps`) the same score, on each step's query and documents.
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
            build_request(trace.question, trace.contexts, trace.language, trace.history),
            lambda raw: parse_relevant_statements(raw, trace.trace_id),
        )
        return Outcome.ok(context_relevance(statements))

    async def score_steps(
        self, batch: TraceBatch, index: int, context: JudgeContext, *, against: StepAgainst = "step_query"
    ) -> list[Outcome]:
        """One outcome per retrieval step of trace ``index`` (none when it has no steps), judged in one request.

        A step is asked about its own query (or, with ``against="question"``, the turn's question); one lacking it,
        or its contexts, is not applicable. A turn with one judged step sends the one-question request
        (:func:`build_request`, the request :meth:`score` sends for that step's row of ``step_batch``); a failed
        call or an unusable reply fails every judged step of the turn."""
        turn = Trace.of(batch, index)
        steps = (batch.steps[index] if batch.steps is not None else None) or ()
        traces = [
            Trace(
                trace_id=turn.trace_id,
                question=(step.query if against == "step_query" else turn.question) or "",
                answer="",
                contexts=tuple(text for text in step.context_texts if text is not None),
                reference="",
                contexts_without_text=sum(text is None for text in step.context_texts),
                language=turn.language,
                history=turn.history,
            )
            for step in steps
        ]
        reasons = [step.missing("question", "contexts") for step in traces]
        judged = [step for step, reason in zip(traces, reasons, strict=True) if reason is None]
        try:
            verdicts = iter(await self._judge_steps(judged, turn, context))
        except JudgeCallError as exc:
            verdicts = iter([Outcome.of_call_error(exc)] * len(judged))
        except VerdictParseError:
            verdicts = iter([Outcome.failed(PARSE_ERROR)] * len(judged))
        return [next(verdicts) if reason is None else Outcome.not_applicable(reason) for reason in reasons]

    async def _judge_steps(self, steps: Sequence[Trace], turn: Trace, context: JudgeContext) -> list[Outcome]:
        if not steps:
            return []
        if len(steps) == 1:
            (step,) = steps
            (statements,) = await ask(
                context.judge,
                build_request(step.question, step.contexts, turn.language, turn.history),
                lambda raw: parse_relevant_statements(raw, turn.trace_id),
            )
            return [Outcome.ok(context_relevance(statements))]
        (found,) = await ask(
            context.judge,
            build_steps_request([(step.question, step.contexts) for step in steps], turn.language, turn.history),
            lambda raw: parse_steps(raw, turn.trace_id, expected=len(steps)),
        )
        return [Outcome.ok(context_relevance(statements)) for statements in found]


def create(request: MetricName, options: Mapping[str, Any]) -> ContextRelevance:
    """The registry's factory; context relevance takes no options."""
    return ContextRelevance()
