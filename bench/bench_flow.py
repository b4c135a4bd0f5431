"""End-to-end benchmark of the ``evaluate-partition`` flow on one large partition.

Generates one ``dt=`` partition of demo traces (``ragpulse.tasks.demo.generate``, in a child process so that its
memory is not counted), starts Prefect's ephemeral API (timed separately), warms up on a small
partition, then for each batch size runs, in this process:

* a **plain-Python** pass: the pipeline's own body (``score_partition.fn``, which ``evaluate_partition`` runs
  as its subflow) with every task call, ``submit`` and ``map`` replaced by a direct call of the task body
  (``Task.fn``) in the calling thread: no engine, no API, no result persistence, no cache, no thread pool,
  no artifacts;
* the **flow** on the ephemeral API (cold cache: fresh work dir and warehouse);

and finally re-runs the flow on the default batch size's work dir (warm cache).

Every task body and a list of pure functions (staging, scoring, assembling, DuckDB publish, ...) are
wrapped with timers in both passes, so the report shows where the time goes inside the flow.
"Orchestration share" is ``(flow wall - plain wall) / flow wall``.

Usage::

    python bench/bench_flow.py                       # 100k traces, batch sizes 1000,5000,20000 (~10 min)
    python bench/bench_flow.py --profile 25          # ... and cProfile a plain run
    python bench/bench_flow.py --traces 20000 --batch-sizes 2000,5000 --repeat 2 --max-workers 1
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime as dt
import functools
import importlib
import io
import json
import logging
import os
import platform
import pstats
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "bench" / "results" / "flow.json"
DAY = dt.date(2026, 3, 2)

# Must be in the environment before Prefect is first imported (every project module imports it).
PREFECT_ENV = {
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
}

# Pure functions timed inside the tasks, wherever the project's modules refer to them; missing ones are skipped.
FUNCTION_PROBES = (
    "ragpulse.tasks.ingest.staging:stage_records",
    "ragpulse.tasks.ingest.batches:read_staged",
    "ragpulse.tasks.ingest.batches:read_trace_batch",
    "ragpulse.metrics.registry:compute",
    "ragpulse.tasks.scoring.assemble:assemble_partition",
    "ragpulse.tasks.ingest.quarantine:write_quarantine_copy",
    "ragpulse.tasks.warehouse.publication:build_publication",
    "ragpulse.tasks.warehouse.duckdb:DuckDBWarehouse.publish",
    "ragpulse.tasks.reporting.run_summary:summarize",
    "ragpulse.tasks.quality.checks:trace_profile",
    "ragpulse.tasks.quality.checks:check_traces",
    "ragpulse.tasks.quality.checks:check_scores",
)
PROJECT_PACKAGES = ("flows", "tasks", "metrics")


# ------------------------------------------------------------------------------------------ measuring


def flow_tasks() -> list[Any]:
    """The Task objects the flow module uses (whatever the flow currently looks like)."""
    from prefect import Task

    import ragpulse.flows.evaluate

    return [value for value in vars(ragpulse.flows.evaluate).values() if isinstance(value, Task)]


class Probe:
    """Times every call of the flow's task bodies and of FUNCTION_PROBES, from any thread, while installed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, float, float]] = []  # label, start, end, CPU s of the calling thread
        self.missing: list[str] = []

    @contextlib.contextmanager
    def installed(self) -> Iterator[Probe]:
        patched: list[tuple[Any, str, Any]] = []
        for task in flow_tasks():
            patched.append((task, "fn", task.fn))
            task.fn = self._timed(task.fn, f"task:{task.name}")
        for target in FUNCTION_PROBES:
            module_name, _, qualname = target.partition(":")
            try:
                owner: Any = importlib.import_module(module_name)
                *parents, attribute = qualname.split(".")
                for parent in parents:
                    owner = getattr(owner, parent)
                original = getattr(owner, attribute)
            except (ImportError, AttributeError):
                self.missing.append(target)
                continue
            wrapper = self._timed(original, f"fn:{qualname}")
            if parents:  # a method: patch the class
                patched.append((owner, attribute, original))
                setattr(owner, attribute, wrapper)
                continue
            for module in list(sys.modules.values()):  # every `from x import f` copy of the function
                name = getattr(module, "__name__", "") or ""
                if name.split(".")[0] in PROJECT_PACKAGES and getattr(module, attribute, None) is original:
                    patched.append((module, attribute, original))
                    setattr(module, attribute, wrapper)
        try:
            yield self
        finally:
            for owner, attribute, original in reversed(patched):
                setattr(owner, attribute, original)

    def _timed(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.calls.append((label, start, time.perf_counter(), time.thread_time() - cpu))  # atomic append

        return wrapper

    def totals(self, prefix: str) -> dict[str, dict[str, float]]:
        """Summed call durations (threads overlap, so sums can exceed wall time), thread CPU time and call counts."""
        seconds: dict[str, float] = defaultdict(float)
        cpu: dict[str, float] = defaultdict(float)
        calls: dict[str, int] = defaultdict(int)
        first: dict[str, float] = {}
        for label, start, end, cpu_s in self.calls:
            if label.startswith(prefix):
                name = label.removeprefix(prefix)
                seconds[name] += end - start
                cpu[name] += cpu_s
                calls[name] += 1
                first[name] = min(first.get(name, start), start)
        return {
            name: {"seconds": round(seconds[name], 3), "cpu_s": round(cpu[name], 3), "calls": calls[name]}
            for name in sorted(seconds, key=first.__getitem__)
        }

    def busy_seconds(self) -> float:
        """Wall time during which at least one task body was running (overlaps merged)."""
        busy, current_start, current_end = 0.0, 0.0, None
        for _, start, end, _ in sorted((c for c in self.calls if c[0].startswith("task:")), key=lambda c: c[1]):
            if current_end is None or start > current_end:
                if current_end is not None:
                    busy += current_end - current_start
                current_start, current_end = start, end
            else:
                current_end = max(current_end, end)
        if current_end is not None:
            busy += current_end - current_start
        return busy

    def timeline(self, t0: float, t1: float) -> dict[str, Any]:
        """Each task's first start and last end (s from the flow call), and the time before, between and
        after them during which no task body of the flow ran."""
        phases: dict[str, list[float]] = {}
        for label, start, end, _ in self.calls:
            if label.startswith("task:"):
                first, last = phases.get(label[5:], [start, end])
                phases[label[5:]] = [min(first, start), max(last, end)]
        ordered = sorted(phases.items(), key=lambda item: item[1][0])
        out: dict[str, Any] = {
            name: {"start_s": round(a - t0, 3), "end_s": round(b - t0, 3)} for name, (a, b) in ordered
        }
        gaps, previous, previous_end = {}, "call", t0
        for name, (a, b) in ordered:
            gaps[f"{previous} -> {name}"] = round(max(0.0, a - previous_end), 3)
            previous, previous_end = name, max(previous_end, b)
        gaps[f"{previous} -> return"] = round(max(0.0, t1 - previous_end), 3)
        out["gaps_s"] = gaps
        return out


class _Done:
    """What ``submit`` returns in the plain pass: an already-finished future."""

    state = SimpleNamespace(name="Completed", is_completed=lambda: True, is_failed=lambda: False)

    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self, *args: Any, **kwargs: Any) -> Any:
        return self.value

    def wait(self, *args: Any, **kwargs: Any) -> None:
        return None


