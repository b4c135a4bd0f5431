"""What a model's tokens cost: USD per million input and output tokens, and how a logged model name finds its price.

The built-in table holds list prices (standard tier, no batch or cache discounts) of the chat models of OpenAI,
Anthropic, Google's Gemini API, Mistral, xAI and DeepSeek, taken from LiteLLM's published price list
(:data:`PRICE_SOURCE` names its version and when it was read; ``infra/prices/refresh.py`` regenerates it). Prices
change: a run's own table (``[ragpulse.scoring] prices``, docs/configuration.md) extends or overrides it, and a change
to either re-scores ``cost_usd`` (its cache key holds the table).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ragpulse.metrics._price_list import PRICE_LIST, SOURCE

__all__ = ["BUILTIN_PRICES", "PRICE_SOURCE", "PriceTable", "TokenPrice", "merged_prices", "price_of", "prices_digest"]

PRICE_SOURCE = SOURCE
"""Where the built-in prices come from and when they were read (``cost_usd``'s minor version changes with them)."""


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


BUILTIN_PRICES: PriceTable = _table(PRICE_LIST)

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
