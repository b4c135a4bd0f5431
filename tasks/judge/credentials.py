"""The judge's secrets: read from the environment where the calls are made, never part of the run configuration,
never stored (apart from the settings so that only the processes that call the judge load pydantic-settings)."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragpulse.tasks.judge.config import JUDGE_ENV_PREFIX

__all__ = ["JudgeSecrets"]


class JudgeSecrets(BaseSettings):
    """The judge's secrets, read from the environment where the calls are made and never stored: the key
    (``RAGPULSE_JUDGE_API_KEY``; else the config's ``api_key_block``, else ``OPENAI_API_KEY``) and headers sent with
    every call (``RAGPULSE_JUDGE_EXTRA_HEADERS``, JSON: an Azure ``api-key``, a gateway token)."""

    model_config = SettingsConfigDict(env_prefix=JUDGE_ENV_PREFIX, extra="ignore", frozen=True)

    api_key: SecretStr | None = None
    extra_headers: dict[str, SecretStr] = Field(default_factory=dict)