@contextlib.contextmanager
def without_prefect() -> Iterator[None]:
    """Make task calls, ``submit``, ``map`` and ``with_options`` run ``Task.fn`` inline; artifacts become no-ops."""
    from prefect import Task
    from prefect.logging import disable_run_logger
    from prefect.utilities.annotations import BaseAnnotation
    from prefect.utilities.collections import isiterable

    def resolve(value: Any) -> Any:
        if isinstance(value, _Done):
            return value.value
        if isinstance(value, BaseAnnotation):
            return resolve(value.unwrap())
        if type(value) in (list, tuple):
            return type(value)(resolve(v) for v in value)
        if type(value) is dict:
            return {k: resolve(v) for k, v in value.items()}
        return value

    def call(self: Any, *args: Any, wait_for: Any = None, return_state: bool = False, **kwargs: Any) -> Any:
        return self.fn(*resolve(args), **resolve(kwargs))

    def submit(self: Any, *args: Any, wait_for: Any = None, return_state: bool = False, **kwargs: Any) -> _Done:
        return _Done(call(self, *args, **kwargs))

    def mapped(self: Any, *args: Any, wait_for: Any = None, return_state: bool = False, **kwargs: Any) -> list[_Done]:
        def is_mapped(v: Any) -> bool:
            return not isinstance(v, BaseAnnotation) and isiterable(resolve(v))

        lengths = {len(list(resolve(v))) for v in [*args, *kwargs.values()] if is_mapped(v)}
        if len(lengths) != 1:
            raise ValueError(f"map needs iterables of one length, got {lengths}")
        columns = {k: list(resolve(v)) if is_mapped(v) else None for k, v in enumerate(args)}
        keywords = {k: list(resolve(v)) if is_mapped(v) else None for k, v in kwargs.items()}
        return [
            _Done(
                call(
                    self,
                    *(columns[k][i] if columns[k] is not None else v for k, v in enumerate(args)),
                    **{k: keywords[k][i] if keywords[k] is not None else v for k, v in kwargs.items()},
                )
            )
            for i in range(lengths.pop())
        ]

    def with_options(self: Any, **kwargs: Any) -> Any:
        return self

    patched: list[tuple[Any, str, Any]] = [
        (Task, name, getattr(Task, name)) for name in ("__call__", "submit", "map", "with_options")
    ]
    for name, replacement in (("__call__", call), ("submit", submit), ("map", mapped), ("with_options", with_options)):
        setattr(Task, name, replacement)
    for module in list(sys.modules.values()):
        module_name = getattr(module, "__name__", "") or ""
        if module_name.split(".")[0] in (*PROJECT_PACKAGES, "prefect"):
            for attribute in [a for a in vars(module) if a.startswith("create_") and a.endswith("_artifact")]:
                patched.append((module, attribute, getattr(module, attribute)))
                setattr(module, attribute, lambda *args, **kwargs: None)
    try:
        with disable_run_logger():
            yield
    finally:
        for owner, attribute, original in reversed(patched):
            setattr(owner, attribute, original)


