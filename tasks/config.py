"""The run configuration: one pydantic model in small groups, written out once.

The CLI builds it from (lowest to highest precedence) defaults, a TOML file, ``RAGPULSE_*`` environment variables
and command-line options; every flow takes its groups as parameters; deployments fill them in ``prefect.yaml``.
Flows take groups rather than one model because Prefect merges a run's parameter overrides shallowly: overriding
``scoring`` replaces that group only, not the whole configuration. Constraints are ``Literal`` types and ``Field``
bounds where they fit, so that Prefect's UI can check them too.

Each setting also has a *flat name*, the same for the CLI option (``--batch-size``), the environment variable
(``RAGPULSE_BATCH_SIZE``) and the TOML key (``batch_size``); ``SETTINGS`` maps flat names to groups and fields.
Secrets are never part of it: storage credentials come from the environment or profiles that fsspec's backends
read themselves, the judge key from ``OPENAI_API_KEY``/``RAGPULSE_JUDGE_API_KEY`` or a Secret block.

Each group that a room reads is declared in that room (``tasks/<room>/config.py``: ``SourceConfig`` in ingest,
``JudgeConfig`` in judge, ...), so that a room reads its settings without importing the rooms above it; this module
declares the two groups only flows read (``output``, ``runner``), assembles them all into ``RunConfig`` and loads it.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_serializer, field_validator
from pydantic.fields import FieldInfo

from ragpulse.metrics import parse_metrics
from ragpulse.metrics.operations import COST_USD
from ragpulse.metrics.refusal import SPEC as REFUSAL
from ragpulse.metrics.registry import STEP_FAMILIES
from ragpulse.tasks.calibration.config import CalibrationConfig
from ragpulse.tasks.core.config_base import (
    ENV_PREFIX,
    STORAGE_KEY_HINT,
    ConfigGroup,
    no_password,
    required_text,
    value_from_text,
)
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.redaction import redact_url
from ragpulse.tasks.ingest.adapters import CANONICAL_FORMAT, parse_options
from ragpulse.tasks.ingest.config import SourceConfig, TraceFormat
from ragpulse.tasks.judge.config import API_KEY_ENV, EXTRA_HEADERS_ENV, JUDGE_ENV_PREFIX, JUDGE_KEY_HINT, JudgeConfig
from ragpulse.tasks.monitoring.config import AlertConfig, DriftConfig
from ragpulse.tasks.quality.config import QualityConfig
from ragpulse.tasks.scoring.config import ScoringConfig
from ragpulse.tasks.topics.config import TopicsConfig

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG_FILE",
    "ENV_PREFIX",
    "GROUPS",
    "JUDGE_KEY_HINT",
    "NO_SOURCE",
    "OTHER_VARIABLES",
    "PARTITION_GROUPS",
    "SETTINGS",
    "AlertConfig",
    "CalibrationConfig",
    "ConfigGroup",
    "DriftConfig",
    "JudgeConfig",
    "OutputConfig",
    "PartitionGroups",
    "QualityConfig",
    "RunConfig",
    "RunGroups",
    "RunnerConfig",
    "ScoringConfig",
    "Setting",
    "SourceConfig",
    "TopicsConfig",
    "TraceFormat",
    "check_variables",
    "from_text",
    "load_config",
    "load_group",
]

CONFIG_ENV = "RAGPULSE_CONFIG"
DEFAULT_CONFIG_FILE = "ragpulse.toml"
NO_SOURCE = "no trace source: pass --source, set RAGPULSE_SOURCE or `source` in ragpulse.toml"
_G = typing.TypeVar("_G", bound="ConfigGroup")


class OutputConfig(ConfigGroup):
    """Where results go: the score tables, and the work dir of task cache and staged batches."""

    warehouse: str = Field(default="duckdb:///ragpulse.duckdb", min_length=1, description="Warehouse URL.")
    work_dir: str = Field(
        default=".ragpulse", min_length=1, description="Task cache and staged batches; s3:// shares them."
    )
    republish: bool = Field(
        default=False,
        description="Validate and publish even when the warehouse already holds this run's identical rows.",
    )

    @field_validator("warehouse", "work_dir", mode="before")
    @classmethod
    def _location_given(cls, value: Any, info: ValidationInfo) -> Any:
        return required_text(value, ENV_PREFIX + str(info.field_name).upper())

    @field_validator("work_dir")
    @classmethod
    def _work_dir_without_password(cls, value: str) -> str:
        return no_password(value, STORAGE_KEY_HINT)

    @field_serializer("warehouse", when_used="json")
    def _warehouse_shown(self, value: str) -> str:
        """A PostgreSQL URL may carry a password for a run in this process; JSON never does. Prefect stores flow
        parameters as this JSON (``Flow.serialize_parameters``), and runs rows stamp it, while the flow in this
        process keeps the object itself. A deployment must not rely on it: ``secret://<block>`` or PGPASSWORD."""
        return redact_url(value)


