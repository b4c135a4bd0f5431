"""What the goals of issue 33 leave per trace, measured side by side in one run against the least each part costs.

On the day ``bench_floor.py`` evaluates (distinct texts; ``--data`` reuses one it generated), in this order:

- **floor**: ``bench_floor``'s DuckDB query (the five retrieval metrics straight from the files);
- **typed-JSON reader**: DuckDB's ``read_json`` over the same JSONL files with every field of the canonical format
  (docs/traces.md) typed ``JSON`` (the contexts as a list of structs of ``JSON``), written to zstd Parquet, plus the
  Parquet files copied. That is the least a bulk reader must do that still tells, field by field, a string from a
  number from an object, as quarantine reasons need; the checks themselves, language identification, scoring,
  the suites and the publish all come on top;
- **Python staging**: ``stage_records`` over the same files, one slice per file, in one process (its CPU is what
  staging costs however many threads share it);
- **fixed cost**: a cold and a warm ``ragpulse evaluate`` of a three-trace day against a running Prefect server, fresh
  work dir and warehouse: imports, configuration checks, flow and task runs, the summary; no per-trace work to speak
  of.

It then states the goals as a budget: k x the floor's wall (5 at 100k, 3 from 1M on) minus the fixed cost, divided
by the traces, against what the typed-JSON reader alone takes per trace. Each reader runs in its own spawned process
(a process forked from a large one inherits its RSS high-water mark, see ``bench_floor.run_ragpulse``)::

    python bench/bench_bounds.py --n 100000 --data /tmp/floor-data
    python bench/bench_bounds.py --n 1000000 --data /tmp/floor-data-1m
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._common import machine, prefect_server  # noqa: E402
from bench.bench_floor import (  # noqa: E402
    DAY,
    RESULTS,
    cli_command,
    day_files,
    distinct_texts,
    evaluate_command,
    floor,
    in_child,
    prefect_env,
    read_once,
    run_ragpulse,
)
from bench.bench_flow import describe_partition, generate  # noqa: E402

# Every top-level field of the canonical format, typed JSON: a reader typing them as VARCHAR or DOUBLE would cast a
# number to text or text to a number without a word, and a quarantine reason could no longer name the field.
_JSON_FIELDS = (
    "trace_id", "timestamp", "question", "answer", "reference", "reference_answers", "relevant_context_ids",
    "relevant_contexts", "metadata", "language", "steps", "conversation_id", "history", "tool_calls",
    "reference_tool_calls", "latency_ms", "retrieval_latency_ms", "generation_latency_ms", "usage", "errors",
    "feedback",
)  # fmt: skip
TYPED_JSON_COLUMNS = {
    **dict.fromkeys(_JSON_FIELDS, "JSON"),
    "contexts": "STRUCT(id JSON, text JSON, score JSON)[]",
}
GOALS = {100_000: 5.0, 1_000_000: 3.0}
"""The issue's wall-time factors over the floor: 5x at 100k traces, 3x at 1M (and beyond)."""


def _typed_json_reader(partition: str, out: str) -> dict[str, Any]:
    import duckdb

    json_files, parquet_files = day_files(partition)
    # At DuckDB's default memory limit, as the floor runs: under ragpulse's 512 MB this COPY of the 1M day's plain
    # JSONL file alone took 44.6 s instead of 6.8 (bench/README.md, "What the goals leave per trace").
    con = duckdb.connect()
    wall, cpu = time.perf_counter(), time.process_time()
    con.execute(
        f"COPY (SELECT * FROM read_json($files, format = 'newline_delimited', columns = $columns, "
        f"maximum_object_size = 16777216)) TO '{out}/json.parquet' (FORMAT parquet, COMPRESSION zstd)",
        {"files": json_files, "columns": TYPED_JSON_COLUMNS},
    )
    if parquet_files:
        con.execute(
            f"COPY (SELECT * FROM read_parquet($files)) TO '{out}/parquet.parquet' (FORMAT parquet, COMPRESSION zstd)",
            {"files": parquet_files},
        )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows = con.execute(f"SELECT count(*) FROM read_parquet('{out}/*.parquet')").fetchone()
    con.close()
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "rows": rows[0] if rows else 0}


def _python_staging(partition: str, out: str) -> dict[str, Any]:
    from ragpulse.tasks.core.storage import list_partition_files
    from ragpulse.tasks.ingest.staging import stage_records

    files = list_partition_files(str(Path(partition).parent), DAY)
    wall, cpu = time.perf_counter(), time.process_time()
    staged = stage_records(DAY, files, staged_url=f"file://{out}", batch_size=5000)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "rows": staged.counts.staged}