class Resources:
    """Peak resident memory and CPU time of this process and of its children (the ephemeral API server)."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.process = psutil.Process()
        self.start_mb = self.peak_mb = self.children_peak_mb = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Resources:
        self.start_mb = self.peak_mb = self._own()
        self.cpu_start, self.children_cpu_start = self._cpu()
        self._thread = threading.Thread(target=self._run, name="resource-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self.peak_mb = max(self.peak_mb, self._own())
        cpu, children_cpu = self._cpu()
        self.cpu_s, self.children_cpu_s = cpu - self.cpu_start, children_cpu - self.children_cpu_start
        self.load_1m = os.getloadavg()[0]

    def settle_server_cpu(self) -> None:
        """Re-read the API server's CPU time once it has processed the run's events (they arrive late)."""
        self.children_cpu_s = self._cpu()[1] - self.children_cpu_start

    def _cpu(self) -> tuple[float, float]:
        own = self.process.cpu_times()
        children = 0.0
        for child in self.process.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                times = child.cpu_times()
                children += times.user + times.system
        return own.user + own.system, children

    def _own(self) -> float:
        return self.process.memory_info().rss / 2**20

    def _children(self) -> float:
        total = 0
        for child in self.process.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        return total / 2**20

    def _run(self) -> None:
        ticks = 0
        while not self._stop.wait(self.interval):
            self.peak_mb = max(self.peak_mb, self._own())
            ticks += 1
            if ticks % 25 == 0:  # children are slower to enumerate; every 0.5 s is enough
                self.children_peak_mb = max(self.children_peak_mb, self._children())

    def to_dict(self) -> dict[str, float]:
        return {
            "rss_start_mb": round(self.start_mb, 1),
            "rss_peak_mb": round(self.peak_mb, 1),
            "rss_growth_mb": round(self.peak_mb - self.start_mb, 1),
            "server_rss_peak_mb": round(self.children_peak_mb, 1),
            "cpu_s": round(self.cpu_s, 2),
            "server_cpu_s": round(self.children_cpu_s, 2),
            "load_average_1m_at_end": round(self.load_1m, 2),
        }


# ------------------------------------------------------------------------------------------ running


@dataclass
class RunResult:
    kind: str  # "plain" | "flow-cold" | "flow-warm"
    batch_size: int
    repeat: int
    wall_s: float
    n_traces: int
    n_batches: int
    n_batches_cached: int
    tasks: dict[str, dict[str, float]]
    functions: dict[str, dict[str, float]]
    busy_s: float
    timeline: dict[str, Any]
    resources: dict[str, float]
    task_runs: dict[str, int] = field(default_factory=dict)
    task_run_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def traces_per_s(self) -> float:
        return self.n_traces / self.wall_s

    def task_seconds(self, name: str, key: str = "seconds") -> float:
        return self.tasks.get(name, {}).get(key, 0.0)

    @property
    def total_cpu_s(self) -> float:
        """CPU seconds of this process and of the API server during the run."""
        return self.resources["cpu_s"] + self.resources["server_cpu_s"]

    def to_dict(self) -> dict[str, Any]:
        data = {
            "kind": self.kind,
            "batch_size": self.batch_size,
            "repeat": self.repeat,
            "wall_s": round(self.wall_s, 3),
            "traces_per_s": round(self.traces_per_s, 1),
            "n_traces": self.n_traces,
            "n_batches": self.n_batches,
            "n_batches_cached": self.n_batches_cached,
            "task_body_s": self.tasks,
            "pure_function_s": self.functions,
            "task_body_busy_s": round(self.busy_s, 3),
            "no_task_body_running_s": round(self.wall_s - self.busy_s, 3),
            "resources": self.resources,
        }
        data["timeline"] = self.timeline
        if self.kind != "plain":
            data.update(
                task_runs=self.task_runs,
                n_task_runs=sum(self.task_runs.values()),
                task_run_seconds_api=self.task_run_seconds,
            )
        return data


def run_plain(
    source: Path, root: Path, batch_size: int, *, repeat: int = 0, profile: cProfile.Profile | None = None
) -> RunResult:
    """The pipeline's body with every task run inline (see without_prefect), on a fresh work dir and warehouse."""
    from ragpulse.flows.evaluate import score_partition
    from ragpulse.tasks.config import RunConfig

    config = RunConfig(**_groups(source, root, batch_size))
    probe = Probe()
    with without_prefect(), probe.installed(), Resources() as resources:
        if profile is not None:
            profile.enable()
        start = time.perf_counter()
        summary = score_partition.fn(DAY, config)
        end = time.perf_counter()
        if profile is not None:
            profile.disable()
    return _result("plain", batch_size, repeat, start, end, summary, probe, resources)