class RunnerConfig(ConfigGroup):
    """Where a partition's scoring tasks run."""

    flat_renames: ClassVar[Mapping[str, str]] = {"kind": "task_runner"}

    kind: Literal["thread", "dask"] = Field(default="thread", description="thread pool, or dask beyond one machine.")
    max_workers: int = Field(default=4, ge=1, le=256, description="Parallel scoring tasks (threads or Dask workers).")
    dask_address: str | None = Field(default=None, description="Existing Dask scheduler; default a LocalCluster.")


class PartitionGroups(typing.TypedDict):
    """The groups that shape one partition's evaluation, by flow parameter name."""

    source: SourceConfig
    scoring: ScoringConfig
    judge: JudgeConfig
    quality: QualityConfig
    output: OutputConfig
    runner: RunnerConfig


class RunGroups(PartitionGroups):
    """Every group, by flow parameter name."""

    drift: DriftConfig
    calibration: CalibrationConfig
    alerts: AlertConfig
    topics: TopicsConfig


class RunConfig(BaseModel):
    """Everything that configures a run, group by group. Only ``source`` has no default."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    source: SourceConfig
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    quality: QualityConfig = Field(default_factory=QualityConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    drift: DriftConfig = Field(default_factory=DriftConfig)
    calibration: CalibrationConfig = Field(default_factory=CalibrationConfig)
    alerts: AlertConfig = Field(default_factory=AlertConfig)
    topics: TopicsConfig = Field(default_factory=TopicsConfig)

    def groups(self) -> RunGroups:
        """Every group, as keyword arguments of ``monitor`` and ``backfill`` (typed: a flow's parameters)."""
        return RunGroups(
            **self.partition_groups(), drift=self.drift, calibration=self.calibration, alerts=self.alerts,
            topics=self.topics,
        )  # fmt: skip

    def partition_groups(self) -> PartitionGroups:
        """The groups of ``PARTITION_GROUPS``, as keyword arguments of ``evaluate_partition``."""
        return PartitionGroups(
            source=self.source, scoring=self.scoring, judge=self.judge, quality=self.quality, output=self.output,
            runner=self.runner,
        )  # fmt: skip

    def relative_paths(self) -> dict[str, str]:
        """The settings that name a local file or folder by a relative path, as ``group.field``: their meaning
        depends on the working directory, which for a worker's flow run is a temporary folder."""
        found = {}
        for group, field in _PATH_SETTINGS:
            value = getattr(getattr(self, group), field)
            local = _local_path(value) if value else None
            if local is not None and not os.path.isabs(local[1]):
                found[f"{group}.{field}"] = value
        return found

    def with_absolute_paths(self, base: Path) -> RunConfig:
        """This configuration with every relative local path resolved against ``base`` (what it means here)."""
        updates: dict[str, dict[str, str]] = {}
        for name, value in self.relative_paths().items():
            group, field = name.split(".")
            prefix, path = _local_path(value) or ("", value)
            updates.setdefault(group, {})[field] = prefix + str((base / path).absolute())
        return self.model_copy(
            update={group: getattr(self, group).model_copy(update=fields) for group, fields in updates.items()}
        )

    def fingerprint(self) -> str:
        """Hash of what can change scores: metric names and versions, the judge's sample rate (it decides which
        traces get judge scores), what retrieval steps are scored against (when a metric is scored per step), the
        run's own model prices (when ``cost_usd`` is scored), the application's fallback phrases (when ``refusal``
        is scored), and
        for an adapter format the format and its options (they decide which question, answer and contexts a trace
        gets). Defaults add nothing, so older hashes stay valid."""
        requests = parse_metrics(self.scoring.metrics)
        versions: list[Any] = sorted((request.name, request.version) for request in requests)
        if self.scoring.auto_sample:
            scoring = self.scoring
            target = [scoring.sample_half_width, scoring.sample_detect_drop, scoring.sample_power]
            versions.append(["sample_rate", "auto", *target, scoring.sample_min_per_segment])
        elif self.scoring.sample_rate != 1.0:
            versions.append(["sample_rate", self.scoring.sample_rate])
        steps = any(request.family in STEP_FAMILIES for request in requests)
        if steps and self.scoring.step_against != ScoringConfig.model_fields["step_against"].default:
            versions.append(["step_against", list(self.scoring.step_against)])
        if self.scoring.prices and any(request.family == COST_USD.name for request in requests):
            versions.append(["prices", self.scoring.prices])
        if self.scoring.refusal_phrases and any(request.family == REFUSAL.name for request in requests):
            versions.append(["refusal_phrases", sorted(self.scoring.refusal_phrases)])
        if self.source.format != CANONICAL_FORMAT:
            options = parse_options(self.source.format, self.source.format_options).to_dict()
            versions.append(["trace_format", self.source.format, options])
        return hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:16]


