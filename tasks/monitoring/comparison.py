"""Drift comparisons of published scores: every metric, overall and per segment, against its baseline.

The baseline is the previous ``baseline_partitions`` published partitions (not calendar days: a source that
skips weekends still gets seven comparable days). Only scores made by the same judge model, prompt version
and metric major version are compared; when the baseline was made with another judge the row says so.
The statistics live in ``ragpulse.metrics.drift``; this module groups score rows into samples and turns the
verdicts into ``drift`` table rows and alerts. No Prefect, no warehouse: ``tasks/monitoring/tasks.py`` does that.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ragpulse.metrics import Status
from ragpulse.metrics.drift import ALERTING, Estimate, EstimatedMeans, Sample, Verdict, compare
from ragpulse.tasks.core.duckdb_limits import connect_duckdb
from ragpulse.tasks.core.fingerprint import digest
from ragpulse.tasks.core.types import DriftAlert
from ragpulse.tasks.monitoring.config import STEP_METRIC_PREFIX, DriftConfig, higher_is_better
from ragpulse.tasks.warehouse import DRIFT_SCHEMA

__all__ = [
    "ALL_SEGMENTS",
    "SCORE_COLUMNS",
    "STEP_METRIC_PREFIX",
    "alert_of",
    "alerts_of",
    "drift_rows",
    "largest_segments",
    "metadata_keys",
    "scorer_identity",
    "segment_values",
]

ALL_SEGMENTS = "all"
_OK, _FAILED = Status.OK.label, Status.FAILED.label


def _json_path(key: str) -> str:
    """``metadata.user.tier`` (or ``user.tier``) as the JSON path ``$."user"."tier"``."""
    parts = key.removeprefix("metadata.").split(".")
    return "$" + "".join('."' + part.replace("\\", "\\\\").replace('"', '\\"') + '"' for part in parts)


def segment_values(metadata: pa.ChunkedArray | pa.Array, key: str) -> pa.ChunkedArray:
    """The value at ``key`` in each trace's metadata JSON as text (``true``, ``2``, ``support``); null where it is
    missing, null, an object or a list, or the metadata is not JSON. DuckDB parses the column in one pass: a
    json.loads per trace took 3.6 s of a 17 s drift check at 800k traces (bench/README.md)."""
    with connect_duckdb() as con:
        con.register("traces", pa.table({"metadata": metadata}))
        return con.sql(
            """
            SELECT CASE WHEN json_valid(metadata) THEN
                       CASE WHEN json_type(metadata, $path) NOT IN ('OBJECT', 'ARRAY', 'NULL')
                            THEN json_extract_string(metadata, $path) END
                   END AS segment
            FROM traces
            """,
            params={"path": _json_path(key)},
        ).to_arrow_table()["segment"]


def metadata_keys(metadata: pa.ChunkedArray | pa.Array, most: int = 20) -> list[str]:
    """The ``metadata.<key>`` names of the top-level keys found in the traces' metadata JSON, most common first (at
    most ``most``): what an error about a segment key that matches nothing can offer instead."""
    with connect_duckdb() as con:
        con.register("traces", pa.table({"metadata": metadata}))
        rows = con.sql(
            """
            SELECT key FROM (
                SELECT unnest(json_keys(metadata)) AS key FROM traces
                WHERE json_valid(metadata) AND json_type(metadata) = 'OBJECT'
            ) GROUP BY key ORDER BY count(*) DESC, key LIMIT $most
            """,
            params={"most": most},
        ).fetchall()
    return [f"metadata.{key}" for (key,) in rows]


def _major(version: str | None) -> str:
    return (version or "").split(".", 1)[0]


def _scorers(rows: pd.DataFrame) -> pd.DataFrame:
    """Who scored each row: judge model, prompt version and metric major version ("" where none)."""
    return pd.DataFrame(
        {
            "judge_model": rows["judge_model"],
            "prompt_version": rows["prompt_version"],
            # A categorical maps each distinct version once, not each of millions of rows.
            "major": rows["metric_version"].map(_major),
        }
    ).astype(str)


def scorer_identity(rows: pd.DataFrame) -> tuple[str, str, str]:
    """The most frequent scorer among ``rows``; a tie goes to the smallest (judge, prompt, major), not to whichever
    the warehouse returned first."""
    counts = _scorers(rows).value_counts(sort=False).sort_index().sort_values(ascending=False, kind="stable")
    return tuple(counts.index[0]) if len(counts) else ("", "", "")


def _describe_identity(identity: tuple[str, str, str]) -> str:
    judge, prompt, major = identity
    return f"judge {judge}, prompt {prompt}" if judge or prompt else f"metric version {major}.x"


def _sample(rows: pd.DataFrame) -> Sample:
    status = rows["status"]
    ok = (status == _OK).to_numpy()
    return Sample(
        values=rows["value"].to_numpy(dtype=np.float64)[ok],
        n_failed=int((status == _FAILED).sum()),
        n_total=len(rows),
        partitions=rows["day"].nunique(),
    )


def _seed(day: dt.date, metric: str, segment: str) -> int:
    """A per-comparison seed: the first 32 bits of SHA-256 over the ISO date, metric and segment label joined by
    U+001F (``digest``; not Python's salted ``hash``), so the bootstrap is the same in every process."""
    return int(digest(day.isoformat(), metric, segment)[:8], 16)


def _segments(current: pd.DataFrame, settings: DriftConfig) -> Iterator[tuple[str, str | None]]:
    """(label, value) pairs: everything, then the day's largest segments (equal sizes by value, so the cut at
    ``max_segments`` does not depend on row order)."""
    yield ALL_SEGMENTS, None
    if settings.segment_key is None:
        return
    for value in largest_segments(current, settings.max_segments):
        yield f"{settings.segment_key}={value}", value


def largest_segments(rows: pd.DataFrame, most: int) -> list[str]:
    """The ``most`` values of ``rows``' ``segment`` column with the most distinct traces, largest first; equal sizes
    by value, so the cut does not depend on row order."""
    sizes = rows.dropna(subset=["segment"]).groupby("segment", observed=True)["trace_id"].nunique()
    sizes.index = sizes.index.astype(str)
    return list(sizes.sort_index().sort_values(ascending=False, kind="stable").index[:most])


_EPOCH = dt.date(1970, 1, 1)
_CATEGORIES = ("metric", "status", "metric_version", "judge_model", "prompt_version", "segment")


def _frame(scores: pa.Table) -> pd.DataFrame:
    """Score rows as pandas with repeated strings as categoricals ("" for no judge) and the partition as a day
    number: comparisons on millions of object strings and dates were most of the drift check's time."""
    if "segment" not in scores.column_names:
        scores = scores.append_column("segment", pa.nulls(scores.num_rows, pa.string()))
    columns = {
        "day": scores["partition_date"].cast(pa.int32()),
        "trace_id": scores["trace_id"],
        "value": scores["value"],
    }
    for name in _CATEGORIES:
        column = scores[name]
        if name in ("judge_model", "prompt_version"):
            column = pc.fill_null(column, "")
        columns[name] = pc.dictionary_encode(column)
    return pa.table(columns).to_pandas()


def _day_number(day: dt.date) -> int:
    return (day - _EPOCH).days


def drift_rows(
    scores: pa.Table,
    day: dt.date,
    window: Sequence[dt.date],
    settings: DriftConfig,
    run_id: str,
    estimates: pa.Table | None = None,
) -> pa.Table:
    """Drift rows for ``day`` from long score rows of ``day`` and its baseline ``window`` (columns: partition_date,
    trace_id, metric, value, status, metric_version, judge_model, prompt_version, and segment when segmenting).

    With ``settings.estimator == "ppi"``, the ``all`` segment of a metric whose judge identity has a
    prediction-powered estimate on ``day`` (rows of the ``estimates`` table) compares those estimates instead of
    the raw means; without one it falls back to the raw means and says so."""
    thresholds = settings.thresholds()
    now = dt.datetime.now(dt.UTC)
    frame = _frame(scores)
    current_all = frame[frame["day"] == _day_number(day)]
    baseline_all = frame[frame["day"].isin([_day_number(d) for d in window])]
    records: list[dict[str, Any]] = []
    for metric, current_metric in current_all.groupby("metric", sort=True, observed=True):
        identity = scorer_identity(current_metric)
        candidates = baseline_all[baseline_all["metric"] == metric]
        scorers = _scorers(candidates)
        same = (scorers == pd.Series(identity, index=scorers.columns)).all(axis=1).to_numpy()
        baseline_metric = candidates[same]
        note = ""
        if not same.all():
            others = sorted({_describe_identity(tuple(row)) for row in scorers[~same].drop_duplicates().to_numpy()})
            note = (
                f"baseline excludes {candidates.loc[~same, 'day'].nunique()} partition(s) scored with "
                f"{'; '.join(others)} (current: {_describe_identity(identity)})"
            )
        direction = higher_is_better(str(metric), settings.lower_is_better)
        for label, value in _segments(current_metric, settings):
            current = current_metric if value is None else current_metric[current_metric["segment"] == value]
            baseline = baseline_metric if value is None else baseline_metric[baseline_metric["segment"] == value]
            base, cur = _sample(baseline), _sample(current)
            means, fallback = None, ""
            if settings.estimator == "ppi" and value is None:
                means = _estimated_means(estimates, day, window, str(metric), identity)
                if means is None:
                    fallback = "no prediction-powered estimate of this partition: raw judge means compared"
            result = compare(
                base, cur, thresholds, higher_is_better=direction, seed=_seed(day, str(metric), label), estimates=means
            )
            detail = "; ".join(text for text in (result.detail, note, fallback) if text)
            if result.verdict is Verdict.NO_BASELINE and note:
                detail = f"baseline made with another scorer: {note}"
            dates = [_EPOCH + dt.timedelta(days=int(d)) for d in sorted(baseline["day"].unique())]
            records.append(
                {
                    "partition_date": day,
                    "metric": str(metric),
                    "segment": label,
                    "judge_model": identity[0] or None,
                    "prompt_version": identity[1] or None,
                    "baseline_start": dates[0] if dates else None,
                    "baseline_end": dates[-1] if dates else None,
                    "baseline_partitions": base.partitions,
                    "baseline_n": base.n_ok,
                    "current_n": cur.n_ok,
                    "baseline_mean": _finite(
                        base.mean if means is None else float(np.mean([e.mean for e in means.baseline] or [math.nan]))
                    ),
                    "current_mean": _finite(cur.mean if means is None else means.current.mean),
                    "delta": _finite(result.delta),
                    "ci_low": _finite(result.ci_low),
                    "ci_high": _finite(result.ci_high),
                    "p_value": _finite(result.p_value),
                    "baseline_failure_rate": _finite(base.failure_rate),
                    "current_failure_rate": _finite(cur.failure_rate),
                    "baseline_coverage": _finite(base.coverage),
                    "current_coverage": _finite(cur.coverage),
                    "verdict": result.verdict.value,
                    "detail": detail,
                    "run_id": run_id,
                    "computed_at": now,
                }
            )
    return pa.Table.from_pylist(records, schema=DRIFT_SCHEMA)


def _estimated_means(
    estimates: pa.Table | None, day: dt.date, window: Sequence[dt.date], metric: str, identity: tuple[str, str, str]
) -> EstimatedMeans | None:
    """``day``'s and its baseline partitions' prediction-powered estimates of ``metric`` by the judge identity, or
    None when ``day`` has none (no labels, too few, or no calibration run)."""
    if estimates is None:
        return None
    judge, prompt, _ = identity
    found = {
        row["partition_date"]: Estimate(row["ppi_mean"], row["std_error"])
        for row in estimates.to_pylist()
        if row["metric"] == metric
        and (row["judge_model"] or "") == judge
        and (row["prompt_version"] or "") == prompt
        and row["ppi_mean"] is not None
    }
    if day not in found:
        return None
    return EstimatedMeans(tuple(found[d] for d in sorted(window) if d in found), found[day])


def _finite(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def alerts_of(rows: pa.Table) -> list[DriftAlert]:
    """The alerts among a partition's drift rows: those whose verdict alerts, as just opened."""
    return [alert_of(row) for row in rows.to_pylist() if row["verdict"] in ALERTING]


def alert_of(row: Mapping[str, Any], state: str = "opened") -> DriftAlert:
    """A drift row (a dict of its columns) as an alert with ``state``."""
    return DriftAlert(
        partition_date=row["partition_date"],
        metric=row["metric"],
        segment=row["segment"],
        verdict=row["verdict"],
        detail=row["detail"] or "",
        baseline_mean=row["baseline_mean"],
        current_mean=row["current_mean"],
        delta=row["delta"],
        judge_model=row["judge_model"],
        rule=row.get("rule"),
        observed=row.get("observed"),
        state=state,
    )


SCORE_COLUMNS = [
    "partition_date", "trace_id", "metric", "value", "status", "metric_version", "judge_model", "prompt_version",
]  # fmt: skip
