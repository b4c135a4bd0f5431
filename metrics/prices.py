"""What a model's tokens cost: USD per million input and output tokens, and how a logged model name finds its price.

The built-in table holds the list prices of common hosted models as their providers published them (standard tier,
no batch or cache discounts; for models priced by prompt size, the lowest tier). It was read on
:data:`PRICES_READ_ON` from the providers' pricing pages (OpenAI platform.openai.com/docs/pricing, Anthropic
docs.anthropic.com/en/docs/about-claude/pricing, Google ai.google.dev/gemini-api/docs/pricing, Mistral
mistral.ai/pricing). Prices change: a run's own table (``[ragpulse.scoring] prices``, docs/configuration.md) extends
or overrides it, and a change to either re-scores ``cost_usd`` (its cache key holds the table).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["BUILTIN_PRICES", "PRICES_READ_ON", "PriceTable", "TokenPrice", "merged_prices", "price_of", "prices_digest"]

PRICES_READ_ON = "2026-12-05"
"""When the built-in prices were read (``cost_usd``'s minor version changes with the table)."""


@dataclass(frozen=True)
class TokenPrice:
    """USD per million tokens of one model: what it reads (input, prompt) and what it writes (output, completion)."""

    input_per_million: float
    output_per_million: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """USD of one call's tokens.

        >>> TokenPrice(0.15, 0.60).cost(2_000, 500)
        0.0006
        """
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1_000_000


PriceTable = Mapping[str, TokenPrice]
"""Prices by model name, lower case (:func:`price_of` folds a logged name the same way)."""


def _table(rows: dict[str, tuple[float, float]]) -> dict[str, TokenPrice]:
    return {model: TokenPrice(*price) for model, price in rows.items()}


BUILTIN_PRICES: PriceTable = _table(
    {
        # OpenAI
        "gpt-5": (1.25, 10.0),
        "gpt-5-mini": (0.25, 2.0),
        "gpt-5-nano": (0.05, 0.40),
        "gpt-4.1": (2.0, 8.0),
        "gpt-4.1-mini": (0.40, 1.60),
        "gpt-4.1-nano": (0.10, 0.40),
        "gpt-4o": (2.50, 10.0),
        "gpt-4o-mini": (0.15, 0.60),
        "o3": (2.0, 8.0),
        "o3-mini": (1.10, 4.40),
        "o4-mini": (1.10, 4.40),
        "gpt-3.5-turbo": (0.50, 1.50),
        # Anthropic
        "claude-opus-4-1": (15.0, 75.0),
        "claude-opus-4": (15.0, 75.0),
        "claude-sonnet-4-5": (3.0, 15.0),
        "claude-sonnet-4": (3.0, 15.0),
        "claude-3-7-sonnet": (3.0, 15.0),
        "claude-3-5-sonnet": (3.0, 15.0),
        "claude-haiku-4-5": (1.0, 5.0),
        "claude-3-5-haiku": (0.80, 4.0),
        "claude-3-haiku": (0.25, 1.25),
        # Google (Gemini API, prompts up to 200k tokens for 2.5 Pro)
        "gemini-2.5-pro": (1.25, 10.0),
        "gemini-2.5-flash": (0.30, 2.50),
        "gemini-2.5-flash-lite": (0.10, 0.40),
        "gemini-2.0-flash": (0.10, 0.40),
        "gemini-2.0-flash-lite": (0.075, 0.30),
        # Mistral
        "mistral-large": (2.0, 6.0),
        "mistral-medium": (0.40, 2.0),
        "mistral-small": (0.10, 0.30),
        "codestral": (0.30, 0.90),
        "open-mistral-nemo": (0.15, 0.15),
    }
)

# A dated or pinned snapshot of a model: gpt-4o-2024-08-06, claude-3-5-sonnet-20241022, claude-3-5-sonnet@20240620
# (Vertex AI), mistral-large-2411, mistral-large-latest. Only these suffixes are dropped, never a variant's name
# (gpt-4o-mini is its own model, not gpt-4o).
_SNAPSHOT = re.compile(r"[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest)$")


def merged_prices(overrides: Mapping[str, TokenPrice] | None = None) -> dict[str, TokenPrice]:
    """The built-in table with ``overrides`` added or replacing its entries (names folded to lower case)."""
    table = dict(BUILTIN_PRICES)
    table.update({model.strip().lower(): price for model, price in (overrides or {}).items()})
    return table


def price_of(model: str, prices: PriceTable) -> TokenPrice | None:
    """The price of a logged model name: the name itself (lower case), else without its provider prefix (``openai/``,
    ``models/``), else without a snapshot suffix too; None when the table has none of them.

    >>> table = merged_prices()
    >>> price_of("gpt-4o-mini-2024-07-18", table) == table["gpt-4o-mini"], price_of("models/gemini-2.5-flash", table)
    (True, TokenPrice(input_per_million=0.3, output_per_million=2.5))
    >>> price_of("my-finetune", table) is None
    True
    """
    name = model.strip().lower()
    bare = name.rsplit("/", 1)[-1]
    for candidate in (name, bare, _SNAPSHOT.sub("", bare)):
        if candidate in prices:
            return prices[candidate]
    return None


def prices_digest(prices: PriceTable) -> str:
    """A short hash of a price table, for cache keys: a changed price re-scores ``cost_usd``."""
    rows = sorted((model, price.input_per_million, price.output_per_million) for model, price in prices.items())
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]