#: Settings that may name a local file or folder.
_PATH_SETTINGS = (
    ("source", "url"), ("output", "warehouse"), ("output", "work_dir"), ("judge", "options_file"),
    ("quality", "input_suite"), ("quality", "output_suite"), ("calibration", "labels"),
)  # fmt: skip
_LOCAL_PREFIXES = ("duckdb:///", "file://")


def _local_path(value: str) -> tuple[str, str] | None:
    """``(prefix, path)`` of a value on the local filesystem (``duckdb:///x.duckdb`` is the path ``x.duckdb``);
    None for object storage, databases and secrets."""
    for prefix in _LOCAL_PREFIXES:
        if value.startswith(prefix):
            return prefix, value.removeprefix(prefix)
    return None if "://" in value else ("", value)


#: The groups that shape one partition's evaluation (``evaluate_partition`` takes these; drift and alerts come after).
PARTITION_GROUPS = tuple(PartitionGroups.__annotations__)

#: The groups of RunConfig by field name, in flow-parameter order.
GROUPS: dict[str, type[ConfigGroup]] = {name: field.annotation for name, field in RunConfig.model_fields.items()}  # type: ignore[misc]


class Setting(typing.NamedTuple):
    """One setting: its flat name and where it lives in RunConfig."""

    flat: str
    group: str
    field: str

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.flat.upper()

    @property
    def option(self) -> str:
        return "--" + self.flat.replace("_", "-")

    @property
    def info(self) -> FieldInfo:
        """The field's declaration: type, default, bounds and description."""
        return GROUPS[self.group].model_fields[self.field]


def _settings() -> dict[str, Setting]:
    found: dict[str, Setting] = {}
    for group, model in GROUPS.items():
        for field in model.model_fields:
            setting = Setting(model.flat_name(field), group, field)
            if setting.flat in found:  # a programming error, caught by the first import in any test
                raise RuntimeError(f"flat setting name {setting.flat!r} used twice")
            found[setting.flat] = setting
    return found


#: Every setting by flat name.
SETTINGS: dict[str, Setting] = _settings()


def from_text(setting: Setting, text: str, where: str) -> Any:
    """A setting given as text (an environment variable, an option): JSON for mappings, the rest pydantic parses.
    ``where`` names the origin in the error."""
    return value_from_text(setting.info.annotation, text, where)


def _config_file(path: str | os.PathLike[str] | None) -> Path | None:
    explicit = path or os.environ.get(CONFIG_ENV)
    if explicit:
        candidate = Path(explicit)
        if not candidate.is_file():
            raise ConfigError(f"config file {str(candidate)!r} does not exist")
        return candidate
    default = Path(DEFAULT_CONFIG_FILE)
    return default if default.is_file() else None


def _file_values(found: Path) -> dict[tuple[str, str], Any]:
    """The ``[ragpulse]`` table (or the top level): flat keys, or one table per group (``[ragpulse.drift]``)."""
    try:
        parsed = tomllib.loads(found.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {str(found)!r} is not valid TOML: {exc}") from exc
    table = parsed.get("ragpulse", parsed)
    values: dict[tuple[str, str], Any] = {}
    for key, value in table.items():
        if key in GROUPS and isinstance(value, dict):
            unknown = sorted(set(value) - set(GROUPS[key].model_fields))
            if unknown:
                raise ConfigError(f"config file {str(found)!r}: unknown setting(s) in [{key}]: {', '.join(unknown)}")
            values.update(((key, field), item) for field, item in value.items())
        elif key in SETTINGS:
            values[SETTINGS[key].group, SETTINGS[key].field] = value
        else:
            raise ConfigError(f"config file {str(found)!r}: unknown setting {key!r} (see `ragpulse settings`)")
    return values


class _Merged(typing.NamedTuple):
    grouped: dict[str, dict[str, Any]]
    found: Path | None
    from_env: set[tuple[str, str]]
    """The settings whose value came from a ``RAGPULSE_*`` variable: an error names the variable."""


def _merged(config_file: str | os.PathLike[str] | None, overrides: Mapping[str, Any]) -> _Merged:
    """Raw values by group: file < environment < non-None overrides (flat names)."""
    unknown = sorted(set(overrides) - set(SETTINGS))
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(unknown)}")
    found = _config_file(config_file)
    values = _file_values(found) if found is not None else {}
    from_env = set()
    for setting in SETTINGS.values():
        raw = os.environ.get(setting.env)
        if raw:  # an empty variable is unset, never an empty URL or path
            values[setting.group, setting.field] = from_text(setting, raw, setting.env)
            from_env.add((setting.group, setting.field))
    for flat, value in overrides.items():
        if value is not None:
            values[SETTINGS[flat].group, SETTINGS[flat].field] = value
            from_env.discard((SETTINGS[flat].group, SETTINGS[flat].field))
    grouped: dict[str, dict[str, Any]] = {}
    for (group, field), value in values.items():
        grouped.setdefault(group, {})[field] = value
    return _Merged(grouped, found, from_env)


