"""What a run checks of its judge before any work: its settings in the run's environment and that an enabled judge
has a key where it will look. Once scoring has started, a missing key would fail every judge call of the day."""

from __future__ import annotations

import os

from pydantic import ValidationError
from pydantic_settings import SettingsError

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.judge.budget import check_budget
from ragpulse.tasks.judge.config import (
    EXTRA_HEADERS_ENV,
    JUDGE_KEY_HINT,
    JudgeConfig,
)
from ragpulse.tasks.judge.credentials import JudgeSecrets

__all__ = ["check_judge"]


def check_judge(judge: JudgeConfig) -> None:
    """``judge`` (already resolved in the run's environment) is usable: a USD budget has a price to count in
    (``check_budget``), the secrets in the environment parse, and an enabled judge has a key: in
    ``RAGPULSE_JUDGE_API_KEY``, in its Secret block (which must exist), or, for OpenAI's own API, in
    ``OPENAI_API_KEY``. Raises ConfigError in one line, never with a secret in it."""
    from ragpulse.tasks.core.secrets import secret_text

    check_budget(judge)

    try:
        secrets = JudgeSecrets()
    except (ValidationError, SettingsError):  # the key is any text: only the headers can be malformed
        raise ConfigError(f"invalid {EXTRA_HEADERS_ENV}: must be a JSON object of header names and values") from None
    if not judge.enabled or secrets.api_key is not None:
        return
    if judge.api_key_block:
        secret_text(judge.api_key_block, used_for="judge API key, RAGPULSE_JUDGE_API_KEY_BLOCK", holds="an API key")
    elif judge.base_url is None and not os.environ.get("OPENAI_API_KEY"):
        raise ConfigError(f"no API key for the OpenAI API (judge model {judge.model!r}): {JUDGE_KEY_HINT}")
