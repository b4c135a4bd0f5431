"""The monitoring groups of the run configuration: how drift is judged, and where alerts go."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ragpulse.metrics.aspect_critique import BUILTIN_ASPECTS
from ragpulse.metrics.drift import DriftThresholds
from ragpulse.metrics.errors import RagpulseError
from ragpulse.metrics.registry import MetricRequest
from ragpulse.metrics.thresholds import Direction, valid_statistic
from ragpulse.tasks.core.config_base import ConfigGroup, split_list

__all__ = ["STEP_METRIC_PREFIX", "AlertConfig", "DriftConfig", "ThresholdRule", "higher_is_better"]

STEP_METRIC_PREFIX = "step."
"""Drift of the retrieval steps: ``step.<metric>`` is a turn's mean over its steps scored against their own
queries, so that a hop that degrades shows even while the turn's score, on what the generator received, holds."""

_DRIFT_DEFAULTS = DriftThresholds()


_RULE_SYNTAX = "<metric> [<statistic>] [above|below] <warning>[/<critical>] [per <segment>] [min <n>]"


class ThresholdRule(BaseModel):
    """A level the day's statistic of a metric must not pass (docs/monitoring.md, "Threshold rules"). Written as
    text, ``faithfulness mean below 0.8/0.6 per language min 50`` (``-`` for a level not set:
    ``latency_ms p95 above -/5000``), or as a TOML table with these fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = Field(description="A metric the run scores, e.g. faithfulness, latency_ms, hit_rate@5.")
    statistic: str = Field(default="mean", description="mean, failure_rate, coverage, or a percentile such as p95.")
    direction: Direction | None = Field(
        default=None,
        description="Which side breaches; default below for a mean or percentile of a higher-is-better metric and "
        "for coverage, above otherwise.",
    )
    warning: float | None = Field(default=None, description="Level past which the rule warns.")
    critical: float | None = Field(default=None, description="Level past which the rule is critical.")
    segment: str = Field(
        default="all",
        description="all (the whole day), a segment key (language, topic, metadata.<key>: every value of it) or "
        "one segment (language=ja).",
    )
    min_samples: int = Field(default=30, ge=1, description="Fewer scores: insufficient data, never an alert.")

    @classmethod
    def parse(cls, text: str) -> ThresholdRule:
        """A rule from its text form (``_RULE_SYNTAX``)."""
        tokens = text.split()
        if not tokens:
            raise ValueError(f"empty threshold rule; write {_RULE_SYNTAX}")
        fields: dict[str, Any] = {"metric": tokens.pop(0)}
        if tokens and (valid_statistic(tokens[0]) or tokens[0][:1] == "p"):
            fields["statistic"] = tokens.pop(0)  # one that is not valid is named by the model's check
        if tokens and tokens[0] in ("above", "below"):
            fields["direction"] = tokens.pop(0)
        if not tokens:
            raise ValueError(f"threshold rule {text!r} sets no level; write {_RULE_SYNTAX}")
        levels = tokens.pop(0).split("/")
        if len(levels) > 2:
            raise ValueError(f"threshold rule {text!r}: levels are <warning>[/<critical>]")
        for name, level in zip(("warning", "critical"), levels, strict=False):
            if level != "-":
                fields[name] = _level(level, text)
        while tokens:
            word = tokens.pop(0)
            if word not in ("per", "min") or not tokens:
                raise ValueError(f"threshold rule {text!r}: unexpected {word!r}; write {_RULE_SYNTAX}")
            fields["segment" if word == "per" else "min_samples"] = tokens.pop(0)
        try:
            return cls(**fields)
        except ValidationError as exc:  # one line naming the rule as written, and its part
            error = exc.errors()[0]
            part = f"{error['loc'][0]}: " if error["loc"] else ""
            raise ValueError(f"{part}{error['msg'].removeprefix('Value error, ')} (in {text!r})") from None

    @model_validator(mode="after")
    def _check(self) -> ThresholdRule:
        try:
            MetricRequest.parse(self.metric)
        except RagpulseError as exc:
            raise ValueError(f"threshold rule on {self.metric!r}: {exc}") from None
        if not valid_statistic(self.statistic):
            raise ValueError(
                f"threshold rule on {self.metric}: statistic {self.statistic!r} is not mean, failure_rate, coverage "
                "or a percentile p<q> with 0 < q < 100"
            )
        if self.warning is None and self.critical is None:
            raise ValueError(f"threshold rule on {self.metric} sets neither a warning nor a critical level")
        if self.segment != "all" and (not self.segment.strip() or self.segment.startswith("=")):
            raise ValueError(f"threshold rule on {self.metric}: segment {self.segment!r} names no key")
        return self

    def resolved(self, lower_is_better: bool) -> ThresholdRule:
        """The rule with its direction given (from the statistic and whether the metric's lower values are the
        better ones), its levels checked against it: a critical level must lie past the warning level."""
        direction = self.direction or _default_direction(self.statistic, lower_is_better)
        warning, critical = self.warning, self.critical
        if (
            warning is not None
            and critical is not None
            and (critical > warning if direction == "below" else critical < warning)
        ):
            raise ValueError(f"threshold rule {self}: the critical level must lie {direction} the warning level")
        return self.model_copy(update={"direction": direction})

    def __str__(self) -> str:
        """The rule's text form, with every default written out: what ``drift.rule`` and the alerts name."""
        levels = "/".join("-" if level is None else _level_text(level) for level in (self.warning, self.critical))
        direction = f" {self.direction}" if self.direction else ""
        return f"{self.metric} {self.statistic}{direction} {levels} per {self.segment} min {self.min_samples}"


