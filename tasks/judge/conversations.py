"""A day's conversations, as the conversation metrics read them: the kept traces that carry a conversation id,
grouped by it, each conversation's turns ordered by timestamp, then trace id.

What the judge reads of a conversation is bounded, so that one endless thread cannot make a request no model
takes: its first ``FIRST_TURNS`` and last ``MAX_TURNS - FIRST_TURNS`` turns (the goal is usually stated at the
start, the end state at the end), each question and answer cut to ``MAX_TEXT_CHARS`` characters, at most
``MAX_TOOL_CALLS`` tool calls a turn, their arguments (as JSON) and errors cut to ``MAX_ARGUMENT_CHARS``.
``n_turns`` counts every turn all the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from ragpulse.metrics.agent_goal_accuracy import Conversation, ConversationTurn
from ragpulse.metrics.batch import ToolCall
from ragpulse.tasks.core.types import BatchRef, QuarantinedRecord
from ragpulse.tasks.ingest.batches import CONVERSATION_COLUMNS, read_staged, tool_calls_column

__all__ = [
    "FIRST_TURNS",
    "MAX_ARGUMENT_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_TOOL_CALLS",
    "MAX_TURNS",
    "DayConversations",
    "bounded",
    "read_conversations",
]

MAX_TURNS = 20
FIRST_TURNS = 2
MAX_TEXT_CHARS = 2000
MAX_TOOL_CALLS = 10
MAX_ARGUMENT_CHARS = 500
_CUT = "…"
_LOCATION = ("trace_id", "source_file", "source_line", "conversation_id")


@dataclass(frozen=True)
class DayConversations:
    """The conversations of a day, index-aligned: each one whole, its number of turns and its first and last
    trace."""

    conversations: list[Conversation]
    n_turns: list[int]
    first_trace_ids: list[str]
    last_trace_ids: list[str]


def read_conversations(
    batches: Sequence[BatchRef],
    excluded: Sequence[QuarantinedRecord] = (),
    storage_options: Mapping[str, Any] | None = None,
) -> DayConversations:
    """The conversations among the traces the partition keeps: not ``excluded`` (failed the input suite), and of a
    repeated trace id the first record, as the partition's scores keep them. Traces without a conversation id
    belong to none; a batch none of whose kept traces has one is read no further than its ids."""
    dropped = {(q.source_file, q.line) for q in excluded}
    seen: set[str] = set()
    turns: dict[str, list[dict[str, Any]]] = {}
    for batch in batches:
        ids = read_staged(batch, storage_options, columns=list(_LOCATION))
        keep = []
        for trace_id, file, line, conversation in zip(*(ids.column(c).to_pylist() for c in _LOCATION), strict=True):
            allowed = (file, line) not in dropped and trace_id not in seen
            if allowed:
                seen.add(trace_id)
            keep.append(allowed and conversation is not None)
        if not any(keep):
            continue
        table = read_staged(batch, storage_options, columns=list(CONVERSATION_COLUMNS)).filter(pa.array(keep))
        for row, calls in zip(_rows(table), tool_calls_column(table, "tool_calls") or [], strict=True):
            turns.setdefault(row["conversation_id"], []).append({**row, "tool_calls": calls})
    found = DayConversations([], [], [], [])
    for conversation_id in sorted(turns):
        ordered = sorted(turns[conversation_id], key=lambda turn: (turn["timestamp"], turn["trace_id"]))
        found.conversations.append(Conversation(conversation_id, bounded([_turn(t) for t in ordered])))
        found.n_turns.append(len(ordered))
        found.first_trace_ids.append(ordered[0]["trace_id"])
        found.last_trace_ids.append(ordered[-1]["trace_id"])
    return found


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    names = [name for name in CONVERSATION_COLUMNS if name != "tool_calls"]
    return table.select(names).to_pylist() if table.num_rows else []


def _turn(row: Mapping[str, Any]) -> ConversationTurn:
    return ConversationTurn(
        question=row["question"], answer=row["answer"], tool_calls=tuple(row["tool_calls"] or ()),
        language=row["language"],
    )  # fmt: skip


def bounded(turns: Sequence[ConversationTurn]) -> tuple[ConversationTurn, ...]:
    """What the judge reads of a conversation's turns (the module's bounds).

    >>> turns = [ConversationTurn(f"質問{i}", "回" * 3000) for i in range(30)]
    >>> kept = bounded(turns)
    >>> len(kept), [t.question for t in kept[:3]], len(kept[0].answer)
    (20, ['質問0', '質問1', '質問12'], 2001)
    """
    chosen = list(turns) if len(turns) <= MAX_TURNS else [*turns[:FIRST_TURNS], *turns[FIRST_TURNS - MAX_TURNS :]]
    return tuple(
        replace(
            turn,
            question=_cut(turn.question, MAX_TEXT_CHARS),
            answer=_cut(turn.answer, MAX_TEXT_CHARS),
            tool_calls=tuple(_bounded_call(call) for call in turn.tool_calls[:MAX_TOOL_CALLS]),
        )
        for turn in chosen
    )


def _cut(text: str | None, limit: int) -> str | None:
    return text if text is None or len(text) <= limit else text[:limit] + _CUT


def _bounded_call(call: ToolCall) -> ToolCall:
    arguments, error = call.arguments, _cut(call.error, MAX_ARGUMENT_CHARS)
    if arguments is not None:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=str)
        arguments = arguments if len(text) <= MAX_ARGUMENT_CHARS else text[:MAX_ARGUMENT_CHARS] + _CUT
    return replace(call, arguments=arguments, error=error)
