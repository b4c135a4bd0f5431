"""Splitting an answer into atomic statements: the first step of faithfulness and answer correctness.

Both metrics build this request with :func:`build_statements_request`, so for one trace they send
the identical request and the judge client's call cache answers the second one for free. That is
why the request is labelled with its own metric name, ``answer_statements``: its cost belongs to
neither metric alone. Changing the prompt below changes both metrics' prompt versions.
"""

from __future__ import annotations

from ragpulse.metrics._prompting import ReplyReader, Trace, array_schema, object_schema, user_message
from ragpulse.metrics.judge import JudgeClient, JudgeRequest, ask

__all__ = [
    "PROMPT_VERSION",
    "SCHEMA",
    "STATEMENTS_INSTRUCTIONS",
    "STATEMENTS_METRIC",
    "STEP",
    "answer_statements",
    "build_statements_request",
    "parse_statements",
]

STATEMENTS_METRIC = "answer_statements"
PROMPT_VERSION = "answer_statements/1"
STEP = "statements"

STATEMENTS_INSTRUCTIONS = """\
Split the answer into atomic statements. Each statement holds one fact or claim of the answer, is \
understandable on its own (replace pronouns and vague references with what they refer to, using the \
question where needed) and adds nothing the answer does not say. Leave out filler and restatements of \
the question. A refusal or "I don't know" holds no statements.
Example. Question: Who wrote Dracula? Answer: Bram Stoker; he published it in 1897.
-> {"statements": ["Bram Stoker wrote Dracula.", "Bram Stoker published Dracula in 1897."]}
Reply with JSON only: {"statements": [string, ...]}"""

SCHEMA = object_schema({"statements": array_schema({"type": "string"})})


def build_statements_request(question: str, answer: str) -> JudgeRequest:
    """The statement-extraction request for one (question, answer); identical inputs, identical request."""
    return JudgeRequest(
        metric=STATEMENTS_METRIC,
        prompt_version=PROMPT_VERSION,
        step=STEP,
        messages=(
            ("system", STATEMENTS_INSTRUCTIONS),
            ("user", user_message(("Question", question.strip()), ("Answer", answer.strip()))),
        ),
        schema=SCHEMA,
    )


def parse_statements(raw: str, record_id: str) -> list[str]:
    """The statements of a reply; an empty list is valid (the answer states nothing).

    >>> parse_statements('{"statements": ["Paris is the capital of France."]}', "q1")
    ['Paris is the capital of France.']
    >>> parse_statements('{"statement": []}', "q1")
    Traceback (most recent call last):
    ...
    ragpulse.metrics.judge.VerdictParseError: record 'q1', field 'statements': statements is missing; raw reply '{"st...
    """
    reader = ReplyReader(raw, record_id)
    return [" ".join(s.split()) for s in reader.texts(reader.root(), "statements")]


async def answer_statements(judge: JudgeClient, trace: Trace) -> list[str]:
    """The answer's statements, asked with the one request both metrics share."""
    (statements,) = await ask(
        judge,
        build_statements_request(trace.question, trace.answer),
        lambda raw: parse_statements(raw, trace.trace_id),
    )
    return statements