def fixed_cost(
    scratch: Path, env: dict[str, str], seed: int, interval: float, server: psutil.Process
) -> dict[str, Any]:
    """Cold and warm ``ragpulse evaluate`` of a three-trace day against the running server."""
    source = scratch / "three-trace"
    generate(source, 3, seed, malformed=0)  # the smallest day the generator makes: one trace per file
    command = [*cli_command(env), *evaluate_command(source, scratch / "work-three", scratch / "three.duckdb")[1:]]
    cold = run_ragpulse(command, env, scratch / "three-cold.log", interval, server)
    warm = run_ragpulse(command, env, scratch / "three-warm.log", interval, server)
    keep = ("exit_code", "wall_s", "cpu_s", "vm_hwm_ragpulse_mib", "server_cpu_s")
    return {"cold": {k: cold[k] for k in keep}, "warm": {k: warm[k] for k in keep}}


def budget(n: int, floor_wall: float, fixed_wall: float, reader_wall: float) -> dict[str, Any]:
    """The goal's wall time, what it leaves per trace once the fixed cost is paid, and the typed-JSON reader's
    share of it."""
    factor = GOALS.get(n, 3.0 if n > 100_000 else 5.0)
    goal = factor * floor_wall
    left = goal - fixed_wall
    return {
        "factor": factor,
        "goal_wall_s": round(goal, 2),
        "left_after_fixed_cost_s": round(left, 2),
        "left_per_trace_us": round(left / n * 1e6, 1),
        "typed_json_reader_per_trace_us": round(reader_wall / n * 1e6, 1),
        "typed_json_reader_over_left": round(reader_wall / left, 2) if left > 0 else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="traces in the day")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--data", type=Path, help="keep the generated day here, and reuse it if already there")
    parser.add_argument("--interval", type=float, default=0.1, help="RSS sampling interval of the CLI runs, s")
    parser.add_argument("--out", type=Path, help="default bench/results/bounds-<n>.json")
    args = parser.parse_args(argv)
    out = args.out or RESULTS / f"bounds-{args.n}.json"

    scratch = Path(tempfile.mkdtemp(prefix="bench-bounds-"))
    try:
        source = args.data or scratch / "traces"
        marker = source / f"generated-{args.n}-{args.seed}-distinct.json"
        if marker.exists():
            data = json.loads(marker.read_text())
        else:  # as bench_floor makes it, so that either bench reuses the other's day
            shutil.rmtree(source / f"dt={DAY}", ignore_errors=True)
            data = generate(source, args.n, args.seed, malformed=0)
            data["texts_made_distinct"] = in_child(distinct_texts, source / f"dt={DAY}", args.seed)
            marker.write_text(json.dumps(data))
        partition = source / f"dt={DAY}"
        data = {**describe_partition(source, data["seconds"]), "traces": args.n, "seed": args.seed}
        print(f"day: {args.n:,} traces, {data['bytes'] / 2**20:.0f} MiB")

        load_before = os.getloadavg()
        read_once(partition)
        floor_run = floor(partition, scratch / "floor.duckdb")
        print(f"floor: {floor_run}")
        (scratch / "typed").mkdir()
        reader = in_child(_typed_json_reader, str(partition), str(scratch / "typed"))
        print(f"typed-JSON reader: {reader}")
        staging = in_child(_python_staging, str(partition), str(scratch / "staged"))
        print(f"Python staging: {staging}")

        env = prefect_env(scratch / "prefect-home")
        with prefect_server(env, scratch / "server.log") as (url, server):
            env["PREFECT_API_URL"] = url
            fixed = fixed_cost(scratch, env, args.seed, args.interval, server)
        print(f"fixed cost: {fixed}")

        per_trace = {
            name: {"wall_us": round(run["wall_s"] / args.n * 1e6, 1), "cpu_us": round(run["cpu_s"] / args.n * 1e6, 1)}
            for name, run in (("floor", floor_run), ("typed_json_reader", reader), ("python_staging", staging))
        }
        result = {
            "benchmark": "bench/bench_bounds.py",
            "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "data": {**data, "partition": str(DAY), "texts": "distinct"},
            "floor": floor_run,
            "typed_json_reader": {**reader, "columns": TYPED_JSON_COLUMNS},
            "python_staging": staging,
            "per_trace": per_trace,
            "fixed_cost": fixed,
            "budget": budget(args.n, floor_run["wall_s"], fixed["cold"]["wall_s"], reader["wall_s"]),
            "warm_goal": {
                "fixed_warm_wall_s": fixed["warm"]["wall_s"],
                "note": "a warm re-run of any day costs at least this; under 10 % of cold needs cold >= 10x it",
                "cold_wall_needed_s": round(10 * fixed["warm"]["wall_s"], 1),
            },
            "machine": machine(load_before),
        }
        print(json.dumps({k: result[k] for k in ("per_trace", "fixed_cost", "budget", "warm_goal")}, indent=1))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(f"wrote {out}")
        rows_agree = reader["rows"] == staging["rows"] == args.n
        return 0 if rows_agree and fixed["cold"]["exit_code"] == 0 and fixed["warm"]["exit_code"] == 0 else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
