"""The quality group of the run configuration: the gates on traces in and scores out."""

from __future__ import annotations

from pydantic import Field

from ragpulse.tasks.core.config_base import ConfigGroup

__all__ = ["QualityConfig"]


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
