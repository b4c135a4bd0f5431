"""Drawing traces of a partition for people to label: a seeded random sample, stratified in proportion to the
strata's sizes (by language or a metadata key), written as CSV or JSON lines with the text labellers need and an
empty ``value`` to fill in. ``ragpulse calibrate`` reads the file back as it is (tasks/calibration/labels.py).

Proportional allocation gives every trace about the same chance to be drawn, so the labelled traces stay a random
sample of the partition and the prediction-powered estimate needs no weights (docs/calibration.md).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import posixpath
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from fsspec.implementations.local import LocalFileSystem

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.storage import filesystem, local_write_errors, storage_errors
from ragpulse.tasks.monitoring.comparison import metadata_keys, segment_values
from ragpulse.tasks.warehouse import open_published

__all__ = ["SAMPLE_COLUMNS", "LabelSample", "allocate", "draw_label_sample"]

SAMPLE_COLUMNS = (
    "partition_date", "trace_id", "metric", "value", "labeller", "stratum", "language", "question", "answer",
    "contexts", "source_file", "source_line",
)  # fmt: skip
_LANGUAGE = "language"


@dataclass(frozen=True)
class LabelSample:
    """What was written: traces drawn per stratum (of how many eligible), and the rows (one per trace and metric)."""

    url: str
    drawn: dict[str, int]
    eligible: dict[str, int]
    rows: int


def allocate(sizes: Mapping[str, int], n: int) -> dict[str, int]:
    """``n`` draws shared among strata in proportion to ``sizes`` (largest remainders, ties by name), never more than
    a stratum holds."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    quotas = {name: n * size / total for name, size in sizes.items()}
    shares = {name: math.floor(quota) for name, quota in quotas.items()}
    left = n - sum(shares.values())
    for name in sorted(quotas, key=lambda k: (-(quotas[k] - shares[k]), k))[:left]:
        shares[name] += 1
    return shares


def draw_label_sample(
    warehouse_url: str,
    day: dt.date,
    metrics: Sequence[str],
    n: int,
    out: str,
    *,
    stratify: str | None = None,
    seed: int = 0,
    storage_options: Mapping[str, Any] | None = None,
) -> LabelSample:
    """Draw ``n`` of ``day``'s traces that have an ok score of any of ``metrics``, stratified by ``stratify``
    (``language`` or a metadata key such as ``metadata.app``), and write them to ``out`` (``.csv`` or ``.jsonl``):
    one row per drawn trace and metric it was scored on, with the stored excerpts of its text."""
    if not out.endswith((".csv", ".jsonl")):
        raise ConfigError(f"--out {out!r}: write the sample as .csv or .jsonl")
    if n < 1:
        raise ConfigError(f"the sample needs at least one trace, got {n}")
    warehouse = open_published(warehouse_url)
    scores = warehouse.read(
        "scores", start=day, end=day, metrics=list(metrics), columns=["trace_id", "metric", "status"]
    )
    scored = scores.filter(pc.equal(scores["status"], "ok"))
    metrics_of: dict[str, list[str]] = defaultdict(list)
    for trace, metric in zip(scored["trace_id"].to_pylist(), scored["metric"].to_pylist(), strict=True):
        metrics_of[trace].append(metric)
    if not metrics_of:
        raise ConfigError(f"dt={day} has no ok scores of {', '.join(metrics)} in {warehouse.url} to sample")
    columns = ["trace_id", "question", "answer", "contexts", "metadata", "language", "source_file", "source_line"]
    traces = warehouse.read("traces", start=day, end=day, columns=columns)
    traces = traces.filter(pc.is_in(traces["trace_id"], value_set=pa.array(sorted(metrics_of), pa.string())))
    strata = _strata(traces, stratify, day)
    rows = traces.to_pylist()
    members: dict[str, list[int]] = defaultdict(list)
    for index, stratum in enumerate(strata):
        members[stratum].append(index)
    sizes = {name: len(indices) for name, indices in members.items()}
    shares = allocate(sizes, n)
    rng = random.Random(seed)
    drawn = sorted(i for name in sorted(members) for i in rng.sample(sorted(members[name]), shares[name]))
    lines = [
        {
            "partition_date": day.isoformat(),
            "trace_id": rows[i]["trace_id"],
            "metric": metric,
            "value": "",
            "labeller": "",
            "stratum": strata[i],
            "language": rows[i]["language"] or "",
            "question": rows[i]["question"] or "",
            "answer": rows[i]["answer"] or "",
            "contexts": _context_text(rows[i]["contexts"]),
            "source_file": rows[i]["source_file"],
            "source_line": rows[i]["source_line"],
        }
        for i in drawn
        for metric in sorted(metrics_of[rows[i]["trace_id"]])
    ]
    _write(out, lines, storage_options)
    return LabelSample(out, {name: shares[name] for name in sorted(shares)}, dict(sorted(sizes.items())), len(lines))


def _strata(traces: pa.Table, stratify: str | None, day: dt.date) -> list[str]:
    """Each trace's stratum: ``all``, its language, or its value at the metadata key (``(none)`` without one). A
    metadata key that no trace has is a typo (``metadata.ap``): one ``(none)`` stratum would pass for a sample."""
    if stratify is None:
        return ["all"] * traces.num_rows
    if stratify == _LANGUAGE:
        values = traces["language"].to_pylist()
    else:
        values = segment_values(traces["metadata"], stratify).to_pylist()
        if all(value is None for value in values):
            keys = ", ".join(metadata_keys(traces["metadata"])) or "none"
            raise ConfigError(f"--stratify {stratify!r}: no trace of dt={day} has that key; its metadata keys: {keys}")
    return [value if value is not None else "(none)" for value in values]


def _context_text(contexts: str | None) -> str:
    """The stored context excerpts as numbered paragraphs: readable in a spreadsheet cell."""
    try:
        parsed = json.loads(contexts) if contexts else []
    except json.JSONDecodeError:
        return contexts or ""
    return "\n\n".join(f"[{i}] {c.get('text') or ''}" for i, c in enumerate(parsed, start=1) if isinstance(c, dict))


def _write(out: str, lines: list[dict[str, Any]], storage_options: Mapping[str, Any] | None) -> None:
    """CSV with a byte-order mark (spreadsheets then read Japanese and Chinese right), or JSON lines, in one PUT."""
    if out.endswith(".csv"):
        buffer = io.StringIO(newline="")
        writer = csv.DictWriter(buffer, fieldnames=SAMPLE_COLUMNS, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(lines)
        data = ("\ufeff" + buffer.getvalue()).encode("utf-8")
    else:
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")
    fs, path = filesystem(out, storage_options)
    # A local path that cannot be written is the option's mistake, not a storage outage or a credential.
    errors = local_write_errors(out) if isinstance(fs, LocalFileSystem) else storage_errors(out)
    with errors:
        parent = posixpath.dirname(path)
        if parent:
            fs.makedirs(parent, exist_ok=True)
        fs.pipe_file(path, data)
