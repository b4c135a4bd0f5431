"""Answer relevancy: how well questions generated back from the answer match the real question (ragas)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragpulse.metrics._prompting import (
    ReplyReader,
    Trace,
    data_message,
    embed_similarities,
    history_data,
    object_schema,
    system_prompt,
)
from ragpulse.metrics._request import MetricName
from ragpulse.metrics._spec import MetricSpec
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.errors import ShapeError
from ragpulse.metrics.judge import JudgeContext, JudgeRequest, Outcome, ask

__all__ = [
    "DEFAULT_GENERATIONS",
    "HISTORY_PROMPT_TAG",
    "INSTRUCTIONS",
    "PROMPT_VERSION",
    "SCHEMA",
    "SPEC",
    "AnswerRelevancy",
    "Generation",
    "answer_relevancy",
    "build_request",
    "create",
    "parse_generation",
]

SPEC = MetricSpec(
    name="answer_relevancy",
    version="2.0.0",
    summary="Mean cosine similarity of the question to questions an LLM judge generates from the answer; "
    "0 when every generation finds the answer noncommittal.",
)
PROMPT_VERSION = "answer_relevancy/3"
"""2: the generated question is asked for in the trace's language; 3: the answer is sent as JSON data,
never as instructions. Since 2026-12-05 3 also covers a turn of a conversation sending its earlier messages
(``previous_turns``), so the question is written as the user asked it there (a follow-up's "and its
population?"): not bumped, since a request without them is byte for byte what it was (docs/metrics.md, Versions)."""
HISTORY_PROMPT_TAG = "answer_relevancy/3+history"
"""What a request with ``previous_turns`` carries instead of :data:`PROMPT_VERSION`, so that it is told apart in
the call cache; never published."""
DEFAULT_GENERATIONS = 3

INSTRUCTIONS = """\
Write the question that the given "answer" responds to, as the user would have asked it. Then rate the \
answer: "noncommittal" is 1 if it is evasive, vague or declines to answer (e.g. "I don't know", "it \
depends" with nothing specific), else 0.
Reply with JSON only: {"question": string, "noncommittal": 0 or 1}"""

SCHEMA = object_schema({"question": {"type": "string"}, "noncommittal": {"type": "integer", "enum": [0, 1]}})

Generation = tuple[str, int]
"""A generated question and its noncommittal flag (0 or 1)."""


def build_request(
    answer: str,
    generations: int = DEFAULT_GENERATIONS,
    language: str | None = None,
    history: Sequence[tuple[str, str]] = (),
) -> JudgeRequest:
    """One request for ``generations`` sampled completions; only the answer (and the conversation's earlier
    messages, when there are any) is shown, never the question.

    The question must come back in the trace's language: one in another language is compared with
    the real question by embedding, and lands far from it even when it means the same."""
    turns = {"previous_turns": history_data(history)} if history else {}
    return JudgeRequest(
        metric=SPEC.name,
        prompt_version=HISTORY_PROMPT_TAG if history else PROMPT_VERSION,
        step="questions",
        messages=(
            (
                "system",
                system_prompt(INSTRUCTIONS, language, "the question", fallback="the answer", history=bool(history)),
            ),
            ("user", data_message(**turns, answer=answer)),
        ),
        schema=SCHEMA,
        n=generations,
    )


def parse_generation(raw: str, record_id: str) -> Generation:
    """The generated question (may be empty) and the noncommittal flag of one completion.

    >>> parse_generation('{"question": "Where is Paris?", "noncommittal": 0}', "q1")
    ('Where is Paris?', 0)
    """
    reader = ReplyReader(raw, record_id)
    root = reader.root()
    return reader.text(root, "question", "question", allow_blank=True).strip(), reader.flag(
        root, "noncommittal", "noncommittal"
    )


def answer_relevancy(similarities: Sequence[float], noncommittal: Sequence[int]) -> float:
    """AR = mean_i cos(q, q_i), times 0 when every generation is noncommittal (ragas).

    Only generations with a non-empty question count; with none, AR = 0.0 (as ragas).
    >>> answer_relevancy([1.0, 0.5, 0.75], [0, 1, 0])
    0.75
    >>> answer_relevancy([0.9, 0.7], [1, 1])
    0.0
    """
    if not similarities or all(noncommittal):
        return 0.0
    return float(np.mean(similarities))


class AnswerRelevancy:
    """Answer relevancy as defined by ragas: does the answer address the question that was asked?

    The judge sees only the answer and writes, in N sampled completions of one request, the question
    it answers plus a noncommittal flag. AR = (1/N') Σ cos(E(q), E(q_i)) over the N' generations
    with a non-empty question, where E is the run's embedder; AR = 0 when all of them flag the
    answer as noncommittal. Cosines are clipped at 0 (ragas does not clip; a negative cosine would
    put the score below the [0, 1] range it declares). N = options["answer_relevancy_generations"]
    (default 3). Not applicable without a question or an answer, or without an embedder
    (``no_embedder``).
    """

    name = SPEC.name
    spec = SPEC
    prompt_version = PROMPT_VERSION
    uses_llm = True

    def __init__(self, generations: int = DEFAULT_GENERATIONS) -> None:
        if isinstance(generations, bool) or not isinstance(generations, int) or generations < 1:
            raise ShapeError("answer_relevancy_generations", "an integer >= 1", repr(generations))
        self.generations = generations

    async def score(self, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome:
        trace = Trace.of(batch, index)
        if (reason := trace.missing("question", "answer")) is not None:
            return Outcome.not_applicable(reason)
        if context.embedder is None:
            return Outcome.not_applicable("no_embedder")
        generations = await ask(
            context.judge,
            build_request(trace.answer, self.generations, trace.language, trace.history),
            lambda raw: parse_generation(raw, trace.trace_id),
        )
        kept = [(question, flag) for question, flag in generations if question]
        flags = [flag for _, flag in kept]
        if not kept or all(flags):
            return Outcome.ok(answer_relevancy([], flags))
        similarities = await embed_similarities(context.embedder, trace.question.strip(), [q for q, _ in kept])
        return Outcome.ok(answer_relevancy(similarities.tolist(), flags))


def create(request: MetricName, options: Mapping[str, Any]) -> AnswerRelevancy:
    """The registry's factory: reads ``answer_relevancy_generations`` (default 3)."""
    return AnswerRelevancy(options.get("answer_relevancy_generations", DEFAULT_GENERATIONS))
