"""Cost of ragpulse's Great Expectations data-quality gates, next to the work they guard.

One process, four parts:

1. **Import**: ``import great_expectations`` (after pandas, pyarrow and Prefect are already loaded), then one
   small ``check_scores`` call that pays GX's remaining first-call costs. Both are reported apart and excluded
   from everything below.
2. **Output gate** on a synthetic score table (default 100,000 traces x 10 metrics = 1,000,000 rows; about
   10 % ``not_applicable`` and 0.5 % ``failed`` per metric): ``build_publication`` for comparison, then
   ``check_scores`` without data docs and with data docs written to a temporary directory. Peak RSS growth
   is sampled during each call. A what-if re-runs the ``scores_out`` suite on the same rows with the string
   columns dictionary-encoded (pandas ``category``) and checks that every expectation gives the same result.
3. **Input gate** on a 100,000-trace partition (about 8 contexts per trace, texts from the demo corpus, a few
   deliberately bad rows) staged with ``stage_records``: ``trace_profile`` and ``check_traces``.
4. **Share of a run**: the same partition staged and scored in plain Python (``stage_records``, then
   ``score_batch``'s body per staged batch of 5,000 with ``metrics.DEFAULT_METRICS``, then
   ``assemble_partition`` and ``build_publication``), against ``check_traces`` and ``check_scores`` on that
   partition's real score table.

Usage::

    python bench/bench_validation.py                        # defaults above (about 4-6 minutes)
    python bench/bench_validation.py --traces 20000 --repeat 1 --out /tmp/validation.json   # quick run
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import importlib.metadata
import json
import logging
import os
import platform
import random
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "bench" / "results" / "validation.json"
DAY = dt.date(2026, 3, 2)
PREFECT_ENV = {"PREFECT_LOGGING_LEVEL": "WARNING", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
SCORE_COLUMNS = ["partition_date", "trace_id", "metric", "value", "status", "reason"]

# Realistic reasons: a handful of distinct texts per status, as the metrics write them.
NA_REASONS = {
    "document": ("no relevance labels", "no retrieved contexts"),
    "answer": ("no reference answer", "no answer (generation failed)"),
}
FAILED_REASONS = ("metric raised ValueError: malformed relevance grades", "timed out after 30 s")


# ------------------------------------------------------------------------------------------ measuring


class PeakRSS:
    """Peak resident set size of this process during a block, sampled every ``interval`` s (plus ru_maxrss)."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.process = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> PeakRSS:
        self.start = self.peak = self.process.memory_info().rss
        self.maxrss_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        if maxrss > self.maxrss_start:  # the lifetime peak moved during the block: a peak the sampler may miss
            self.peak = max(self.peak, maxrss)
        self.peak = max(self.peak, self.process.memory_info().rss)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def delta_mb(self) -> float:
        return (self.peak - self.start) / 2**20


