"""The output group of the run configuration: the warehouse, and the work dir of task cache and staged batches."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationInfo, field_serializer, field_validator

from ragpulse.tasks.core.config_base import ENV_PREFIX, STORAGE_KEY_HINT, ConfigGroup, no_password, required_text
from ragpulse.tasks.core.redaction import redact_url

__all__ = ["OutputConfig"]


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
