"""What every group of the run configuration shares: the base class with its flat names, and the checks that several
groups apply to their values (no password in a URL, no blank location, comma-separated lists).

Each room declares its own group (``tasks/<room>/config.py``) on this base; ``tasks/config.py`` assembles them into
the one run configuration."""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.redaction import carries_secret, redact_url

__all__ = [
    "ENV_PREFIX",
    "STORAGE_KEY_HINT",
    "ConfigGroup",
    "no_password",
    "required_text",
    "split_list",
    "value_from_text",
]

ENV_PREFIX = "RAGPULSE_"
#: Where storage credentials go instead of a URL.
STORAGE_KEY_HINT = "use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile"


class ConfigGroup(BaseModel):
    """A group of settings. ``flat_prefix`` and ``flat_renames`` give each field its flat name: the same for the CLI
    option (``--batch-size``), the environment variable (``RAGPULSE_BATCH_SIZE``) and the TOML key (``batch_size``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    flat_prefix: ClassVar[str] = ""
    flat_renames: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def flat_name(cls, field: str) -> str:
        return cls.flat_renames.get(field, cls.flat_prefix + field)

    @classmethod
    def env_name(cls, field: str) -> str:
        return ENV_PREFIX + cls.flat_name(field).upper()


def no_password(value: str, instead: str) -> str:
    """Refuse a URL that carries a password (userinfo, a credential query parameter, however encoded): settings are
    stamped on runs rows and sent to Prefect as flow parameters."""
    if carries_secret(value):
        raise ValueError(f"must not carry a password or token ({redact_url(value)}); {instead}")
    return value


def required_text(value: Any, env: str) -> Any:
    """Refuse an empty or blank value with the usual cause: ``prefect deploy`` fills ``{{ $VAR }}`` with '' when
    the variable is unset, and the run would otherwise start and fail late, or write into the worker's cwd."""
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"must not be empty (a deployment gets '' when {env} was unset where `prefect deploy` ran)")
    return value


def split_list(value: Any) -> Any:
    """Comma-separated names, as options and environment variables give lists."""
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    return value


def value_from_text(annotation: Any, text: str, where: str) -> Any:
    """A setting of type ``annotation`` given as text (an environment variable, an option): JSON for mappings, the
    rest left to pydantic. ``where`` names the origin in the error."""
    if typing.get_origin(annotation) is dict:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{where} must be a JSON object: {exc}") from None
    return text
