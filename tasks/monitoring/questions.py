"""Input drift: have the questions users ask changed? The day's questions against the baseline window's, as embeddings.

The published ``traces`` table holds each trace's question (an excerpt of at most 1,000 characters). Each side is a
deterministic sample: the ``question_sample`` rows of smallest SHA-256 over (partition date, trace id), so a re-run
samples the same traces and the baseline's days enter in proportion to their size. The samples are embedded with the
multilingual encoder (``DEFAULT_EMBEDDING_MODEL``) and compared by the kernel two-sample test of
``ragpulse.metrics.embedding_drift`` (MMD with a permutation p-value), overall and per segment like score drift.
A row goes to the ``drift`` table as metric ``QUESTION_METRIC``:

- ``shifted`` (alerts): the permutation p-value is below ``1 - confidence`` and MMD^2 at least
  ``question_min_mmd``; a distribution has no better or worse, so the verdict says the questions moved, not that
  quality dropped, and its ``detail`` quotes the day's questions that most set it apart (the largest witness
  values), cut and masked;
- ``stable``: tested, no significant difference;
- ``insufficient_data``: fewer than ``min_baseline_partitions`` baseline partitions or ``min_samples`` questions on
  either side (the test was not run); ``no_baseline``: no earlier partition has questions.

``delta`` holds MMD^2 and ``p_value`` the permutation p-value; ``baseline_n`` and ``current_n`` the questions
compared; the means, interval, failure rate and coverage are NULL (there is no score). No Prefect, no warehouse:
``tasks/monitoring/tasks.py`` reads the traces and publishes the rows.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray

from ragpulse.metrics.drift import Verdict
from ragpulse.metrics.embedding_drift import mmd_test
from ragpulse.tasks.core.duckdb_limits import connect_duckdb
from ragpulse.tasks.core.fingerprint import digest
from ragpulse.tasks.core.redaction import redact_url
from ragpulse.tasks.monitoring.config import DriftConfig
from ragpulse.tasks.warehouse import DRIFT_SCHEMA

__all__ = [
    "QUESTION_EXAMPLES",
    "QUESTION_EXAMPLE_CHARS",
    "QUESTION_METRIC",
    "Embed",
    "Samples",
    "question_drift_rows",
]

QUESTION_METRIC = "input.question_embedding"
QUESTION_EXAMPLES = 3
"""Questions of a shifted day quoted in its drift row, most characteristic first."""
QUESTION_EXAMPLE_CHARS = 80
"""Each quoted question is cut to this many characters: the row is an alert's text, not a trace viewer."""

Embed = Callable[[Sequence[str]], NDArray[np.float32]]
_WHITESPACE = re.compile(r"\s+")


Samples = dict[tuple[bool, str | None], tuple[pd.DataFrame, int]]
"""(current?, segment value or None for all) -> (the sample in sampling order, the number of questions it is from)."""


def _sampled(traces: pa.Table, day: dt.date, window: Sequence[dt.date], per_side: int) -> Samples:
    """The samples of ``day`` (current) and of the ``window``, each side whole and per segment: the first
    ``per_side`` rows with a question (not blank) in sampling order, which is SHA-256 over the ISO date and trace id
    joined by U+001F (as ``digest``), then the trace id. DuckDB keeps the first ones per group (``min_by`` with a
    count, no sort of the whole table): a drift check over 8 days of a million traces never brings them to Python."""
    if "segment" not in traces.column_names:
        traces = traces.append_column("segment", pa.nulls(traces.num_rows, pa.string()))
    taken = """count(*) AS n,
               min_by({'day': day, 'trace_id': trace_id, 'question': question, 'key': key}, (key, trace_id), $per_side)
                   AS rows"""
    with connect_duckdb() as con:
        con.register("traces", traces.select(["partition_date", "trace_id", "question", "segment"]))
        groups = con.sql(
            f"""
            WITH asked AS (
                SELECT partition_date AS day, trace_id, question, CAST(segment AS VARCHAR) AS segment,
                       partition_date = $day AS current,
                       sha256(strftime(partition_date, '%Y-%m-%d') || chr(31) || trace_id) AS key
                FROM traces
                WHERE question IS NOT NULL AND NOT regexp_full_match(question, '\\s*')
                  AND list_contains($days, partition_date)
            )
            SELECT current, NULL AS segment, {taken} FROM asked GROUP BY current
            UNION ALL
            SELECT current, segment, {taken} FROM asked WHERE segment IS NOT NULL GROUP BY current, segment
            """,
            params={"day": day, "days": sorted({day, *window}), "per_side": per_side},
        ).fetchall()
    return {(current, segment): (_in_order(rows), n) for current, segment, n, rows in groups}


