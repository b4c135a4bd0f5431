"""The calibration group of the run configuration: the human labels that calibrate the judge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import Field, field_validator

from ragpulse.tasks.core.config_base import ConfigGroup

__all__ = ["CalibrationConfig"]


class CalibrationConfig(ConfigGroup):
    """Human labels that calibrate the judge (docs/calibration.md): a labels file (``labels``) or the traces' own
    human feedback (``labels_from``); without either, nothing is calibrated."""

    flat_renames: ClassVar[Mapping[str, str]] = {
        "window_days": "label_window_days",
        "confidence": "calibration_confidence",
        "min_labels": "calibration_min_labels",
    }

    labels: str | None = Field(
        default=None, description="Labels file or folder (*.jsonl, *.csv); monitor calibrates each day before drift."
    )
    labels_from: str | None = Field(
        default=None,
        description="Labels from the traces' human feedback instead: feedback:<name>=<judge metric>[,...].",
    )
    window_days: int = Field(default=1, ge=1, le=366, description="Days of labels a partition uses, itself last.")
    confidence: float = Field(default=0.95, gt=0.5, lt=1, description="Level of the estimates' intervals.")
    min_labels: int = Field(default=30, ge=2, description="Fewest labelled traces for an estimate.")

    @field_validator("labels_from")
    @classmethod
    def _valid_labels_from(cls, value: str | None) -> str | None:
        if value is not None:
            from ragpulse.tasks.calibration.feedback_labels import parse_labels_from

            parse_labels_from(value)
        return value
