"""Cost of the ``traces`` table in publishing: re-reading the staged batches for trace excerpts, and DuckDB publish
time with vs without the traces rows, side by side in one run.

Setup (untimed, once): one partition of N demo traces (``ragpulse.tasks.demo.generate``, generated in a child process; 5
malformed lines, one of them a repeated trace id), staged with ``tasks.ingest.staging.stage_records`` in batches of
5,000 as the flow stages it, and scored with ``score_batch``'s body per batch (``metrics.DEFAULT_METRICS``).

Timed, every variant once per round, ``--repeat`` rounds:

1. ``assemble-partition``'s work: ``assemble_partition`` (join, de-duplicate), the excerpts that publishing reads
   (``trace_excerpts(...).to_table()``: every staged batch re-read, excerpts cut with DuckDB: question and answer to
   ``EXCERPT_CHARS``, each context text to ``CONTEXT_EXCERPT_CHARS``; split into Parquet reads, ``_excerpts`` and
   the rest), the quarantine copy (``write_quarantine_copy`` to a local file), and the whole task body
   ``assemble_scores.fn``. Since issue 17 the excerpts are produced while the warehouse writes them, not in
   ``assemble-partition``.
2. ``build_publication`` with the excerpts vs without staged batches (no excerpts); both are lazy since issue 17.
3. DuckDB ``open_warehouse(url).publish`` of the same publication with vs without its traces rows (traces emptied):
   two warehouse files, one per variant; a first publish into each, then replacing publishes (a daily re-run's
   steady state: delete and insert), alternating between the two files. Sizes are also given per trace.

The added cost is then set against the flow's wall time for a partition of N traces (``bench/results/flow.json``).

Usage::

    python bench/bench_traces_table.py                     # N = 100,000 (about 1.5 minutes here)
    python bench/bench_traces_table.py --traces 10000 --repeat 1 --out /tmp/traces_table.json   # quick run
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
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
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

DEFAULT_OUT = REPO / "bench" / "results" / "traces_table.json"
FLOW_RESULTS = REPO / "bench" / "results" / "flow.json"
DAY = dt.date(2026, 3, 2)


# ------------------------------------------------------------------------------------------ measuring


class Timing:
    """Wall and process-CPU seconds of repeated calls, with optional per-call parts."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.parts: list[dict[str, dict[str, float]]] = []

    def run(self, fn: Callable[[], Any], spans: Spans | None = None) -> Any:
        gc.collect()
        with spans.installed() if spans is not None else contextlib.nullcontext():
            wall, cpu = time.perf_counter(), time.process_time()
            result = fn()
            self.wall.append(time.perf_counter() - wall)
            self.cpu.append(time.process_time() - cpu)
        if spans is not None:
            self.parts.append(spans.to_dict())
        return result

    @property
    def best_wall(self) -> float:
        return min(self.wall)

    @property
    def best_cpu(self) -> float:
        return min(self.cpu)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "best_wall_s": round(self.best_wall, 4),
            "median_wall_s": round(statistics.median(self.wall), 4),
            "best_cpu_s": round(self.best_cpu, 4),
            "median_cpu_s": round(statistics.median(self.cpu), 4),
            "wall_s": [round(w, 4) for w in self.wall],
            "cpu_s": [round(c, 4) for c in self.cpu],
        }
        if self.parts:
            out["parts_of_fastest_run"] = self.parts[self.wall.index(self.best_wall)]
        return out


class Spans:
    """Seconds (wall and process CPU) and calls of named functions while installed."""

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
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.wall[label] += time.perf_counter() - wall
                self.cpu[label] += time.process_time() - cpu
                self.calls[label] += 1

        return wrapper

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {
            k: {"wall_s": round(self.wall[k], 4), "cpu_s": round(self.cpu[k], 4), "calls": self.calls[k]}
            for k in self.wall
        }


def ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("nan")


# ------------------------------------------------------------------------------------------ setup


def _generate(root: str, traces: int, seed: int) -> None:
    from ragpulse.tasks.demo.generate import generate_demo_traces

    generate_demo_traces(root, start=DAY, days=1, traces_per_day=traces, seed=seed, malformed_per_day=5)


