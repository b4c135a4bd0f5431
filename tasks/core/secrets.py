"""Secrets that live in Prefect Secret blocks rather than in configuration."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from ragpulse.tasks.core.exceptions import ConfigError

__all__ = ["secret_text"]


def secret_text(block_name: str, *, used_for: str, holds: str, valid: Callable[[str], bool] = bool) -> str:
    """The string in the Prefect Secret block ``block_name``; ConfigError naming the block and what it is
    ``used_for`` when there is none, or when it does not hold ``holds`` (checked by ``valid``)."""
    from prefect.blocks.system import Secret

    try:
        value = cast("Secret[Any]", Secret.load(block_name)).get()
    except ValueError:
        raise ConfigError(f"no Prefect Secret block named {block_name!r} ({used_for})") from None
    if not isinstance(value, str) or not valid(value):
        raise ConfigError(f"Prefect Secret block {block_name!r} must hold {holds}")
    return value
