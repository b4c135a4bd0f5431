"""The copy of a partition's quarantine that a run leaves in its work dir, for whoever triages bad records (the
warehouse's ``quarantine`` table holds the same rows for SQL)."""

from __future__ import annotations

import dataclasses
import json
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.tasks.core.storage import filesystem, storage_errors
from ragpulse.tasks.core.types import QuarantinedRecord

__all__ = ["write_quarantine_copy"]


def write_quarantine_copy(
    url: str, records: Sequence[QuarantinedRecord], storage_options: Mapping[str, Any] | None = None
) -> None:
    """The partition's quarantine as JSON lines at ``url``, for whoever triages bad records."""
    fs, path = filesystem(url, storage_options)
    lines = "".join(json.dumps(dataclasses.asdict(record)) + "\n" for record in records)
    with storage_errors(url):
        fs.makedirs(posixpath.dirname(path), exist_ok=True)
        fs.pipe_file(path, lines.encode())
