"""The input of every metric: one batch of traces as plain Python sequences."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics.errors import InvalidRecordError, ShapeError

__all__ = [
    "Feedback",
    "History",
    "Operations",
    "RelevanceLabels",
    "SpanError",
    "Step",
    "StepAgainst",
    "StepRows",
    "ToolCall",
    "TraceBatch",
    "Usage",
    "primary_language",
]

RelevanceLabels = Mapping[str, float]
"""Graded relevance by context key (id or text); a plain list of ids is given gain 1.0 each."""

History = Sequence[tuple[str, str]]
"""A conversation's earlier messages as (role, content) pairs, oldest first (role ``user`` or ``assistant``)."""

StepAgainst = Literal["step_query", "question"]
"""What a step row's question is: the query the agent sent to the retriever, or the user's question of the turn."""


@dataclass(frozen=True)
class Step:
    """One retrieval step of an agent's turn (a retriever, a tool returning documents, or a reranker).

    ``index`` is its position in the turn's steps (the order the agent ran them); ``parent`` the index of the
    step whose documents a reranker reorders, else None. Contexts are in rank order, as the trace's own.
    """

    index: int
    id: str | None
    name: str | None
    kind: str
    query: str | None
    context_ids: tuple[str | None, ...]
    context_texts: tuple[str | None, ...]
    parent: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a turn (or of its labels): ``arguments`` as the source logged them (an object, JSON
    text, or None); ``step`` the index of the retrieval step it produced, if any."""

    name: str
    arguments: Mapping[str, Any] | str | None = None
    error: str | None = None
    step: int | None = None


@dataclass(frozen=True)
class Usage:
    """One model call's token counts as the application logged them (its own calls, not the judge's)."""

    model: str | None
    input_tokens: int | None
    output_tokens: int | None


@dataclass(frozen=True)
class SpanError:
    """A span that ended in error: its kind (``root``, ``llm``, ``retriever``, ``tool``, ``reranker``, ``chain``,
    ``agent``, ...), its name and the error message, as the source logged them."""

    kind: str
    name: str | None
    message: str | None


@dataclass(frozen=True)
class Operations:
    """What a turn cost to serve, read from span times, token counts and statuses; a field is None where the source
    did not log it (its metrics are then ``not_applicable``). ``errors`` is ``()`` for a turn known to have none."""

    latency_ms: float | None = None
    retrieval_latency_ms: float | None = None
    generation_latency_ms: float | None = None
    usage: tuple[Usage, ...] | None = None
    errors: tuple[SpanError, ...] | None = None


@dataclass(frozen=True)
class Feedback:
    """One piece of feedback or annotation on a turn: ``value`` the number logged (a boolean as 1/0), ``label`` the
    category logged; ``source`` who gave it: ``user`` (the application's end user), ``annotation`` (a human
    reviewer), ``api`` (sent by the application's code, origin not said) or ``evaluation`` (computed by a model or
    code, never a human label)."""

    name: str
    value: float | None
    label: str | None
    source: str
    comment: str | None = None


@dataclass(frozen=True)
class TraceBatch:
    """Traces in the shape metrics need, index-aligned.

    - ``context_ids`` / ``context_texts``: retrieved contexts in rank order; a text is None where the
      source logged only the id (judge metrics are then ``not_applicable``, ``no_context_text``), an id
      is None where it logged only the text (metrics by id are then ``no_context_id``).
    - ``relevant_ids``: graded labels by context id, or None when the trace has none.
    - ``relevant_texts``: graded labels by context text; used only where ``relevant_ids`` is None.
    - ``answers``: the generated answer or None; ``references``: acceptable answers (maybe empty).
    - ``questions``: the user's question per trace, read by the judge metrics; None when the batch was
      built without them (retrieval and answer metrics never read it; judge metrics then say
      ``no_question``).
    - ``languages``: each trace's BCP 47 language tag (``ja``, ``zh-TW``), as the trace gave it, else the
      run's default, else detected; None (for the batch or a trace) when unknown. Text metrics normalise
      and judge prompts ask by it.
    - ``steps``: an agent's retrieval steps per trace, in the order it ran them; None for a trace (or the
      whole batch) whose source did not say, ``[]`` for a turn that did not retrieve.
    - ``tool_calls`` / ``reference_tool_calls``: the turn's tool calls in order and their labels; None when
      not logged / not labelled.
    - ``histories``: the conversation's earlier messages per trace (empty for a first or single turn).
    - ``conversation_ids``: the session or thread a turn belongs to, None when it has none.
    - ``operations``: latency, token usage and span errors per trace (:class:`Operations`); None when not logged.
    - ``feedback``: what users, reviewers and the tools' evaluators said about each trace; None when nothing.
    """

    trace_ids: Sequence[str]
    context_ids: Sequence[Sequence[str | None]]
    context_texts: Sequence[Sequence[str | None]]
    relevant_ids: Sequence[RelevanceLabels | None]
    relevant_texts: Sequence[RelevanceLabels | None]
    answers: Sequence[str | None]
    references: Sequence[Sequence[str]]
    questions: Sequence[str | None] | None = None
    languages: Sequence[str | None] | None = None
    steps: Sequence[Sequence[Step] | None] | None = None
    tool_calls: Sequence[Sequence[ToolCall] | None] | None = None
    reference_tool_calls: Sequence[Sequence[ToolCall] | None] | None = None
    histories: Sequence[History] | None = None
    conversation_ids: Sequence[str | None] | None = None
    operations: Sequence[Operations | None] | None = None
    feedback: Sequence[Sequence[Feedback] | None] | None = None

    def __post_init__(self) -> None:
        n = len(self.trace_ids)
        for name in ("context_ids", "context_texts", "relevant_ids", "relevant_texts", "answers", "references"):
            got = len(getattr(self, name))
            if got != n:
                raise ShapeError(name, f"length {n} (one per trace)", f"length {got}")
        for optional in _OPTIONAL:
            values = getattr(self, optional)
            if values is not None and len(values) != n:
                raise ShapeError(optional, f"length {n} (one per trace)", f"length {len(values)}")
        for trace_id, ids, texts in zip(self.trace_ids, self.context_ids, self.context_texts, strict=True):
            if len(ids) != len(texts):
                raise InvalidRecordError(trace_id, "contexts", f"{len(ids)} ids but {len(texts)} texts")
        # Errors name the trace-format field the labels came from, not the attribute holding them.
        for attribute, field in (("relevant_ids", "relevant_context_ids"), ("relevant_texts", "relevant_contexts")):
            for trace_id, labels in zip(self.trace_ids, getattr(self, attribute), strict=True):
                if labels is None:
                    continue
                for key, gain in labels.items():
                    if (
                        not isinstance(gain, int | float)
                        or isinstance(gain, bool)
                        or not math.isfinite(gain)
                        or gain < 0
                    ):
                        raise InvalidRecordError(
                            trace_id, field, f"relevance of {key!r} must be a finite number >= 0, got {gain!r}"
                        )
        if self.steps is not None:
            for trace_id, steps in zip(self.trace_ids, self.steps, strict=True):
                _check_steps(trace_id, steps or ())

    def __len__(self) -> int:
        return len(self.trace_ids)

    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]]) -> TraceBatch:
        """Build a batch from canonical trace dicts (the documented trace format, already validated)."""
        return cls(
            trace_ids=[str(r["trace_id"]) for r in records],
            context_ids=[[None if c.get("id") is None else str(c["id"]) for c in _contexts(r)] for r in records],
            context_texts=[[None if c.get("text") is None else str(c["text"]) for c in _contexts(r)] for r in records],
            relevant_ids=[_labels(r.get("relevant_context_ids")) for r in records],
            relevant_texts=[_labels(r.get("relevant_contexts")) for r in records],
            answers=[r.get("answer") for r in records],
            references=[_references(r) for r in records],
            questions=[q if isinstance(q := r.get("question"), str) else None for r in records],
            languages=[tag if isinstance(tag := r.get("language"), str) and tag else None for r in records],
            steps=[_steps(r) for r in records],
            tool_calls=[_tool_calls(r, "tool_calls") for r in records],
            reference_tool_calls=[_tool_calls(r, "reference_tool_calls") for r in records],
            histories=[_history(r) for r in records],
            conversation_ids=[c if isinstance(c := r.get("conversation_id"), str) and c else None for r in records],
            operations=[_operations(r) for r in records],
            feedback=[_feedback(r) for r in records],
        )

    def step_batch(self, against: StepAgainst) -> StepRows:
        """One row per retrieval step of every trace, for the metrics computed per step (``STEP_FAMILIES``).

        A row's contexts are the step's; its question is the step's query (``against="step_query"``) or the
        turn's question (``"question"``); answer, references, labels, language and history are its trace's,
        and its trace id the trace's. Traces without steps give no rows.
        """
        if against not in ("step_query", "question"):
            raise ShapeError("against", "'step_query' or 'question'", repr(against))
        rows: list[int] = []
        found: list[Step] = []
        for row, steps in enumerate(self.steps or ()):
            for step in steps or ():
                rows.append(row)
                found.append(step)

        def per_row(values: Sequence[Any] | None) -> list[Any] | None:
            return None if values is None else [values[row] for row in rows]

        questions = (
            [step.query for step in found] if against == "step_query" else per_row(self.questions) or [None] * len(rows)
        )
        batch = TraceBatch(
            trace_ids=[self.trace_ids[row] for row in rows],
            context_ids=[step.context_ids for step in found],
            context_texts=[step.context_texts for step in found],
            relevant_ids=[self.relevant_ids[row] for row in rows],
            relevant_texts=[self.relevant_texts[row] for row in rows],
            answers=[self.answers[row] for row in rows],
            references=[self.references[row] for row in rows],
            questions=questions,
            languages=per_row(self.languages),
            histories=per_row(self.histories),
            conversation_ids=per_row(self.conversation_ids),
        )
        return StepRows(
            batch=batch,
            trace_rows=np.array(rows, dtype=np.int64),
            step_index=np.array([step.index for step in found], dtype=np.int64),
            step_ids=np.array([step.id for step in found], dtype=object),
        )

    def history_of(self, index: int) -> History:
        """The earlier messages of trace ``index``'s conversation, oldest first; empty when it has none."""
        return () if self.histories is None else self.histories[index]

    def language_of(self, index: int) -> str | None:
        """The primary language subtag of trace ``index`` (``zh`` for ``zh-TW``), None when unknown."""
        return None if self.languages is None else primary_language(self.languages[index])


