"""The run configuration: flat names, precedence (option > environment > TOML > default), grouped and flat TOML,
environment parsing, one-line errors naming the setting, and what the Prefect UI can check from the schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragpulse.metrics import DEFAULT_EMBEDDING_METRICS, DEFAULT_FEEDBACK_METRICS, DEFAULT_METRICS
from ragpulse.tasks.config import (
    GROUPS,
    SETTINGS,
    DriftConfig,
    OutputConfig,
    RunConfig,
    SourceConfig,
    load_config,
    load_group,
)
from ragpulse.tasks.core.exceptions import ConfigError


def test_flat_names_are_unique_and_cover_every_field() -> None:
    fields = {(group, field) for group, model in GROUPS.items() for field in model.model_fields}
    assert {(s.group, s.field) for s in SETTINGS.values()} == fields
    assert SETTINGS["source"].env == "RAGPULSE_SOURCE" and SETTINGS["trace_format"].field == "format"
    assert SETTINGS["judge_model"].option == "--judge-model" and SETTINGS["judge_config"].field == "options_file"


def test_precedence_option_over_environment_over_file_over_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "ragpulse.toml"
    file.write_text('[ragpulse]\nsource = "from-file"\nbatch_size = 10\nwork_dir = "file-work"\n')
    monkeypatch.setenv("RAGPULSE_BATCH_SIZE", "20")
    monkeypatch.setenv("RAGPULSE_WAREHOUSE", "duckdb:///env.duckdb")
    config = load_config(file, warehouse="duckdb:///option.duckdb", metrics=None)
    assert config.source.url == "from-file"
    assert config.scoring.batch_size == 20
    assert config.output.warehouse == "duckdb:///option.duckdb"
    assert config.output.work_dir == "file-work"
    assert config.scoring.metrics == (*DEFAULT_METRICS, *DEFAULT_EMBEDDING_METRICS, *DEFAULT_FEEDBACK_METRICS)


def test_toml_takes_group_tables_and_flat_keys(tmp_path: Path) -> None:
    file = tmp_path / "c.toml"
    file.write_text(
        'segment_key = "metadata.app"\n\n[drift]\nconfidence = 0.9\n\n'
        '[source]\nurl = "s3://b/t"\nstorage_options = {endpoint_url = "http://minio:9000"}\n'
    )
    config = load_config(file)
    assert config.source == SourceConfig(url="s3://b/t", storage_options={"endpoint_url": "http://minio:9000"})
    assert config.drift == DriftConfig(segment_key="metadata.app", confidence=0.9)


def test_environment_values_are_parsed_by_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_SOURCE", "./traces")
    monkeypatch.setenv("RAGPULSE_METRICS", "document_mrr, precision@3")
    monkeypatch.setenv("RAGPULSE_STORAGE_OPTIONS", '{"endpoint_url": "http://127.0.0.1:9000"}')
    monkeypatch.setenv("RAGPULSE_ALERT_EMIT_EVENTS", "false")
    monkeypatch.setenv("RAGPULSE_LOWER_IS_BETTER", "llm_judge:toxicity")
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "")  # empty is unset, never an empty model name
    config = load_config()
    assert config.scoring.metrics == ("document_mrr", "precision@3")
    assert config.source.storage_options == {"endpoint_url": "http://127.0.0.1:9000"}
    assert config.alerts.emit_events is False
    assert config.drift.lower_is_better == ("llm_judge:toxicity",)
    assert config.judge.model is None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"source": "x", "batch_size": 0}, "invalid ragpulse settings: batch_size: Input should be greater"),
        ({"source": "x", "trace_format": "csv"}, "trace_format: Input should be 'ragpulse'"),
        ({"source": "x", "drift_confidence": 0.2}, "drift_confidence: Input should be greater than 0.5"),
        ({"source": "x", "storage_options": {"secret": "s"}}, "storage_options must not carry credentials (secret)"),
        ({"source": "x", "metrics": "ndcg"}, "metrics: Value error, unknown metric 'ndcg'"),
        ({"source": "x", "warehouse": ""}, "warehouse: Value error, must not be empty"),
        ({}, "no trace source: pass --source"),
        ({"source": "x", "sources": "y"}, "unknown setting(s): sources"),
    ],
)
def test_bad_settings_are_one_line_errors_naming_the_setting(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, **values)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_bad_environment_and_file_values_name_their_origin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_FORMAT_OPTIONS", "{not json")
    with pytest.raises(ConfigError, match="RAGPULSE_FORMAT_OPTIONS must be a JSON object"):
        load_config(None, source="x")
    monkeypatch.delenv("RAGPULSE_FORMAT_OPTIONS")
    file = tmp_path / "c.toml"
    file.write_text('source = "x"\n[drift]\nconfidense = 0.9\n')
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) in \[drift\]: confidense"):
        load_config(file)
    file.write_text('source = "x"\nmax_contexts = -1\n')
    with pytest.raises(ConfigError, match=r"\(config file .*c.toml\): max_contexts: Input should be greater"):
        load_config(file)


def test_one_group_loads_without_a_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_WAREHOUSE", "postgresql://db/test")
    assert load_group(OutputConfig) == OutputConfig(warehouse="postgresql://db/test")
    with pytest.raises(ConfigError, match="warehouse: Value error, must not be empty"):
        load_group(OutputConfig, warehouse="")


def test_defaults_and_bounds_are_in_the_json_schema_the_prefect_ui_checks() -> None:
    schema = RunConfig.model_json_schema()
    scoring = schema["$defs"]["ScoringConfig"]["properties"]
    assert scoring["batch_size"] == {**scoring["batch_size"], "minimum": 1, "maximum": 1_000_000, "default": 5000}
    runner = schema["$defs"]["RunnerConfig"]["properties"]["kind"]
    assert runner["enum"] == ["thread", "dask"]
    assert schema["required"] == ["source"]


def test_fingerprint_follows_what_changes_scores_only() -> None:
    base = RunConfig(source=SourceConfig(url="a"))
    assert base.fingerprint() == RunConfig(source=SourceConfig(url="b", partitioning="event-time")).fingerprint()
    changed = [
        RunConfig(source=SourceConfig(url="a"), scoring={"metrics": ["document_mrr"]}),
        RunConfig(source=SourceConfig(url="a"), scoring={"sample_rate": 0.5}),
        RunConfig(source=SourceConfig(url="a", format="langfuse")),
    ]
    assert len({base.fingerprint(), *(config.fingerprint() for config in changed)}) == 4


def test_the_default_language_is_a_bcp47_tag_in_canonical_case(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SourceConfig(url="s3://b/t", language="zh-cn").language == "zh-CN"
    assert SourceConfig(url="s3://b/t").language is None
    monkeypatch.setenv("RAGPULSE_LANGUAGE", "ja")
    monkeypatch.setenv("RAGPULSE_SOURCE", "s3://b/t")
    assert load_config().source.language == "ja"
    with pytest.raises(ValueError, match="BCP 47"):
        SourceConfig(url="s3://b/t", language="en_US")


def test_the_variables_that_are_no_setting_are_the_ones_their_rooms_read() -> None:
    """``OTHER_VARIABLES`` names them as text (importing delivery or the models would slow every command's start):
    a renamed constant must not turn its variable into a "misspelt setting"."""
    from ragpulse.tasks.config import OTHER_VARIABLES
    from ragpulse.tasks.embeddings.models import TORCH_THREADS_ENV
    from ragpulse.tasks.embeddings.store import CACHE_DIR_ENV, CACHE_MB_ENV
    from ragpulse.tasks.monitoring.delivery import WEBHOOK_URL_ENV

    assert {TORCH_THREADS_ENV, WEBHOOK_URL_ENV, CACHE_DIR_ENV, CACHE_MB_ENV} <= OTHER_VARIABLES
