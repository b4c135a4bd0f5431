"""Retry policy shared by the I/O tasks: only transient storage errors are retried."""

from __future__ import annotations

from typing import Any

from tasks.errors import StorageError

__all__ = ["only_transient"]


def only_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry StorageError, never a bad record or a bad setting."""
    try:
        state.result()
    except StorageError:
        return True
    except Exception:
        return False
    return False
