"""The judge's settings: where the judge is, how hard to push it and what it costs, from ``RAGPULSE_JUDGE_*``.

Apart from the HTTP client so that run configuration, planning and publishing can read and hash these settings
without the client's machinery. Secrets stay ``SecretStr``, so they never reach dumps or logs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragpulse.tasks.core.storage import carries_secret, reject_credentials

__all__ = ["DEFAULT_OPENAI_URL", "JudgeSettings", "ModelPrice"]

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"


class ModelPrice(BaseModel):
    """USD per million tokens of one model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_per_million: float = Field(ge=0)
    completion_per_million: float = Field(ge=0)


class JudgeSettings(BaseSettings):
    """How to reach and use the judge; ``RAGPULSE_JUDGE_<NAME>`` env vars (dicts as JSON).

    Judging is enabled when ``model`` is set. The key comes from ``api_key``, else the Prefect Secret
    block ``api_key_block``, else ``OPENAI_API_KEY``; servers of your own may need none.
    """

    model_config = SettingsConfigDict(env_prefix="RAGPULSE_JUDGE_", extra="forbid", frozen=True)

    base_url: str | None = Field(default=None, description="OpenAI-compatible API root; None = OpenAI.")
    model: str | None = Field(default=None, description="Judge model; judging is off while unset.")
    api_key: SecretStr | None = Field(default=None, description="API key; else api_key_block, else OPENAI_API_KEY.")
    api_key_block: str | None = Field(default=None, description="Name of a Prefect Secret block holding the key.")
    extra_headers: dict[str, SecretStr] = Field(
        default_factory=dict, description="Headers sent with every call (Azure api-key, proxy auth...)."
    )
    timeout_seconds: float = Field(default=30.0, gt=0, description="Per HTTP call.")
    max_retries: int = Field(default=6, ge=0, le=20, description="Retries of 429, 5xx, timeouts, connection errors.")
    backoff_base_seconds: float = Field(default=0.5, gt=0, description="First backoff ceiling; doubles per retry.")
    backoff_max_seconds: float = Field(default=30.0, gt=0, description="Largest backoff ceiling.")
    max_retry_after_seconds: float = Field(default=60.0, ge=0, description="Cap on a server's Retry-After.")
    max_concurrency: int = Field(default=16, ge=1, le=1024, description="HTTP calls in flight per process.")
    requests_per_minute: float | None = Field(default=None, gt=0, description="Per process; None = unlimited.")
    tokens_per_minute: float | None = Field(default=None, gt=0, description="Per process; None = unlimited.")
    completion_token_budget: int = Field(
        default=512, ge=1, description="Completion tokens assumed per choice when reserving tokens/min."
    )
    seed: int | None = Field(default=7, description="Sent with every call; None sends none.")
    temperature: float = Field(default=0.0, ge=0, le=2)
    sample_temperature: float | None = Field(
        default=0.3,
        ge=0,
        le=2,
        description="Temperature of n > 1 samples (votes, generations), so they can differ; None = temperature.",
    )
    response_format: Literal["auto", "json_schema", "json_object", "text"] = "auto"
    supports_n: Literal["auto"] | bool = Field(default="auto", description="Whether the server honours n > 1.")
    prices: dict[str, ModelPrice] = Field(default_factory=dict, description="USD per million tokens, by model.")
    cache_url: str | None = Field(default=None, description="fsspec URL of the call cache; None = no cache.")
    cache_storage_options: dict[str, Any] = Field(default_factory=dict, description="fsspec options (no secrets).")
    rate_limit_name: str | None = Field(default=None, description="Prefect global limit: one slot per call.")
    token_rate_limit_name: str | None = Field(
        default=None, description="Prefect global limit: one slot per 1,000 estimated tokens."
    )

    @field_validator("base_url")
    @classmethod
    def _no_credentials_in_url(cls, value: str | None) -> str | None:
        if value is not None and carries_secret(value):
            raise ValueError(
                "base_url must not carry a password or token; put the key in RAGPULSE_JUDGE_API_KEY (or "
                "OPENAI_API_KEY) or in a Prefect Secret block named by RAGPULSE_JUDGE_API_KEY_BLOCK"
            )
        return value.rstrip("/") if value else value

    @field_validator("cache_storage_options")
    @classmethod
    def _no_storage_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        return reject_credentials(value, "cache_storage_options")

    @property
    def enabled(self) -> bool:
        return bool(self.model)

    @property
    def endpoint(self) -> str:
        return self.base_url or DEFAULT_OPENAI_URL

    def with_default_cache(self, work_dir: str) -> JudgeSettings:
        """These settings with ``cache_url`` defaulting to ``<work_dir>/judge-cache`` (an explicit one is kept)."""
        if self.cache_url:
            return self
        return self.model_copy(update={"cache_url": f"{work_dir.rstrip('/')}/judge-cache"})
