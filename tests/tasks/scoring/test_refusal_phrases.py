"""The setting refusal_phrases (the application's own fallback sentences for the refusal metric): read from TOML, the
environment or an option (a JSON array or one phrase per line, since phrases hold commas), checked before any work,
and part of the configuration hash and the scoring cache key only where refusal is scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragpulse.tasks.config import RunConfig, ScoringConfig, SourceConfig, load_config
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.types import BatchRef
from ragpulse.tasks.scoring.tasks import _score_key

OWN = ("I'm sorry, I can only help with questions about your account.", "恐れ入りますが、その件にはお答えできません。")


def test_phrases_load_from_toml_keeping_their_commas(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ragpulse.toml").write_text(
        "[ragpulse.scoring]\nrefusal_phrases = " + json.dumps(list(OWN), ensure_ascii=False) + "\n", encoding="utf-8"
    )
    assert load_config(source="s3://b/t").scoring.refusal_phrases == OWN


@pytest.mark.parametrize(
    "text",
    [json.dumps(list(OWN), ensure_ascii=False), "\n".join(OWN), f"  {OWN[0]}\n\n{OWN[1]}  \n{OWN[0]}\n"],
)
def test_phrases_as_text_are_a_json_array_or_one_per_line(
    text: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As an option or an environment variable gives them: stripped, blank lines and repeats dropped."""
    monkeypatch.chdir(tmp_path)
    assert load_config(None, source="s3://b/t", refusal_phrases=text).scoring.refusal_phrases == OWN
    monkeypatch.setenv("RAGPULSE_REFUSAL_PHRASES", text)
    assert load_config(source="s3://b/t").scoring.refusal_phrases == OWN


@pytest.mark.parametrize(
    ("phrases", "message"),
    [
        ('["unclosed', "refusal_phrases must be a JSON array of strings"),
        (["I don't know.", "..."], "refusal phrase '...' holds no word to match"),
        ('[{"phrase": 1}]', "refusal_phrases: Input should be a valid string"),
    ],
)
def test_a_bad_phrase_is_a_one_line_error_naming_the_setting(phrases: Any, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, source="s3://b/t", refusal_phrases=phrases)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def _fingerprint(**scoring: Any) -> str:
    return RunConfig(source=SourceConfig(url="s3://b/t"), scoring=ScoringConfig(**scoring)).fingerprint()


def test_phrases_enter_the_configuration_hash_only_with_refusal() -> None:
    refused, latency = {"metrics": ("refusal", "latency_ms")}, {"metrics": ("latency_ms",)}
    assert _fingerprint(**refused) == _fingerprint(**refused, refusal_phrases=())  # defaults add nothing
    assert _fingerprint(**refused) != _fingerprint(**refused, refusal_phrases=OWN)
    assert _fingerprint(**refused, refusal_phrases=OWN) == _fingerprint(**refused, refusal_phrases=OWN[::-1])
    assert _fingerprint(**latency) == _fingerprint(**latency, refusal_phrases=OWN)


def _key(metric_names: list[str], phrases: Any) -> str:
    batch = BatchRef(url="file:///staged/b.parquet", content_hash="c0ffee", n_rows=10)
    params = {"batch": batch, "metric_names": metric_names, "refusal_phrases": phrases}
    return _score_key(None, params)  # type: ignore[arg-type]  # the key reads only the parameters


def test_changed_phrases_re_score_refusal_and_nothing_else() -> None:
    assert _key(["refusal"], None) == _key(["refusal"], [])
    assert _key(["refusal"], list(OWN)) != _key(["refusal"], None)
    assert _key(["refusal"], list(OWN)) != _key(["refusal"], list(OWN[:1]))
    assert _key(["latency_ms"], list(OWN)) == _key(["latency_ms"], None)
