"""The scoring group of the run configuration: which metrics, in which batches, how much the judge samples."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from ragpulse.metrics import DEFAULT_METRICS, parse_metrics
from ragpulse.metrics.batch import StepAgainst
from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.config_base import ConfigGroup, split_list

__all__ = ["ScoringConfig"]


class ScoringConfig(ConfigGroup):
    """What is computed and in which batches."""

    metrics: tuple[str, ...] = Field(default=DEFAULT_METRICS, min_length=1, description="Metric names, e.g. recall@5.")
    batch_size: int = Field(default=5000, ge=1, le=1_000_000, description="Traces per scoring task.")
    sample_rate: float = Field(
        default=1.0, gt=0.0, le=1.0, description="Share of traces the judge metrics score, chosen by trace_id."
    )
    # Not in fingerprint(): a rescore republishes the same configuration.
    rescore: Literal["failed", "all"] = Field(
        default="failed",
        description="Judge metrics: failed re-asks only failed calls; all re-asks every call, skipping both caches.",
    )
    step_against: tuple[StepAgainst, ...] = Field(
        default=("step_query",),
        min_length=1,
        description="What an agent's retrieval steps are scored against: step_query (its own), question (the user's).",
    )

    @field_validator("metrics", "step_against", mode="before")
    @classmethod
    def _split_lists(cls, value: Any) -> Any:
        return split_list(value)

    @field_validator("step_against")
    @classmethod
    def _once_each(cls, value: tuple[StepAgainst, ...]) -> tuple[StepAgainst, ...]:
        return tuple(dict.fromkeys(value))

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            return tuple(request.name for request in parse_metrics(value))
        except RagpulseError as exc:
            raise ValueError(str(exc)) from exc