#: ``RAGPULSE_*`` variables that are no setting: the config file, secrets, process tuning (tasks/embeddings), and the
#: deployment recipes' own (infra/), which a worker's environment may well carry.
OTHER_VARIABLES = frozenset({
    CONFIG_ENV, API_KEY_ENV, EXTRA_HEADERS_ENV, "RAGPULSE_ALERT_WEBHOOK_URL", "RAGPULSE_TORCH_THREADS",
    "RAGPULSE_CACHE_DIR", "RAGPULSE_EMBEDDING_CACHE_MB",
    "RAGPULSE_IMAGE_TAG", "RAGPULSE_WORK_POOL", "RAGPULSE_WORK_POOL_TYPE", "RAGPULSE_BASE_JOB_TEMPLATE",
    "RAGPULSE_GLOBAL_JUDGE_RPM", "RAGPULSE_GLOBAL_JUDGE_TPM", "RAGPULSE_BUCKET", "RAGPULSE_WORKER_LIMIT",
})  # fmt: skip


def check_variables(environ: Mapping[str, str] | None = None) -> None:
    """Refuse a misspelt ``RAGPULSE_*`` variable, naming the one meant: nothing reads it, so ``RAGPULSE_BATCHSIZE``
    or ``RAGPULSE_JUDGE_TIMEOUT`` would change nothing, silently. A ``RAGPULSE_JUDGE_*`` name is the judge's, so any
    unknown one is refused; elsewhere only a near miss of a setting (a team's own ``RAGPULSE_*`` names are theirs)."""
    environ = os.environ if environ is None else environ
    known = {setting.env for setting in SETTINGS.values()} | OTHER_VARIABLES
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in known:
            continue
        judge = name.startswith(JUDGE_ENV_PREFIX)
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8 if not judge else 0.6)
        if close or judge:
            hint = f"; did you mean {close[0]}?" if close else " (see `ragpulse settings`)"
            raise ConfigError(f"unknown {'judge ' if judge else ''}setting {name}{hint}")


def _no_source(error: Any) -> bool:
    return error["type"] == "missing" and tuple(error["loc"]) in (("source",), ("source", "url"))


def _one_line(errors: list[Any], merged: _Merged) -> ConfigError:
    """Pydantic's errors as one line naming each setting by its flat name, or by its variable where the value came
    from the environment (the variable is what the user has to find and fix)."""
    problems = []
    for error in errors:
        if _no_source(error):
            problems.append(NO_SOURCE)
            continue
        loc = [str(part) for part in error["loc"]]
        if len(loc) >= 2 and loc[0] in GROUPS and loc[1] in GROUPS[loc[0]].model_fields:
            group = GROUPS[loc[0]]
            name = group.env_name(loc[1]) if (loc[0], loc[1]) in merged.from_env else group.flat_name(loc[1])
        else:
            name = ".".join(loc) or "settings"
        problems.append(f"{name}: {error['msg']}")
    origin = f" (config file {merged.found})" if merged.found is not None else ""
    return ConfigError(f"invalid ragpulse settings{origin}: {'; '.join(problems)}")


def load_config(config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> RunConfig:
    """The run configuration from defaults, the TOML file, ``RAGPULSE_*`` variables and non-None ``overrides``
    (flat names). Raises ConfigError (one line, naming the setting) on anything invalid or a missing source."""
    merged = _merged(config_file, overrides)
    try:
        return RunConfig.model_validate(merged.grouped)
    except ValidationError as exc:
        errors = exc.errors()
    if all(_no_source(error) for error in errors):
        raise ConfigError(NO_SOURCE)
    raise _one_line(errors, merged)


def load_group(group: type[_G], config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> _G:
    """One group alone (e.g. the warehouse for ``ragpulse report``), from the same sources as ``load_config``."""
    name = next(name for name, model in GROUPS.items() if model is group)
    merged = _merged(config_file, overrides)
    try:
        return group.model_validate(merged.grouped.get(name, {}))
    except ValidationError as exc:
        raise _one_line([{**error, "loc": (name, *error["loc"])} for error in exc.errors()], merged) from None