def run_flow(
    source: Path, root: Path, batch_size: int, kind: str, *, repeat: int = 0, max_workers: int | None = None
) -> RunResult:
    from ragpulse.flows.evaluate import evaluate_partition

    groups = _groups(source, root, batch_size, max_workers)
    probe = Probe()
    with probe.installed(), Resources() as resources:
        start = time.perf_counter()
        summary = evaluate_partition(date=DAY, **groups)
        end = time.perf_counter()
    result = _result(kind, batch_size, repeat, start, end, summary, probe, resources)
    result.task_runs, result.task_run_seconds = task_runs_of(
        summary.run_id, expected=summary.n_batches + len(flow_tasks()) - 1
    )
    resources.settle_server_cpu()
    result.resources = resources.to_dict()
    return result


def _groups(source: Path, root: Path, batch_size: int, max_workers: int | None = None) -> dict[str, Any]:
    """The configuration groups of a run: ``source`` into a warehouse and work dir under ``root``; the thread
    pool has ``max_workers`` threads, by default RunnerConfig's."""
    from ragpulse.tasks.config import OutputConfig, RunnerConfig, ScoringConfig, SourceConfig

    groups: dict[str, Any] = {
        "source": SourceConfig(url=str(source)),
        "scoring": ScoringConfig(batch_size=batch_size),
        "output": OutputConfig(warehouse=f"duckdb:///{root / 'warehouse.duckdb'}", work_dir=str(root / "work")),
    }
    if max_workers is not None:
        groups["runner"] = RunnerConfig(kind="thread", max_workers=max_workers)
    return groups


def _result(
    kind: str, batch_size: int, repeat: int, start: float, end: float, summary: Any, probe: Probe, resources: Resources
) -> RunResult:
    return RunResult(
        kind=kind,
        batch_size=batch_size,
        repeat=repeat,
        wall_s=end - start,
        n_traces=summary.n_traces,
        n_batches=summary.n_batches,
        n_batches_cached=summary.n_batches_cached,
        tasks=probe.totals("task:"),
        functions=probe.totals("fn:"),
        busy_s=probe.busy_seconds(),
        timeline=probe.timeline(start, end),
        resources=resources.to_dict(),
    )