@dataclass(frozen=True)
class StepRows:
    """The steps of a batch as a batch of their own (:meth:`TraceBatch.step_batch`), and where each row came from:
    ``trace_rows[i]`` is the row of its trace in the turn batch, ``step_index[i]`` its index in that trace's steps,
    ``step_ids[i]`` the source's id of the step (or None)."""

    batch: TraceBatch
    trace_rows: NDArray[np.int64]
    step_index: NDArray[np.int64]
    step_ids: NDArray[np.object_]


_OPTIONAL = (
    "questions",
    "languages",
    "steps",
    "tool_calls",
    "reference_tool_calls",
    "histories",
    "conversation_ids",
    "operations",
    "feedback",
)
"""The optional per-trace fields: None for the whole batch, else one entry per trace."""


def _check_steps(trace_id: str, steps: Sequence[Step]) -> None:
    """A trace's steps are numbered by position, their ids and texts pair up, and a parent is an earlier step."""
    for position, step in enumerate(steps):
        field = f"steps[{position}]"
        if step.index != position:
            raise InvalidRecordError(trace_id, field, f"index must be its position {position}, got {step.index}")
        if len(step.context_ids) != len(step.context_texts):
            raise InvalidRecordError(
                trace_id, f"{field}.contexts", f"{len(step.context_ids)} ids but {len(step.context_texts)} texts"
            )
        if step.parent is not None and not 0 <= step.parent < position:
            raise InvalidRecordError(
                trace_id, f"{field}.parent", f"must be the index of an earlier step, got {step.parent}"
            )


