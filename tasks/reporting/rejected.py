"""The artifact of a partition whose score table failed validation, so the run page says why nothing changed."""

from __future__ import annotations

import datetime as dt

from prefect.artifacts import create_markdown_artifact

__all__ = ["report_rejected_scores"]


def report_rejected_scores(date: dt.date, run_id: str, failures: list[str]) -> None:
    """Markdown artifact for a partition whose score table failed validation and was not published."""
    items = "\n".join(f"- `{failure}`" for failure in failures)
    create_markdown_artifact(
        key=f"ragpulse-rejected-{date.isoformat()}",
        markdown=(
            f"# ragpulse dt={date.isoformat()}: scores not published\n\n"
            f"Run `{run_id}` produced a score table that failed {len(failures)} expectation(s). Nothing was "
            "published; the partition keeps its previous rows. The results are in the `validations` table.\n\n"
            f"{items}\n"
        ),
        description="ragpulse output validation failed",
    )
