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
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from ragpulse.metrics import DEFAULT_METRICS, parse_metrics
from ragpulse.metrics.drift import DriftThresholds
from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.storage import carries_secret, redact_url, reject_credentials
from ragpulse.tasks.ingest.adapters import CANONICAL_FORMAT, parse_options
from ragpulse.tasks.ingest.language import normalize_language_tag

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG_FILE",
    "ENV_PREFIX",
    "GROUPS",
    "JUDGE_KEY_HINT",
    "NO_SOURCE",
    "PARTITION_GROUPS",
    "SETTINGS",
    "AlertConfig",
    "CalibrationConfig",
    "ConfigGroup",
    "DriftConfig",
    "JudgeConfig",
    "OutputConfig",
    "QualityConfig",
    "RunConfig",
    "RunnerConfig",
    "ScoringConfig",
    "Setting",
    "SourceConfig",
    "TraceFormat",
    "from_text",
    "load_config",
    "load_group",
]

CONFIG_ENV = "RAGPULSE_CONFIG"
DEFAULT_CONFIG_FILE = "ragpulse.toml"
ENV_PREFIX = "RAGPULSE_"
NO_SOURCE = "no trace source: pass --source, set RAGPULSE_SOURCE or `source` in ragpulse.toml"
TraceFormat = Literal["ragpulse", "openinference", "otel-genai", "langfuse", "langsmith"]
_DRIFT_DEFAULTS = DriftThresholds()
_G = typing.TypeVar("_G", bound="ConfigGroup")


