"""Human labels of traces, read from object storage like the traces themselves (docs/calibration.md).

A labels file is JSON lines (``.jsonl``, ``.jsonl.gz``) or CSV (``.csv``, ``.csv.gz``) with one label per line:

    trace_id, metric, value        required: the trace, the metric it labels, and the human's value
    partition_date                 the trace's date (YYYY-MM-DD); without it the trace id is looked up nearby
    labeller, labelled_at          who labelled it, and when (ISO 8601)

``value`` is a number in [0, 1] (a grade scaled to the metric's range) or yes/no/true/false for a binary metric.
An empty value is a trace not labelled yet (a sample being worked through) and is skipped; anything else that does
not fit is rejected with the file, line, field and reason, and never stops the read.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import hashlib
import io
import json
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.storage import filesystem, redact_url, storage_errors

__all__ = ["LABELS_SCHEMA", "LabelSet", "RejectedLabel", "labels_key", "read_labels"]

LABELS_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("trace_id", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("labeller", pa.string()),
        ("labelled_at", pa.timestamp("us", tz="UTC")),
        ("source_file", pa.string()),
        ("source_line", pa.int64()),
    ]
)
_SUFFIXES = (".jsonl", ".jsonl.gz", ".csv", ".csv.gz")
_BINARY = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}
_RAW_CHARS = 500


@dataclass(frozen=True)
class RejectedLabel:
    """A line that is not a label: where it is, which field, why, and the line itself (cut)."""

    source_file: str
    line: int
    field: str
    reason: str
    raw: str


@dataclass(frozen=True)
class LabelSet:
    """The labels read, the lines rejected, and how many lines were not labelled yet."""

    rows: pa.Table
    rejected: list[RejectedLabel] = field(default_factory=list)
    unlabelled: int = 0
    files: int = 0

    def with_rows_of(self, other: LabelSet) -> LabelSet:
        """These labels and ``other``'s (a labels file's and the traces' feedback's), with this set's counts."""
        return LabelSet(pa.concat_tables([self.rows, other.rows]), self.rejected, self.unlabelled, self.files)


def read_labels(url: str, storage_options: Mapping[str, Any] | None = None) -> LabelSet:
    """Every label in the file at ``url``, or in the labels files anywhere under the folder ``url``."""
    fs, path = filesystem(url, storage_options)
    shown = redact_url(url)
    with storage_errors(url):
        fs.invalidate_cache()
        if fs.isfile(path):
            files = [path]
        elif fs.isdir(path):
            files = sorted(p for p in fs.find(path) if p.endswith(_SUFFIXES))
        else:
            raise ConfigError(f"no labels at {shown}: neither a file nor a folder")
        if not files:
            raise ConfigError(f"no labels files (*.jsonl, *.csv, optionally .gz) under {shown}")
        rows: list[dict[str, Any]] = []
        rejected: list[RejectedLabel] = []
        unlabelled = 0
        for name in files:
            if not name.endswith(_SUFFIXES):
                raise ConfigError(f"labels file {name} is neither JSON lines nor CSV (*.jsonl, *.csv, optionally .gz)")
            source = fs.unstrip_protocol(name) if "file" not in fs.protocol else name
            data = fs.cat_file(name)
            for line, raw, record in _records(name, data):
                label = _label(record, source, line, raw, rejected)
                if label is None:
                    continue
                if label["value"] is None:
                    unlabelled += 1
                    continue
                rows.append(label)
    return LabelSet(pa.Table.from_pylist(rows, schema=LABELS_SCHEMA), rejected, unlabelled, len(files))


def _records(name: str, data: bytes) -> Iterator[tuple[int, str, dict[str, Any] | str]]:
    """``(line, raw text, record or the reason it is none)`` of each non-empty line."""
    text = (gzip.decompress(data) if name.endswith(".gz") else data).decode("utf-8-sig", errors="replace")
    if posixpath.basename(name).removesuffix(".gz").endswith(".csv"):
        reader = csv.DictReader(io.StringIO(text, newline=""))
        for record in reader:
            yield reader.line_num, json.dumps(record, ensure_ascii=False), record
        return
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            yield number, raw, f"invalid JSON: {exc.msg}"
            continue
        yield number, raw, record if isinstance(record, dict) else "not a JSON object"


def _label(
    record: dict[str, Any] | str, source: str, line: int, raw: str, rejected: list[RejectedLabel]
) -> dict[str, Any] | None:
    """The label of one record (``value`` None when not labelled yet), or None after rejecting it."""

    def reject(field_name: str, reason: str) -> None:
        rejected.append(RejectedLabel(source, line, field_name, reason, raw[:_RAW_CHARS]))

    if isinstance(record, str):
        reject("<record>", record)
        return None
    texts: dict[str, str] = {}
    for name in ("trace_id", "metric"):
        value = record.get(name)
        if not isinstance(value, str | int) or isinstance(value, bool) or not str(value).strip():
            reject(name, "missing or empty")
            return None
        texts[name] = str(value).strip()
    value, problem = _value(record.get("value"))
    if problem:
        reject("value", problem)
        return None
    day = record.get("partition_date")
    try:
        partition_date = dt.date.fromisoformat(str(day)) if day not in (None, "") else None
    except ValueError:
        reject("partition_date", f"not a date (YYYY-MM-DD): {str(day)[:40]!r}")
        return None
    stamp = record.get("labelled_at")
    try:
        labelled_at = dt.datetime.fromisoformat(str(stamp)) if stamp not in (None, "") else None
    except ValueError:
        reject("labelled_at", f"not an ISO 8601 time: {str(stamp)[:40]!r}")
        return None
    if labelled_at is not None and labelled_at.tzinfo is None:
        labelled_at = labelled_at.replace(tzinfo=dt.UTC)
    labeller = record.get("labeller")
    return {
        "partition_date": partition_date,
        **texts,
        "value": value,
        "labeller": str(labeller) if labeller not in (None, "") else None,
        "labelled_at": labelled_at,
        "source_file": source,
        "source_line": line,
    }


def _value(raw: object) -> tuple[float | None, str | None]:
    """The label's number, None for a line not labelled yet, or the reason it is no label."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None, None
    if isinstance(raw, bool):
        return float(raw), None
    if isinstance(raw, str) and raw.strip().lower() in _BINARY:
        return _BINARY[raw.strip().lower()], None
    try:
        number = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None, f"not a number in [0, 1] nor yes/no: {str(raw)[:40]!r}"
    if not 0.0 <= number <= 1.0:
        return None, f"{number:g} is outside [0, 1]; scale grades to the metric's range"
    return number, None


def labels_key(labels: Iterable[tuple[dt.date, str, str, float]]) -> str:
    """A digest of labels, ``(partition date, trace id, metric, value)`` each, in any order: a calibration on other
    labels has another key."""
    ordered = sorted(labels, key=lambda item: (str(item[0]), item[1], item[2], item[3]))
    return hashlib.sha256(json.dumps(ordered, default=str).encode()).hexdigest()[:16]
