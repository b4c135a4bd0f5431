"""Cost of drift detection at production size, side by side in one run.

Seeded synthetic score rows: a current partition and a baseline of 7 earlier partitions (8 published days), N traces
per partition (default 100,000), 8 of the default metrics, 89.5 % ``ok``, 10 % ``not_applicable``, 0.5 % ``failed``.
Every trace carries metadata ``{"app": ..., "tenant": ...}`` with 5 apps of unequal size; on the current day
``document_mrr`` drops in one app so that something alerts. Each partition is built as a run builds it
(``ragpulse.tasks.warehouse.publication.build_publication``, with a traces table of excerpts). Three parts:

1. ``drift_rows``: overall only vs with segments (``DriftConfig(segment_key="metadata.app")``), on the Arrow
   table ``detect_drift`` would hand it (the score rows, segments joined from the traces rows). Reported with score
   rows/s, the time spent inside ``ragpulse.metrics.drift.compare`` (bootstrap or Welch interval, rank test) and inside
   ``tasks.monitoring.comparison._frame`` (Arrow to pandas with categoricals) vs pandas grouping and filtering. The
   segment preparation (``segment_values`` on every trace's metadata, Arrow left join) is timed apart.
2. ``ragpulse.metrics.drift.mean_difference_interval``: the seeded bootstrap vs Welch's normal interval at the
   ``bootstrap_limit`` boundary (5,000 per side, and 5,000 baseline vs 715 current: a 7-partition baseline of a
   segment with 715 traces a day), on three score shapes, over several data seeds: cost ratio and how far apart
   the two intervals are, relative to their width. One bootstrap beyond the limit shows what the limit saves.
3. End to end against a DuckDB file holding the 8 published partitions (``open_warehouse(url).publish``):
   ``detect_drift.fn`` (its body, no Prefect engine; ``get_run_logger`` needs a run context, so the call runs
   inside ``prefect.logging.disable_run_logger``), with the warehouse reads, ``drift_rows`` and ``publish_drift``
   timed by wrappers, and ``segment_values`` too; the remainder is mostly the Arrow join of segments.

Drift's wall time is then compared with the time the flow needs to score one partition of N traces
(``bench/results/flow.json``: traces/s of the flow, cold cache, batch 5,000, and of the plain pass).

Usage::

    python bench/bench_drift.py                  # N = 100,000 per partition (about 4 minutes here)
    python bench/bench_drift.py --n 10000 --repeat 1 --out /tmp/drift.json   # quick run; also --seeds, --seed
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

import pyarrow as pa  # noqa: E402

from bench._common import cpu_model  # noqa: E402
from ragpulse.metrics import Status  # noqa: E402
from ragpulse.tasks.core.types import TRACE_ROWS_SCHEMA, PartitionScores, QuarantinedRecord, RunInfo  # noqa: E402
from ragpulse.tasks.warehouse import Publication  # noqa: E402
from ragpulse.tasks.warehouse.publication import build_publication  # noqa: E402

DEFAULT_OUT = REPO / "bench" / "results" / "drift.json"
FLOW_RESULTS = REPO / "bench" / "results" / "flow.json"
DAY = dt.date(2026, 11, 8)
BASELINE_PARTITIONS = 7
METRICS = (
    "document_map",
    "document_mrr",
    "document_ndcg",
    "document_ndcg@10",
    "document_recall_single_hit",
    "precision@5",
    "recall@5",
    "answer_f1",
)
APPS = ("support-bot", "docs-search", "research-assistant", "sales-copilot", "hr-helpdesk")
APP_WEIGHTS = (0.35, 0.25, 0.20, 0.12, 0.08)
TENANTS = ("acme", "globex", "initech")
DRIFTED = ("document_mrr", "docs-search")  # the metric and app that get worse on the current day
SEGMENT_KEY = "metadata.app"
SCORE_COLUMNS = [
    "partition_date", "trace_id", "metric", "value", "status", "metric_version", "judge_model", "prompt_version",
]  # fmt: skip


# ------------------------------------------------------------------------------------------ data


def metric_values(rng: np.random.Generator, metric: str, n: int) -> np.ndarray:
    """Scores in [0, 1] shaped like the metric: ranking metrics have point masses at 0 and 1."""
    if metric in ("document_recall_single_hit",):
        return (rng.random(n) < 0.88).astype(np.float64)
    if metric in ("document_mrr",):
        ranks = rng.choice([1, 2, 3, 4, 5, 0], size=n, p=[0.55, 0.18, 0.09, 0.05, 0.03, 0.10])
        return np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0)
    if metric in ("precision@5",):
        return rng.binomial(5, 0.3, n) / 5.0
    values = rng.beta(2.5, 1.5, n)
    values[rng.random(n) < 0.08] = 0.0
    values[rng.random(n) < 0.15] = 1.0
    return values


def context_list(i: int) -> list[dict[str, Any]]:
    text = "passage text " * 20
    return [{"id": f"doc-{(i * 7 + k) % 50_000}", "text": text, "score": 0.9 - k / 10} for k in range(3)]


def make_partition(day: dt.date, n: int, seed: int, *, drifted: bool) -> tuple[Publication, np.ndarray]:
    """One published partition (scores, traces, quarantine, run) of ``n`` traces; also the traces' apps."""
    rng = np.random.default_rng([seed, day.toordinal()])
    trace_ids = np.array([f"{day:%Y%m%d}-{i:08x}" for i in range(n)], dtype=object)
    apps = rng.choice(len(APPS), size=n, p=APP_WEIGHTS)
    values, status, reasons = {}, {}, {}
    for metric in METRICS:
        value = metric_values(rng, metric, n)
        if drifted and metric == DRIFTED[0]:
            hit = apps == APPS.index(DRIFTED[1])
            value[hit & (rng.random(n) < 0.35)] = 0.0  # the app's answering passage is missed more often
        draw = rng.random(n)
        state = np.full(n, Status.OK, dtype=np.int8)
        state[draw < 0.10] = Status.NOT_APPLICABLE
        state[(draw >= 0.10) & (draw < 0.105)] = Status.FAILED
        value[state != Status.OK] = np.nan
        values[metric], status[metric] = value, state
        reasons[metric] = np.select(
            [state == Status.NOT_APPLICABLE, state == Status.FAILED], ["no_relevance_labels", "timed out"], ""
        ).astype(object)
        reasons[metric][state == Status.OK] = None
    tenants = rng.integers(0, len(TENANTS), n)
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    seconds = np.sort(rng.integers(0, 86_400, n))
    traces = pa.table(
        {
            "trace_id": pa.array(trace_ids, pa.string()),
            "timestamp": pa.array([start + dt.timedelta(seconds=int(s)) for s in seconds], pa.timestamp("us", "UTC")),
            "question": pa.array([f"question {i}: how do I export report {i % 977}?" for i in range(n)]),
            "answer": pa.array([f"Open settings, choose export, then report {i % 977}. " * 3 for i in range(n)]),
            "contexts": pa.array([json.dumps(context_list(i)) for i in range(n)]),
            "metadata": pa.array(
                [json.dumps({"app": APPS[a], "tenant": TENANTS[t]}) for a, t in zip(apps, tenants, strict=True)]
            ),
            "source_file": pa.array([f"s3://logs/dt={day}/traces-{i % 4:02d}.jsonl" for i in range(n)]),
            "source_line": pa.array(np.arange(n, dtype=np.int64) // 4 + 1),
        },
        schema=TRACE_ROWS_SCHEMA,
    )
    scores = PartitionScores(
        date=day,
        trace_ids=trace_ids,
        values=values,
        status=status,
        reasons=reasons,
        versions=dict.fromkeys(METRICS, "1.0.0"),
        quarantined=[
            QuarantinedRecord(f"s3://logs/dt={day}/traces-00.jsonl", i, None, "<record>", "invalid JSON", "{")
            for i in range(5)
        ],
        n_records=n + 5,
        n_files=4,
        n_batches=n // 5000 + 1,
        traces=traces,
    )
    run = RunInfo(f"bench-{day}", "s3://logs", "0123456789abcdef", {"batch_size": 5000}, dt.datetime.now(dt.UTC))
    return build_publication(scores, run, list(METRICS), n_batches_cached=0), apps


# ------------------------------------------------------------------------------------------ measuring


class Timing:
    """Wall and process-CPU seconds of repeated calls."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def run(self, fn: Callable[[], Any]) -> Any:
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        self.wall.append(time.perf_counter() - wall)
        self.cpu.append(time.process_time() - cpu)
        return result

    def to_dict(self, rows: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "best_wall_s": round(min(self.wall), 4),
            "median_wall_s": round(statistics.median(self.wall), 4),
            "best_cpu_s": round(min(self.cpu), 4),
            "median_cpu_s": round(statistics.median(self.cpu), 4),
            "wall_s": [round(w, 4) for w in self.wall],
            "cpu_s": [round(c, 4) for c in self.cpu],
        }
        if rows:
            out["rows"] = rows
            out["rows_per_s_wall"] = round(rows / min(self.wall))
            out["rows_per_cpu_s"] = round(rows / min(self.cpu))
        return out


class Spans:
    """Seconds (wall and process CPU) and calls of named functions while installed; the outermost call counts."""

    def __init__(self, targets: dict[str, tuple[Any, str]]) -> None:
        self.targets = targets
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    @contextlib.contextmanager
    def installed(self) -> Iterator[Spans]:
        originals = [(owner, attribute, getattr(owner, attribute)) for owner, attribute in self.targets.values()]
        for label, (owner, attribute) in self.targets.items():
            setattr(owner, attribute, self._timed(label, getattr(owner, attribute)))
        try:
            yield self
        finally:
            for owner, attribute, original in originals:
                setattr(owner, attribute, original)

    def _timed(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = label.format(table=args[1] if len(args) > 1 else kwargs.get("table", ""))
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.wall[key] += time.perf_counter() - wall
                self.cpu[key] += time.process_time() - cpu
                self.calls[key] += 1

        return wrapper

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {
            k: {"wall_s": round(self.wall[k], 4), "cpu_s": round(self.cpu[k], 4), "calls": self.calls[k]}
            for k in self.wall
        }


def merge_parts(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """The run with the lowest summed wall time among ``runs`` (parts of one call stay together)."""
    return min(runs, key=lambda parts: sum(p["wall_s"] for p in parts.values()))


# ------------------------------------------------------------------------------------------ part 1: drift_rows


def drift_table(scores: pa.Table, traces: pa.Table | None) -> pa.Table:
    """What ``detect_drift`` hands to ``drift_rows``: the same steps, from in-memory Arrow rows."""
    from ragpulse.tasks.monitoring.comparison import segment_values

    table = scores.select(SCORE_COLUMNS)
    if traces is not None:
        segments = pa.table(
            {
                "partition_date": traces["partition_date"],
                "trace_id": traces["trace_id"],
                "segment": segment_values(traces["metadata"], SEGMENT_KEY),
            }
        )
        table = table.join(segments, ["partition_date", "trace_id"], join_type="left outer")
    return table


def bench_drift_rows(scores: pa.Table, traces: pa.Table, window: list[dt.date], repeat: int) -> dict[str, Any]:
    import ragpulse.metrics.drift
    import ragpulse.tasks.monitoring.comparison
    from ragpulse.tasks.config import DriftConfig
    from ragpulse.tasks.monitoring.comparison import drift_rows

    plain_table = drift_table(scores, None)
    prep = Timing()
    for _ in range(repeat):
        segmented_table = prep.run(lambda: drift_table(scores, traces))
    settings = {"overall": DriftConfig(), "segmented": DriftConfig(segment_key=SEGMENT_KEY)}
    tables = {"overall": plain_table, "segmented": segmented_table}
    timings = {name: Timing() for name in settings}
    parts: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in settings}
    results: dict[str, pa.Table] = {}
    targets = {
        "compare": (ragpulse.tasks.monitoring.comparison, "compare"),
        "_frame (Arrow to pandas)": (ragpulse.tasks.monitoring.comparison, "_frame"),
        "mean_difference_interval": (ragpulse.metrics.drift, "mean_difference_interval"),
        "rank_test": (ragpulse.metrics.drift, "_rank_p_value"),
    }
    for round_ in range(repeat):
        for name in settings:  # side by side: one of each per round
            spans = Spans(targets)
            with spans.installed():
                results[name] = timings[name].run(
                    lambda name=name: drift_rows(tables[name], DAY, window, settings[name], "bench")
                )
            parts[name].append(spans.to_dict())
            print(
                f"  drift_rows {name:>9} round {round_ + 1}: {timings[name].wall[-1]:.2f} s wall, "
                f"{timings[name].cpu[-1]:.2f} s CPU, {results[name].num_rows} drift rows",
                flush=True,
            )
    out: dict[str, Any] = {"segment_key": SEGMENT_KEY, "segment_prep (segment_values + Arrow join)": prep.to_dict()}
    for name in settings:
        verdicts: dict[str, int] = defaultdict(int)
        for verdict in results[name]["verdict"].to_pylist():
            verdicts[verdict] += 1
        best = merge_parts(parts[name])
        best_wall = min(timings[name].wall)
        out[name] = {
            **timings[name].to_dict(rows=tables[name].num_rows),
            "drift_rows_out": results[name].num_rows,
            "verdicts": dict(sorted(verdicts.items())),
            "alerts": [
                f"{r['metric']} {r['segment']}: {r['verdict']}"
                for r in results[name].to_pylist()
                if r["verdict"] in ("degraded", "failure_rate_up", "coverage_down")
            ],
            "parts_of_fastest_run": best,
            "compare_share_of_best_wall_pct": round(100 * best.get("compare", {}).get("wall_s", 0) / best_wall, 1),
            "frame_share_of_best_wall_pct": round(
                100 * best.get("_frame (Arrow to pandas)", {}).get("wall_s", 0) / best_wall, 1
            ),
        }
    out["segmented_over_overall_wall"] = round(min(timings["segmented"].wall) / min(timings["overall"].wall), 2)
    out["segmented_over_overall_cpu"] = round(min(timings["segmented"].cpu) / min(timings["overall"].cpu), 2)
    return out


# ------------------------------------------------------------------------------------------ part 2: intervals


def interval_sample(kind: str, rng: np.random.Generator, n: int, shift: float) -> np.ndarray:
    if kind == "continuous (beta 2.5,1.5)":
        return np.clip(rng.beta(2.5, 1.5, n) + shift, 0, 1)
    if kind == "binary (hit rate 0.88)":
        return (rng.random(n) < 0.88 + shift).astype(np.float64)
    ranks = rng.choice([1, 2, 3, 4, 5, 0], size=n, p=[0.55, 0.18, 0.09, 0.05, 0.03, 0.10])  # reciprocal rank
    values = np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0)
    values[rng.random(n) < abs(shift) * 2] = 0.0 if shift < 0 else 1.0
    return values


def bench_intervals(repeat: int, seeds: int) -> dict[str, Any]:
    from ragpulse.metrics.drift import DriftThresholds, mean_difference_interval

    limit = DriftThresholds().bootstrap_limit
    resamples = DriftThresholds().n_resamples
    sizes = [(limit, limit), (limit, limit // BASELINE_PARTITIONS + 1), (1000, 1000), (210, 30)]
    kinds = ("continuous (beta 2.5,1.5)", "binary (hit rate 0.88)", "reciprocal rank")
    rows = []
    for n_base, n_cur in sizes:
        for kind in kinds:
            boot, welch = Timing(), Timing()
            gaps, width_ratios = [], []
            for s in range(seeds):
                rng = np.random.default_rng([s, n_base, n_cur, len(kind)])
                base = interval_sample(kind, rng, n_base, 0.0)
                cur = interval_sample(kind, rng, n_cur, -0.02)
                timed = s < repeat
                b = (boot.run if timed else (lambda f: f()))(
                    lambda base=base, cur=cur, s=s: mean_difference_interval(
                        base, cur, n_resamples=resamples, bootstrap_limit=limit, seed=s
                    )
                )
                w = (welch.run if timed else (lambda f: f()))(
                    lambda base=base, cur=cur, s=s: mean_difference_interval(base, cur, bootstrap_limit=0, seed=s)
                )
                width = w[1] - w[0]
                gaps.append(max(abs(b[0] - w[0]), abs(b[1] - w[1])) / width)
                width_ratios.append((b[1] - b[0]) / width)
            row = {
                "baseline_n": n_base,
                "current_n": n_cur,
                "shape": kind,
                "bootstrap": boot.to_dict(),
                "welch": welch.to_dict(),
                "cost_ratio_cpu": round(min(boot.cpu) / max(min(welch.cpu), 1e-6)),
                "cost_ratio_wall": round(min(boot.wall) / max(min(welch.wall), 1e-6)),
                "endpoint_gap_over_width_median": round(statistics.median(gaps), 4),
                "endpoint_gap_over_width_max": round(max(gaps), 4),
                "bootstrap_over_welch_width_median": round(statistics.median(width_ratios), 4),
                "welch_width_last_seed": round(width, 5),
                "seeds": seeds,
            }
            rows.append(row)
            print(
                f"  interval {n_base:>6} vs {n_cur:>5} {kind:<26}: bootstrap {min(boot.cpu) * 1e3:7.1f} ms CPU, "
                f"Welch {min(welch.cpu) * 1e3:6.2f} ms CPU, gap/width median "
                f"{row['endpoint_gap_over_width_median']:.3f} max {row['endpoint_gap_over_width_max']:.3f}",
                flush=True,
            )
    # What the limit saves: the bootstrap forced on a segment of 5,000 a day against its 7-day baseline.
    rng = np.random.default_rng(99)
    base = interval_sample(kinds[0], rng, limit * BASELINE_PARTITIONS, 0.0)
    cur = interval_sample(kinds[0], rng, limit, -0.02)
    beyond, beyond_welch = Timing(), Timing()
    beyond.run(lambda: mean_difference_interval(base, cur, n_resamples=resamples, bootstrap_limit=10**9))
    beyond_welch.run(lambda: mean_difference_interval(base, cur, bootstrap_limit=limit))
    print(f"  bootstrap forced at {len(base):,} vs {len(cur):,}: {beyond.cpu[0]:.2f} s CPU", flush=True)
    return {
        "bootstrap_limit": limit,
        "n_resamples": resamples,
        "current_shift": -0.02,
        "rows": rows,
        "beyond_limit": {
            "baseline_n": len(base),
            "current_n": len(cur),
            "bootstrap_forced": beyond.to_dict(),
            "welch": beyond_welch.to_dict(),
        },
    }


# ------------------------------------------------------------------------------------------ part 3: end to end


def bench_end_to_end(url: str, repeat: int) -> dict[str, Any]:
    from prefect.logging import disable_run_logger

    import ragpulse.tasks.monitoring.tasks
    from ragpulse.tasks.config import DriftConfig
    from ragpulse.tasks.monitoring.tasks import detect_drift
    from ragpulse.tasks.warehouse.duckdb import DuckDBWarehouse

    settings = {"overall": DriftConfig(), "segmented": DriftConfig(segment_key=SEGMENT_KEY)}
    timings = {name: Timing() for name in settings}
    parts: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in settings}
    targets = {
        "read {table}": (DuckDBWarehouse, "read"),
        "drift_rows": (ragpulse.tasks.monitoring.tasks, "drift_rows"),
        "segment_values": (ragpulse.tasks.monitoring.tasks, "segment_values"),
        "publish_drift": (DuckDBWarehouse, "publish_drift"),
    }
    reports = {}
    for round_ in range(repeat):
        for name in settings:
            spans = Spans(targets)
            with spans.installed(), disable_run_logger():
                reports[name] = timings[name].run(
                    lambda name=name: detect_drift.fn(url, DAY, settings[name], run_id="bench")
                )
            parts[name].append(spans.to_dict())
            print(
                f"  detect_drift {name:>9} round {round_ + 1}: {timings[name].wall[-1]:.2f} s wall, "
                f"{timings[name].cpu[-1]:.2f} s CPU, {reports[name].rows.num_rows} drift rows, "
                f"{len(reports[name].alerts)} alert(s)",
                flush=True,
            )
    out: dict[str, Any] = {}
    for name in settings:
        best_index = min(range(repeat), key=lambda i: timings[name].wall[i])
        best = parts[name][best_index]
        total_wall, total_cpu = timings[name].wall[best_index], timings[name].cpu[best_index]
        reads = {k: v for k, v in best.items() if k.startswith("read ")}
        read_wall = sum(v["wall_s"] for v in reads.values())
        read_cpu = sum(v["cpu_s"] for v in reads.values())
        compute = best["drift_rows"]
        publish = best["publish_drift"]
        segment = best.get("segment_values", {"wall_s": 0.0, "cpu_s": 0.0, "calls": 0})
        other_wall = total_wall - read_wall - segment["wall_s"] - compute["wall_s"] - publish["wall_s"]
        other_cpu = total_cpu - read_cpu - segment["cpu_s"] - compute["cpu_s"] - publish["cpu_s"]
        out[name] = {
            **timings[name].to_dict(),
            "split_of_fastest_run": {
                "read_wall_s": round(read_wall, 3),
                "read_cpu_s": round(read_cpu, 3),
                "reads": reads,
                "segment_values_wall_s": segment["wall_s"],
                "segment_values_cpu_s": segment["cpu_s"],
                "join_and_rest_wall_s": round(other_wall, 3),
                "join_and_rest_cpu_s": round(other_cpu, 3),
                "drift_rows_wall_s": compute["wall_s"],
                "drift_rows_cpu_s": compute["cpu_s"],
                "publish_drift_wall_s": publish["wall_s"],
                "publish_drift_cpu_s": publish["cpu_s"],
            },
            "shares_of_fastest_wall_pct": {
                "read": round(100 * read_wall / total_wall, 1),
                "segment_values": round(100 * segment["wall_s"] / total_wall, 1),
                "join_and_rest": round(100 * other_wall / total_wall, 1),
                "drift_rows": round(100 * compute["wall_s"] / total_wall, 1),
                "publish_drift": round(100 * publish["wall_s"] / total_wall, 1),
            },
            "drift_rows_out": reports[name].rows.num_rows,
            "alerts": [f"{a.metric} {a.segment}: {a.verdict}" for a in reports[name].alerts],
        }
    return out


def share_of_daily_run(n: int, end_to_end: dict[str, Any]) -> dict[str, Any]:
    """detect_drift's wall time against the flow's time to score n traces (bench/results/flow.json)."""
    if not FLOW_RESULTS.exists():
        return {"note": f"{FLOW_RESULTS} not found"}
    flow = json.loads(FLOW_RESULTS.read_text())
    runs = {(r["kind"], r["batch_size"]): r for r in flow["runs"]}
    out: dict[str, Any] = {"source": "bench/results/flow.json", "flow_n_traces": flow["runs"][0]["n_traces"]}
    for key, label in ((("flow-cold", 5000), "flow_cold_batch_5000"), (("plain", 5000), "plain_batch_5000")):
        if key not in runs:
            continue
        rate = runs[key]["traces_per_s"]
        scoring_s = n / rate
        entry: dict[str, Any] = {"traces_per_s": rate, "scoring_s_for_n": round(scoring_s, 2)}
        for name, result in end_to_end.items():
            drift_s = result["best_wall_s"]
            entry[f"{name}_drift_pct_of_scoring"] = round(100 * drift_s / scoring_s, 1)
            entry[f"{name}_drift_pct_of_scoring_plus_drift"] = round(100 * drift_s / (scoring_s + drift_s), 1)
        out[label] = entry
    return out


# ------------------------------------------------------------------------------------------ environment


def version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def code_state() -> dict[str, Any]:
    """The commit measured, and whether the measured modules had uncommitted changes (the tree is shared)."""

    def git(*args: str) -> str:
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        return ""

    modules = ["tasks/monitoring/tasks.py", "metrics/drift.py", "tasks/warehouse/duckdb.py"]
    uncommitted = git("status", "--porcelain", "--", *modules).splitlines()
    return {"commit": git("rev-parse", "HEAD"), "uncommitted": uncommitted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="traces per partition (default 100,000)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of each side-by-side timing (default 3)")
    parser.add_argument("--seeds", type=int, default=20, help="data seeds per interval comparison (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    started = time.perf_counter()
    load = {"start": round(os.getloadavg()[0], 2)}
    code = code_state()  # at the start: the tree is shared and may change during the run

    days = [DAY - dt.timedelta(days=BASELINE_PARTITIONS - i) for i in range(BASELINE_PARTITIONS + 1)]
    window = days[:-1]
    print(f"building {len(days)} partitions of {args.n:,} traces x {len(METRICS)} metrics ...", flush=True)
    build = Timing()
    publications = [build.run(lambda d=d: make_partition(d, args.n, args.seed, drifted=d == DAY)[0]) for d in days]
    scores = pa.concat_tables([p.scores for p in publications])
    traces = pa.concat_tables([p.traces for p in publications])
    print(f"  {scores.num_rows:,} score rows, {traces.num_rows:,} traces in {sum(build.wall):.1f} s", flush=True)

    print("part 1: drift_rows, overall vs segmented", flush=True)
    rows_part = bench_drift_rows(scores, traces, window, args.repeat)

    print("part 2: mean_difference_interval, bootstrap vs Welch", flush=True)
    interval_part = bench_intervals(args.repeat, max(args.seeds, args.repeat))

    print("part 3: detect_drift against DuckDB", flush=True)
    from ragpulse.tasks.warehouse import open_warehouse

    with tempfile.TemporaryDirectory() as tmp:
        url = f"duckdb:///{Path(tmp) / 'bench.duckdb'}"
        warehouse = open_warehouse(url)
        publish = Timing()
        for publication in publications:
            publish.run(lambda publication=publication: warehouse.publish(publication))
        file_mb = round((Path(tmp) / "bench.duckdb").stat().st_size / 2**20, 1)
        print(f"  published {len(publications)} partitions in {sum(publish.wall):.1f} s ({file_mb} MiB)", flush=True)
        del publications, scores, traces
        gc.collect()
        end_to_end = bench_end_to_end(url, args.repeat)
    load["end"] = round(os.getloadavg()[0], 2)

    result = {
        "benchmark": "drift",
        "command": " ".join(["python", "bench/bench_drift.py", *sys.argv[1:]]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "code": code,
        "data": {
            "traces_per_partition": args.n,
            "partitions": len(days),
            "baseline_partitions": BASELINE_PARTITIONS,
            "metrics": list(METRICS),
            "score_rows_total": args.n * len(days) * len(METRICS),
            "segment_key": SEGMENT_KEY,
            "apps": dict(zip(APPS, APP_WEIGHTS, strict=True)),
            "status_shares": {"ok": 0.895, "not_applicable": 0.10, "failed": 0.005},
            "drift_injected": f"{DRIFTED[0]} in app {DRIFTED[1]} on {DAY}: 35 % of its scores set to 0",
            "build_publications_s": round(sum(build.wall), 1),
            "duckdb_publish_s": [round(w, 2) for w in publish.wall],
            "duckdb_file_mb": file_mb,
        },
        "drift_rows": rows_part,
        "intervals": interval_part,
        "detect_drift_duckdb": end_to_end,
        "share_of_daily_run": share_of_daily_run(args.n, end_to_end),
        "environment": {
            "python": platform.python_version(),
            **{name: version(name) for name in ("numpy", "scipy", "pandas", "pyarrow", "duckdb", "prefect")},
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "load_average_1min": load,
            "platform": platform.platform(),
        },
        "script_seconds": round(time.perf_counter() - started, 1),
        "method": (
            "One process. Wall: perf_counter; CPU: process_time (all threads of the process, so DuckDB's and "
            "Arrow's worker threads count). Every timed call after gc.collect(). Side by side: each round runs "
            "every variant once, in the same order; best and median over --repeat rounds. parts/split: wrappers "
            "around metrics.drift functions, DuckDBWarehouse.read/publish_drift and tasks.monitoring.comparison's "
            "drift_rows, "
            "_frame and segment_values during the timed calls (outermost call; the wrappers' own overhead is in "
            "the totals). detect_drift.fn runs inside prefect.logging.disable_run_logger because "
            "get_run_logger() raises MissingContextError outside a run. Each detect_drift call replaces the "
            "day's drift rows (steady state of a re-run)."
        ),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {args.out} in {result['script_seconds']} s")


if __name__ == "__main__":
    main()
