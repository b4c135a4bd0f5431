"""The artifact of a partition whose score table failed validation, so the run page says why nothing changed."""

from __future__ import annotations

import datetime as dt

from prefect.artifacts import create_markdown_artifact

from ragpulse.tasks.core.artifacts import artifact_key, md

__all__ = ["rejected_markdown", "report_rejected_scores"]


def rejected_markdown(date: dt.date, run_id: str, failures: list[str]) -> str:
    """The artifact's text: which expectations failed, every value escaped (a failure quotes column values)."""
    items = "\n".join(f"- {md(failure)}" for failure in failures)
    return (
        f"# ragpulse dt={date.isoformat()}: scores not published\n\n"
        f"Run {md(run_id)} produced a score table that failed {len(failures)} expectation(s). Nothing was "
        "published; the partition keeps its previous rows. The results are in the `validations` table.\n\n"
        f"{items}\n"
    )


def report_rejected_scores(date: dt.date, run_id: str, failures: list[str], *, warehouse_url: str) -> None:
    """Markdown artifact for a partition whose score table failed validation and was not published."""
    create_markdown_artifact(
        key=artifact_key("rejected", date, warehouse_url),
        markdown=rejected_markdown(date, run_id, failures),
        description="ragpulse output validation failed",
    )