def primary_language(tag: str | None) -> str | None:
    """The lower-case primary subtag of a BCP 47 tag: ``zh`` for ``zh-Hant-TW``, None for None or ``""``.

    >>> primary_language("zh-TW"), primary_language("JA"), primary_language(None)
    ('zh', 'ja', None)
    """
    return tag.split("-", 1)[0].lower() or None if tag else None


def _contexts(record: Mapping[str, Any]) -> list[Mapping[str, object]]:
    return list(record.get("contexts") or [])


def _steps(record: Mapping[str, Any]) -> list[Step] | None:
    """A record's ``steps`` (None when it has none); contexts are read as the top-level ones."""
    raw = record.get("steps")
    if raw is None:
        return None
    steps = []
    for index, step in enumerate(raw):
        contexts = list(step.get("contexts") or [])
        steps.append(
            Step(
                index=index,
                id=_text_or_none(step.get("id")),
                name=_text_or_none(step.get("name")),
                kind=str(step.get("kind") or "retriever"),
                query=step.get("query") if isinstance(step.get("query"), str) else None,
                context_ids=tuple(None if c.get("id") is None else str(c["id"]) for c in contexts),
                context_texts=tuple(None if c.get("text") is None else str(c["text"]) for c in contexts),
                parent=step.get("parent"),
                error=_text_or_none(step.get("error")),
            )
        )
    return steps


