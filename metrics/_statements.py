"""Splitting an answer into atomic statements: the first step of faithfulness and answer correctness.

Both metrics build this request with :func:`build_statements_request`, so for one trace they send
the identical request and the judge client's call cache answers the second one for free. That is
why the request is labelled with its own metric name, ``answer_statements``: its cost belongs to
neither metric alone. Changing the prompt below changes both metrics' prompt versions.

Splitting is the judge's job in every language: nothing here cuts text at ". " or any other
punctuation, so Chinese and Japanese answers (sentences ending in "。", "！" or "？", no spaces)
reach the judge whole, and its statements come back as written (white space collapsed, nothing
split or joined).
"""

from __future__ import annotations

from collections.abc import Sequence

from ragpulse.metrics._prompting import (
    ReplyReader,
    Trace,
    array_schema,
    data_json,
    data_message,
    history_data,
    object_schema,
    system_prompt,
)
from ragpulse.metrics.judge import JudgeClient, JudgeRequest, ask

__all__ = [
    "HISTORY_PROMPT_TAG",
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
PROMPT_VERSION = "answer_statements/3"
"""2: adds the Japanese example, implicit subjects and the language line; 3: the inputs (and the
examples) are one JSON object and the system prompt says they are data, not instructions. Since 2026-12-05 3
also covers a turn of a conversation sending its earlier messages (``previous_turns``, for faithfulness): not
bumped, since a request without them is byte for byte what it was (docs/metrics.md, Versions)."""
HISTORY_PROMPT_TAG = "answer_statements/3+history"
"""What a request with ``previous_turns`` carries instead of :data:`PROMPT_VERSION`, so that it is told apart in
the call cache; never published."""
STEP = "statements"

_JA_ANSWER = "ブラム・ストーカーです。1897年に出版しました。"

STATEMENTS_INSTRUCTIONS = f"""\
Split the "answer" into atomic statements. Each statement holds one fact or claim of the answer, is \
understandable on its own (replace pronouns and vague references with what they refer to, and state \
subjects or objects the answer leaves implicit, using the "question" where needed) and adds nothing the \
answer does not say. Leave out filler and restatements of the question. A refusal or "I don't know" \
holds no statements.
Example. {data_json({"question": "Who wrote Dracula?", "answer": "Bram Stoker; he published it in 1897."})}
-> {{"statements": ["Bram Stoker wrote Dracula.", "Bram Stoker published Dracula in 1897."]}}
Example. {data_json({"question": "『ドラキュラ』の作者は誰ですか？", "answer": _JA_ANSWER})}
-> {{"statements": ["『ドラキュラ』の作者はブラム・ストーカーです。", \
"ブラム・ストーカーは1897年に『ドラキュラ』を出版しました。"]}}
Reply with JSON only: {{"statements": [string, ...]}}"""
"""Fixed instructions; the system message adds the data rule and the trace's language line
(:func:`system_prompt`). The examples show their inputs as the user message does (:func:`data_json`).

The second example is Japanese because English alone shows neither statements in another language
nor sentences without spaces whose subject is left implicit ("1897年に出版しました" says neither
who published nor what). ragas reports that demonstrations in the target language help a judge
adapt; one fixed CJK example serves every trace without translating prompts per language."""

SCHEMA = object_schema({"statements": array_schema({"type": "string"})})


def build_statements_request(
    question: str, answer: str, language: str | None = None, history: Sequence[tuple[str, str]] = ()
) -> JudgeRequest:
    """The statement-extraction request for one (question, answer) in ``language`` (a BCP 47 tag or None), with
    the conversation's earlier messages when ``history`` has any; identical inputs, identical request."""
    turns = {"previous_turns": history_data(history)} if history else {}
    return JudgeRequest(
        metric=STATEMENTS_METRIC,
        prompt_version=HISTORY_PROMPT_TAG if history else PROMPT_VERSION,
        step=STEP,
        messages=(
            (
                "system",
                system_prompt(
                    STATEMENTS_INSTRUCTIONS, language, "the statements", fallback="the answer", history=bool(history)
                ),
            ),
            ("user", data_message(**turns, question=question, answer=answer)),
        ),
        schema=SCHEMA,
    )


def parse_statements(raw: str, record_id: str) -> list[str]:
    """The statements of a reply; an empty list is valid (the answer states nothing).

    >>> parse_statements('{"statements": ["Paris is the capital of France."]}', "q1")
    ['Paris is the capital of France.']
    >>> parse_statements('{"statements": ["東京は日本の首都です。", "大阪は 第二の都市です。"]}', "q1")
    ['東京は日本の首都です。', '大阪は 第二の都市です。']
    >>> parse_statements('{"statement": []}', "q1")
    Traceback (most recent call last):
    ...
    ragpulse.metrics.judge.VerdictParseError: record 'q1', field 'statements': statements is missing; raw reply '{"st...
    """
    reader = ReplyReader(raw, record_id)
    return [" ".join(s.split()) for s in reader.texts(reader.root(), "statements")]


async def answer_statements(judge: JudgeClient, trace: Trace, *, with_history: bool = False) -> list[str]:
    """The answer's statements, asked with the one request both metrics share; ``with_history`` (faithfulness)
    adds the trace's earlier messages, so a turn with history no longer shares it with answer correctness."""
    (statements,) = await ask(
        judge,
        build_statements_request(trace.question, trace.answer, trace.language, trace.history if with_history else ()),
        lambda raw: parse_statements(raw, trace.trace_id),
    )
    return statements
