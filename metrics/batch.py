"""The input of every metric: one batch of traces as plain Python sequences."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragpulse.metrics.errors import InvalidRecordError, ShapeError

__all__ = ["RelevanceLabels", "TraceBatch", "primary_language"]

RelevanceLabels = Mapping[str, float]
"""Graded relevance by context key (id or text); a plain list of ids is given gain 1.0 each."""


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

    def __post_init__(self) -> None:
        n = len(self.trace_ids)
        for name in ("context_ids", "context_texts", "relevant_ids", "relevant_texts", "answers", "references"):
            got = len(getattr(self, name))
            if got != n:
                raise ShapeError(name, f"length {n} (one per trace)", f"length {got}")
        for optional in ("questions", "languages"):
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
        )

    def language_of(self, index: int) -> str | None:
        """The primary language subtag of trace ``index`` (``zh`` for ``zh-TW``), None when unknown."""
        return None if self.languages is None else primary_language(self.languages[index])


def primary_language(tag: str | None) -> str | None:
    """The lower-case primary subtag of a BCP 47 tag: ``zh`` for ``zh-Hant-TW``, None for None or ``""``.

    >>> primary_language("zh-TW"), primary_language("JA"), primary_language(None)
    ('zh', 'ja', None)
    """
    return tag.split("-", 1)[0].lower() or None if tag else None


def _contexts(record: Mapping[str, Any]) -> list[Mapping[str, object]]:
    return list(record.get("contexts") or [])


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
