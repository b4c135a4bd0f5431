"""The source group of the run configuration: where a day's traces are and how to read them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.config_base import STORAGE_KEY_HINT, ConfigGroup, no_password, required_text
from ragpulse.tasks.core.partitions import DEFAULT_PARTITIONING, Partitioning
from ragpulse.tasks.core.redaction import reject_credentials
from ragpulse.tasks.ingest.adapters import CANONICAL_FORMAT, parse_options
from ragpulse.tasks.ingest.language import normalize_language_tag

__all__ = ["SourceConfig", "TraceFormat"]

TraceFormat = Literal["ragpulse", "openinference", "otel-genai", "langfuse", "langsmith"]


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
    partitioning: Partitioning = Field(
        default=DEFAULT_PARTITIONING, description="dt=YYYY-MM-DD folders, or select the day by each trace's event time."
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
        return required_text(value, "RAGPULSE_SOURCE")

    @field_validator("url")
    @classmethod
    def _url_without_password(cls, value: str) -> str:
        return no_password(value, STORAGE_KEY_HINT)

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
