"""The publish task: one partition's publication written to the warehouse in one transaction."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ragpulse.tasks.core.storage import redact_url
from ragpulse.tasks.warehouse.factory import open_warehouse
from ragpulse.tasks.warehouse.protocol import Publication

__all__ = ["publish_partition"]


@task(name="publish-partition", cache_policy=NO_CACHE, persist_result=False)
def publish_partition(warehouse_url: str, publication: Publication) -> int:
    """Publish atomically (replace the partition's rows for these metrics); returns the score rows written."""
    open_warehouse(warehouse_url).publish(publication)
    get_run_logger().info(
        "dt=%s: published %d score rows, %d traces, %d quarantined records and %d validation results to %s",
        publication.partition_date, publication.scores.num_rows, publication.traces.num_rows,
        publication.quarantine.num_rows, publication.validations.num_rows, redact_url(warehouse_url),
    )  # fmt: skip
    return publication.scores.num_rows
