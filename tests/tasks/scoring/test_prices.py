"""The setting prices (cost_usd's price table): read from TOML, the environment or an option, checked before any work
with one line naming the model, and part of the configuration hash and the scoring cache key only when it can change
a score."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragpulse.metrics.prices import BUILTIN_PRICES, TokenPrice
from ragpulse.tasks.config import RunConfig, ScoringConfig, SourceConfig, load_config
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.types import BatchRef
from ragpulse.tasks.scoring.tasks import _score_key

OWN = {"my-llama-70b": {"input_per_million": 0.6, "output_per_million": 0.8}}


def test_prices_load_from_toml_and_environment_and_extend_the_builtin_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ragpulse.toml").write_text(
        "[ragpulse.scoring.prices]\n"
        '"My-Llama-70B" = { input_per_million = 0.6, output_per_million = 0.8 }\n'
        '"gpt-4o" = { input_per_million = 2, output_per_million = 9 }\n'
    )
    table = load_config(source="s3://b/t").scoring.price_table()
    assert table["my-llama-70b"] == TokenPrice(0.6, 0.8)  # names are matched case-insensitively
    assert table["gpt-4o"] == TokenPrice(2.0, 9.0)  # overrides the built-in price
    assert table["gpt-4o-mini"] == BUILTIN_PRICES["gpt-4o-mini"]  # the rest stays
    monkeypatch.setenv("RAGPULSE_PRICES", '{"qwen2.5-7b": {"input_per_million": 0.05, "output_per_million": 0.1}}')
    assert load_config(source="s3://b/t").scoring.prices == {
        "qwen2.5-7b": {"input_per_million": 0.05, "output_per_million": 0.1}
    }


@pytest.mark.parametrize(
    ("prices", "message"),
    [
        ({"gpt-x": {"input_per_million": -1, "output_per_million": 2}}, "'gpt-x': input_per_million must be a number"),
        ({"gpt-x": {"input_per_million": 1}}, "'gpt-x' must give exactly input_per_million and output_per_million"),
        ({"gpt-x": {"input_per_million": 1, "output_per_million": "2"}}, "output_per_million must be a number of USD"),
        ({"gpt-x": {"input_per_million": 1, "output_per_million": float("nan")}}, "got nan"),
        ({"gpt-x": {"input_per_million": True, "output_per_million": 1}}, "got True"),
        ({" ": {"input_per_million": 1, "output_per_million": 1}}, "a model name must not be empty"),
        ("gpt-x=1", "prices: Input should be a valid dictionary"),
    ],
)
def test_a_bad_price_is_a_one_line_error_naming_the_setting_and_model(prices: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, source="s3://b/t", prices=prices)
    assert "prices: " in str(caught.value) and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_bad_price_from_the_environment_names_its_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGPULSE_PRICES", '{"gpt-x": {"input_per_million": -2, "output_per_million": 1}}')
    with pytest.raises(ConfigError, match=r"RAGPULSE_PRICES: Value error, 'gpt-x': input_per_million"):
        load_config(source="s3://b/t")
    monkeypatch.setenv("RAGPULSE_PRICES", "{not json")
    with pytest.raises(ConfigError, match="RAGPULSE_PRICES must be a JSON object"):
        load_config(source="s3://b/t")


def _fingerprint(**scoring: Any) -> str:
    return RunConfig(source=SourceConfig(url="s3://b/t"), scoring=ScoringConfig(**scoring)).fingerprint()


def test_prices_enter_the_configuration_hash_only_with_cost_usd() -> None:
    costed, latency = {"metrics": ("cost_usd", "latency_ms")}, {"metrics": ("latency_ms",)}
    assert _fingerprint(**costed) == _fingerprint(**costed, prices={})  # defaults add nothing
    assert _fingerprint(**costed) != _fingerprint(**costed, prices=OWN)
    assert _fingerprint(**latency) == _fingerprint(**latency, prices=OWN)


def _key(metric_names: list[str], prices: Any) -> str:
    batch = BatchRef(url="file:///staged/b.parquet", content_hash="c0ffee", n_rows=10)
    params = {"batch": batch, "metric_names": metric_names, "prices": prices}
    return _score_key(None, params)  # type: ignore[arg-type]  # the key reads only the parameters


def test_a_changed_price_re_scores_cost_usd_and_nothing_else() -> None:
    cheaper = {"my-llama-70b": {"input_per_million": 0.5, "output_per_million": 0.8}}
    assert _key(["cost_usd"], None) == _key(["cost_usd"], {})
    assert _key(["cost_usd"], OWN) != _key(["cost_usd"], None)
    assert _key(["cost_usd"], OWN) != _key(["cost_usd"], cheaper)
    assert _key(["latency_ms"], OWN) == _key(["latency_ms"], None)
