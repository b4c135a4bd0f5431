"""The setting step_against: a comma-separated list from the environment, TOML or an option, checked before any
work; at its default it leaves the configuration hash as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragpulse.tasks.config import RunConfig, ScoringConfig, SourceConfig, load_config
from ragpulse.tasks.core.exceptions import ConfigError


def _fingerprint(**scoring: object) -> str:
    return RunConfig(source=SourceConfig(url="s3://b/t"), scoring=ScoringConfig(**scoring)).fingerprint()


def test_step_against_loads_as_a_list_from_each_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config(source="s3://b/t").scoring.step_against == ("step_query",)
    monkeypatch.setenv("RAGPULSE_STEP_AGAINST", "question, step_query,question")
    assert load_config(source="s3://b/t").scoring.step_against == ("question", "step_query")
    (tmp_path / "ragpulse.toml").write_text('[ragpulse.scoring]\nstep_against = ["question"]\n')
    monkeypatch.delenv("RAGPULSE_STEP_AGAINST")
    assert load_config(source="s3://b/t").scoring.step_against == ("question",)
    assert load_config(source="s3://b/t", step_against="step_query").scoring.step_against == ("step_query",)


def test_a_wrong_step_against_is_refused_naming_its_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGPULSE_STEP_AGAINST", "sub_query")
    with pytest.raises(ConfigError, match="RAGPULSE_STEP_AGAINST"):
        load_config(source="s3://b/t")
    monkeypatch.setenv("RAGPULSE_STEP_AGAINST", ",")
    with pytest.raises(ConfigError, match="RAGPULSE_STEP_AGAINST"):
        load_config(source="s3://b/t")


def test_step_against_changes_the_hash_only_off_its_default_and_with_a_step_metric() -> None:
    ranking = {"metrics": ("document_mrr", "answer_f1")}
    answers = {"metrics": ("answer_f1",)}
    assert _fingerprint(**ranking) == _fingerprint(**ranking, step_against=("step_query",))
    assert _fingerprint(**ranking) != _fingerprint(**ranking, step_against=("step_query", "question"))
    assert _fingerprint(**answers) == _fingerprint(**answers, step_against=("question",))  # no metric per step
