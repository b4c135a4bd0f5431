"""The judge group of the run configuration: set anywhere a setting is set, and where it is unset, taken from the
environment of the process that runs the flow (a worker's), never from the one that registered the deployment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from ragpulse.tasks.config import SETTINGS, RunConfig, load_config
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.judge.config import JudgeConfig

WORKER = {
    "RAGPULSE_JUDGE_MODEL": "worker-judge",
    "RAGPULSE_JUDGE_TIMEOUT_SECONDS": "12.5",
    "RAGPULSE_JUDGE_PRICES": json.dumps({"worker-judge": {"prompt_per_million": 1, "completion_per_million": 2}}),
}


def test_a_flow_parameter_carries_only_the_settings_given() -> None:
    given = JudgeConfig(model="m", timeout_seconds=5.0)
    assert given.model_dump(mode="json") == {"model": "m", "timeout_seconds": 5.0}
    assert JudgeConfig().model_dump(mode="json") == {}
    # What Prefect stores and hands the run rebuilds the same settings.
    assert JudgeConfig.model_validate(given.model_dump(mode="json")) == given


def test_the_run_environment_fills_what_was_not_given_and_never_overrides_what_was() -> None:
    resolved = JudgeConfig(timeout_seconds=5.0).in_run_environment(WORKER)
    assert resolved.model == "worker-judge" and resolved.timeout_seconds == 5.0
    assert resolved.prices["worker-judge"].completion_per_million == 2
    assert resolved.max_retries == 6  # neither given nor in the environment: the default
    # A deployment's explicit null model (deployments/prefect.yaml) leaves the choice to the worker.
    assert JudgeConfig(model=None).in_run_environment(WORKER).model == "worker-judge"
    # Resolved, every setting counts as given: the runs row stamps all of them.
    assert set(resolved.model_dump()) == set(JudgeConfig.model_fields)


def test_a_bad_value_in_the_run_environment_names_its_variable_and_not_its_value() -> None:
    with pytest.raises(ConfigError) as refused:
        JudgeConfig().in_run_environment({"RAGPULSE_JUDGE_MAX_CONCURRENCY": "0", "RAGPULSE_JUDGE_SEED": "x7q"})
    message = str(refused.value)
    assert message.startswith("invalid judge settings: RAGPULSE_JUDGE_MAX_CONCURRENCY: Input should be")
    assert "RAGPULSE_JUDGE_SEED" in message and "x7q" not in message
    with pytest.raises(ConfigError, match="RAGPULSE_JUDGE_PRICES must be a JSON object"):
        JudgeConfig().in_run_environment({"RAGPULSE_JUDGE_PRICES": "{cheap"})


def test_every_judge_setting_is_a_setting_of_the_run_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = {flat for flat, setting in SETTINGS.items() if setting.group == "judge"}
    assert judge == {JudgeConfig.flat_name(field) for field in JudgeConfig.model_fields}
    assert {SETTINGS[flat].env for flat in judge} >= {"RAGPULSE_JUDGE_TIMEOUT_SECONDS", "RAGPULSE_JUDGE_CACHE_URL"}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGPULSE_JUDGE_MAX_RETRIES", "2")
    config = load_config(source="s3://b/t", judge_rate_limit_name="judge-rpm", judge_supports_n="false")
    assert (config.judge.max_retries, config.judge.rate_limit_name, config.judge.supports_n) == (2, "judge-rpm", False)


def test_the_judge_url_and_cache_carry_no_password() -> None:
    for field in ("base_url", "cache_url"):
        with pytest.raises(ValidationError, match="must not carry a password or token"):
            JudgeConfig(**{field: "https://user:hunter2@proxy.example/v1"})
    with pytest.raises(ValidationError, match="cache_storage_options"):
        JudgeConfig(cache_storage_options={"secret": "hunter2"})


def test_runs_rows_stamp_the_judge_the_run_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    from ragpulse.tasks.planning.run import plan_run

    for name, value in WORKER.items():
        monkeypatch.setenv(name, value)
    groups = {
        "source": {"url": "s3://b/t"},
        "scoring": {"metrics": ["faithfulness"]},
        "output": {"work_dir": str(tmp_path)},
    }
    config = RunConfig.model_validate(groups)
    plan = plan_run(config)
    assert plan.judge.model == "worker-judge" and plan.judge.cache_url == f"{tmp_path}/judge-cache"
    assert plan.stamped["judge"]["model"] == "worker-judge" and plan.stamped["judge"]["timeout_seconds"] == 12.5
    assert plan.stamped["judge"]["judge_model"] == "worker-judge"  # the plan's own entry beside the settings


def test_ragpulse_settings_lists_every_judge_setting() -> None:
    from typer.testing import CliRunner

    from ragpulse.cli import app

    listed = CliRunner().invoke(app, ["settings", "--json"])
    assert listed.exit_code == 0, listed.output
    names = {entry["setting"] for entry in json.loads(listed.stdout)}
    assert {JudgeConfig.flat_name(field) for field in JudgeConfig.model_fields} <= names
