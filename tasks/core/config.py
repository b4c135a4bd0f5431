"""Run configuration from (lowest to highest precedence) defaults, a TOML file, ``RAGPULSE_*`` env vars
and explicit arguments. Secrets are never part of it: storage credentials come from the usual
AWS/GCP environment variables or profiles that fsspec's backends read themselves."""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ragpulse.metrics import DEFAULT_METRICS, parse_metrics
from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.errors import ConfigError
from ragpulse.tasks.core.storage import reject_credentials
from ragpulse.tasks.ingest.adapters import CANONICAL_FORMAT, parse_options

__all__ = ["CONFIG_ENV", "RunSettings", "load_settings"]

CONFIG_ENV = "RAGPULSE_CONFIG"
DEFAULT_CONFIG_FILE = "ragpulse.toml"


class RunSettings(BaseSettings):
    """Everything that configures a run. Field names match CLI options and ``RAGPULSE_<NAME>`` env vars."""

    model_config = SettingsConfigDict(env_prefix="RAGPULSE_", extra="forbid", frozen=True)

    source: str | None = Field(default=None, description="Root URL of the dt=YYYY-MM-DD trace partitions.")
    warehouse: str = Field(default="duckdb:///ragpulse.duckdb", description="Where score tables are published.")
    work_dir: str = Field(default=".ragpulse", description="Task cache (Prefect results) and staged batches.")
    metrics: Annotated[tuple[str, ...], NoDecode] = Field(
        default=DEFAULT_METRICS, description="Metric names, e.g. precision@5."
    )
    batch_size: int = Field(default=5000, ge=1, le=1_000_000, description="Traces per scoring task.")
    max_workers: int = Field(default=4, ge=1, le=256, description="Threads of the thread-pool task runner.")
    task_runner: Literal["thread", "dask"] = "thread"
    dask_address: str | None = Field(default=None, description="Existing Dask scheduler; default a LocalCluster.")
    max_failure_rate: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        description="Largest share of failed scores per metric before a publish is refused.",
    )
    input_suite: str | None = Field(default=None, description="Your own GX suite file for traces (JSON).")
    output_suite: str | None = Field(default=None, description="Your own GX suite file for the score table (JSON).")
    max_question_chars: int = Field(default=8_000, ge=1)
    max_answer_chars: int = Field(default=32_000, ge=1)
    max_contexts: int = Field(default=200, ge=0)
    max_context_chars: int = Field(default=100_000, ge=1)
    sample_rate: float = Field(
        default=1.0, gt=0.0, le=1.0, description="Share of traces the judge metrics score, chosen by trace_id."
    )
    judge_config: str | None = Field(
        default=None, description="TOML/JSON file of judge options: aspects, custom llm_judges, weights, models."
    )
    storage_options: dict[str, Any] = Field(
        default_factory=dict, description="Extra fsspec options for the source, e.g. endpoint_url for MinIO."
    )
    trace_format: Literal["ragpulse", "openinference", "otel-genai", "langfuse", "langsmith"] = Field(
        default=CANONICAL_FORMAT, description="What the source holds: canonical traces or a tracing tool's export."
    )
    format_options: dict[str, Any] = Field(
        default_factory=dict, description="Where an adapter finds question, answer and document fields."
    )
    partitioning: Literal["dt", "event-time"] = Field(
        default="dt", description="dt=YYYY-MM-DD folders, or select the day by each trace's event time."
    )
    late_arrival_hours: float = Field(
        default=6.0, ge=0.0, le=168.0, description="event-time: how long after the day files may still arrive."
    )

    @field_validator("metrics", mode="before")
    @classmethod
    def _split_metrics(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            return tuple(request.name for request in parse_metrics(value))
        except RagpulseError as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("storage_options")
    @classmethod
    def _no_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        return reject_credentials(value, "storage_options")

    @model_validator(mode="after")
    def _known_format_options(self) -> RunSettings:
        try:
            parse_options(self.trace_format, self.format_options)
        except RagpulseError as exc:
            raise ValueError(str(exc)) from exc
        return self

    def fingerprint(self) -> str:
        """Hash of what can change scores: metric names and versions, the judge's sample rate (it decides which
        traces get judge scores), and for an adapter format the format and its options (they decide which
        question, answer and contexts a trace gets). Defaults add nothing, so older hashes stay valid."""
        versions: list[Any] = sorted((request.name, request.version) for request in parse_metrics(self.metrics))
        if self.sample_rate != 1.0:
            versions.append(["sample_rate", self.sample_rate])
        if self.trace_format != CANONICAL_FORMAT:
            options = parse_options(self.trace_format, self.format_options).to_dict()
            versions.append(["trace_format", self.trace_format, options])
        return hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:16]


def _config_file(path: str | os.PathLike[str] | None) -> Path | None:
    explicit = path or os.environ.get(CONFIG_ENV)
    if explicit:
        candidate = Path(explicit)
        if not candidate.is_file():
            raise ConfigError(f"config file {str(candidate)!r} does not exist")
        return candidate
    default = Path(DEFAULT_CONFIG_FILE)
    return default if default.is_file() else None


def load_settings(config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> RunSettings:
    """Merge the TOML file (``[ragpulse]`` table or top level), env vars and non-None overrides."""
    file_values: dict[str, Any] = {}
    found = _config_file(config_file)
    if found is not None:
        try:
            parsed = tomllib.loads(found.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(found)!r} is not valid TOML: {exc}") from exc
        file_values = parsed.get("ragpulse", parsed)
    explicit = {key: value for key, value in overrides.items() if value is not None}
    try:
        env_only = RunSettings()
        merged = {**file_values, **env_only.model_dump(exclude_unset=True), **explicit}
        return RunSettings.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}" for err in exc.errors()
        )
        origin = f" (config file {found})" if found is not None else ""
        raise ConfigError(f"invalid ragpulse settings{origin}: {problems}") from exc
