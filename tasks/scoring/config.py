"""The scoring group of the run configuration: which metrics, in which batches, how much the judge samples."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from ragpulse.metrics import DEFAULT_EMBEDDING_METRICS, DEFAULT_FEEDBACK_METRICS, DEFAULT_METRICS, parse_metrics
from ragpulse.metrics.batch import StepAgainst
from ragpulse.metrics.errors import RagpulseError
from ragpulse.metrics.prices import TokenPrice, merged_prices
from ragpulse.metrics.refusal import phrase_form
from ragpulse.tasks.core.config_base import ConfigGroup, split_list

__all__ = ["AUTO_EMBEDDING_TRACES", "ScoringConfig"]

AUTO_EMBEDDING_TRACES = 200
"""Traces a day ``embedding_sample = "auto"`` embeds: a day's mean of a signal to +-0.14 of its standard deviation
(95%, 1.96 / sqrt(200)), and a shift of 0.3 standard deviations between two such days found with power 0.85 at
alpha 0.05; about two CPU minutes on one core of this machine (docs/metrics.md, Embedding signals)."""


class ScoringConfig(ConfigGroup):
    """What is computed and in which batches."""

    metrics: tuple[str, ...] = Field(
        default=(*DEFAULT_METRICS, *DEFAULT_EMBEDDING_METRICS, *DEFAULT_FEEDBACK_METRICS),
        min_length=1,
        description="Metric names, e.g. recall@5; user_feedback:* publishes every feedback name of the day.",
    )
    batch_size: int = Field(default=5000, ge=1, le=1_000_000, description="Traces per scoring task.")
    sample_rate: Annotated[float, Field(gt=0.0, le=1.0)] | Literal["auto"] = Field(
        default=1.0,
        description="Share of traces the judge metrics score, chosen by trace_id; auto: per language, as many as the "
        "sample_* targets need (docs/judge.md).",
    )
    sample_half_width: float = Field(
        default=0.05, gt=0.0, le=0.5, description="sample_rate = auto: each language's mean known to +- this (95%)."
    )
    sample_detect_drop: float | None = Field(
        default=None, gt=0.0, le=1.0, description="sample_rate = auto: instead, a drop of this size found with power."
    )
    sample_power: float = Field(
        default=0.8, gt=0.5, lt=1.0, description="sample_rate = auto: power of finding sample_detect_drop."
    )
    sample_min_per_segment: int = Field(
        default=30, ge=1, description="sample_rate = auto: at least this many traces per language (or all of them)."
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
    embedding_sample: str = Field(
        default="auto",
        description="Traces the embedding signals score, chosen by trace_id as the judge's sample: auto "
        f"({AUTO_EMBEDDING_TRACES:,} a day), all, a number of traces a day (e.g. 5000) or a share (e.g. 0.05).",
    )

    prices: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="USD per million input_per_million/output_per_million tokens by model, for cost_usd: added to "
        "(or replacing entries of) the built-in table.",
    )

    refusal_phrases: tuple[str, ...] = Field(
        default=(),
        description="The application's own fallback sentences (e.g. the one its system prompt prescribes): an answer "
        "holding one is a refusal for the refusal metric, compared by words after the lexicon's normalisation. A JSON "
        "array of strings, or one phrase per line.",
    )

    feedback_labels: dict[str, float] = Field(
        default_factory=dict,
        description="Feedback categories read as values in [0, 1] by user_feedback/tool_evaluation (e.g. "
        '{"great": 1, "meh": 0.5}): added to (or replacing entries of) the built-in table.',
    )
    feedback_scales: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="Feedback names whose values are on another scale than [0, 1], as [low, high] (e.g. "
        '{"rating": [1, 10]}): added to the built-in scales (stars: [1, 5]).',
    )

    @field_validator("metrics", "step_against", mode="before")
    @classmethod
    def _split_lists(cls, value: Any) -> Any:
        return split_list(value)

    @field_validator("step_against")
    @classmethod
    def _once_each(cls, value: tuple[StepAgainst, ...]) -> tuple[StepAgainst, ...]:
        return tuple(dict.fromkeys(value))

    @field_validator("refusal_phrases", mode="before")
    @classmethod
    def _phrase_list(cls, value: Any) -> Any:
        """Phrases hold commas, so text is a JSON array or one phrase per line, never comma-separated."""
        if not isinstance(value, str):
            return value
        if value.lstrip().startswith("["):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f"refusal_phrases must be a JSON array of strings: {exc}") from None
        return [line for line in value.splitlines() if line.strip()]

    @field_validator("refusal_phrases")
    @classmethod
    def _usable_phrases(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for phrase in value:
            if not phrase_form(phrase):
                raise ValueError(f"refusal phrase {phrase!r} holds no word to match")
        return tuple(dict.fromkeys(phrase.strip() for phrase in value))

    @field_validator("embedding_sample", mode="before")
    @classmethod
    def _valid_embedding_sample(cls, value: Any) -> str:
        if isinstance(value, bool):
            raise ValueError(f"embedding_sample must be auto, all, a number of traces a day or a share, got {value!r}")
        return _embedding_sample(value)

    @property
    def auto_sample(self) -> bool:
        """Whether the judge's sample is sized per language (``sample_rate = "auto"``: tasks/judge/sample_size.py)."""
        return self.sample_rate == "auto"

    def embedding_rate(self, day_traces: int) -> float:
        """The share of a day of ``day_traces`` traces that the embedding signals score (1.0: every trace)."""
        sample = self.embedding_sample
        if sample == "all":
            return 1.0
        if "." in sample:
            return float(sample)
        target = AUTO_EMBEDDING_TRACES if sample == "auto" else int(sample)
        return 1.0 if day_traces <= target else target / day_traces

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            return tuple(request.name for request in parse_metrics(value))
        except RagpulseError as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("feedback_labels")
    @classmethod
    def _valid_feedback_labels(cls, value: dict[str, float]) -> dict[str, float]:
        for label, number in value.items():
            if not label.strip() or not (math.isfinite(number) and 0.0 <= number <= 1.0):
                raise ValueError(f"feedback label {label!r} must map to a value in [0, 1], got {number!r}")
        return value

    @field_validator("feedback_scales")
    @classmethod
    def _valid_feedback_scales(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for name, (low, high) in value.items():
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ValueError(f"feedback scale {name!r} must be [low, high] with low < high, got {[low, high]}")
        return value

    @field_validator("prices", mode="before")
    @classmethod
    def _valid_prices(cls, value: Any) -> Any:
        """Each model's two prices, named in the error: pydantic's own would lose which model was wrong."""
        if not isinstance(value, Mapping):
            return value  # pydantic says it is no mapping
        return {str(model).strip().lower(): _price(str(model), price) for model, price in value.items()}

    def price_table(self) -> dict[str, TokenPrice]:
        """The built-in prices (ragpulse.metrics.prices) with this run's added or replacing them."""
        return merged_prices({model: TokenPrice(**price) for model, price in self.prices.items()})


_PRICE_FIELDS = ("input_per_million", "output_per_million")


def _price(model: str, price: Any) -> dict[str, float]:
    if not model.strip():
        raise ValueError("a model name must not be empty")
    if not isinstance(price, Mapping) or set(price) != set(_PRICE_FIELDS):
        raise ValueError(f"{model!r} must give exactly input_per_million and output_per_million, got {price!r}")
    checked = {}
    for field in _PRICE_FIELDS:
        amount = price[field]
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not math.isfinite(amount) or amount < 0:
            raise ValueError(f"{model!r}: {field} must be a number of USD >= 0, got {amount!r}")
        checked[field] = float(amount)
    return checked


def _embedding_sample(value: Any) -> str:
    """``embedding_sample`` as its canonical text: auto, all, a whole number of traces a day, or a share in (0, 1]."""
    text = str(value).strip().lower()
    if text in ("auto", "all"):
        return text
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if math.isfinite(number) and number > 0:
        if "." not in text and "e" not in text:  # a count of traces a day
            return str(int(number))
        if number <= 1:
            return repr(number)
    raise ValueError(
        f"embedding_sample must be auto, all, a whole number of traces a day (e.g. 5000) or a share in (0, 1] "
        f"(e.g. 0.05), got {value!r}"
    )
