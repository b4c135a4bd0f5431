"""Agent goal accuracy: did the conversation reach what the user wanted? Scored per conversation (ragas'
``AgentGoalAccuracyWithoutReference``).

Two judge calls per conversation: the judge reads the whole conversation (each turn's question, tool calls and
answer) and states the user's goal and the end state the conversation arrived at; a second call compares the
two: 1 when the end state achieves the goal, else 0. The unit is the conversation, not the turn: the turn judge
never runs it (``registry.CONVERSATION_FAMILIES``); :func:`judge_conversations` does.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ragpulse.metrics._prompting import ReplyReader, data_message, object_schema, system_prompt
from ragpulse.metrics._request import MetricName
from ragpulse.metrics._spec import MetricResult, MetricSpec
from ragpulse.metrics.batch import ToolCall
from ragpulse.metrics.judge import (
    PARSE_ERROR,
    JudgeCallError,
    JudgeContext,
    JudgeRequest,
    Outcome,
    VerdictParseError,
    ask,
    result_of,
)
from ragpulse.metrics.tool_calls import arguments_of

__all__ = [
    "COMPARE_INSTRUCTIONS",
    "GOAL_INSTRUCTIONS",
    "PROMPT_VERSION",
    "SPEC",
    "AgentGoalAccuracy",
    "Conversation",
    "ConversationMetric",
    "ConversationTurn",
    "build_compare_request",
    "build_goal_request",
    "create",
    "judge_conversations",
    "parse_goal",
    "parse_verdict",
]

SPEC = MetricSpec(
    name="agent_goal_accuracy",
    version="1.0.0",
    summary="1 if an LLM judge finds that the conversation's end state achieves the goal it infers for the user, "
    "else 0 (per conversation; ragas, without reference).",
)
PROMPT_VERSION = "agent_goal_accuracy/1"


@dataclass(frozen=True)
class ConversationTurn:
    """One turn as the goal judge sees it: the user's message, the tools the agent called, its answer, and the
    turn's BCP 47 language tag (None when unknown)."""

    question: str | None
    answer: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    language: str | None = None


@dataclass(frozen=True)
class Conversation:
    """The turns of one conversation (session, thread), oldest first."""

    conversation_id: str
    turns: tuple[ConversationTurn, ...]

    @property
    def language(self) -> str | None:
        """The language most of its turns are in (the earliest of equals), None when no turn says.

        >>> turns = [("hi", "en"), ("東京は？", "ja"), ("大阪は？", "ja"), ("北京呢？", "zh")]
        >>> Conversation("c1", tuple(ConversationTurn(q, None, language=tag) for q, tag in turns)).language
        'ja'
        """
        tags = Counter(turn.language for turn in self.turns if turn.language)
        return tags.most_common(1)[0][0] if tags else None


GOAL_INSTRUCTIONS = """\
The "conversation" is an agent's work with a user, turn by turn: the "user" message, the "tool_calls" the agent \
made (name, arguments, and an error when the call failed) and the agent's "answer". Identify the "user_goal", the \
task or objective the user wants to achieve over the conversation, and the "end_state", the outcome the \
conversation actually arrived at. Write each as one or two sentences.
Reply with JSON only: {"user_goal": string, "end_state": string}"""

COMPARE_INSTRUCTIONS = """\
Compare the "desired_outcome" (what the user wanted) with the "arrived_outcome" (where the conversation ended): \
"verdict" is 1 if the arrived outcome achieves the desired outcome, else 0. Give a one-sentence reason before the \
verdict.
Reply with JSON only: {"reason": string, "verdict": 0 or 1}"""

_GOAL_SCHEMA = object_schema({"user_goal": {"type": "string"}, "end_state": {"type": "string"}})
_COMPARE_SCHEMA = object_schema({"reason": {"type": "string"}, "verdict": {"type": "integer", "enum": [0, 1]}})


def _transcript(conversation: Conversation) -> list[dict[str, Any]]:
    """The turns as data: what the user said, which tools the agent called (and which failed), what it answered."""
    turns: list[dict[str, Any]] = []
    for turn in conversation.turns:
        calls = []
        for call in turn.tool_calls:
            entry: dict[str, Any] = {"name": call.name, "arguments": arguments_of(call)}
            if call.error:
                entry["error"] = call.error.strip()
            calls.append(entry)
        turns.append(
            {"user": (turn.question or "").strip(), "tool_calls": calls, "answer": (turn.answer or "").strip()}
        )
    return turns