def task_runs_of(flow_run_id: str, *, expected: int, timeout: float = 30.0) -> tuple[dict[str, int], dict[str, float]]:
    """Task runs the API recorded for a flow run, by task name, with Prefect's own run-time totals.

    Task-run states reach the API as events, slightly after the flow returns: poll until all are final.
    """
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    flow_filter = FlowRunFilter(id=FlowRunFilterId(any_=[UUID(flow_run_id)]))
    deadline, previous = time.monotonic() + timeout, -1
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(flow_run_filter=flow_filter)
            settled = len(runs) == previous and all(r.state is not None and r.state.is_final() for r in runs)
            if (settled and len(runs) >= expected) or time.monotonic() > deadline:
                break
            previous = len(runs)
            time.sleep(0.5)
    counts: dict[str, int] = defaultdict(int)
    seconds: dict[str, float] = defaultdict(float)
    for task_run in runs:
        name = task_run.name.rsplit("-", 1)[0]  # "score-batch-a1b" -> "score-batch"
        counts[name] += 1
        seconds[name] += task_run.total_run_time.total_seconds()
    return dict(counts), {name: round(total, 3) for name, total in seconds.items()}


def time_startup(n_tasks: int) -> dict[str, float]:
    """The ephemeral API start-up (first flow call), a trivial flow, and a flow of trivial tasks."""
    from prefect import flow, task
    from prefect.task_runners import ThreadPoolTaskRunner

    @task
    def noop(i: int) -> int:
        return i

    @flow(name="bench-noop")
    def noop_flow() -> int:
        return 1

    @flow(name="bench-noop-tasks", task_runner=ThreadPoolTaskRunner(max_workers=4))
    def noop_tasks(n: int) -> int:
        return sum(f.result() for f in noop.map(range(n)))

    timings: dict[str, float] = {}
    start = time.perf_counter()
    noop_flow()
    timings["first_flow_with_server_startup_s"] = round(time.perf_counter() - start, 3)
    with Resources() as idle:
        time.sleep(3)
    timings["server_idle_cpu_s_per_s"] = round(idle.children_cpu_s / 3, 4)
    for label, call, n in (
        ("trivial_flow_s", noop_flow, 0),
        (f"flow_with_{n_tasks}_noop_tasks_s", functools.partial(noop_tasks, n_tasks), n_tasks),
    ):
        with Resources() as resources:
            start = time.perf_counter()
            state = call(return_state=True)  # type: ignore[operator]
            timings[label] = round(time.perf_counter() - start, 3)
        task_runs_of(str(state.state_details.flow_run_id), expected=n)
        resources.settle_server_cpu()
        timings[label.replace("_s", "_server_cpu_s", 1)] = resources.to_dict()["server_cpu_s"]
    extra = timings[f"flow_with_{n_tasks}_noop_tasks_s"] - timings["trivial_flow_s"]
    timings["wall_per_noop_task_run_ms"] = round(extra / n_tasks * 1000, 2)
    extra_cpu = timings[f"flow_with_{n_tasks}_noop_tasks_server_cpu_s"] - timings["trivial_flow_server_cpu_s"]
    timings["server_cpu_per_noop_task_run_ms"] = round(extra_cpu / n_tasks * 1000, 2)
    return timings


def generate(root: Path, traces: int, seed: int, malformed: int = 5) -> dict[str, Any]:
    """Write the partition in a child process (its memory is not ours); returns its size and the time taken."""
    start = time.perf_counter()
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        pool.submit(_generate, str(root), traces, seed, malformed).result()
    return describe_partition(root, time.perf_counter() - start)


def describe_partition(root: Path, seconds: float | None) -> dict[str, Any]:
    files = sorted((root / f"dt={DAY}").iterdir())
    return {
        "seconds": None if seconds is None else round(seconds, 1),
        "files": {f.name: f.stat().st_size for f in files},
        "bytes": sum(f.stat().st_size for f in files),
    }


def _generate(root: str, traces: int, seed: int, malformed: int) -> None:
    from ragpulse.tasks.demo.generate import generate_demo_traces

    generate_demo_traces(root, start=DAY, days=1, traces_per_day=traces, seed=seed, malformed_per_day=malformed)


def profile_report(profile: cProfile.Profile, top: int) -> tuple[str, list[dict[str, Any]]]:
    stream = io.StringIO()
    stats = pstats.Stats(profile, stream=stream)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    rows = [
        {
            "function": f"{filename}:{line}({function})",
            "ncalls": ncalls,
            "tottime_s": round(tottime, 3),
            "cumtime_s": round(cumtime, 3),
        }
        for (filename, line, function), (_, ncalls, tottime, cumtime, _) in sorted(
            raw.items(), key=lambda item: item[1][2], reverse=True
        )[:top]
    ]
    return stream.getvalue(), rows


# ------------------------------------------------------------------------------------------ reporting


def environment() -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "python": platform.python_version(),
        **{name: version(name) for name in ("prefect", "duckdb", "pyarrow", "numpy")},
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


