"""The topics group of the run configuration: whether topics run, how they are fit, when they are refit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import Field, model_validator

from ragpulse.tasks.core.config_base import ConfigGroup
from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL

__all__ = ["TopicsConfig"]


class TopicsConfig(ConfigGroup):
    """Topics of the questions (docs/topics.md): fit on the baseline window, a new day assigned to them."""

    flat_prefix: ClassVar[str] = "topics_"
    flat_renames: ClassVar[Mapping[str, str]] = {"refit": "refit_topics"}

    enabled: bool = Field(default=True, description="Assign each day's questions to topics, with share drift.")
    refit: bool = Field(default=False, description="Fit the topics anew on this run's baseline window.")
    refit_after_days: int = Field(
        default=28, ge=0, description="Refit when the stored topics are older than this many days; 0: only on ask."
    )
    baseline_partitions: int = Field(default=7, ge=1, le=366, description="Previous partitions the topics are fit on.")
    min_topics: int = Field(default=2, ge=2, le=100, description="Fewest topics a fit considers.")
    max_topics: int = Field(default=12, ge=2, le=100, description="Most topics a fit considers.")
    min_topic_size: int = Field(
        default=10, ge=2, description="Smaller clusters are not topics; a candidate this large is ready to be one."
    )
    min_fit_questions: int = Field(default=50, ge=4, description="Fewer baseline questions: no topics are fit.")
    max_fit_questions: int = Field(
        default=2000, ge=10, le=100_000, description="Baseline questions a fit embeds (a deterministic sample)."
    )
    max_day_questions: int = Field(
        default=2000, ge=100, description="Questions of a day assigned (a deterministic sample beyond that)."
    )
    distance_quantile: float = Field(
        default=0.95, gt=0.5, le=1.0, description="A topic's radius: this quantile of its members' distances."
    )
    min_share_delta: float = Field(
        default=0.03, ge=0.0, le=1.0, description="Smallest change of a topic's share of traffic that alerts."
    )
    embedding_model: str = Field(default=DEFAULT_EMBEDDING_MODEL, description="Encoder of the questions.")
    seed: int = Field(default=0, ge=0, description="Seed of the clustering and of the baseline sample.")

    @model_validator(mode="after")
    def _topics_range(self) -> TopicsConfig:
        if self.min_topics > self.max_topics:
            raise ValueError(f"min_topics ({self.min_topics}) exceeds max_topics ({self.max_topics})")
        return self