@dataclass
class Timing:
    """Wall and process-CPU seconds and peak RSS growth of each repeat of one measured call."""

    label: str
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss_delta_mb: list[float] = field(default_factory=list)
    rss_start_mb: list[float] = field(default_factory=list)
    parts: dict[str, list[float]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> float:
        return min(self.wall)

    @property
    def best_cpu(self) -> float:
        return min(self.cpu)

    def to_dict(self) -> dict[str, Any]:
        return {
            "best_wall_s": round(self.best, 3),
            "median_wall_s": round(statistics.median(self.wall), 3),
            "wall_s": [round(x, 3) for x in self.wall],
            "best_cpu_s": round(self.best_cpu, 3),
            "cpu_s": [round(x, 3) for x in self.cpu],
            "rss_start_mb": [round(x, 1) for x in self.rss_start_mb],
            "peak_rss_delta_mb": [round(x, 1) for x in self.rss_delta_mb],
            "parts_best_wall_s": {k: round(min(v), 3) for k, v in self.parts.items()},
            **self.notes,
        }


class Spans:
    """Times calls of module-level functions (by rebinding the module attribute) while installed."""

    def __init__(self, targets: dict[str, tuple[Any, str]], key: Callable[..., str] | None = None) -> None:
        self.targets = targets
        self.key = key
        self.seconds: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def installed(self) -> Iterator[Spans]:
        originals = []
        for label, (module, attribute) in self.targets.items():
            original = getattr(module, attribute)
            originals.append((module, attribute, original))
            setattr(module, attribute, self._wrap(label, original))
        try:
            yield self
        finally:
            for module, attribute, original in originals:
                setattr(module, attribute, original)

    def _wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                name = self.key(label, *args, **kwargs) if self.key else label
                self.seconds[name] += time.perf_counter() - start

        return wrapper


def measure(
    label: str,
    fn: Callable[[], Any],
    repeat: int,
    *,
    spans: Callable[[], Spans] | None = None,
    before: Callable[[], None] | None = None,
) -> tuple[Any, Timing]:
    """Run ``fn`` ``repeat`` times after a garbage collection each; returns the last result and the timings."""
    timing = Timing(label)
    result = None
    for _ in range(repeat):
        if before is not None:
            before()
        result = None
        gc.collect()
        span = spans() if spans is not None else None
        with contextlib.ExitStack() as stack:
            if span is not None:
                stack.enter_context(span.installed())
            rss = stack.enter_context(PeakRSS())
            wall, cpu = time.perf_counter(), time.process_time()
            result = fn()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        timing.wall.append(wall)
        timing.cpu.append(cpu)
        timing.rss_delta_mb.append(rss.delta_mb)
        timing.rss_start_mb.append(rss.start / 2**20)
        if span is not None:
            for name, seconds in span.seconds.items():
                timing.parts.setdefault(name, []).append(seconds)
        print(f"  {label}: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS +{rss.delta_mb:.0f} MiB", flush=True)
    return result, timing


def suite_spans() -> Spans:
    """Time each GX suite run inside check_traces / check_scores, keyed by suite name."""
    import ragpulse.tasks.quality.checks as checks

    return Spans(
        {"suite": (checks, "_run_suite"), "trace_profile": (checks, "trace_profile")},
        key=lambda label, *args, **kwargs: f"suite {args[0]['name']}" if label == "suite" else label,
    )


# ------------------------------------------------------------------------------------------ data


def synthetic_scores(
    n_traces: int, metrics: Sequence[str], *, seed: int, na_rate: float, failed_rate: float
) -> tuple[Any, dict[str, int]]:
    """A PartitionScores of ``n_traces`` x ``metrics`` with the given status mix (independent per metric)."""
    from ragpulse.metrics import Status
    from ragpulse.tasks.core.types import PartitionScores

    rng = np.random.default_rng(seed)
    trace_ids = np.array([str(uuid.UUID(int=int(x), version=4)) for x in rng.integers(0, 2**63, n_traces)], object)
    values, status, reasons = {}, {}, {}
    counts = {"ok": 0, "not_applicable": 0, "failed": 0}
    for metric in metrics:
        draw = rng.random(n_traces)
        code = np.full(n_traces, Status.OK, dtype=np.int8)
        code[draw < na_rate + failed_rate] = Status.NOT_APPLICABLE
        code[draw < failed_rate] = Status.FAILED
        value = rng.random(n_traces)
        value[code != Status.OK] = np.nan
        why = np.full(n_traces, None, dtype=object)
        na_texts = NA_REASONS["answer" if metric.startswith("answer") else "document"]
        na = np.flatnonzero(code == Status.NOT_APPLICABLE)
        why[na] = np.array(na_texts, dtype=object)[rng.integers(0, len(na_texts), len(na))]
        failed = np.flatnonzero(code == Status.FAILED)
        why[failed] = np.array(FAILED_REASONS, dtype=object)[rng.integers(0, len(FAILED_REASONS), len(failed))]
        values[metric], status[metric], reasons[metric] = value, code, why
        counts["ok"] += int((code == Status.OK).sum())
        counts["not_applicable"] += len(na)
        counts["failed"] += len(failed)
    scores = PartitionScores(
        date=DAY, trace_ids=trace_ids, values=values, status=status, reasons=reasons,
        versions={m: "1.0.0" for m in metrics}, quarantined=[], n_records=n_traces, n_files=1,
        n_batches=-(-n_traces // 5000),
    )  # fmt: skip
    return scores, counts


def generate_traces(root: Path, n_traces: int, *, n_files: int, seed: int, anomaly_rate: float) -> dict[str, Any]:
    """Write ``<root>/dt=DAY/traces-NN.jsonl``: demo-corpus questions with 6-10 retrieved passages each.

    About 10 % of traces lack relevance labels and 10 % lack a reference (so ~10 % not_applicable scores);
    3 % repeat a context id (report-only finding); ``anomaly_rate`` of the traces each get an empty context
    text, a repeated trace_id, a timestamp on the next day, or an empty reference answer (quarantined by the
    input suite).
    """
    from ragpulse.tasks.demo.corpora import load_demo_corpus

    corpus = load_demo_corpus()
    passages = {row.passage_id: row.passage for row in corpus}
    passage_ids = sorted(passages)
    rng = random.Random(seed)
    directory = root / f"dt={DAY.isoformat()}"
    directory.mkdir(parents=True, exist_ok=True)
    anomalies: dict[str, int] = defaultdict(int)
    previous_id = None
    per_file = -(-n_traces // n_files)
    for file_number in range(n_files):
        lines = []
        for _ in range(min(per_file, n_traces - file_number * per_file)):
            row = rng.choice(corpus)
            k = rng.randint(6, 10)
            ids = rng.sample(passage_ids, k)
            if row.passage_id not in ids and rng.random() < 0.8:
                ids[min(int(rng.expovariate(0.7)), k - 1)] = row.passage_id
            if rng.random() < 0.03:
                ids[-1] = ids[0]
                anomalies["repeated_context_id (report)"] += 1
            score = rng.uniform(0.55, 0.93)
            contexts = []
            for pid in ids:
                contexts.append({"id": pid, "text": passages[pid], "score": round(score, 4)})
                score -= rng.uniform(0.005, 0.06)
            ms = rng.randrange(86_400_000)
            trace = {
                "trace_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "timestamp": f"{DAY.isoformat()}T{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:"
                f"{ms // 1000 % 60:02d}.{ms % 1000:03d}Z",
                "question": row.question,
                "answer": None if rng.random() < 0.02 else (row.answer or "I couldn't find that in the documents."),
                "contexts": contexts,
                "reference": None if rng.random() < 0.1 else (row.answer or "unanswerable"),
                "relevant_context_ids": None if rng.random() < 0.1 else [row.passage_id],
                "metadata": {"app": rng.choice(("support-bot", "docs-search")), "model": "gpt-4o-mini"},
            }
            draw = rng.random()
            if draw < anomaly_rate:
                contexts[rng.randrange(k)]["text"] = ""
                anomalies["empty_context_text"] += 1
            elif draw < 2 * anomaly_rate and previous_id is not None:
                trace["trace_id"] = previous_id
                anomalies["repeated_trace_id"] += 1
            elif draw < 3 * anomaly_rate:
                trace["timestamp"] = f"{DAY + dt.timedelta(days=1)}T00:00:{rng.randint(10, 59)}Z"
                anomalies["timestamp_outside_day"] += 1
            elif draw < 4 * anomaly_rate:
                trace["reference_answers"] = [trace["reference"] or "x", ""]
                anomalies["empty_reference_answer"] += 1
            previous_id = trace["trace_id"]
            lines.append(json.dumps(trace))
        (directory / f"traces-{file_number:02d}.jsonl").write_text("\n".join(lines) + "\n")
    size = sum(p.stat().st_size for p in directory.iterdir())
    return {"traces": n_traces, "files": n_files, "jsonl_mb": round(size / 2**20, 1), "anomalies": dict(anomalies)}


# ------------------------------------------------------------------------------------------ parts


def time_gx_import() -> dict[str, Any]:
    if "great_expectations" in sys.modules:
        raise RuntimeError("great_expectations was imported before the import could be timed")
    start = time.perf_counter()
    import great_expectations

    seconds = time.perf_counter() - start
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    logging.getLogger("great_expectations.data_context.types.base").setLevel(logging.WARNING)
    return {"import_great_expectations_s": round(seconds, 2), "version": great_expectations.__version__}


def run_info() -> Any:
    from ragpulse.tasks.core.types import RunInfo

    return RunInfo("bench-validation", "bench://synthetic", "0" * 16, {}, dt.datetime.now(dt.UTC))


def output_section(args: argparse.Namespace, metrics: list[str], scratch: Path) -> dict[str, Any]:
    from ragpulse.tasks.quality.checks import check_scores
    from ragpulse.tasks.warehouse.publication import build_publication

    run = run_info()
    print(f"output gate: synthetic {args.score_traces:,} traces x {len(metrics)} metrics", flush=True)
    scores, counts = synthetic_scores(
        args.score_traces, metrics, seed=args.seed, na_rate=args.na_rate, failed_rate=args.failed_rate
    )
    publication, build = measure(
        "build_publication", lambda: build_publication(scores, run, metrics, n_batches_cached=0), args.repeat
    )
    n = len(scores.trace_ids)

    def check(docs: Path | None) -> tuple[Any, list[str]]:
        return check_scores(publication, run, n_traces=n, max_failure_rate=0.05, docs_dir=docs)

    (_, failures), plain = measure("check_scores (no data docs)", lambda: check(None), args.repeat, spans=suite_spans)
    docs_root = scratch / "docs-scores"
    runs = iter(range(1000))

    def fresh_docs() -> None:
        shutil.rmtree(docs_root, ignore_errors=True)

    def with_docs() -> tuple[Any, list[str]]:
        return check(docs_root / f"run-{next(runs)}")

    (_, failures_docs), docs = measure(
        "check_scores (data docs)", with_docs, args.repeat, spans=suite_spans, before=fresh_docs
    )
    docs.notes["data_docs_mb"] = round(sum(p.stat().st_size for p in docs_root.rglob("*") if p.is_file()) / 2**20, 1)
    docs.notes["data_docs_files"] = sum(1 for p in docs_root.rglob("*") if p.is_file())
    result = {
        "rows": publication.scores.num_rows,
        "traces": n,
        "metrics": metrics,
        "status_counts": counts,
        "suite_failures": failures + failures_docs,
        "build_publication": build.to_dict(),
        "check_scores_no_docs": plain.to_dict(),
        "check_scores_with_docs": docs.to_dict(),
    }
    if args.what_if:
        result["what_if_categorical_frame"] = what_if_categorical(publication, metrics, n, args.repeat)
    return result


def what_if_categorical(publication: Any, metrics: list[str], n_traces: int, repeat: int) -> dict[str, Any]:
    """The scores_out suite on the frame check_scores builds, and on the same rows with string columns as category.

    Uses ragpulse.tasks.quality.checks' private helpers as they are today; skipped if they changed.
    """
    import pyarrow as pa

    try:
        from ragpulse.tasks.quality.checks import DEFAULT_SUITES, _range_expectations, _run_suite, load_suite
    except ImportError as exc:
        return {"skipped": f"ragpulse.tasks.quality.checks changed: {exc}"}
    suite = load_suite(DEFAULT_SUITES["scores_out"])
    parameters = {"expected_rows": n_traces * len(metrics), "requested_metrics": metrics}
    extra = _range_expectations(metrics)

    def frame(categorical: bool) -> Any:
        table = publication.scores.select(SCORE_COLUMNS)
        if categorical:
            table = pa.table({c: table[c].dictionary_encode() if c != "value" else table[c] for c in SCORE_COLUMNS})
        return table.to_pandas()

    def run(categorical: bool) -> list[tuple[Any, ...]]:
        outcome = _run_suite(suite, frame(categorical), parameters, extra_expectations=extra)
        return [
            (r.expectation_config.type, json.dumps(r.expectation_config.kwargs, sort_keys=True, default=str),
             bool(r.success), r.result.get("unexpected_count"), r.result.get("element_count"))
            for r in outcome.results
        ]  # fmt: skip

    baseline, as_is = measure("scores_out suite, frame as check_scores builds it", lambda: run(False), repeat)
    alternative, categorical = measure("scores_out suite, string columns as category", lambda: run(True), repeat)
    same = sorted(baseline) == sorted(alternative)
    return {
        "change": "scores.select(cols) -> dictionary_encode() each string column -> to_pandas() (pandas category)",
        "same_expectation_results": same,
        "as_is": as_is.to_dict(),
        "categorical": categorical.to_dict(),
        "speedup_wall": round(as_is.best / categorical.best, 2),
        "speedup_cpu": round(as_is.best_cpu / categorical.best_cpu, 2),
    }


def pipeline_section(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    from prefect.logging import disable_run_logger

    import ragpulse.tasks.scoring.tasks as score_module
    from ragpulse.metrics import DEFAULT_METRICS, Status
    from ragpulse.tasks.core.storage import list_partition_files
    from ragpulse.tasks.ingest.staging import stage_records
    from ragpulse.tasks.quality.checks import TraceLimits, check_scores, check_traces, trace_profile
    from ragpulse.tasks.scoring.assemble import assemble_partition
    from ragpulse.tasks.warehouse.publication import build_publication

    run = run_info()
    names = list(DEFAULT_METRICS)
    source = scratch / "source"
    print(f"input gate and pipeline: generating {args.traces:,} traces ...", flush=True)
    start = time.perf_counter()
    data = generate_traces(source, args.traces, n_files=args.files, seed=args.seed, anomaly_rate=args.anomaly_rate)
    data["generate_s"] = round(time.perf_counter() - start, 1)
    print(f"  generated {data['jsonl_mb']} MiB of JSONL in {data['generate_s']} s", flush=True)
    files = list_partition_files(str(source), DAY)

    staged, stage = measure(
        "stage_records",
        lambda: stage_records(DAY, files, staged_url=str(scratch / "staged"), batch_size=args.batch_size),
        1,
    )
    profile, profiled = measure("trace_profile", lambda: trace_profile(staged), args.repeat)
    limits = TraceLimits()
    checked, traces_plain = measure(
        "check_traces (no data docs)",
        lambda: check_traces(staged, run, limits=limits),
        args.repeat,
        spans=suite_spans,
    )
    docs_in = scratch / "docs-traces"
    _, traces_docs = measure(
        "check_traces (data docs)",
        lambda: check_traces(staged, run, limits=limits, docs_dir=docs_in),
        1,
        before=lambda: shutil.rmtree(docs_in, ignore_errors=True),
    )

    def score_all() -> list[Any]:
        with disable_run_logger():
            return [score_module.score_batch.fn(batch, names) for batch in staged.batches]

    probes = ("read_staged", "read_trace_batch", "compute")
    score_spans = {name: (score_module, name) for name in probes if hasattr(score_module, name)}
    scored, score = measure("score batches (score_batch.fn each)", score_all, 1, spans=lambda: Spans(score_spans))
    scores, assemble = measure("assemble_partition", lambda: assemble_partition(staged, scored, checked.excluded), 1)
    publication, build = measure(
        "build_publication", lambda: build_publication(scores, run, names, n_batches_cached=0), 1
    )
    n = len(scores.trace_ids)

    def check(docs: Path | None) -> tuple[Any, list[str]]:
        return check_scores(publication, run, n_traces=n, max_failure_rate=0.05, docs_dir=docs)

    (_, failures), scores_plain = measure("check_scores (no data docs)", lambda: check(None), 1, spans=suite_spans)
    docs_out = scratch / "docs-scores-real"
    (_, failures_docs), scores_docs = measure("check_scores (data docs)", lambda: check(docs_out), 1)

    status = {s.label: int(sum(int((scores.status[m] == s).sum()) for m in names)) for s in Status}
    pipeline = {"stage_records": stage, "score": score, "assemble_partition": assemble, "build_publication": build}
    pipeline_s = sum(t.best for t in pipeline.values())
    pipeline_cpu = sum(t.best_cpu for t in pipeline.values())
    scoring_s = score.best

    def share(seconds: float) -> float:
        return round(100 * seconds / pipeline_s, 1)

    def share_cpu(seconds: float) -> float:
        return round(100 * seconds / pipeline_cpu, 1)

    shares = {
        "pipeline_s": round(pipeline_s, 2),
        "pipeline_cpu_s": round(pipeline_cpu, 2),
        "scoring_s": round(scoring_s, 2),
        "validate_traces_no_docs_pct": share(traces_plain.best),
        "validate_traces_docs_pct": share(traces_docs.best),
        "validate_scores_no_docs_pct": share(scores_plain.best),
        "validate_scores_docs_pct": share(scores_docs.best),
        "both_no_docs_pct": share(traces_plain.best + scores_plain.best),
        "both_docs_pct": share(traces_docs.best + scores_docs.best),
        "critical_path_added_no_docs_pct": share(scores_plain.best + max(0.0, traces_plain.best - scoring_s)),
        "critical_path_added_docs_pct": share(scores_docs.best + max(0.0, traces_docs.best - scoring_s)),
        "cpu_validate_traces_no_docs_pct": share_cpu(traces_plain.best_cpu),
        "cpu_validate_traces_docs_pct": share_cpu(traces_docs.best_cpu),
        "cpu_validate_scores_no_docs_pct": share_cpu(scores_plain.best_cpu),
        "cpu_validate_scores_docs_pct": share_cpu(scores_docs.best_cpu),
        "cpu_both_no_docs_pct": share_cpu(traces_plain.best_cpu + scores_plain.best_cpu),
        "cpu_both_docs_pct": share_cpu(traces_docs.best_cpu + scores_docs.best_cpu),
    }
    return {
        "data": data,
        "staged_traces": staged.n_valid,
        "staged_batches": len(staged.batches),
        "staging_quarantined": len(staged.quarantined),
        "staging_quarantine_fields": dict(Counter(q.field for q in staged.quarantined)),
        "profile_rows": len(profile),
        "input_suite_quarantined": len(checked.excluded),
        "input_suite_findings": checked.reported,
        "scored_traces": n,
        "score_rows": publication.scores.num_rows,
        "metrics": names,
        "status_counts": status,
        "output_suite_failures": failures + failures_docs,
        "timings": {
            **{k: v.to_dict() for k, v in pipeline.items()},
            "trace_profile": profiled.to_dict(),
            "check_traces_no_docs": traces_plain.to_dict(),
            "check_traces_with_docs": traces_docs.to_dict(),
            "check_scores_no_docs": scores_plain.to_dict(),
            "check_scores_with_docs": scores_docs.to_dict(),
        },
        "share_of_pipeline": shares,
    }


# ------------------------------------------------------------------------------------------ report


def environment() -> dict[str, Any]:
    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    cpu_model = platform.processor() or None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    return {
        "python": platform.python_version(),
        "great_expectations": version("great_expectations"),
        "pandas": version("pandas"),
        "numpy": version("numpy"),
        "pyarrow": version("pyarrow"),
        "prefect": version("prefect"),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model,
        "platform": platform.platform(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def table(rows: list[tuple[str, str, dict[str, Any] | None, str]]) -> str:
    header = ("part", "measurement", "best wall s", "median wall s", "best CPU s", "peak RSS +MiB", "note")
    lines = [header]
    for part, label, timing, note in rows:
        if timing is None:
            lines.append((part, label, "", "", "", "", note))
            continue
        lines.append(
            (part, label, f"{timing['best_wall_s']:.2f}", f"{timing['median_wall_s']:.2f}",
             f"{timing['best_cpu_s']:.2f}", f"{max(timing['peak_rss_delta_mb']):.0f}", note)
        )  # fmt: skip
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    out = []
    for i, line in enumerate(lines):
        pairs = zip(line, widths, strict=True)
        cells = [str(c).ljust(w) if j in (0, 1, 6) else str(c).rjust(w) for j, (c, w) in enumerate(pairs)]
        out.append("  ".join(cells).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def summary_rows(result: dict[str, Any]) -> list[tuple[str, str, Any, str]]:
    out = result["output"]
    pipe = result["pipeline"]
    t = pipe["timings"]
    s = pipe["share_of_pipeline"]
    rows: list[tuple[str, str, Any, str]] = [
        ("import", "import great_expectations", None, f"{result['import']['import_great_expectations_s']:.2f} s"),
        ("import", "first check_scores call (1k traces)", None, f"{result['import']['first_call_s']:.2f} s"),
        ("output", f"build_publication ({out['rows']:,} rows)", out["build_publication"], ""),
        ("output", "check_scores, no data docs", out["check_scores_no_docs"], _suite_note(out["check_scores_no_docs"])),
        ("output", "check_scores, data docs", out["check_scores_with_docs"],
         f"{out['check_scores_with_docs']['data_docs_mb']} MiB of docs"),
    ]  # fmt: skip
    what_if = out.get("what_if_categorical_frame") or {}
    if "as_is" in what_if:
        rows += [
            ("what-if", "scores_out suite, frame as built today", what_if["as_is"], ""),
            ("what-if", "scores_out suite, string columns as category", what_if["categorical"],
             f"x{what_if['speedup_wall']} wall, x{what_if['speedup_cpu']} CPU; same results: "
             f"{what_if['same_expectation_results']}"),
        ]  # fmt: skip
    rows += [
        ("input", f"trace_profile ({pipe['staged_traces']:,} traces)", t["trace_profile"], ""),
        ("input", "check_traces, no data docs", t["check_traces_no_docs"], _suite_note(t["check_traces_no_docs"])),
        ("input", "check_traces, data docs", t["check_traces_with_docs"], ""),
        ("pipeline", "stage_records", t["stage_records"], f"{pipe['data']['jsonl_mb']} MiB JSONL"),
        ("pipeline", f"score {pipe['staged_batches']} batches x {len(pipe['metrics'])} metrics", t["score"], ""),
        ("pipeline", "assemble_partition", t["assemble_partition"], ""),
        ("pipeline", f"build_publication ({pipe['score_rows']:,} rows)", t["build_publication"], ""),
        ("pipeline", "total (stage + score + assemble + build)", None,
         f"{s['pipeline_s']:.2f} s wall, {s['pipeline_cpu_s']:.2f} s CPU"),
        ("share", f"check_scores on the real {pipe['score_rows']:,} rows, no docs", t["check_scores_no_docs"],
         f"{s['validate_scores_no_docs_pct']} % of pipeline wall, {s['cpu_validate_scores_no_docs_pct']} % of CPU"),
        ("share", "check_scores on the real rows, data docs", t["check_scores_with_docs"],
         f"{s['validate_scores_docs_pct']} % of pipeline wall, {s['cpu_validate_scores_docs_pct']} % of CPU"),
        ("share", "check_traces (no docs / data docs)", None,
         f"wall {s['validate_traces_no_docs_pct']} / {s['validate_traces_docs_pct']} %, "
         f"CPU {s['cpu_validate_traces_no_docs_pct']} / {s['cpu_validate_traces_docs_pct']} % (beside scoring)"),
        ("share", "both gates (no docs / data docs)", None,
         f"wall {s['both_no_docs_pct']} / {s['both_docs_pct']} %, "
         f"CPU {s['cpu_both_no_docs_pct']} / {s['cpu_both_docs_pct']} %"),
    ]  # fmt: skip
    return rows


def _suite_note(timing: dict[str, Any]) -> str:
    parts = timing.get("parts_best_wall_s") or {}
    return ", ".join(f"{k}: {v:.2f} s" for k, v in parts.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--score-traces", type=int, default=100_000, help="traces of the synthetic score table")
    parser.add_argument("--score-metrics", type=int, default=10, help="metrics (first N of DEFAULT_METRICS)")
    parser.add_argument("--na-rate", type=float, default=0.10)
    parser.add_argument("--failed-rate", type=float, default=0.005)
    parser.add_argument("--traces", type=int, default=100_000, help="traces of the staged partition")
    parser.add_argument("--files", type=int, default=4, help="JSONL files the partition is written as")
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--anomaly-rate", type=float, default=0.0005, help="share of traces per kind of bad row")
    parser.add_argument("--repeat", type=int, default=2, help="repeats of the validation calls (best is reported)")
    parser.add_argument("--no-what-if", dest="what_if", action="store_false", help="skip the category-frame what-if")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--work-root", type=Path, default=None, help="keep generated data here (default: temp dir)")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    for key, value in PREFECT_ENV.items():
        os.environ.setdefault(key, value)
    sys.path.insert(0, str(REPO))
    # Everything the project imports at module level (pandas, pyarrow, Prefect) loads before GX is timed.
    import ragpulse.tasks.quality.checks  # GX is imported lazily inside it
    import ragpulse.tasks.warehouse.publication
    from ragpulse.metrics import DEFAULT_METRICS

    env = environment()
    print(f"python {env['python']}, GX {env['great_expectations']}, pandas {env['pandas']}, numpy {env['numpy']}, "
          f"{env['cpu_count']} CPUs, load {env['load_average_at_start']}", flush=True)  # fmt: skip
    gx_import = time_gx_import()
    print(f"import great_expectations: {gx_import['import_great_expectations_s']} s", flush=True)
    metrics = list(DEFAULT_METRICS[: args.score_metrics])
    warm_scores, _ = synthetic_scores(1000, metrics, seed=args.seed + 1, na_rate=0.1, failed_rate=0.005)
    run = run_info()
    warm = ragpulse.tasks.warehouse.publication.build_publication(warm_scores, run, metrics, n_batches_cached=0)
    start = time.perf_counter()
    ragpulse.tasks.quality.checks.check_scores(warm, run, n_traces=1000, max_failure_rate=0.05)
    gx_import["first_call_s"] = round(time.perf_counter() - start, 2)
    print(f"first check_scores call on 10k rows (GX one-off set-up): {gx_import['first_call_s']} s", flush=True)

    scratch = args.work_root or Path(tempfile.mkdtemp(prefix="bench-validation-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        output = output_section(args, metrics, scratch)
        gc.collect()
        pipeline = pipeline_section(args, scratch)
    finally:
        if args.work_root is None:
            shutil.rmtree(scratch, ignore_errors=True)
    env["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result = {
        "benchmark": "Great Expectations data-quality gates (bench/bench_validation.py)",
        "command": " ".join(["python", "bench/bench_validation.py", *(argv if argv is not None else sys.argv[1:])]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "environment": env,
        "import": gx_import,
        "output": output,
        "pipeline": pipeline,
        "process_maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "script_seconds": round(time.perf_counter() - began, 1),
        "method": (
            "One process, single-threaded calls of the project's functions (no Prefect engine). GX is imported once "
            "after pandas/pyarrow/Prefect and a first check_scores on 1,000 traces pays its one-off set-up; both are "
            "reported apart. Each measured call runs after gc.collect(); best (lowest wall) of --repeat runs is "
            "reported, with process CPU time (time.process_time) since the machine may be shared. Peak RSS growth: "
            "psutil RSS sampled every 5 ms (and ru_maxrss when the lifetime peak moves) minus RSS at the start of the "
            "call; memory kept by allocators after the first repeat makes later deltas smaller. Data docs go to a "
            "fresh temporary directory per call. parts_best_wall_s: time inside tasks.quality.checks._run_suite"
            " per suite "
            "and inside trace_profile, or inside read_staged / read_trace_batch / compute while scoring. Pipeline = "
            "stage_records + score_batch.fn per staged batch + assemble_partition + build_publication, run once. "
            "Shares are validation seconds / pipeline seconds. In the flow validate-traces runs beside score-batch "
            "(threads of one process, so it competes for the same CPUs and GIL) and only blocks assemble-partition if "
            "it outlasts scoring; validate-scores (build_publication + check_scores) is on the critical path."
        ),
    }
    print()
    print(table(summary_rows(result)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"\nwrote {args.out} ({result['script_seconds']} s total)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
