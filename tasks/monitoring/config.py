"""The monitoring groups of the run configuration: how drift is judged, and where alerts go."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from ragpulse.metrics.drift import DriftThresholds
from ragpulse.tasks.core.config_base import ConfigGroup, split_list

__all__ = ["AlertConfig", "DriftConfig"]

_DRIFT_DEFAULTS = DriftThresholds()


class DriftConfig(ConfigGroup):
    """How drift is judged against the baseline of previous partitions."""

    flat_renames: ClassVar[Mapping[str, str]] = {
        "confidence": "drift_confidence",
        "min_samples": "drift_min_samples",
        "estimator": "drift_estimator",
    }

    baseline_partitions: int = Field(default=7, ge=1, le=366, description="Previous partitions in the baseline.")
    min_baseline_partitions: int = Field(
        default=_DRIFT_DEFAULTS.min_baseline_partitions,
        ge=1,
        description="Fewer baseline partitions: insufficient data.",
    )
    min_samples: int = Field(
        default=_DRIFT_DEFAULTS.min_samples, ge=2, description="Fewer scores on either side: insufficient data."
    )
    min_delta: float = Field(
        default=_DRIFT_DEFAULTS.min_delta, ge=0, le=1, description="Smallest mean change that alerts."
    )
    confidence: float = Field(
        default=_DRIFT_DEFAULTS.confidence, gt=0.5, lt=1, description="Level of intervals and tests."
    )
    max_failure_rate_increase: float = Field(
        default=_DRIFT_DEFAULTS.max_failure_rate_increase, ge=0, le=1, description="Failure-rate rise that alerts."
    )
    max_coverage_drop: float = Field(
        default=_DRIFT_DEFAULTS.max_coverage_drop, ge=0, le=1, description="Coverage drop that alerts."
    )
    segment_key: str | None = Field(
        default=None,
        description="Metadata key whose values get drift checks of their own, e.g. metadata.app; or language, topic.",
    )
    max_segments: int = Field(default=20, ge=1, le=1000, description="Largest segments of the day compared.")
    lower_is_better: tuple[str, ...] = Field(
        default=(), description="Metrics where a higher score is worse (custom judges); built-in ones are known."
    )
    estimator: Literal["raw", "ppi"] = Field(
        default="raw",
        description="Compare the judge's raw means, or (ppi) the calibrated human means of `ragpulse calibrate`.",
    )

    question_drift: bool = Field(
        default=True, description="Test whether the day's questions moved from the baseline's (input drift)."
    )
    question_sample: int = Field(
        default=500, ge=10, le=2000, description="Questions sampled per side and segment for the input drift test."
    )
    question_permutations: int = Field(
        default=500, ge=100, le=10000, description="Relabellings behind the input drift test's p-value."
    )
    question_min_mmd: float = Field(
        default=0.0, ge=0, description="Smallest MMD^2 of the question embeddings that alerts (0: significance only)."
    )

    @field_validator("lower_is_better", mode="before")
    @classmethod
    def _split_metrics(cls, value: Any) -> Any:
        return split_list(value)

    def thresholds(self) -> DriftThresholds:
        """The statistical thresholds among these settings; the others (resamples, bootstrap limit) at defaults."""
        shared = set(DriftThresholds.__dataclass_fields__) & set(type(self).model_fields)
        return DriftThresholds(**self.model_dump(include=shared))


class AlertConfig(ConfigGroup):
    """Where alerts go. The webhook URL is a secret: ``RAGPULSE_ALERT_WEBHOOK_URL`` or a Secret block, never here."""

    flat_prefix: ClassVar[str] = "alert_"

    webhook_block: str | None = Field(
        default=None, description="Prefect Secret block holding the webhook URL; else $RAGPULSE_ALERT_WEBHOOK_URL."
    )
    webhook_format: Literal["slack", "json"] = Field(
        default="slack", description="slack: Slack-compatible {text, blocks}; json: ragpulse's own document."
    )
    emit_events: bool = Field(default=True, description="Emit a Prefect event per alert, for Automations.")
    max_attempts: int = Field(default=4, ge=1, le=20, description="Webhook attempts before giving up.")
    timeout_seconds: float = Field(default=10.0, gt=0, description="Timeout of one webhook attempt.")
    backoff_seconds: float = Field(default=1.0, ge=0, description="First retry delay; doubles per attempt.")
    report_url: str | None = Field(default=None, description="Link to a report, put in every message.")