def build_goal_request(conversation: Conversation) -> JudgeRequest:
    """Step 1: the user's goal and the end state, in the conversation's language."""
    return JudgeRequest(
        metric=SPEC.name,
        prompt_version=PROMPT_VERSION,
        step="goal",
        messages=(
            (
                "system",
                system_prompt(
                    GOAL_INSTRUCTIONS,
                    conversation.language,
                    "the user_goal and the end_state",
                    fallback="the user's messages",
                ),
            ),
            ("user", data_message(conversation=_transcript(conversation))),
        ),
        schema=_GOAL_SCHEMA,
    )


def parse_goal(raw: str, record_id: str) -> tuple[str, str]:
    """The (user_goal, end_state) of a step-1 reply, both non-blank.

    >>> parse_goal('{"user_goal": "预订今晚八点的餐厅", "end_state": "已预订金龙餐厅八点的座位"}', "c1")
    ('预订今晚八点的餐厅', '已预订金龙餐厅八点的座位')
    """
    reader = ReplyReader(raw, record_id)
    root = reader.root()
    return reader.text(root, "user_goal", "user_goal").strip(), reader.text(root, "end_state", "end_state").strip()


def build_compare_request(user_goal: str, end_state: str, language: str | None = None) -> JudgeRequest:
    """Step 2: does the end state achieve the goal? The reason in the conversation's language."""
    return JudgeRequest(
        metric=SPEC.name,
        prompt_version=PROMPT_VERSION,
        step="verdict",
        messages=(
            ("system", system_prompt(COMPARE_INSTRUCTIONS, language, "the reason", fallback="the desired_outcome")),
            ("user", data_message(desired_outcome=user_goal, arrived_outcome=end_state)),
        ),
        schema=_COMPARE_SCHEMA,
    )


def parse_verdict(raw: str, record_id: str) -> int:
    """The 0/1 verdict of a step-2 reply.

    >>> parse_verdict('{"reason": "同じ結果です。", "verdict": 1}', "c1")
    1
    """
    reader = ReplyReader(raw, record_id)
    root = reader.root()
    reader.text(root, "reason", "reason", allow_blank=True)
    return reader.flag(root, "verdict", "verdict")


class ConversationMetric(Protocol):
    """A judge metric whose unit is a conversation: one outcome per :class:`Conversation`."""

    name: str
    spec: MetricSpec
    prompt_version: str
    uses_llm: bool

    async def score(self, conversation: Conversation, context: JudgeContext) -> Outcome: ...


class AgentGoalAccuracy:
    """ragas' AgentGoalAccuracyWithoutReference: infer the goal and the end state, then compare them (1 or 0).

    Not applicable to a conversation none of whose turns has a question (``no_question``) or an answer
    (``no_answer``). A failed call or an unusable reply (after one repair) is a failed score, never an exception.
    """

    name = SPEC.name
    spec = SPEC
    prompt_version = PROMPT_VERSION
    uses_llm = True

    async def score(self, conversation: Conversation, context: JudgeContext) -> Outcome:
        turns = conversation.turns
        if not any((turn.question or "").strip() for turn in turns):
            return Outcome.not_applicable("no_question")
        if not any((turn.answer or "").strip() for turn in turns):
            return Outcome.not_applicable("no_answer")
        record = conversation.conversation_id
        try:
            ((goal, end_state),) = await ask(
                context.judge, build_goal_request(conversation), lambda raw: parse_goal(raw, record)
            )
            (verdict,) = await ask(
                context.judge,
                build_compare_request(goal, end_state, conversation.language),
                lambda raw: parse_verdict(raw, record),
            )
        except JudgeCallError as exc:
            return Outcome.of_call_error(exc)
        except VerdictParseError:
            return Outcome.failed(PARSE_ERROR)
        return Outcome.ok(verdict)


async def judge_conversations(
    conversations: Sequence[Conversation], metrics: Sequence[ConversationMetric], context: JudgeContext
) -> dict[str, MetricResult]:
    """Every (conversation, metric) pair concurrently; results index-aligned with ``conversations``."""
    outcomes = await asyncio.gather(*(m.score(c, context) for m in metrics for c in conversations))
    n = len(conversations)
    return {metric.name: result_of(outcomes[i * n : (i + 1) * n]) for i, metric in enumerate(metrics)}


def create(request: MetricName, options: Mapping[str, Any]) -> AgentGoalAccuracy:
    """The registry's factory; agent goal accuracy takes no options."""
    return AgentGoalAccuracy()