@dataclass
class Comparison:
    """One configuration: the best (fastest) of its repeats, flow against plain Python."""

    kind: str
    batch_size: int
    best: RunResult
    walls: list[float]
    plain_wall: float | None = None

    plain_cpu: float | None = None

    @property
    def orchestration_share(self) -> float | None:
        if self.plain_wall is None or self.kind == "plain":
            return None
        return (self.best.wall_s - self.plain_wall) / self.best.wall_s

    @property
    def orchestration_cpu_share(self) -> float | None:
        if self.plain_cpu is None or self.kind == "plain":
            return None
        return (self.best.total_cpu_s - self.plain_cpu) / self.best.total_cpu_s

    def to_dict(self) -> dict[str, Any]:
        r = self.best
        out: dict[str, Any] = {
            "kind": self.kind,
            "batch_size": self.batch_size,
            "best_wall_s": round(r.wall_s, 3),
            "all_wall_s": [round(w, 3) for w in self.walls],
            "traces_per_s": round(r.traces_per_s, 1),
            "n_batches": r.n_batches,
            "n_batches_cached": r.n_batches_cached,
            "task_body_s": {name: v["seconds"] for name, v in r.tasks.items()},
            "task_body_cpu_s": {name: v["cpu_s"] for name, v in r.tasks.items()},
            "peak_rss_mb": r.resources["rss_peak_mb"],
            "cpu_s": r.resources["cpu_s"],
            "server_cpu_s": r.resources["server_cpu_s"],
        }
        if self.kind != "plain":
            out.update(
                n_task_runs=sum(r.task_runs.values()),
                plain_wall_s=None if self.plain_wall is None else round(self.plain_wall, 3),
                orchestration_s=None if self.plain_wall is None else round(r.wall_s - self.plain_wall, 3),
                orchestration_share=None if self.orchestration_share is None else round(self.orchestration_share, 3),
                plain_cpu_s=None if self.plain_cpu is None else round(self.plain_cpu, 3),
                orchestration_cpu_s=None if self.plain_cpu is None else round(r.total_cpu_s - self.plain_cpu, 3),
                orchestration_cpu_share=None
                if self.orchestration_cpu_share is None
                else round(self.orchestration_cpu_share, 3),
                no_task_body_running_s=round(r.wall_s - r.busy_s, 3),
                gaps_s=r.timeline.get("gaps_s", {}),
            )
        return out


def compare(runs: list[RunResult]) -> list[Comparison]:
    groups: dict[tuple[str, int], list[RunResult]] = defaultdict(list)
    for r in runs:
        groups[(r.kind, r.batch_size)].append(r)
    best = {
        key: Comparison(key[0], key[1], min(group, key=lambda r: r.wall_s), [r.wall_s for r in group])
        for key, group in groups.items()
    }
    for (kind, batch_size), comparison in best.items():
        plain = best.get(("plain", batch_size))
        if plain is None or kind == "plain":
            continue
        # A warm run skips the bodies of cached tasks; its plain counterpart is the plain run without them.
        skipped = [name for name in plain.best.tasks if name not in comparison.best.tasks]
        comparison.plain_wall = plain.best.wall_s - sum(plain.best.task_seconds(name) for name in skipped)
        comparison.plain_cpu = plain.best.total_cpu_s - sum(plain.best.task_seconds(n, "cpu_s") for n in skipped)
    return list(best.values())