class ConfigGroup(BaseModel):
    """A group of settings. ``flat_prefix`` and ``flat_renames`` give each field its flat name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flat_prefix: ClassVar[str] = ""
    flat_renames: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def flat_name(cls, field: str) -> str:
        return cls.flat_renames.get(field, cls.flat_prefix + field)


class SourceConfig(ConfigGroup):
    """Where a day's traces are and how to read them."""

    flat_renames: ClassVar[Mapping[str, str]] = {"url": "source", "format": "trace_format"}

    url: str = Field(min_length=1, description="Root URL of the traces: dt= partitions or an export.")
    storage_options: dict[str, Any] = Field(
        default_factory=dict, description="Extra fsspec options for the source, e.g. endpoint_url for MinIO."
    )
    format: TraceFormat = Field(
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
    language: str | None = Field(
        default=None,
        description="BCP 47 language of traces that give none, e.g. ja; unset: identified from each question.",
    )
    slice_mb: float = Field(
        default=128.0,
        gt=0.0,
        le=1_048_576.0,
        description="MiB of canonical trace files per staging task: JSONL cut at lines, Parquet at row groups.",
    )

    @property
    def slice_bytes(self) -> int:
        """``slice_mb`` in bytes, at least one."""
        return max(1, int(self.slice_mb * 2**20))

    @field_validator("url", mode="before")
    @classmethod
    def _url_given(cls, value: Any) -> Any:
        return _required_text(value, "RAGPULSE_SOURCE")

    @field_validator("url")
    @classmethod
    def _url_without_password(cls, value: str) -> str:
        return _no_password(value, "use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile")

    @field_validator("storage_options")
    @classmethod
    def _no_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        return reject_credentials(value, "storage_options")

    @field_validator("language")
    @classmethod
    def _language_tag(cls, value: str | None) -> str | None:
        return normalize_language_tag(value) if value else None

    @model_validator(mode="after")
    def _known_format_options(self) -> SourceConfig:
        try:
            parse_options(self.format, self.format_options)
        except RagpulseError as exc:
            raise ValueError(str(exc)) from exc
        return self


class ScoringConfig(ConfigGroup):
    """What is computed and in which batches."""

    metrics: tuple[str, ...] = Field(default=DEFAULT_METRICS, min_length=1, description="Metric names, e.g. recall@5.")
    batch_size: int = Field(default=5000, ge=1, le=1_000_000, description="Traces per scoring task.")
    sample_rate: float = Field(
        default=1.0, gt=0.0, le=1.0, description="Share of traces the judge metrics score, chosen by trace_id."
    )
    # Not in fingerprint(): a rescore republishes the same configuration.
    rescore: Literal["failed", "all"] = Field(
        default="failed",
        description="Judge metrics: failed re-asks only failed calls; all re-asks every call, skipping both caches.",
    )

    @field_validator("metrics", mode="before")
    @classmethod
    def _split_metrics(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            return tuple(request.name for request in parse_metrics(value))
        except RagpulseError as exc:
            raise ValueError(str(exc)) from exc


class JudgeConfig(ConfigGroup):
    """The LLM judge; unset fields fall back to ``RAGPULSE_JUDGE_*`` in the environment of the run itself."""

    flat_prefix: ClassVar[str] = "judge_"
    flat_renames: ClassVar[Mapping[str, str]] = {"options_file": "judge_config"}

    model: str | None = Field(default=None, description="Judge model; none: LLM metrics are skipped.")
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint of the judge.")
    options_file: str | None = Field(
        default=None, description="TOML/JSON file of judge options: aspects, custom llm_judges, weights, models."
    )

    @field_validator("base_url")
    @classmethod
    def _url_without_password(cls, value: str | None) -> str | None:
        return _no_password(value, JUDGE_KEY_HINT) if value else value


class QualityConfig(ConfigGroup):
    """The data-quality gates on traces (input suite, size limits) and on scores (output suite, failure rate)."""

    max_failure_rate: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        description="Largest share of failed scores per metric before publishing is refused.",
    )
    input_suite: str | None = Field(default=None, description="Your own GX suite file for traces (JSON).")
    output_suite: str | None = Field(default=None, description="Your own GX suite file for the score table (JSON).")
    max_question_chars: int = Field(default=8_000, ge=1, description="Longest question accepted.")
    max_answer_chars: int = Field(default=32_000, ge=1, description="Longest answer accepted.")
    max_contexts: int = Field(default=200, ge=0, description="Most contexts per trace accepted.")
    max_context_chars: int = Field(default=100_000, ge=1, description="Longest context accepted.")

    def trace_limits(self) -> dict[str, int]:
        """The size bounds of the input suite, as ``TraceLimits`` takes them."""
        return self.model_dump(include={"max_question_chars", "max_answer_chars", "max_contexts", "max_context_chars"})


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
        return _required_text(value, ENV_PREFIX + str(info.field_name).upper())

    @field_validator("work_dir")
    @classmethod
    def _work_dir_without_password(cls, value: str) -> str:
        return _no_password(value, "use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile")

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


class DriftConfig(ConfigGroup):
    """How drift is judged against the baseline of previous partitions."""

    flat_renames: ClassVar[Mapping[str, str]] = {
        "confidence": "drift_confidence",
        "min_samples": "drift_min_samples",
        "estimator": "drift_estimator",
    }

    baseline_partitions: int = Field(default=7, ge=1, le=366, description="Previous partitions in the baseline.")
    min_baseline_partitions: int = Field(
        default=_DRIFT_DEFAULTS.min_baseline_partitions,
        ge=1,
        description="Fewer baseline partitions: insufficient data.",
    )
    min_samples: int = Field(
        default=_DRIFT_DEFAULTS.min_samples, ge=2, description="Fewer scores on either side: insufficient data."
    )
    min_delta: float = Field(
        default=_DRIFT_DEFAULTS.min_delta, ge=0, le=1, description="Smallest mean change that alerts."
    )
    confidence: float = Field(
        default=_DRIFT_DEFAULTS.confidence, gt=0.5, lt=1, description="Level of intervals and tests."
    )
    max_failure_rate_increase: float = Field(
        default=_DRIFT_DEFAULTS.max_failure_rate_increase, ge=0, le=1, description="Failure-rate rise that alerts."
    )
    max_coverage_drop: float = Field(
        default=_DRIFT_DEFAULTS.max_coverage_drop, ge=0, le=1, description="Coverage drop that alerts."
    )
    segment_key: str | None = Field(
        default=None,
        description="Metadata key whose values get drift checks of their own, e.g. metadata.app; or language.",
    )
    max_segments: int = Field(default=20, ge=1, le=1000, description="Largest segments of the day compared.")
    lower_is_better: tuple[str, ...] = Field(
        default=(), description="Metrics where a higher score is worse (custom judges); built-in ones are known."
    )
    estimator: Literal["raw", "ppi"] = Field(
        default="raw",
        description="Compare the judge's raw means, or (ppi) the calibrated human means of `ragpulse calibrate`.",
    )

    @field_validator("lower_is_better", mode="before")
    @classmethod
    def _split_metrics(cls, value: Any) -> Any:
        return _split_list(value)

    def thresholds(self) -> DriftThresholds:
        """The statistical thresholds among these settings; the others (resamples, bootstrap limit) at defaults."""
        shared = set(DriftThresholds.__dataclass_fields__) & set(type(self).model_fields)
        return DriftThresholds(**self.model_dump(include=shared))


class CalibrationConfig(ConfigGroup):
    """Human labels that calibrate the judge (docs/calibration.md); without ``labels``, nothing is calibrated."""

    flat_renames: ClassVar[Mapping[str, str]] = {
        "window_days": "label_window_days",
        "confidence": "calibration_confidence",
        "min_labels": "calibration_min_labels",
    }

    labels: str | None = Field(
        default=None, description="Labels file or folder (*.jsonl, *.csv); monitor calibrates each day before drift."
    )
    window_days: int = Field(default=1, ge=1, le=366, description="Days of labels a partition uses, itself last.")
    confidence: float = Field(default=0.95, gt=0.5, lt=1, description="Level of the estimates' intervals.")
    min_labels: int = Field(default=30, ge=2, description="Fewest labelled traces for an estimate.")


class AlertConfig(ConfigGroup):
    """Where alerts go. The webhook URL is a secret: ``RAGPULSE_ALERT_WEBHOOK_URL`` or a Secret block, never here."""

    flat_prefix: ClassVar[str] = "alert_"

    webhook_block: str | None = Field(
        default=None, description="Prefect Secret block holding the webhook URL; else $RAGPULSE_ALERT_WEBHOOK_URL."
    )
    webhook_format: Literal["slack", "json"] = Field(
        default="slack", description="slack: Slack-compatible {text, blocks}; json: ragpulse's own document."
    )
    emit_events: bool = Field(default=True, description="Emit a Prefect event per alert, for Automations.")
    max_attempts: int = Field(default=4, ge=1, le=20, description="Webhook attempts before giving up.")
    timeout_seconds: float = Field(default=10.0, gt=0, description="Timeout of one webhook attempt.")
    backoff_seconds: float = Field(default=1.0, ge=0, description="First retry delay; doubles per attempt.")
    report_url: str | None = Field(default=None, description="Link to a report, put in every message.")


class RunConfig(BaseModel):
    """Everything that configures a run, group by group. Only ``source`` has no default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: SourceConfig
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    quality: QualityConfig = Field(default_factory=QualityConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    drift: DriftConfig = Field(default_factory=DriftConfig)
    calibration: CalibrationConfig = Field(default_factory=CalibrationConfig)
    alerts: AlertConfig = Field(default_factory=AlertConfig)

    def groups(self, *names: str) -> dict[str, ConfigGroup]:
        """The named groups (all by default) as keyword arguments of a flow."""
        return {name: getattr(self, name) for name in names or GROUPS}

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
        traces get judge scores), and for an adapter format the format and its options (they decide which
        question, answer and contexts a trace gets). Defaults add nothing, so older hashes stay valid."""
        versions: list[Any] = sorted((request.name, request.version) for request in parse_metrics(self.scoring.metrics))
        if self.scoring.sample_rate != 1.0:
            versions.append(["sample_rate", self.scoring.sample_rate])
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
PARTITION_GROUPS = ("source", "scoring", "judge", "quality", "output", "runner")

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


def _split_list(value: Any) -> Any:
    """Comma-separated names, as options and environment variables give lists."""
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    return value


#: Where the judge's key goes instead of its URL.
JUDGE_KEY_HINT = (
    "put the key in RAGPULSE_JUDGE_API_KEY (or OPENAI_API_KEY) or in a Prefect Secret block named by "
    "RAGPULSE_JUDGE_API_KEY_BLOCK"
)


def _no_password(value: str, instead: str) -> str:
    """Refuse a URL that carries a password (userinfo, a credential query parameter, however encoded): settings are
    stamped on runs rows and sent to Prefect as flow parameters."""
    if carries_secret(value):
        raise ValueError(f"must not carry a password or token ({redact_url(value)}); {instead}")
    return value


def _required_text(value: Any, env: str) -> Any:
    """Refuse an empty or blank value with the usual cause: ``prefect deploy`` fills ``{{ $VAR }}`` with '' when
    the variable is unset, and the run would otherwise start and fail late, or write into the worker's cwd."""
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"must not be empty (a deployment gets '' when {env} was unset where `prefect deploy` ran)")
    return value


