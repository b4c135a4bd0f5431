"""The judge's group of the run configuration: where the judge is, how hard to push it and what it costs.

Like every group it is set in ragpulse.toml (``[ragpulse.judge]`` or ``judge_*`` keys), by ``RAGPULSE_JUDGE_*``
variables, ``--judge-*`` options and deployment parameters. One thing is particular to it: a setting left unset (or
null) takes the ``RAGPULSE_JUDGE_*`` variable *of the process that runs the flow*, so a worker's environment
configures the judge of every deployment it runs (``in_run_environment``). Only what was set travels as a flow
parameter, so that fallback still has room to apply in the worker.

The key and extra headers are secrets: never part of this group, read from the environment (or a Secret block named
by ``api_key_block``) where the calls are made (``tasks/judge/credentials.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
)

from ragpulse.tasks.core.config_base import ENV_PREFIX, ConfigGroup, no_password, value_from_text
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.redaction import reject_credentials

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_OPENAI_URL",
    "EXTRA_HEADERS_ENV",
    "JUDGE_ENV_PREFIX",
    "JUDGE_KEY_HINT",
    "JudgeConfig",
    "ModelPrice",
]

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
JUDGE_ENV_PREFIX = ENV_PREFIX + "JUDGE_"
API_KEY_ENV = JUDGE_ENV_PREFIX + "API_KEY"
EXTRA_HEADERS_ENV = JUDGE_ENV_PREFIX + "EXTRA_HEADERS"
#: Where the judge's key goes instead of its URL.
JUDGE_KEY_HINT = (
    f"put the key in {API_KEY_ENV} (or OPENAI_API_KEY) or in a Prefect Secret block named by {API_KEY_ENV}_BLOCK"
)


class ModelPrice(BaseModel):
    """USD per million tokens of one model."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    prompt_per_million: float = Field(ge=0)
    completion_per_million: float = Field(ge=0)