def table(comparisons: list[Comparison]) -> str:
    header = (
        f"{'run':<10} {'batch':>6} {'batches':>7} {'tasks':>5} {'wall s':>7} {'traces/s':>8} {'plain s':>7} "
        f"{'orch %':>6} {'idle s':>6} {'cpu s':>6} {'api cpu':>7} {'plain cpu':>9} {'orch cpu %':>10} {'RSS MB':>6}"
    )
    lines = [header, "-" * len(header)]
    for c in comparisons:
        r = c.best
        share = "" if c.orchestration_share is None else f"{100 * c.orchestration_share:.0f}"
        cpu_share = "" if c.orchestration_cpu_share is None else f"{100 * c.orchestration_cpu_share:.0f}"
        plain = "" if c.plain_wall is None else f"{c.plain_wall:.1f}"
        plain_cpu = "" if c.plain_cpu is None else f"{c.plain_cpu:.1f}"
        tasks = str(sum(r.task_runs.values())) if r.task_runs else ""
        idle = "" if c.kind == "plain" else f"{r.wall_s - r.busy_s:.1f}"
        lines.append(
            f"{c.kind:<10} {c.batch_size:>6} {r.n_batches:>7} {tasks:>5} {r.wall_s:>7.1f} {r.traces_per_s:>8.0f} "
            f"{plain:>7} {share:>6} {idle:>6} {r.resources['cpu_s']:>6.1f} {r.resources['server_cpu_s']:>7.1f} "
            f"{plain_cpu:>9} {cpu_share:>10} {r.resources['rss_peak_mb']:>6.0f}"
        )
    lines.append("")
    names = list(dict.fromkeys(name for c in comparisons for name in c.best.tasks))
    widths = [max(len(name), 11) for name in names]
    lines.append(f"{'task bodies':<17} " + " ".join(f"{n:>{w}}" for n, w in zip(names, widths, strict=True)))
    for c in comparisons:
        pairs = [f"{c.best.task_seconds(n):.1f}/{c.best.task_seconds(n, 'cpu_s'):.1f}" for n in names]
        cells = " ".join(f"{pair:>{w}}" for pair, w in zip(pairs, widths, strict=True))
        lines.append(f"{c.kind:<10} {c.batch_size:>6} {cells}")
    lines.append(
        "wall: best of the repeats. plain: the same flow body without Prefect (warm: without the cached tasks).\n"
        "orch % = (flow wall - plain wall) / flow wall. idle: flow wall time with no task body running.\n"
        "cpu s: this process; api cpu: the ephemeral API server; orch cpu % = (cpu + api cpu - plain cpu) / "
        "(cpu + api cpu).\ntask bodies: wall s / CPU s of the calling thread, summed over calls (score-batch runs "
        "up to 4 at a time in the flow)."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=100_000, help="valid traces in the partition (default 100000)")
    parser.add_argument("--batch-sizes", default="1000,5000,20000", help="comma-separated (default 1000,5000,20000)")
    parser.add_argument("--warm-batch-size", type=int, default=5000, help="batch size re-run warm; 0: none")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each configuration; the best counts (default 1)")
    parser.add_argument(
        "--max-workers", type=int, help="thread-pool size for the flow runs (default: RunnerConfig's max_workers)"
    )
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--source", type=Path, help=f"use this existing partition root (with dt={DAY}/)")
    parser.add_argument("--work-root", type=Path, help="where to write data and runs (kept; default: a temp dir)")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain-Python baseline runs")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also cProfile a plain run at --warm-batch-size and print the top N functions by own time",
    )
    parser.add_argument("--noop-tasks", type=int, default=200, help="trivial tasks for the per-task overhead probe")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results (default bench/results/flow.json)")
    args = parser.parse_args(argv)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]

    for name, value in PREFECT_ENV.items():
        os.environ.setdefault(name, value)
    logging.getLogger("great_expectations").setLevel(logging.WARNING)  # one INFO line per suite run otherwise
    scratch = args.work_root or Path(tempfile.mkdtemp(prefix="ragpulse-bench-flow-"))
    scratch.mkdir(parents=True, exist_ok=True)
    # A private Prefect home: a fresh API database, no history from other runs on this machine.
    os.environ.setdefault("PREFECT_HOME", str(scratch / "prefect-home"))
    began = time.perf_counter()
    env = environment()
    try:
        if args.source is None:
            source = scratch / "traces"
            print(f"generating {args.traces} traces under {source} ...", flush=True)
            data = generate(source, args.traces, args.seed)
            print(f"  {data['bytes'] / 2**20:.0f} MiB in {data['seconds']} s", flush=True)
        else:
            source = args.source
            data = describe_partition(source, None)

        print("starting Prefect's ephemeral API (timed separately) ...", flush=True)
        startup = time_startup(args.noop_tasks)
        print(f"  {startup}", flush=True)
        # Untimed warm-up on a small partition: first-call costs (lazy imports, DuckDB, Parquet) are not measured.
        print("warm-up on 300 traces (not timed) ...", flush=True)
        generate(scratch / "warmup-traces", 300, args.seed)
        warmup = {
            "first_plain_run_s": round(run_plain(scratch / "warmup-traces", scratch / "warmup-plain", 100).wall_s, 3),
            "first_flow_run_s": round(
                run_flow(scratch / "warmup-traces", scratch / "warmup-flow", 100, "flow-cold").wall_s, 3
            ),
        }
        print(f"  {warmup}", flush=True)
        for name in list(logging.root.manager.loggerDict):  # GX pins some module loggers at INFO on import
            if name.split(".")[0] == "great_expectations":
                logging.getLogger(name).setLevel(logging.WARNING)

        runs: list[RunResult] = []
        for repeat in range(args.repeat):
            for batch_size in batch_sizes:
                kinds = ("flow-cold",) if args.no_plain else ("plain", "flow-cold")
                for kind in kinds:
                    root = scratch / f"{kind}-{batch_size}-{repeat}"
                    print(f"{kind:<9} batch_size={batch_size:<6} repeat {repeat + 1}/{args.repeat} ...", end=" ")
                    if kind == "plain":
                        result = run_plain(source, root, batch_size, repeat=repeat)
                        shutil.rmtree(root)
                    else:
                        result = run_flow(source, root, batch_size, kind, repeat=repeat, max_workers=args.max_workers)
                        if batch_size != args.warm_batch_size:
                            shutil.rmtree(root)
                    print(f"{result.wall_s:.1f} s", flush=True)
                    runs.append(result)
        if args.warm_batch_size:
            batch_size = args.warm_batch_size
            for repeat in range(args.repeat):
                root = scratch / f"flow-cold-{batch_size}-{repeat}"
                if not root.exists():
                    run_flow(source, root, batch_size, "flow-cold", max_workers=args.max_workers)
                print(f"flow-warm batch_size={batch_size:<6} repeat {repeat + 1}/{args.repeat} ...", end=" ")
                result = run_flow(source, root, batch_size, "flow-warm", repeat=repeat, max_workers=args.max_workers)
                print(f"{result.wall_s:.1f} s", flush=True)
                runs.append(result)

        profile_text, profile_rows = "", []
        if args.profile:
            print(f"cProfile of a plain run, batch_size={args.warm_batch_size or batch_sizes[0]} ...", flush=True)
            profiler = cProfile.Profile()
            run_plain(source, scratch / "profile", args.warm_batch_size or batch_sizes[0], profile=profiler)
            profile_text, profile_rows = profile_report(profiler, args.profile)

        comparisons = compare(runs)
        counts = {r.n_traces for r in runs}
        if len(counts) > 1:
            print(f"WARNING: runs scored different numbers of traces: {sorted(counts)}", file=sys.stderr)
        print()
        print(table(comparisons))
        if profile_text:
            print()
            print(profile_text)
        env["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        result_json = {
            "benchmark": "evaluate-partition flow, end to end (bench/bench_flow.py)",
            "command": " ".join(["python", "bench/bench_flow.py", *(argv if argv is not None else sys.argv[1:])]),
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "environment": env,
            "max_workers": args.max_workers or "RunnerConfig default (thread, max_workers=4)",
            "data": {"traces": args.traces, "partition": str(DAY), "generator": "ragpulse.tasks.demo.generate", **data},
            "startup": startup,
            "warmup_300_traces": warmup,
            "summary": [c.to_dict() for c in comparisons],
            "runs": [r.to_dict() for r in runs],
            "profile_plain_top_tottime": profile_rows,
            "process_maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "script_seconds": round(time.perf_counter() - began, 1),
            "method": (
                "One process; the ephemeral API start-up and an untimed warm-up on 300 traces (which pays the "
                "first-call imports) come first. wall_s: the evaluate_partition call. plain: the pipeline's own body "
                "(score_partition.fn, evaluate_partition's subflow) with every task call, submit and map replaced "
                "by a direct call of Task.fn in "
                "the calling thread: no engine, API, result persistence, cache, thread pool or artifacts; fresh work "
                "dir and warehouse. flow-cold: fresh work dir and warehouse; flow-warm: the same flow re-run on the "
                "flow-cold work dir and warehouse of its batch size. Best (lowest wall) of --repeat runs. "
                "orchestration_share = (flow wall - plain wall) / flow wall; for flow-warm the plain wall excludes "
                "the bodies of the tasks that were cached. task_body_s / pure_function_s: summed durations of timed "
                "wrappers around each Task.fn and around FUNCTION_PROBES (threads overlap in the flow, so sums can "
                "exceed wall time); no_task_body_running_s: wall minus the union of task-body intervals; timeline: "
                "first start / last end of each task's bodies and the gaps between. resources: RSS sampled every "
                "20 ms (psutil) and CPU seconds of this process and of its children (the ephemeral API server)."
            ),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result_json, indent=2) + "\n")
        print(f"\nwrote {args.out} ({result_json['script_seconds']} s total)")
    finally:
        if args.work_root:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
