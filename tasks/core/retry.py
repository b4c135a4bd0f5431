"""Retry policy shared by the I/O tasks: only transient storage errors are retried."""

from __future__ import annotations

from typing import Any

from prefect.tasks import exponential_backoff

from ragpulse.tasks.core.exceptions import StorageError

__all__ = ["IO_RETRIES", "only_transient"]


def only_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry StorageError, never a bad record or a bad setting."""
    try:
        state.result()
    except StorageError:
        return True
    except Exception:
        return False
    return False


IO_RETRIES: dict[str, Any] = {
    "retries": 3,
    "retry_delay_seconds": exponential_backoff(backoff_factor=2),
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": only_transient,
}
"""Task options of every storage-touching task: a few retries, with backoff and jitter, of transient errors only."""
