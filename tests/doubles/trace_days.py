"""A day of canonical traces written as a source partition: ``<root>/dt=<day>/traces.jsonl``, UTF-8 as is."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["write_day"]


def write_day(root: Path, day: dt.date | str, records: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``records`` as the JSON lines of ``day``'s partition under ``root``; the file written."""
    partition = root / f"dt={day}"
    partition.mkdir(parents=True, exist_ok=True)
    path = partition / "traces.jsonl"
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
    return path