def _in_order(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A sample's rows by (key, trace id): the permutations pick rows by position, so the order must not depend on
    the order the rows were read in."""
    frame = pd.DataFrame(rows, columns=["day", "trace_id", "question", "key"])
    return frame.sort_values(["key", "trace_id"], kind="stable").reset_index(drop=True)


def _segments(samples: Samples, settings: DriftConfig) -> list[tuple[str, str | None]]:
    """``all``, then the day's ``max_segments`` largest segments by questions (equal sizes by value)."""
    segments: list[tuple[str, str | None]] = [("all", None)]
    if settings.segment_key is None:
        return segments
    sizes = sorted(((-n, value) for (current, value), (_, n) in samples.items() if current and value is not None))
    segments += [(f"{settings.segment_key}={value}", value) for _, value in sizes[: settings.max_segments]]
    return segments


def _side(samples: Samples, current: bool, value: str | None) -> tuple[pd.DataFrame, int]:
    """One side's sample of the segment ``value`` (None: all of it) and the number of questions it is from."""
    return samples.get((current, value), (pd.DataFrame(columns=["day", "trace_id", "question"]), 0))


def _excerpt(question: str) -> str:
    """A question as quoted in a drift row: one line, credentials masked, at most ``QUESTION_EXAMPLE_CHARS``."""
    line = redact_url(_WHITESPACE.sub(" ", question).strip())
    return line if len(line) <= QUESTION_EXAMPLE_CHARS else line[: QUESTION_EXAMPLE_CHARS - 1] + "…"


def _examples(questions: Sequence[str], witness: NDArray[np.float64]) -> list[str]:
    """The distinct questions of largest witness (ties by text), excerpted."""
    best: dict[str, float] = {}
    for question, value in zip(questions, witness, strict=True):
        best[question] = max(value, best.get(question, -np.inf))
    ranked = sorted(best, key=lambda q: (-best[q], q))[:QUESTION_EXAMPLES]
    return [_excerpt(question) for question in ranked]


def question_drift_rows(
    traces: pa.Table,
    day: dt.date,
    window: Sequence[dt.date],
    settings: DriftConfig,
    run_id: str,
    embed: Embed,
    encoder: str,
) -> pa.Table:
    """Drift rows (``DRIFT_SCHEMA``) of ``QUESTION_METRIC`` for ``day`` against its baseline ``window``, from trace
    rows (partition_date, trace_id, question, and segment when segmenting) of those days. ``embed`` turns texts into
    embedding rows; ``encoder`` names it in ``detail``. Every sampled question is embedded once. A day without any
    question has no rows."""
    thresholds = settings.thresholds()
    samples = _sampled(traces, day, window, settings.question_sample)
    if (True, None) not in samples:  # no question to test (like a metric without scores that day): no row
        return DRIFT_SCHEMA.empty_table()
    plans: list[tuple[str, pd.DataFrame, pd.DataFrame, int, int]] = []
    for label, value in _segments(samples, settings):
        (base, n_baseline), (cur, n_current) = _side(samples, False, value), _side(samples, True, value)
        plans.append((label, base, cur, n_baseline, n_current))
    texts = sorted({q for _, base, cur, _, _ in plans for q in (*base["question"], *cur["question"])})
    tested = [plan for plan in plans if _testable(plan[1], plan[2], thresholds.min_baseline_partitions, settings)]
    rows_of = dict(zip(texts, embed(texts), strict=True)) if tested else {}
    now = dt.datetime.now(dt.UTC)
    records: list[dict[str, Any]] = []
    for label, base, cur, n_baseline, n_current in plans:
        verdict, detail, mmd2, p_value = _verdict(
            label, base, cur, n_baseline, n_current, day, settings, rows_of, encoder
        )
        dates = sorted(set(base["day"]))
        records.append(
            {
                "partition_date": day,
                "metric": QUESTION_METRIC,
                "segment": label,
                "baseline_start": dates[0] if dates else None,
                "baseline_end": dates[-1] if dates else None,
                "baseline_partitions": base["day"].nunique(),
                "baseline_n": len(base),
                "current_n": len(cur),
                "delta": mmd2,
                "p_value": p_value,
                "verdict": verdict.value,
                "detail": detail,
                "run_id": run_id,
                "computed_at": now,
            }
        )
    return pa.Table.from_pylist(records, schema=DRIFT_SCHEMA)


def _testable(base: pd.DataFrame, cur: pd.DataFrame, min_partitions: int, settings: DriftConfig) -> bool:
    return base["day"].nunique() >= min_partitions and min(len(base), len(cur)) >= settings.min_samples


def _verdict(
    label: str,
    base: pd.DataFrame,
    cur: pd.DataFrame,
    n_baseline: int,
    n_current: int,
    day: dt.date,
    settings: DriftConfig,
    rows_of: dict[str, NDArray[np.float32]],
    encoder: str,
) -> tuple[Verdict, str, float | None, float | None]:
    """The verdict, detail, MMD^2 and p-value of one segment's samples (None where the test was not run)."""
    thresholds = settings.thresholds()
    partitions = base["day"].nunique()
    if partitions == 0:
        return Verdict.NO_BASELINE, "no earlier partition has questions", None, None
    if partitions < thresholds.min_baseline_partitions:
        needed = f"{thresholds.min_baseline_partitions} needed"
        return Verdict.INSUFFICIENT_DATA, f"{partitions} baseline partition(s) with questions, {needed}", None, None
    if min(len(base), len(cur)) < settings.min_samples:
        return (
            Verdict.INSUFFICIENT_DATA,
            f"questions not compared: {len(base)} baseline and {len(cur)} current, {settings.min_samples} needed",
            None,
            None,
        )
    seed = int(digest(day.isoformat(), QUESTION_METRIC, label)[:8], 16)
    result = mmd_test(
        np.stack([rows_of[q] for q in base["question"]]),
        np.stack([rows_of[q] for q in cur["question"]]),
        n_permutations=settings.question_permutations,
        seed=seed,
    )
    shifted = result.p_value < thresholds.alpha and result.mmd2 >= settings.question_min_mmd
    finding = (
        f"MMD^2 {result.mmd2:.4f} (permutation p={result.p_value:.2g}, {result.n_permutations} permutations; "
        f"Gaussian kernel, bandwidth {result.bandwidth:.3f}, on {encoder} embeddings); "
        f"{len(base)} of {n_baseline} baseline and {len(cur)} of {n_current} current questions sampled"
    )
    if not shifted:
        return Verdict.STABLE, f"questions unchanged: {finding}", result.mmd2, result.p_value
    quoted = "; ".join(f'"{q}"' for q in _examples(list(cur["question"]), result.witness))
    detail = f"questions shifted: {finding}; most characteristic of the day: {quoted}"
    return Verdict.SHIFTED, detail, result.mmd2, result.p_value