def generate(root: Path, traces: int, seed: int) -> float:
    """Write the partition in a child process (its memory is not ours); returns the seconds taken."""
    start = time.perf_counter()
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        pool.submit(_generate, str(root), traces, seed).result()
    return time.perf_counter() - start


def dir_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


# ------------------------------------------------------------------------------------------ environment


def version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def code_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        return ""

    modules = [
        "tasks/warehouse/publication.py",
        "tasks/scoring/assemble.py",
        "tasks/ingest/staging.py",
        "tasks/ingest/slicing.py",
        "tasks/ingest/reading.py",
        "tasks/ingest/counts.py",
        "tasks/warehouse/duckdb.py",
    ]
    uncommitted = git("status", "--porcelain", "--", *modules).splitlines()
    return {"commit": git("rev-parse", "HEAD"), "uncommitted": uncommitted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=100_000, help="traces in the partition (default 100,000)")
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of each side-by-side timing (default 3)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    started = time.perf_counter()
    load = {"start": round(os.getloadavg()[0], 2)}
    code = code_state()  # at the start: the tree is shared and may change during the run

    import pyarrow.parquet as pq
    from prefect.logging import disable_run_logger

    import ragpulse.tasks.warehouse.publication as publication_module
    from ragpulse.metrics import DEFAULT_METRICS
    from ragpulse.tasks.core.storage import list_partition_files
    from ragpulse.tasks.core.types import RunInfo
    from ragpulse.tasks.ingest.quarantine import write_quarantine_copy
    from ragpulse.tasks.ingest.staging import stage_records
    from ragpulse.tasks.scoring.assemble import assemble_partition
    from ragpulse.tasks.scoring.tasks import assemble_scores, score_batch
    from ragpulse.tasks.warehouse import TRACES_SCHEMA, open_warehouse
    from ragpulse.tasks.warehouse.publication import (
        CONTEXT_EXCERPT_CHARS,
        EXCERPT_CHARS,
        build_publication,
        trace_excerpts,
    )

    names = list(DEFAULT_METRICS)
    run = RunInfo(
        "bench-run", "file:///bench", "0123456789abcdef", {"batch_size": args.batch_size}, dt.datetime.now(dt.UTC)
    )
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        print(f"generating {args.traces:,} demo traces ...", flush=True)
        generate_s = generate(scratch / "source", args.traces, args.seed)
        files = list_partition_files(str(scratch / "source"), DAY)
        t = time.perf_counter()
        staged = stage_records(DAY, files, staged_url=str(scratch / "staged"), batch_size=args.batch_size)
        stage_s = time.perf_counter() - t
        t = time.perf_counter()
        with disable_run_logger():
            scored = [score_batch.fn(batch, names) for batch in staged.batches]
        score_s = time.perf_counter() - t
        print(
            f"  generated in {generate_s:.0f} s, staged {staged.n_valid:,} traces in {len(staged.batches)} batches "
            f"({dir_mb(scratch / 'staged')} MiB) in {stage_s:.0f} s, scored in {score_s:.0f} s",
            flush=True,
        )
        setup = {
            "traces_valid": staged.n_valid,
            "quarantined_at_staging": len(staged.quarantined),
            "batches": len(staged.batches),
            "source_mb": dir_mb(scratch / "source"),
            "staged_mb": dir_mb(scratch / "staged"),
            "generate_s": round(generate_s, 1),
            "stage_records_s": round(stage_s, 1),
            "score_batches_s": round(score_s, 1),
            "metrics": names,
            "excerpt_chars": EXCERPT_CHARS,
            "context_excerpt_chars": CONTEXT_EXCERPT_CHARS,
        }

        # 1. assemble-partition's work, side by side
        print("part 1: assemble-partition's work", flush=True)
        timings = {
            k: Timing() for k in ("assemble_partition", "trace_excerpts", "write_quarantine_copy", "assemble_scores")
        }
        excerpt_spans = {
            "pq.read_table": (pq, "read_table"),
            "_excerpts (DuckDB: contexts JSON, text cuts)": (publication_module, "_excerpts"),
        }
        quarantine_url = str(scratch / "outputs" / "quarantine.jsonl")
        for round_ in range(args.repeat):
            base = timings["assemble_partition"].run(lambda: assemble_partition(staged, scored, []))
            excerpts = timings["trace_excerpts"].run(
                lambda base=base: trace_excerpts(base).to_table(), Spans(excerpt_spans)
            )
            timings["write_quarantine_copy"].run(
                lambda base=base: write_quarantine_copy(quarantine_url, base.quarantined)
            )
            scores = timings["assemble_scores"].run(lambda: assemble_scores.fn(staged, scored, [], [], quarantine_url))
            print(
                "  round "
                + str(round_ + 1)
                + ": "
                + ", ".join(f"{k} {v.wall[-1]:.2f} s ({v.cpu[-1]:.2f} CPU)" for k, v in timings.items()),
                flush=True,
            )
        assert trace_excerpts(scores).num_rows == len(scores.trace_ids) == excerpts.num_rows
        rest = timings["assemble_partition"].best_cpu + timings["write_quarantine_copy"].best_cpu
        rest_wall = timings["assemble_partition"].best_wall + timings["write_quarantine_copy"].best_wall
        excerpt_parts = timings["trace_excerpts"].to_dict()["parts_of_fastest_run"]
        unsplit_wall = timings["trace_excerpts"].best_wall - sum(v["wall_s"] for v in excerpt_parts.values())
        assemble = {
            **{k: v.to_dict() for k, v in timings.items()},
            "excerpts_over_rest_cpu": ratio(timings["trace_excerpts"].best_cpu, rest),
            "excerpts_over_rest_wall": ratio(timings["trace_excerpts"].best_wall, rest_wall),
            "excerpts_share_of_assemble_scores_cpu_pct": round(
                100 * timings["trace_excerpts"].best_cpu / timings["assemble_scores"].best_cpu, 1
            ),
            "excerpts_share_of_assemble_scores_wall_pct": round(
                100 * timings["trace_excerpts"].best_wall / timings["assemble_scores"].best_wall, 1
            ),
            "traces_rows": excerpts.num_rows,
            "trace_excerpts_unsplit_wall_s (filter, wrappers)": round(unsplit_wall, 4),
            "traces_arrow_mb": round(excerpts.nbytes / 2**20, 1),
            "traces_arrow_bytes_per_trace": round(excerpts.nbytes / max(excerpts.num_rows, 1)),
            "rest_means": "assemble_partition + write_quarantine_copy",
        }
        del base, excerpts

        # 2. build_publication with vs without excerpts
        print("part 2: build_publication with vs without the traces rows", flush=True)
        no_traces = dataclasses.replace(scores, staged_batches=[])
        builds = {"with_traces": Timing(), "without_traces": Timing()}
        for _ in range(args.repeat):
            publication = builds["with_traces"].run(lambda: build_publication(scores, run, names, n_batches_cached=0))
            builds["without_traces"].run(lambda: build_publication(no_traces, run, names, n_batches_cached=0))
        build = {
            **{k: v.to_dict() for k, v in builds.items()},
            "with_over_without_cpu": ratio(builds["with_traces"].best_cpu, builds["without_traces"].best_cpu),
        }

        # 3. DuckDB publish with vs without the traces rows, side by side
        print("part 3: DuckDB publish with vs without the traces rows", flush=True)
        variants = {
            "with_traces": publication,
            "without_traces": dataclasses.replace(publication, traces=TRACES_SCHEMA.empty_table()),
        }
        paths = {k: scratch / f"{k}.duckdb" for k in variants}
        warehouses = {k: open_warehouse(f"duckdb:///{paths[k]}") for k in variants}
        first = {k: Timing() for k in variants}
        replace = {k: Timing() for k in variants}
        for k in variants:
            first[k].run(lambda k=k: warehouses[k].publish(variants[k]))
        for round_ in range(args.repeat):
            for k in variants:
                replace[k].run(lambda k=k: warehouses[k].publish(variants[k]))
            print(
                f"  round {round_ + 1}: "
                + ", ".join(f"{k} {v.wall[-1]:.2f} s ({v.cpu[-1]:.2f} CPU)" for k, v in replace.items()),
                flush=True,
            )
        stored = {k: warehouses[k].read("traces", start=DAY, end=DAY, columns=["trace_id"]).num_rows for k in variants}
        publish = {
            k: {
                "first": first[k].to_dict(),
                "replace": replace[k].to_dict(),
                "file_mb": round(paths[k].stat().st_size / 2**20, 1),
                "traces_rows_stored": stored[k],
            }
            for k in variants
        }
        publish["with_over_without_replace_wall"] = ratio(
            replace["with_traces"].best_wall, replace["without_traces"].best_wall
        )
        publish["with_over_without_replace_cpu"] = ratio(
            replace["with_traces"].best_cpu, replace["without_traces"].best_cpu
        )
        publish["with_over_without_first_wall"] = ratio(first["with_traces"].wall[0], first["without_traces"].wall[0])
        added_bytes = paths["with_traces"].stat().st_size - paths["without_traces"].stat().st_size
        publish["file_mb_added_by_traces"] = round(added_bytes / 2**20, 1)
        publish["file_bytes_added_per_trace"] = round(added_bytes / max(stored["with_traces"], 1))
        publish["file_with_over_without"] = ratio(
            paths["with_traces"].stat().st_size, paths["without_traces"].stat().st_size
        )

    # The added cost against a whole run of the flow on a partition of the same size.
    added_wall = (
        timings["trace_excerpts"].best_wall
        + builds["with_traces"].best_wall
        - builds["without_traces"].best_wall
        + replace["with_traces"].best_wall
        - replace["without_traces"].best_wall
    )
    added_cpu = (
        timings["trace_excerpts"].best_cpu
        + builds["with_traces"].best_cpu
        - builds["without_traces"].best_cpu
        + replace["with_traces"].best_cpu
        - replace["without_traces"].best_cpu
    )
    share: dict[str, Any] = {"added_wall_s": round(added_wall, 2), "added_cpu_s": round(added_cpu, 2)}
    if FLOW_RESULTS.exists():
        flow = {(r["kind"], r["batch_size"]): r for r in json.loads(FLOW_RESULTS.read_text())["runs"]}
        for key, label in (
            (("flow-cold", 5000), "flow_cold_batch_5000"),
            (("plain", 5000), "plain_batch_5000"),
            (("flow-warm", 5000), "flow_warm_batch_5000"),
        ):
            if key in flow:
                run_s = staged.n_valid / flow[key]["traces_per_s"]
                share[label] = {
                    "run_wall_s_for_n": round(run_s, 1),
                    "added_pct_of_run_wall": round(100 * added_wall / run_s, 1),
                }
    load["end"] = round(os.getloadavg()[0], 2)
    result = {
        "benchmark": "traces_table",
        "command": " ".join(["python", "bench/bench_traces_table.py", *sys.argv[1:]]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "code": code,
        "setup": setup,
        "assemble": assemble,
        "build_publication": build,
        "duckdb_publish": publish,
        "added_by_traces_table": share,
        "environment": {
            "python": platform.python_version(),
            **{name: version(name) for name in ("numpy", "pyarrow", "duckdb", "prefect")},
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "load_average_1min": load,
            "platform": platform.platform(),
        },
        "script_seconds": round(time.perf_counter() - started, 1),
        "method": (
            "One process; setup (generation in a child process, stage_records, score_batch.fn per batch) untimed. "
            "Wall: perf_counter; CPU: process_time (all threads). Every timed call after gc.collect(). Side by "
            "side: each round runs every variant once; best and median over --repeat rounds. DuckDB: one file per "
            "variant, a first publish into each, then replacing publishes alternating between the files. "
            "added_by_traces_table = trace_excerpts + (build_publication with - without traces) + (DuckDB "
            "replace with - without traces), best of each; the run it is compared with is flow.json's wall time "
            "scaled to this partition's traces."
        ),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {args.out} in {result['script_seconds']} s")


if __name__ == "__main__":
    main()
