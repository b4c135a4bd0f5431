"""Scale-out of one day (issue 17): staging in bounded slices on a Dask LocalCluster, measured task by task.

Generates one ``dt=`` partition of N demo traces (``bench_flow.generate``), then reshapes it the way production
days look: the gzipped share is rotated into files of about a slice each (gzip cannot be cut), and the Parquet file
is rewritten with row groups of ``--row-group`` rows, so that the plain JSONL file is cut by byte ranges and the
Parquet file by row groups. Then, side by side in one run:

* **dask cold**: ``evaluate_partition`` with a LocalCluster of ``--workers`` single-threaded worker processes and
  ``slice_mb = --slice-mb``, on a fresh work dir and warehouse;
* **dask warm**: the same call again on the unchanged day (every slice must come from the cache);
* **thread, one slice**: the thread runner with one slice for the whole day (today's staging: one task), on its own
  work dir and warehouse; its ``scores`` and ``traces`` tables must equal the Dask run's, row for row.

A Dask worker plugin records every task the workers execute: its Prefect task and state, the worker, its duration
and the worker process's RSS when it started and at its peak (psutil, sampled every 5 ms; the workers run one task
at a time, so the peak is the task's). A staging slice's work is its bytes (uncompressed for Parquet) and the
records it read; a scoring or profiling task's is its batch's rows. Shares are of the day's bytes and records.
The flow process (this one) is sampled the same way. An untimed warm-up run on 300 traces comes first: a worker's
first task pays its imports and Prefect client start-up (about a minute each on a loaded 2-core machine).

Usage::

    python bench/bench_scaleout.py                       # 200,000 traces -> bench/results/scaleout.json
    python bench/bench_scaleout.py --n 50000 --slice-mb 8 --data /tmp/scaleout-data   # keep and reuse the day
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import psutil
from distributed import WorkerPlugin

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._common import cpu_model  # noqa: E402
from bench.bench_flow import DAY, PREFECT_ENV, describe_partition, generate  # noqa: E402

RESULTS = REPO / "bench" / "results"
SAMPLE_S = 0.005
MIB = 2**20


# ------------------------------------------------------------------------------------------ the day


def reshape(directory: Path, gzip_files: int, row_group: int) -> None:
    """Rotate the gzipped JSONL into ``gzip_files`` files, rewrite the Parquet file with ``row_group`` rows per
    row group (in a child process: its memory is not the flow's)."""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        pool.submit(_reshape, str(directory), gzip_files, row_group).result()


def _reshape(directory: str, gzip_files: int, row_group: int) -> None:
    import pyarrow.parquet as pq

    root = Path(directory)
    (packed,) = root.glob("*.jsonl.gz")
    lines = gzip.decompress(packed.read_bytes()).splitlines(keepends=True)
    packed.unlink()
    per_file = -(-len(lines) // gzip_files)
    for i in range(gzip_files):
        chunk = b"".join(lines[i * per_file : (i + 1) * per_file])
        (root / f"traces-01-{i:02d}.jsonl.gz").write_bytes(gzip.compress(chunk, mtime=0))
    (parquet,) = root.glob("*.parquet")
    table = pq.read_table(parquet)
    pq.write_table(table, parquet, row_group_size=row_group)


# ------------------------------------------------------------------------------------------ measuring


class TaskRecorder(WorkerPlugin):
    """A Dask worker plugin: one record per task the worker executes (Prefect task, work, duration, RSS)."""

    name = "ragpulse-task-recorder"

    def setup(self, worker: Any) -> None:
        self.worker = worker
        self.records: list[dict[str, Any]] = []
        self.process = psutil.Process()
        self.current: dict[str, Any] | None = None
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            current = self.current
            if current is not None:
                current["rss_peak"] = max(current["rss_peak"], self.process.memory_info().rss)
            time.sleep(SAMPLE_S)

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        if finish == "executing":
            rss = self.process.memory_info().rss
            self.current = {"key": str(key), "t0": time.time(), "rss_start": rss, "rss_peak": rss}
            self.current.update(_describe(self.worker.state.tasks[key].run_spec))
        elif start == "executing" and self.current is not None:
            record, self.current = self.current, None
            record["duration_s"] = time.time() - record.pop("t0")
            record["rss_peak"] = max(record["rss_peak"], self.process.memory_info().rss)
            record["worker"] = self.worker.address
            state = self.worker.data.get(key) if finish == "memory" else None
            record["state"] = getattr(state, "name", finish)
            staged = _staged_slice(state) if record.get("task") == "stage-slice" else None
            if staged is not None and staged.counts is not None:
                record["records"] = staged.counts.records_read
            self.records.append(record)


def _describe(spec: Any) -> dict[str, Any]:
    """The Prefect task of a Dask task (prefect-dask passes ``task`` and ``parameters``) and the work it was given."""
    kwargs = getattr(spec, "kwargs", None) or {}
    task, parameters = _value(kwargs.get("task")), _value(kwargs.get("parameters")) or {}
    found: dict[str, Any] = {"task": getattr(task, "name", None)}
    if "pieces" in parameters:
        from ragpulse.tasks.ingest.slicing import slice_label

        pieces = parameters["pieces"]
        found.update(label=slice_label(pieces), bytes=sum(p.n_bytes for p in pieces))
    batch = parameters.get("batch")
    if batch is not None and hasattr(batch, "n_rows"):
        found.update(label=batch.content_hash[:12], records=batch.n_rows)
    return found


def _staged_slice(state: Any) -> Any:
    """The StagedSlice a stage-slice state holds in memory (a result record's value), without loading anything."""
    data = getattr(state, "data", None)
    value = getattr(data, "result", data)
    return getattr(value, "staged", None)


def _value(node: Any) -> Any:
    """A task-spec argument's value (dask wraps literals in data nodes)."""
    return getattr(node, "value", node) if type(node).__name__ in ("DataNode", "Alias") else node


@contextmanager
def own_peak() -> Iterator[dict[str, float]]:
    """Peak RSS of this process while the block runs."""
    process, found, stop = psutil.Process(), {"rss_peak": 0.0}, threading.Event()

    def sample() -> None:
        while not stop.is_set():
            found["rss_peak"] = max(found["rss_peak"], process.memory_info().rss)
            time.sleep(SAMPLE_S)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        stop.set()
        thread.join()


def evaluate(data: Path, scratch: Path, name: str, slice_mb: float, batch_size: int, address: str | None) -> Any:
    from ragpulse.flows.evaluate import evaluate_partition
    from ragpulse.tasks.config import OutputConfig, RunnerConfig, ScoringConfig, SourceConfig

    runner = RunnerConfig(kind="dask", dask_address=address) if address else RunnerConfig()
    start = time.perf_counter()
    with own_peak() as peak:
        summary = evaluate_partition(
            date=DAY,
            source=SourceConfig(url=str(data), slice_mb=slice_mb),
            scoring=ScoringConfig(batch_size=batch_size),
            output=OutputConfig(warehouse=f"duckdb:///{scratch / f'{name}.duckdb'}", work_dir=str(scratch / name)),
            runner=runner,
        )
    return summary, time.perf_counter() - start, peak["rss_peak"]


def tables_equal(scratch: Path, left: str, right: str) -> dict[str, Any]:
    """The scores and traces tables of two runs, compared row for row (run ids aside)."""
    import duckdb

    found: dict[str, Any] = {}
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{scratch / f'{left}.duckdb'}' AS l (READ_ONLY)")
        con.execute(f"ATTACH '{scratch / f'{right}.duckdb'}' AS r (READ_ONLY)")
        for table in ("scores", "traces"):
            columns = [
                c for (c,) in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_catalog = 'l' AND table_name = ?",
                    [table],
                ).fetchall() if c not in ("run_id", "published_at", "computed_at")
            ]  # fmt: skip
            listed = ", ".join(f'"{c}"' for c in columns)
            ((rows,),) = con.execute(f"SELECT count(*) FROM l.{table}").fetchall()
            ((differ,),) = con.execute(
                f"SELECT count(*) FROM ((SELECT {listed} FROM l.{table} EXCEPT ALL SELECT {listed} FROM r.{table}) "
                f"UNION ALL (SELECT {listed} FROM r.{table} EXCEPT ALL SELECT {listed} FROM l.{table}))"
            ).fetchall()
            unequal = [
                c for c in columns if _count(con, f'SELECT "{c}" FROM l.{table} EXCEPT ALL SELECT "{c}" FROM r.{table}')
            ]
            found[table] = {"rows": rows, "rows_differing": differ, "columns": columns, "columns_differing": unequal}
    return found


def _count(con: Any, query: str) -> int:
    ((n,),) = con.execute(f"SELECT count(*) FROM ({query})").fetchall()
    return int(n)


def summarize(records: list[dict[str, Any]], day_bytes: int, day_records: int) -> dict[str, Any]:
    by_task: dict[str, Any] = {}
    for record in records:
        if record.get("bytes") is not None:
            record["bytes_share"] = record["bytes"] / day_bytes
        if record.get("records") is not None:
            record["records_share"] = record["records"] / day_records
        for key in ("rss_start", "rss_peak"):
            record[f"{key}_mib"] = round(record.pop(key) / MIB, 1)
        record["duration_s"] = round(record["duration_s"], 3)
    for task in sorted({str(r.get("task")) for r in records}):
        mine = [r for r in records if str(r.get("task")) == task]
        by_task[task] = {
            "tasks": len(mine),
            "states": {s: sum(r["state"] == s for r in mine) for s in sorted({r["state"] for r in mine})},
            "max_bytes_share": max((r.get("bytes_share", 0.0) for r in mine), default=None),
            "max_records_share": max((r.get("records_share", 0.0) for r in mine), default=None),
            "max_duration_s": max(r["duration_s"] for r in mine),
            "total_duration_s": round(sum(r["duration_s"] for r in mine), 2),
            "max_rss_peak_mib": max(r["rss_peak_mib"] for r in mine),
            "max_rss_growth_mib": round(max(r["rss_peak_mib"] - r["rss_start_mib"] for r in mine), 1),
        }
    return by_task


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="traces in the day")
    parser.add_argument("--workers", type=int, default=4, help="single-threaded Dask worker processes")
    parser.add_argument("--slice-mb", type=float, default=8.0)
    parser.add_argument("--batch-size", type=int, default=2500)
    parser.add_argument("--row-group", type=int, default=2000, help="rows per Parquet row group")
    parser.add_argument("--gzip-files", type=int, default=8, help="files the gzipped share is rotated into")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--data", type=Path, help="generate the day here (or reuse it)")
    parser.add_argument("--out", type=Path, default=RESULTS / "scaleout.json")
    args = parser.parse_args(argv)

    for name, value in PREFECT_ENV.items():
        os.environ.setdefault(name, value)
    scratch = Path(tempfile.mkdtemp(prefix="bench-scaleout-"))
    os.environ.setdefault("PREFECT_HOME", str(scratch / "prefect-home"))
    data = args.data or scratch / "data"
    partition = data / f"dt={DAY}"
    try:
        if not partition.exists():
            print(f"generating {args.n:,} traces ...", flush=True)
            generate(data, args.n, args.seed, malformed=0)
            reshape(partition, args.gzip_files, args.row_group)
        described = describe_partition(data, None)

        from distributed import Client, LocalCluster

        from ragpulse.tasks.core.storage import list_partition_files
        from ragpulse.tasks.ingest.slicing import plan_slices

        slice_bytes = max(1, int(args.slice_mb * MIB))
        plan = plan_slices(list_partition_files(str(data), DAY), slice_bytes)
        day_bytes = sum(p.n_bytes for pieces in plan for p in pieces)
        cluster = LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None, memory_limit=0
        )
        with cluster, Client(cluster) as client:
            client.register_plugin(TaskRecorder(), name=TaskRecorder.name)

            def collect() -> list[dict[str, Any]]:
                found = client.run(lambda dask_worker: dask_worker.plugins[TaskRecorder.name].records)
                client.run(lambda dask_worker: dask_worker.plugins[TaskRecorder.name].records.clear())
                return [record for records in found.values() for record in records]

            print("warm-up on 300 traces (imports, the workers' first Prefect task runs; untimed) ...", flush=True)
            generate(scratch / "warm-up", 300, args.seed + 1, malformed=0)
            evaluate(scratch / "warm-up", scratch, "warm-up", args.slice_mb, args.batch_size, cluster.scheduler_address)
            collect()
            print(f"dask cold: {args.workers} workers, {len(plan)} slices ...", flush=True)
            cold, cold_s, cold_rss = evaluate(
                data, scratch, "dask", args.slice_mb, args.batch_size, cluster.scheduler_address
            )
            cold_tasks = collect()
            print("dask warm ...", flush=True)
            warm, warm_s, warm_rss = evaluate(
                data, scratch, "dask", args.slice_mb, args.batch_size, cluster.scheduler_address
            )
            warm_tasks = collect()
        print("thread runner, one slice ...", flush=True)
        one, one_s, one_rss = evaluate(data, scratch, "thread", 1_048_576.0, args.batch_size, None)
        equal = tables_equal(scratch, "dask", "thread")

        day_records = cold.n_records
        result = {
            "benchmark": "bench/bench_scaleout.py",
            "data": {
                **described,
                "traces": args.n,
                "seed": args.seed,
                "partition": DAY,
                "row_group": args.row_group,
                "gzip_files": args.gzip_files,
                "plan_bytes": day_bytes,
            },
            "config": {
                "workers": args.workers,
                "threads_per_worker": 1,
                "slice_mb": args.slice_mb,
                "batch_size": args.batch_size,
                "slices": len(plan),
                "slice_kinds": {k: sum(p.kind == k for s in plan for p in s) for k in ("file", "bytes", "row_groups")},
            },
            "dask_cold": {
                "wall_s": round(cold_s, 1),
                "flow_rss_peak_mib": round(cold_rss / MIB, 1),
                "n_traces": cold.n_traces,
                "n_batches": cold.n_batches,
                "by_task": summarize(cold_tasks, day_bytes, day_records),
                "tasks": cold_tasks,
            },
            "dask_warm": {
                "wall_s": round(warm_s, 1),
                "flow_rss_peak_mib": round(warm_rss / MIB, 1),
                "n_batches_cached": warm.n_batches_cached,
                "by_task": summarize(warm_tasks, day_bytes, day_records),
            },
            "thread_one_slice": {
                "wall_s": round(one_s, 1),
                "flow_rss_peak_mib": round(one_rss / MIB, 1),
                "n_batches": one.n_batches,
            },
            "ratios": {"thread_one_slice_over_dask_cold_wall": round(one_s / cold_s, 2)},
            "outputs_equal": equal,
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "load_avg_after": os.getloadavg()},
            "notes": "Run side by side in one process; the machine is shared, wall times are noisy. RSS is psutil "
            "resident memory of the whole worker process (its imports included), sampled every 5 ms.",
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
        print(json.dumps({k: v for k, v in result.items() if k not in ("dask_cold",)}, indent=1, default=str))
        print(json.dumps(result["dask_cold"]["by_task"], indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