class JudgeConfig(ConfigGroup):
    """The LLM judge. Judging is enabled when ``model`` is set; unset settings take ``RAGPULSE_JUDGE_*`` in the
    environment of the run itself."""

    flat_prefix: ClassVar[str] = "judge_"
    flat_renames: ClassVar[Mapping[str, str]] = {"options_file": "judge_config"}

    model: str | None = Field(default=None, description="Judge model; none: LLM metrics are skipped.")
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint of the judge; none: OpenAI.")
    options_file: str | None = Field(
        default=None, description="TOML/JSON file of judge options: aspects, custom llm_judges, weights, models."
    )
    api_key_block: str | None = Field(
        default=None, description="Prefect Secret block holding the key; else $RAGPULSE_JUDGE_API_KEY, $OPENAI_API_KEY."
    )
    timeout_seconds: float = Field(default=30.0, gt=0, description="Timeout of one HTTP call to the judge.")
    max_retries: int = Field(default=6, ge=0, le=20, description="Retries of 429, 5xx, timeouts, connection errors.")
    backoff_base_seconds: float = Field(default=0.5, gt=0, description="First backoff ceiling; doubles per retry.")
    backoff_max_seconds: float = Field(default=30.0, gt=0, description="Largest backoff ceiling.")
    max_retry_after_seconds: float = Field(default=60.0, ge=0, description="Cap on a server's Retry-After.")
    max_concurrency: int = Field(default=16, ge=1, le=1024, description="Judge calls in flight per process.")
    requests_per_minute: float | None = Field(default=None, gt=0, description="Judge calls per minute per process.")
    tokens_per_minute: float | None = Field(default=None, gt=0, description="Judge tokens per minute per process.")
    completion_token_budget: int = Field(
        default=512, ge=1, description="Completion tokens assumed per choice when reserving tokens per minute."
    )
    seed: int | None = Field(default=7, description="Sent with every call; none sends none.")
    temperature: float = Field(default=0.0, ge=0, le=2, description="Temperature of single answers.")
    sample_temperature: float | None = Field(
        default=0.3, ge=0, le=2, description="Temperature of n > 1 samples (votes), so they can differ."
    )
    response_format: Literal["auto", "json_schema", "json_object", "text"] = Field(
        default="auto", description="Structured output asked of the judge; auto falls back as the server allows."
    )
    supports_n: Literal["auto"] | bool = Field(default="auto", description="Whether the server honours n > 1.")
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict, description="USD per million tokens, by model (else the built-in price list)."
    )
    run_budget_usd: float | None = Field(
        default=None, gt=0, description="Most a run (a backfill: all its days) spends on judge calls, USD."
    )
    day_budget_usd: float | None = Field(
        default=None, gt=0, description="Most the runs started on one UTC day spend on judge calls, USD."
    )
    run_budget_tokens: int | None = Field(
        default=None, ge=1, description="Most judge tokens a run uses (for models without a price)."
    )
    day_budget_tokens: int | None = Field(
        default=None, ge=1, description="Most judge tokens the runs started on one UTC day use."
    )
    cache_url: str | None = Field(default=None, description="Call cache (fsspec URL); none: <work_dir>/judge-cache.")
    cache_storage_options: dict[str, Any] = Field(
        default_factory=dict, description="fsspec options of the call cache (no secrets)."
    )
    rate_limit_name: str | None = Field(default=None, description="Prefect global limit: one slot per judge call.")
    token_rate_limit_name: str | None = Field(
        default=None, description="Prefect global limit: one slot per 1,000 estimated judge tokens."
    )

    @field_validator("base_url")
    @classmethod
    def _url_without_password(cls, value: str | None) -> str | None:
        return no_password(value, JUDGE_KEY_HINT).rstrip("/") if value else value

    @field_validator("cache_url")
    @classmethod
    def _cache_without_password(cls, value: str | None) -> str | None:
        return no_password(value, "use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile") if value else value

    @field_validator("cache_storage_options")
    @classmethod
    def _no_storage_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        return reject_credentials(value, "cache_storage_options")

    @model_serializer(mode="wrap")
    def _only_what_was_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dumps hold only the settings given, so a flow parameter leaves the others to the run's environment."""
        dumped: dict[str, Any] = handler(self)
        return {name: value for name, value in dumped.items() if name in self.model_fields_set}

    @property
    def enabled(self) -> bool:
        return bool(self.model)

    @property
    def has_day_budget(self) -> bool:
        return self.day_budget_usd is not None or self.day_budget_tokens is not None

    @property
    def has_budget(self) -> bool:
        """Whether any spend limit is set (``tasks/judge/budget.py``)."""
        return self.has_day_budget or self.run_budget_usd is not None or self.run_budget_tokens is not None

    @property
    def endpoint(self) -> str:
        return self.base_url or DEFAULT_OPENAI_URL

    def in_run_environment(self, environ: Mapping[str, str] | None = None) -> JudgeConfig:
        """These settings with each unset (or null) one taken from ``RAGPULSE_JUDGE_*`` in ``environ`` (this
        process's by default); every setting of the result counts as set. ConfigError names a bad variable."""
        environ = os.environ if environ is None else environ
        given = {name: getattr(self, name) for name in self.model_fields_set if getattr(self, name) is not None}
        values: dict[str, Any] = {}
        for name, info in type(self).model_fields.items():
            raw = environ.get(self.env_name(name))
            if name not in given and raw:
                values[name] = value_from_text(info.annotation, raw, self.env_name(name))
        values.update(given)
        try:
            resolved = type(self).model_validate(values)
        except ValidationError as exc:
            raise _one_line(exc) from None
        # Validated already; built again only so that every setting counts as set (and is dumped).
        return type(self).model_construct(**{name: getattr(resolved, name) for name in type(self).model_fields})

    def with_default_cache(self, work_dir: str) -> JudgeConfig:
        """These settings with ``cache_url`` defaulting to ``<work_dir>/judge-cache`` (an explicit one is kept)."""
        if self.cache_url:
            return self
        return self.model_copy(update={"cache_url": f"{work_dir.rstrip('/')}/judge-cache"})


def _one_line(exc: ValidationError) -> ConfigError:
    """The judge settings' errors as one line naming each variable, never the value given."""
    problems = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        name = JudgeConfig.env_name(field) if field in JudgeConfig.model_fields else field or "settings"
        problems.append(f"{name}: {str(error['msg']).removeprefix('Value error, ')}")
    return ConfigError(f"invalid judge settings: {'; '.join(problems)}")
