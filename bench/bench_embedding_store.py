"""The persistent embedding store (tasks/embeddings/store.py): demo days evaluated in fresh processes, with it and
without it (``RAGPULSE_EMBEDDING_CACHE_MB=off``).

Every scheduled run is a fresh process, so without the store each run encodes its texts again. Here, per mode, in
this order and each in a fresh ``ragpulse evaluate`` process with a fresh work dir and warehouse (no result cache,
the default metrics, the embedding metrics' default sample): the first demo day, the same day again (a re-run or a
backfill), then the next day (new questions, the knowledge base's passages again). One Prefect server, started
before any clock, serves every run, as a deployment's runs find it; each run's CPU is its process tree's
(``os.wait4``), the server's apart. Results: ``bench/results/embedding_store.json``.

``--demo``: ``ragpulse demo`` (what ``make demo`` runs: 7 days of 300 traces, its own temporary Prefect server) in a
fresh folder twice, the first time with an empty store, the second with the store the first left. Results:
``bench/results/embedding_store-demo.json``.

    .venv/bin/python bench/bench_embedding_store.py [--traces 120] [--demo]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ragpulse.tasks.demo.generate import generate_demo_traces
from ragpulse.tasks.embeddings.store import CACHE_DIR_ENV, CACHE_MB_ENV

try:
    from bench._common import cpu_model, prefect_server
except ImportError:  # run as a script from bench/
    from _common import cpu_model, prefect_server  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
START = dt.date(2026, 3, 2)


def evaluate(day: dt.date, traces: Path, run_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    """One ``ragpulse evaluate`` of ``day`` in a fresh process, fresh work dir and warehouse: wall and CPU seconds."""
    command = [
        str(BIN / "ragpulse"), "evaluate", "--date", day.isoformat(), "--source", str(traces),
        "--warehouse", f"duckdb:///{run_dir / 'ragpulse.duckdb'}", "--work-dir", str(run_dir / "work"), "--json",
    ]  # fmt: skip
    return timed(command, run_dir, env)


def timed(command: list[str], run_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run ``command`` in ``run_dir`` (new): wall and CPU seconds of its process tree."""
    run_dir.mkdir(parents=True)
    wall = time.perf_counter()
    with (run_dir / "stdout.log").open("wb") as out, (run_dir / "stderr.log").open("wb") as err:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=err, cwd=run_dir)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - wall
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {(run_dir / 'stderr.log').read_text()[-3000:]}")
    return {"seconds": round(seconds, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1)}


def store_rows(directory: Path) -> int:
    rows = 0
    for path in directory.glob("embeddings-*.sqlite"):
        with contextlib.closing(sqlite3.connect(path)) as connection:
            rows += connection.execute("SELECT count(*) FROM rows").fetchone()[0]
    return rows


def demo(scratch: Path) -> dict[str, Any]:
    """``ragpulse demo`` in a fresh folder with an empty store, then in another with the store the first left."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "PREFECT_"))}
    env[CACHE_DIR_ENV] = str(scratch / "store")
    runs = {}
    for name in ("empty store", "warm store"):
        run_dir = scratch / name.replace(" ", "-")
        runs[name] = timed([str(BIN / "ragpulse"), "demo", "--directory", str(run_dir / "demo")], run_dir, env)
        runs[name]["store_rows"] = store_rows(scratch / "store")
        print(f"ragpulse demo, {name}: {runs[name]}", flush=True)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=120, help="demo traces per day")
    parser.add_argument("--demo", action="store_true", help="time `ragpulse demo` with an empty and a warm store")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-embedding-store-"))
    try:
        if args.demo:
            out = args.out or ROOT / "results" / "embedding_store-demo.json"
            load_before = os.getloadavg()
            result = {
                "what": "ragpulse demo (make demo) in fresh folders, first with an empty store, then a warm one",
                "runs": demo(scratch),
                "cpu": cpu_model(),
                "cores": os.cpu_count(),
                "load_average_before": [round(x, 2) for x in load_before],
                "load_average_after": [round(x, 2) for x in os.getloadavg()],
                "python": platform.python_version(),
            }
            out.write_text(json.dumps(result, indent=2) + "\n")
            print(f"wrote {out}")
            return
        traces = scratch / "traces"
        first, second = generate_demo_traces(traces, start=START, days=2, traces_per_day=args.traces)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "PREFECT_"))}
        env.update(PREFECT_HOME=str(scratch / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
        subprocess.run([str(BIN / "prefect"), "server", "database", "upgrade", "-y"], env=env, check=True)
        load_before = os.getloadavg()
        modes: dict[str, list[dict[str, Any]]] = {}
        with prefect_server(env, scratch / "server.log") as (url, _):
            env["PREFECT_API_URL"] = url
            for mode in ("without store", "with store"):
                store = scratch / mode.replace(" ", "-")
                mode_env = {**env, CACHE_DIR_ENV: str(store)}
                if mode == "without store":
                    mode_env[CACHE_MB_ENV] = "off"
                runs = modes[mode] = []
                for n, (name, day) in enumerate((("day 1", first), ("day 1 again", first), ("day 2", second))):
                    run = {"run": name, "date": day.isoformat()}
                    run |= evaluate(day, traces, store / f"run-{n}", mode_env)
                    run["store_rows"] = store_rows(store)
                    runs.append(run)
                    print(f"{mode}, {name}: {run}", flush=True)
        result = {
            "what": "ragpulse evaluate of demo days in fresh processes (default metrics), store off vs on",
            "traces_per_day": args.traces,
            "runs": modes,
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(),
        }
        out = args.out or ROOT / "results" / "embedding_store.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {out}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