def from_text(setting: Setting, text: str, where: str) -> Any:
    """A setting given as text (an environment variable, an option): JSON for mappings, the rest pydantic parses.
    ``where`` names the origin in the error."""
    if typing.get_origin(setting.info.annotation) is dict:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{where} must be a JSON object: {exc}") from None
    return text


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


def _merged(config_file: str | os.PathLike[str] | None, overrides: Mapping[str, Any]) -> tuple[dict, Path | None]:
    """Raw values by group: file < environment < non-None overrides (flat names)."""
    unknown = sorted(set(overrides) - set(SETTINGS))
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(unknown)}")
    found = _config_file(config_file)
    values = _file_values(found) if found is not None else {}
    for setting in SETTINGS.values():
        raw = os.environ.get(setting.env)
        if raw:  # an empty variable is unset, never an empty URL or path
            values[setting.group, setting.field] = from_text(setting, raw, setting.env)
    for flat, value in overrides.items():
        if value is not None:
            values[SETTINGS[flat].group, SETTINGS[flat].field] = value
    grouped: dict[str, dict[str, Any]] = {}
    for (group, field), value in values.items():
        grouped.setdefault(group, {})[field] = value
    return grouped, found


def _no_source(error: Any) -> bool:
    return error["type"] == "missing" and tuple(error["loc"]) in (("source",), ("source", "url"))