def _tool_calls(record: Mapping[str, Any], field: str) -> list[ToolCall] | None:
    raw = record.get(field)
    if raw is None:
        return None
    return [
        ToolCall(
            name=str(call["name"]),
            arguments=call.get("arguments"),
            error=_text_or_none(call.get("error")),
            step=call.get("step"),
        )
        for call in raw
    ]


def _operations(record: Mapping[str, Any]) -> Operations | None:
    """A record's latencies, token usage and span errors; None when it gives none of them."""
    usage, errors = record.get("usage"), record.get("errors")
    operations = Operations(
        latency_ms=_number_or_none(record.get("latency_ms")),
        retrieval_latency_ms=_number_or_none(record.get("retrieval_latency_ms")),
        generation_latency_ms=_number_or_none(record.get("generation_latency_ms")),
        usage=None
        if usage is None
        else tuple(
            Usage(u.get("model"), _count_or_none(u.get("input_tokens")), _count_or_none(u.get("output_tokens")))
            for u in usage
        ),
        errors=None
        if errors is None
        else tuple(SpanError(str(e["kind"]), e.get("name"), e.get("message")) for e in errors),
    )
    return None if operations == Operations() else operations


def _feedback(record: Mapping[str, Any]) -> list[Feedback] | None:
    """A record's feedback entries, a boolean value read as 1.0/0.0; None when it gives none."""
    raw = record.get("feedback")
    if raw is None:
        return None
    return [
        Feedback(
            name=str(entry["name"]),
            value=_number_or_none(entry.get("value")),
            label=_text_or_none(entry.get("label")),
            source=str(entry["source"]),
            comment=_text_or_none(entry.get("comment")),
        )
        for entry in raw
    ]


def _number_or_none(value: object) -> float | None:
    return None if value is None else float(cast(float, value))


def _count_or_none(value: object) -> int | None:
    """A token count as an int (``12.0``, as some exporters write it, is 12)."""
    return None if value is None else int(cast(float, value))


def _history(record: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((str(m["role"]), str(m["content"])) for m in record.get("history") or [])


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _labels(raw: RelevanceLabels | Iterable[object] | None) -> RelevanceLabels | None:
    if raw is None:
        return None
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items()}
    return dict.fromkeys((str(k) for k in raw), 1.0)


def _references(record: Mapping[str, Any]) -> list[str]:
    """Every acceptable answer: ``reference`` first, then ``reference_answers``, without repeats."""
    found: list[str] = []
    candidates = [record.get("reference"), *(record.get("reference_answers") or [])]
    for reference in candidates:
        if isinstance(reference, str) and reference not in found:
            found.append(reference)
    return found
