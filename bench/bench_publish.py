"""Publishing throughput: N score rows into DuckDB, PostgreSQL and the Iceberg lake (local disk, S3), side by side.

One seeded publication is built before any clock starts, with ``tasks.warehouse.publication.build_publication`` as a run
builds it: N/10 traces x 10 metrics (N score rows, 2 % of them not_applicable with a NULL value), 100
quarantined records and the run row. Each backend then, through ``open_warehouse(url).publish``:

- ``first``: publishes it into an empty warehouse;
- ``replace``: publishes the same partition again ``--repeat`` times, the steady state of a daily re-run
  (PostgreSQL and DuckDB delete and insert; the lake writes new files and commits a snapshot per table).

Rows/s is N / wall seconds of one publish. PostgreSQL works in its own server process, so the client's CPU
time is shown apart, with the seconds each phase took (COPY into staging; DELETE; INSERT from staging; the
rest is schema checks and locks). S3 is moto's server on loopback (real HTTP through s3fs, in this process):
it shows the request pattern's cost, not AWS's bandwidth; the lake on S3 keeps its catalog in a SQLite file of the
work folder. After each backend the partition's row count is checked.

    python bench/bench_publish.py                                   # N = 1,000,000, every backend
    python bench/bench_publish.py --n 100000 --repeat 1 --backends duckdb,iceberg-file

``--memory`` measures peak memory instead (issue 17): a child process per backend publishes a lazily generated
day of ``--traces`` traces x 5 metrics with ~2.5 kB excerpts per trace, batch by batch (5,000 traces a batch, as
a run stages them), and reports its peak RSS above its RSS just before the publish (``VmHWM`` after resetting
it through ``/proc/self/clear_refs``). ``--baseline DIR`` runs the same children against another revision's
package (``PYTHONPATH``; see bench/README.md); a revision whose ``Publication`` takes tables gets the same rows
materialised as tables first, which is what publishing cost there.

    python bench/bench_publish.py --memory --traces 1000000 --backends duckdb,iceberg-file --baseline /tmp/base-pkg
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
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa

# Appended, not prepended: a PYTHONPATH package (another revision, --baseline) must win over this checkout.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._common import cpu_model
from ragpulse.metrics import Status
from ragpulse.tasks.core.storage import filesystem
from ragpulse.tasks.core.types import PartitionScores, QuarantinedRecord, RunInfo
from ragpulse.tasks.warehouse import Publication, open_warehouse
from ragpulse.tasks.warehouse.iceberg import IcebergLake
from ragpulse.tasks.warehouse.postgres import PostgresWarehouse
from ragpulse.tasks.warehouse.publication import build_publication

DAY = dt.date(2026, 11, 1)
METRICS = [f"metric_{i}" for i in range(10)]
PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"
BACKENDS = ("duckdb", "postgresql", "iceberg-file", "iceberg-s3")


MEMORY_METRICS = [f"metric_{i}" for i in range(5)]
MEMORY_BATCH_TRACES = 5_000


def lazy_batches(n_traces: int, table: str) -> Iterator[pa.RecordBatch]:
    """The day's score rows or trace excerpts, made a batch of MEMORY_BATCH_TRACES traces at a time, each batch
    new (as a run reads each staged batch): only the batch being made exists."""
    from ragpulse.tasks.warehouse import SCORES_SCHEMA, TRACES_SCHEMA

    now = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
    for start in range(0, n_traces, MEMORY_BATCH_TRACES):
        size = min(MEMORY_BATCH_TRACES, n_traces - start)
        ids = pa.array([f"req-{i:08x}" for i in range(start, start + size)], pa.string())
        if table == "scores":
            rng = np.random.default_rng(start)
            for metric in MEMORY_METRICS:
                yield pa.record_batch(
                    {
                        "partition_date": pa.array([DAY] * size, pa.date32()),
                        "trace_id": ids,
                        "metric": pa.array([metric] * size),
                        "value": pa.array(rng.random(size)),
                        "status": pa.array(["ok"] * size),
                        "reason": pa.nulls(size, pa.string()),
                        "metric_version": pa.array(["1.0.0"] * size),
                        "run_id": pa.array(["bench-run"] * size),
                        "computed_at": pa.array([now] * size, pa.timestamp("us", tz="UTC")),
                        "judge_model": pa.nulls(size, pa.string()),
                        "prompt_version": pa.nulls(size, pa.string()),
                    },
                    schema=SCORES_SCHEMA,
                )
            continue
        # ~2.5 kB of text a trace, like the excerpts of a real day (bench/README.md, issue 17).
        text = [f"{i:08x} " + "x" * 991 for i in range(start, start + size)]
        yield pa.record_batch(
            {
                "partition_date": pa.array([DAY] * size, pa.date32()),
                "trace_id": ids,
                "run_id": pa.array(["bench-run"] * size),
                "timestamp": pa.array([now] * size, pa.timestamp("us", tz="UTC")),
                "question": pa.array(text),
                "answer": pa.array(text),
                "contexts": pa.array([f'[{{"id": "d{i}", "text": "{"y" * 400}", "score": 0.5}}]' for i in range(size)]),
                "metadata": pa.array(['{"app": "support-bot"}'] * size),
                "source_file": pa.array([f"s3://logs/dt={DAY}/part-{start // MEMORY_BATCH_TRACES}.jsonl"] * size),
                "source_line": pa.array(range(1, size + 1), pa.int64()),
                "language": pa.array(["en"] * size),
            },
            schema=TRACES_SCHEMA,
        )


def lazy_publication(n_traces: int) -> Publication:
    """A day of ``n_traces`` traces x 5 metrics: row sources where this revision has them, else materialised."""
    from ragpulse.tasks import warehouse
    from ragpulse.tasks.warehouse import QUARANTINE_SCHEMA, RUNS_SCHEMA, SCORES_SCHEMA, TRACES_SCHEMA

    run: dict[str, Any] = dict.fromkeys((name for name in RUNS_SCHEMA.names if name.startswith("n_")), 0)
    run.update(n_traces=n_traces, n_records=n_traces, n_scores=n_traces * len(MEMORY_METRICS))
    now = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
    run.update(run_id="bench-run", partition_date=DAY, source="s3://logs", config_hash="h", config="{}")
    run.update(metrics=",".join(MEMORY_METRICS), started_at=now, finished_at=now)
    tables: dict[str, Any] = {}
    for key, schema, rows in (
        ("scores", SCORES_SCHEMA, n_traces * len(MEMORY_METRICS)),
        ("traces", TRACES_SCHEMA, n_traces),
    ):
        if hasattr(warehouse, "RowSource"):
            tables[key] = warehouse.RowSource(schema, rows, lambda key=key: lazy_batches(n_traces, key))
        else:
            tables[key] = pa.Table.from_batches(list(lazy_batches(n_traces, key)), schema=schema)
    return Publication(
        DAY,
        MEMORY_METRICS,
        tables["scores"],
        QUARANTINE_SCHEMA.empty_table(),
        pa.Table.from_pylist([run], schema=RUNS_SCHEMA),
        traces=tables["traces"],
    )


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def memory_child(backend: str, n_traces: int, pg_url: str) -> None:
    """One publish of the lazy day into an empty ``backend``; prints its peak RSS growth as JSON."""
    with tempfile.TemporaryDirectory() as tmp, target(backend, Path(tmp), pg_url) as (url, count):
        warehouse = open_warehouse(url)
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        before = _status_kib("VmRSS")
        wall, cpu = time.perf_counter(), time.process_time()
        publication = lazy_publication(n_traces)  # inside the measurement: at a table revision, building is the cost
        warehouse.publish(publication)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        peak = _status_kib("VmHWM")
        stored = count()
    expected = n_traces * len(MEMORY_METRICS)
    if stored != expected:
        raise SystemExit(f"{backend}: {stored:,} score rows stored, {expected:,} published")
    print(
        json.dumps(
            {
                "backend": backend,
                "ragpulse": str(Path(sys.modules["ragpulse.tasks.warehouse"].__file__ or "").parent),
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "rss_before_mib": round(before / 1024),
                "peak_growth_mib": round((peak - before) / 1024),
                "score_rows": stored,
            }
        )
    )


def memory_main(args: argparse.Namespace, backends: list[str]) -> None:
    """Peak RSS of publishing the lazy day, per backend, at this revision and (``--baseline``) another one."""
    import subprocess

    sides = {"after": os.environ.get("PYTHONPATH", "")}
    if args.baseline:
        sides = {"before": str(args.baseline), **sides}
    # Bytes of the rows published: one batch of each table, times the number of batches.
    batches = -(-args.traces // MEMORY_BATCH_TRACES)
    sample = {key: list(lazy_batches(min(args.traces, MEMORY_BATCH_TRACES), key)) for key in ("scores", "traces")}
    total = batches * sum(b.nbytes for rows in sample.values() for b in rows)
    results = []
    for backend in backends:
        row: dict[str, Any] = {"backend": backend}
        # Side by side: before and after for one backend, then the next.
        for side, path in sides.items():
            env = {**os.environ, "PYTHONPATH": path}
            command = [sys.executable, __file__, "--memory-child", backend, "--traces", str(args.traces)]
            done = subprocess.run([*command, "--pg-url", args.pg_url], env=env, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"{backend} ({side}) failed:\n{done.stderr[-3000:]}")
            row[side] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{backend:>13} {side:>6}: {row[side]}", flush=True)
        if "before" in row:
            row["peak_growth_ratio_before_to_after"] = round(
                row["before"]["peak_growth_mib"] / max(row["after"]["peak_growth_mib"], 1), 1
            )
        results.append(row)
    result = {
        "benchmark": "publish-memory",
        "n_traces": args.traces,
        "metrics": len(MEMORY_METRICS),
        "batch_traces": MEMORY_BATCH_TRACES,
        "arrow_mib_published": round(total / 2**20),
        "results": results,
        "environment": {
            "python": platform.python_version(),
            **{name: version(name) for name in ("duckdb", "pyarrow", "psycopg", "s3fs")},
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "load_average_1min": os.getloadavg()[0],
        },
    }
    existing = json.loads(args.out.read_text()) if args.out.exists() else {}
    existing["memory"] = result
    args.out.write_text(json.dumps(existing, indent=2) + "\n")
    print(f"wrote the memory results into {args.out}")


def make_publication(n_rows: int, seed: int) -> Publication:
    rng = np.random.default_rng(seed)
    n = n_rows // len(METRICS)
    values = {m: rng.random(n) for m in METRICS}
    status = {m: np.where(rng.random(n) < 0.02, Status.NOT_APPLICABLE, Status.OK).astype(np.int8) for m in METRICS}
    for m in METRICS:
        values[m][status[m] != Status.OK] = np.nan
    reasons = {m: np.where(status[m] != Status.OK, "no_relevance_labels", None).astype(object) for m in METRICS}
    scores = PartitionScores(
        date=DAY,
        trace_ids=np.array([f"req-{i:08x}" for i in range(n)], dtype=object),
        values=values,
        status=status,
        reasons=reasons,
        versions=dict.fromkeys(METRICS, "1.0.0"),
        quarantined=[
            QuarantinedRecord(f"s3://logs/dt={DAY}/part-0.jsonl", i, None, "<record>", "invalid JSON", "{" * 200)
            for i in range(100)
        ],
        n_records=n + 100,
        n_files=10,
        n_batches=n // 5000 + 1,
    )
    run = RunInfo("bench-run", "s3://logs/rag", "0123456789abcdef", {"batch_size": 5000}, dt.datetime.now(dt.UTC))
    return build_publication(scores, run, METRICS, n_batches_cached=0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def target(backend: str, workdir: Path, pg_url: str) -> Iterator[tuple[str, Callable[[], int]]]:
    """The URL of an empty warehouse of ``backend`` and a function counting its scores rows; cleaned up after."""
    if backend == "duckdb":
        import duckdb

        path = workdir / "bench.duckdb"

        def count_duckdb() -> int:
            with duckdb.connect(str(path), read_only=True) as con:
                row = con.execute("SELECT count(*) FROM scores").fetchone()
                return int(row[0]) if row else 0

        yield f"duckdb:///{path}", count_duckdb
    elif backend == "postgresql":
        import psycopg
        from psycopg import sql

        schema = f"ragpulse_bench_{uuid.uuid4().hex[:8]}"

        def count_postgres() -> int:
            with psycopg.connect(PG_DSN) as con:
                row = con.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, "scores"))
                ).fetchone()
                return int(row[0]) if row else 0

        try:
            yield f"{pg_url}?schema={schema}", count_postgres
        finally:
            with psycopg.connect(PG_DSN, autocommit=True) as con:
                con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    elif backend == "iceberg-file":
        url = str(workdir / "lake")
        yield url, lambda: lake_rows(url)
    else:
        from moto.server import ThreadedMotoServer

        port = free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        env = {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}",
        }
        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        try:
            import s3fs

            s3fs.S3FileSystem(skip_instance_cache=True).mkdir("ragpulse-bench")
            url = f"s3://ragpulse-bench/lake?catalog=sqlite:///{workdir}/catalog.db"
            yield url, lambda: lake_rows(url)
        finally:
            server.stop()
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def lake_rows(url: str) -> int:
    rows = 0
    for location in IcebergLake(url).data_files("scores"):
        fs, path = filesystem(location)
        rows += pq.read_metadata(path, filesystem=fs).num_rows
    return rows


def timed_publish(url: str, publication: Publication) -> dict[str, Any]:
    warehouse = open_warehouse(url)
    phases = instrument(warehouse) if isinstance(warehouse, PostgresWarehouse) else None
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    warehouse.publish(publication)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    timing: dict[str, Any] = {"wall_s": round(wall, 3), "client_cpu_s": round(cpu, 3)}
    if phases is not None:
        timing["phases_s"] = {name: round(seconds, 3) for name, seconds in sorted(phases.items())}
    return timing


def instrument(warehouse: PostgresWarehouse) -> dict[str, float]:
    """Seconds per phase of a PostgreSQL publish: COPY into staging, then each SQL verb (DELETE, INSERT...)."""
    phases: dict[str, float] = defaultdict(float)
    started: list[float] = []

    @sa.event.listens_for(warehouse._engine, "before_cursor_execute")
    def before(*_: Any) -> None:
        started.append(time.perf_counter())

    @sa.event.listens_for(warehouse._engine, "after_cursor_execute")
    def after(_conn: Any, _cursor: Any, statement: str, *__: Any) -> None:
        phases[statement.split(None, 1)[0].lower()] += time.perf_counter() - started.pop()

    bulk_load = warehouse._bulk_load

    def copy(*args: Any) -> None:
        began = time.perf_counter()
        bulk_load(*args)
        phases["copy"] += time.perf_counter() - began

    warehouse._bulk_load = copy  # type: ignore[method-assign]
    return phases


def version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def postgres_version() -> str | None:
    import psycopg

    with contextlib.suppress(psycopg.Error), psycopg.connect(PG_DSN) as con:
        row = con.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else None
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="score rows (default 1,000,000)")
    parser.add_argument("--repeat", type=int, default=3, help="replacing publishes per backend (default 3)")
    parser.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated subset of {BACKENDS}")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "publish.json")
    parser.add_argument("--memory", action="store_true", help="measure peak RSS of a lazily generated day instead")
    parser.add_argument("--traces", type=int, default=1_000_000, help="traces of the --memory day (default 1M)")
    parser.add_argument("--baseline", type=Path, help="--memory: also run against this revision's package")
    parser.add_argument("--memory-child", choices=BACKENDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.traces, args.pg_url)
        return
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backends {unknown}; choose from {BACKENDS}")
    if args.memory:
        memory_main(args, backends)
        return

    started = time.perf_counter()
    publication = make_publication(args.n, args.seed)
    n_rows = publication.scores.num_rows
    print(f"publication: {n_rows:,} score rows built in {time.perf_counter() - started:.1f} s", flush=True)
    load = {"before": os.getloadavg()[0]}
    results = []
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp, target(backend, Path(tmp), args.pg_url) as (url, count):
            first = timed_publish(url, publication)
            replace = [timed_publish(url, publication) for _ in range(args.repeat)]
            stored = count()
        if stored != n_rows:
            raise SystemExit(f"{backend}: {stored:,} score rows stored, {n_rows:,} published")
        walls = [r["wall_s"] for r in replace]
        row = {
            "backend": backend,
            "first": {**first, "rows_per_s": round(n_rows / first["wall_s"])},
            "replace": replace,
            "replace_median_rows_per_s": round(n_rows / statistics.median(walls)) if walls else None,
            "replace_best_rows_per_s": round(n_rows / min(walls)) if walls else None,
        }
        results.append(row)
        print(
            f"{backend:>13}: first {row['first']['rows_per_s']:>9,} rows/s ({first['wall_s']:.2f} s, client CPU "
            f"{first['client_cpu_s']:.2f} s); replace median {row['replace_median_rows_per_s'] or 0:>9,} rows/s, "
            f"best {row['replace_best_rows_per_s'] or 0:>9,} rows/s",
            flush=True,
        )
    load["after"] = os.getloadavg()[0]
    environment = {
        "python": platform.python_version(),
        **{name: version(name) for name in ("duckdb", "pyarrow", "sqlalchemy", "psycopg", "s3fs", "moto")},
        "postgresql_server": postgres_version() if "postgresql" in backends else None,
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": load,
        "platform": platform.platform(),
    }
    result = {
        "benchmark": "publish",
        "n_score_rows": n_rows,
        "n_traces": n_rows // len(METRICS),
        "metrics": len(METRICS),
        "repeat": args.repeat,
        "seed": args.seed,
        "results": results,
        "environment": environment,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"environment: {environment}\nwrote {args.out}")


if __name__ == "__main__":
    main()
