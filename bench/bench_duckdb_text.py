"""How DuckDB stores the traces table's long texts: its own choice (dictionary, FSST) against zstd.

A publish inserts the day's trace excerpts and DuckDB compresses them when it checkpoints (at COMMIT for a large
transaction, or when the connection closes). This bench publishes the same excerpts into a fresh file twice per
repeat, interleaved: once with ``traces`` as ragpulse creates it (``USING COMPRESSION ZSTD`` on question, answer,
contexts and metadata) and once with that clause removed, timing the INSERT (from a RecordBatchReader under
``PUBLISH_MEMORY_LIMIT``, as ``DuckDBWarehouse`` does), the COMMIT and the close, with the process's CPU time and
the file's size.

Two texts of the same shape: the demo's (``generate_demo_traces``, staged and cut into excerpts by the real code;
its passages repeat across traces, which dictionary compression likes) and the same excerpts with every text
replaced by random words of the same length (no passage repeats, closer to production logs).

Usage::

    python bench/bench_duckdb_text.py                  # 100,000 traces, 3 repeats -> bench/results/duckdb_text.json
    python bench/bench_duckdb_text.py --traces 20000 --repeat 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from statistics import median
from typing import Any

import duckdb
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._common import cpu_model  # noqa: E402

RESULTS = REPO / "bench" / "results"
DAY = dt.date(2026, 3, 2)
TEXT_COLUMNS = ("question", "answer", "contexts", "metadata")


def demo_excerpts(traces: int, scratch: Path) -> pa.Table:
    """Trace excerpts of a generated demo day, staged and cut as a run does."""
    from ragpulse.tasks.core.storage import list_partition_files
    from ragpulse.tasks.core.types import TRACE_ROWS_SCHEMA
    from ragpulse.tasks.demo.generate import generate_demo_traces
    from ragpulse.tasks.ingest.batches import read_staged
    from ragpulse.tasks.ingest.staging import stage_records
    from ragpulse.tasks.warehouse.publication import _excerpts

    generate_demo_traces(str(scratch / "traces"), start=DAY, days=1, traces_per_day=traces, seed=7, malformed_per_day=0)
    files = list_partition_files(str(scratch / "traces"), DAY)
    staged = stage_records(DAY, files, staged_url=str(scratch / "staged"), batch_size=5000, language="en")
    with duckdb.connect() as con:
        return pa.concat_tables(
            _excerpts(con, read_staged(ref, columns=TRACE_ROWS_SCHEMA.names)) for ref in staged.batches
        )


def random_words(excerpts: pa.Table, seed: int) -> pa.Table:
    """The excerpts with each text replaced by random lowercase words of the same length (contexts stay JSON)."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 10))) for _ in range(50_000)]

    def text(length: int) -> str:
        words: list[str] = []
        size = 0
        while size < length:
            words.append(rng.choice(vocabulary))
            size += len(words[-1]) + 1
        return " ".join(words)[:length]

    def contexts(value: str) -> str:
        return json.dumps([{**c, "text": text(len(c["text"] or ""))} for c in json.loads(value)], ensure_ascii=False)

    replaced = {
        "question": [text(len(q)) for q in excerpts.column("question").to_pylist()],
        "answer": [None if a is None else text(len(a)) for a in excerpts.column("answer").to_pylist()],
        "contexts": [contexts(c) for c in excerpts.column("contexts").to_pylist()],
    }
    for name, values in replaced.items():
        index = excerpts.column_names.index(name)
        excerpts = excerpts.set_column(index, name, pa.array(values, pa.string()))
    return excerpts


def traces_ddl(zstd: bool) -> str:
    from ragpulse.tasks.warehouse._schema import TABLES
    from ragpulse.tasks.warehouse.duckdb import _ZSTD, _create_table

    ddl = _create_table(TABLES["traces"], "traces")
    return ddl if zstd else ddl.replace(f" {_ZSTD}", "")


def publish_once(rows: pa.Table, zstd: bool, scratch: Path) -> dict[str, Any]:
    from ragpulse.tasks.warehouse.duckdb import PUBLISH_MEMORY_LIMIT

    path = scratch / f"traces-{'zstd' if zstd else 'default'}.duckdb"
    for leftover in (path, path.with_name(path.name + ".wal")):
        leftover.unlink(missing_ok=True)
    con = duckdb.connect(str(path))
    con.execute(f"SET memory_limit = '{PUBLISH_MEMORY_LIMIT}'")
    con.execute(traces_ddl(zstd))
    incoming = rows.append_column("partition_date", pa.array([DAY] * rows.num_rows, pa.date32()))
    incoming = incoming.append_column("run_id", pa.array(["bench"] * rows.num_rows))

    def batches() -> Iterator[pa.RecordBatch]:
        yield from incoming.to_batches(max_chunksize=5000)

    con.register("incoming", pa.RecordBatchReader.from_batches(incoming.schema, batches()))
    cpu, start = time.process_time(), time.perf_counter()
    con.execute("BEGIN TRANSACTION")
    con.execute("INSERT INTO traces BY NAME SELECT * FROM incoming")
    inserted = time.perf_counter()
    con.execute("COMMIT")
    committed = time.perf_counter()
    con.close()
    closed = time.perf_counter()
    return {
        "insert_s": round(inserted - start, 3),
        "commit_s": round(committed - inserted, 3),
        "close_s": round(closed - committed, 3),
        "wall_s": round(closed - start, 3),
        "cpu_s": round(time.process_time() - cpu, 3),
        "file_mib": round(path.stat().st_size / 2**20, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "duckdb_text.json")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {
        "machine": cpu_model(),
        "duckdb": duckdb.__version__,
        "traces": args.traces,
        "repeat": args.repeat,
        "texts": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-duckdb-text-") as tmp:
        scratch = Path(tmp)
        demo = demo_excerpts(args.traces, scratch)
        for kind, rows in (("demo", demo), ("random words", random_words(demo, seed=11))):
            runs: dict[str, list[dict[str, Any]]] = {"default": [], "zstd": []}
            for _ in range(args.repeat):
                for label, zstd in (("default", False), ("zstd", True)):
                    runs[label].append(publish_once(rows, zstd, scratch))
            summary = {
                label: {key: median(run[key] for run in measured) for key in measured[0]}
                for label, measured in runs.items()
            }
            results["texts"][kind] = {"arrow_mib": round(rows.nbytes / 2**20, 1), "median": summary, "runs": runs}
            default, zstd = summary["default"], summary["zstd"]
            print(
                f"{kind}: {rows.num_rows:,} excerpts, {rows.nbytes / 2**20:.0f} MiB in Arrow; "
                f"default {default['wall_s']:.2f} s wall, {default['cpu_s']:.2f} CPU s, {default['file_mib']:.0f} MiB; "
                f"zstd {zstd['wall_s']:.2f} s, {zstd['cpu_s']:.2f} CPU s, {zstd['file_mib']:.0f} MiB"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