def _one_line(errors: list[Any], found: Path | None) -> ConfigError:
    """Pydantic's errors as one line naming each setting by its flat name."""
    problems = []
    for error in errors:
        if _no_source(error):
            problems.append(NO_SOURCE)
            continue
        loc = [str(part) for part in error["loc"]]
        if len(loc) >= 2 and loc[0] in GROUPS and loc[1] in GROUPS[loc[0]].model_fields:
            name = GROUPS[loc[0]].flat_name(loc[1])
        else:
            name = ".".join(loc) or "settings"
        problems.append(f"{name}: {error['msg']}")
    origin = f" (config file {found})" if found is not None else ""
    return ConfigError(f"invalid ragpulse settings{origin}: {'; '.join(problems)}")


def load_config(config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> RunConfig:
    """The run configuration from defaults, the TOML file, ``RAGPULSE_*`` variables and non-None ``overrides``
    (flat names). Raises ConfigError (one line, naming the setting) on anything invalid or a missing source."""
    grouped, found = _merged(config_file, overrides)
    try:
        return RunConfig.model_validate(grouped)
    except ValidationError as exc:
        errors = exc.errors()
    if all(_no_source(error) for error in errors):
        raise ConfigError(NO_SOURCE)
    raise _one_line(errors, found)


def load_group(group: type[_G], config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> _G:
    """One group alone (e.g. the warehouse for ``ragpulse report``), from the same sources as ``load_config``."""
    name = next(name for name, model in GROUPS.items() if model is group)
    grouped, found = _merged(config_file, overrides)
    try:
        return group.model_validate(grouped.get(name, {}))
    except ValidationError as exc:
        raise _one_line([{**error, "loc": (name, *error["loc"])} for error in exc.errors()], found) from None
