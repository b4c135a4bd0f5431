"""What readers cost a DuckDB publish: waiting for one in another process, and refreshing a reader snapshot.

DuckDB's file lock keeps a writer out while any other process has the file open, read-only included (a notebook,
a dashboard). ``DuckDBWarehouse.connect`` retries every ``LOCK_POLL_SECONDS`` (``_locks``) and logs its wait; this bench
measures what that costs. Per repeat, in one file holding ``--history`` days already, one after the other: a
publish nobody else holds up; a publish started while a reader process holds the file for ``--hold`` seconds
after its first query (the reader reports when it closed: the publish's time past that moment is the overshoot of
the wait); and a publish with ``?snapshot=``, which copies the file for readers after committing.

Usage::

    python bench/bench_duckdb_reader.py       # hold 2 s, 20 days before, 5 repeats -> bench/results/duckdb_reader.json
    python bench/bench_duckdb_reader.py --hold 5 --history 100 --repeat 3
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._common import cpu_model  # noqa: E402

RESULTS = REPO / "bench" / "results"
DAY = dt.date(2026, 3, 2)
TRACES = 5_000
METRICS = ("document_mrr", "hit_rate@5", "answer_f1")


def _publication(day: dt.date) -> Any:
    from ragpulse.tasks.core.types import PartitionScores, RunInfo, StagingCounts
    from ragpulse.tasks.warehouse.publication import build_publication

    rng = np.random.default_rng(day.toordinal())
    scores = PartitionScores(
        date=day,
        trace_ids=np.array([f"t{i}" for i in range(TRACES)], dtype=object),
        values={m: rng.random(TRACES) for m in METRICS},
        status={m: np.zeros(TRACES, dtype=np.int8) for m in METRICS},
        reasons={m: np.full(TRACES, None, dtype=object) for m in METRICS},
        versions=dict.fromkeys(METRICS, "1.0.0"),
        quarantined=[],
        n_records=TRACES,
        n_files=1,
        n_batches=1,
        staging=StagingCounts(records_read=TRACES, traces_read=TRACES, staged=TRACES),
    )
    run = RunInfo(f"run-{day}", "bench", "cfg", {}, dt.datetime.now(dt.UTC))
    return build_publication(scores, run, list(METRICS), n_batches_cached=0)


_READER = """
import duckdb, sys, time
con = duckdb.connect(sys.argv[1], read_only=True)
con.execute("SELECT count(*) FROM daily_scores").fetchone()
print("open", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
print(time.time(), flush=True)
"""


def one_repeat(path: Path, day: dt.date, hold: float, history: int) -> dict[str, float]:
    from ragpulse.tasks.warehouse.duckdb import DuckDBWarehouse

    warehouse = DuckDBWarehouse(f"duckdb:///{path}")
    for offset in range(history):
        warehouse.publish(_publication(day - dt.timedelta(days=history - offset)))
    started = time.perf_counter()
    warehouse.publish(_publication(day))
    alone = time.perf_counter() - started
    snapshot = path.with_name(f"{path.stem}-snapshot.duckdb")
    started = time.perf_counter()
    DuckDBWarehouse(f"duckdb:///{path}?snapshot={snapshot}").publish(_publication(day + dt.timedelta(days=2)))
    with_snapshot = time.perf_counter() - started

    reader = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_READER), str(path), str(hold)], stdout=subprocess.PIPE, text=True
    )
    assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
    started_at = time.time()
    warehouse.publish(_publication(day + dt.timedelta(days=1)))
    finished_at = time.time()
    closed_at = float(reader.stdout.readline())
    reader.wait()
    return {
        "file_mib": path.stat().st_size / 2**20,
        "publish_alone_s": alone,
        "publish_with_snapshot_s": with_snapshot,
        "publish_with_reader_s": finished_at - started_at,
        "reader_held_s": closed_at - started_at,
        "after_reader_closed_s": finished_at - closed_at,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hold", type=float, default=2.0, help="seconds the reader keeps the file open")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--history", type=int, default=20, help="days published into the file before measuring")
    parser.add_argument("--out", type=Path, default=RESULTS / "duckdb_reader.json")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        for i in range(args.repeat):
            path = Path(scratch) / f"w{i}.duckdb"
            runs.append(one_repeat(path, DAY + dt.timedelta(days=100 * i), args.hold, args.history))
    summary = {name: median(run[name] for run in runs) for name in runs[0]}
    result = {
        "machine": cpu_model(),
        "hold_s": args.hold,
        "traces_per_day": TRACES,
        "history_days": args.history,
        "score_rows": TRACES * len(METRICS),
        "median": summary,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