def _level(text: str, rule: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"threshold rule {rule!r}: level {text!r} is not a number (or - for none)") from None


def _level_text(level: float) -> str:
    """``0.8``, ``5000``: short where that loses nothing, else every digit."""
    text = f"{level:g}"
    return text if float(text) == level else repr(level)


def _default_direction(statistic: str, lower_is_better: bool) -> Direction:
    if statistic == "failure_rate":
        return "above"
    if statistic == "coverage":
        return "below"
    return "above" if lower_is_better else "below"


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

    threshold_rules: tuple[ThresholdRule, ...] = Field(
        default=(),
        description=f"Levels a day's statistic of a metric must not pass, ';'-separated: {_RULE_SYNTAX}.",
    )

    @field_validator("lower_is_better", mode="before")
    @classmethod
    def _split_metrics(cls, value: Any) -> Any:
        return split_list(value)

    @field_validator("threshold_rules", mode="before")
    @classmethod
    def _parse_rules(cls, value: Any) -> Any:
        """Rules as text separated by ';' (options, environment), or a list of texts and tables (TOML, JSON)."""
        if isinstance(value, str):
            value = [text for text in value.split(";") if text.strip()]
        if isinstance(value, list | tuple):
            return tuple(ThresholdRule.parse(rule) if isinstance(rule, str) else rule for rule in value)
        return value

    @field_validator("threshold_rules", mode="after")
    @classmethod
    def _direct_rules(cls, rules: tuple[ThresholdRule, ...], info: ValidationInfo) -> tuple[ThresholdRule, ...]:
        """Each rule with its direction (``lower_is_better``, validated before, names custom lower-is-better
        metrics), so that the stored rule says which side breaches."""
        lower = info.data.get("lower_is_better", ())
        return tuple(rule.resolved(not higher_is_better(rule.metric, lower)) for rule in rules)

    def thresholds(self) -> DriftThresholds:
        """The statistical thresholds among these settings; the others (resamples, bootstrap limit) at defaults."""
        shared = set(DriftThresholds.__dataclass_fields__) & set(type(self).model_fields)
        return DriftThresholds(**self.model_dump(include=shared))


def higher_is_better(metric: str, lower_is_better: Collection[str] = ()) -> bool:
    """Whether a higher value of ``metric`` (or of its ``step.`` form) is better: ``lower_is_better`` names custom
    judges where it is not; the built-in families and aspects know their own direction."""
    if metric in lower_is_better:
        return False
    request = MetricRequest.parse(metric.removeprefix(STEP_METRIC_PREFIX))
    if request.family == "aspect_critique" and request.variant is not None and request.variant in BUILTIN_ASPECTS:
        return BUILTIN_ASPECTS[request.variant].higher_is_better
    return request.definition.spec.higher_is_better


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
    reminder_days: int = Field(
        default=7, ge=0, description="Days after its last notice that an alert still open is sent again; 0: never."
    )
