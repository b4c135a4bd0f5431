"""The floor of issue 17: one DuckDB query against a cold and a warm ``ragpulse evaluate`` on the same day.

Generates one ``dt=`` partition of N demo traces (``bench_flow.generate``: plain JSONL, gzipped JSONL and Parquet,
no malformed lines, since the floor validates nothing), then by default makes every question and answer distinct
(``distinct_texts``): the demo draws them from a small corpus, so every cache keyed on text (language
identification, embeddings) would hit far more often than on production traffic. Then it measures side by side in
one run:

* **floor**: one DuckDB SQL statement that reads the files straight (``read_json`` + ``read_parquet``) and
  writes the five retrieval metrics of every trace into a table, with ragpulse's definitions (docs/metrics.md);
* **cold**: ``ragpulse evaluate`` as a subprocess on a fresh work dir and warehouse, against a Prefect server the
  bench started before the clock (as a deployment runs; its CPU during the run is recorded apart), or with
  ``--ephemeral`` against Prefect's ephemeral API (a bench-owned ``PREFECT_HOME`` whose database is created before
  the clock starts; the API server is then a child, and its CPU counts);
* **warm**: the same command again on the unchanged day, same work dir and warehouse.

Wall time, CPU time (``os.wait4`` rusage: the process and the children it reaped, i.e. the ephemeral API server)
and peak RSS (psutil samples of the process tree) are recorded. Then ragpulse's ``scores`` table and the floor's
table are joined on (trace_id, metric) and every value must be equal (NULL on both sides for not_applicable).
``--profile`` adds a cold run under cProfile, every thread of the ragpulse process profiled (tasks run in worker
threads), summarised by stage.

Usage::

    python bench/bench_floor.py                     # 100,000 traces -> bench/results/floor-100000.json
    python bench/bench_floor.py --n 1000000
    python bench/bench_floor.py --ephemeral         # a one-off CLI call -> floor-100000-ephemeral.json
    python bench/bench_floor.py --n 20000 --profile --data /tmp/floor-data   # keep and reuse the generated day
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import pstats
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._common import machine, prefect_server  # noqa: E402
from bench.bench_flow import DAY, describe_partition, generate  # noqa: E402

RESULTS = REPO / "bench" / "results"
METRICS = ("document_mrr", "document_recall_multi_hit", "hit_rate@5", "precision@5", "recall@5")
TOLERANCE = 1e-12

# Ranking rules of metrics/_arrays.py: a list of ids grades each id 1, an object grades by value; relevant means
# grade > 0; a context id seen again lower in the ranking keeps its rank but is credited once; no labels, or no
# grade > 0, or an id label with a context logged without an id, make the trace not_applicable (NULL). Text labels
# (``relevant_contexts``) are not generated here and not handled.
FLOOR_SQL = """
CREATE OR REPLACE TABLE floor_scores AS
WITH traces AS (
    SELECT
        trace_id,
        list_transform(contexts, lambda c: c.id) AS ids,
        CASE json_type(relevant_context_ids)
            WHEN 'OBJECT' THEN json_transform(relevant_context_ids, '"MAP(VARCHAR, DOUBLE)"')
            WHEN 'ARRAY' THEN map_from_entries(
                list_transform(list_distinct(relevant_context_ids ->> '$[*]'), lambda k: (k, 1.0::DOUBLE))
            )
        END AS grades
    FROM read_json(
        $json_files, format = 'newline_delimited',
        columns = {trace_id: 'VARCHAR', contexts: 'STRUCT(id VARCHAR)[]', relevant_context_ids: 'JSON'}
    )
    UNION ALL
    SELECT
        trace_id,
        list_transform(contexts, lambda c: c.id),
        CASE WHEN relevant_context_ids IS NOT NULL THEN map_from_entries(
            list_transform(list_distinct(relevant_context_ids), lambda k: (k, 1.0::DOUBLE))
        ) END
    FROM read_parquet($parquet_files)
),
ranked AS (
    SELECT
        trace_id,
        list_transform(
            ids, lambda x, i: CASE WHEN list_position(ids, x) = i AND coalesce(grades[x], 0) > 0 THEN 1 ELSE 0 END
        ) AS hits,
        len(list_filter(map_values(grades), lambda g: g > 0)) AS n_relevant,
        grades IS NULL OR list_contains(list_transform(ids, lambda x: x IS NULL), true) AS unlabelled
    FROM traces
),
counted AS (
    SELECT
        trace_id,
        unlabelled OR n_relevant = 0 AS na,
        n_relevant::DOUBLE AS n_relevant,
        list_position(hits, 1) AS first_hit,
        coalesce(list_sum(hits), 0)::DOUBLE AS found,
        coalesce(list_sum(hits[1:5]), 0)::DOUBLE AS found5
    FROM ranked
),
wide AS (
    SELECT
        trace_id,
        CASE WHEN NOT na THEN coalesce(1.0::DOUBLE / first_hit, 0.0::DOUBLE) END AS "document_mrr",
        CASE WHEN NOT na THEN found / n_relevant END AS "document_recall_multi_hit",
        CASE WHEN NOT na THEN (found5 > 0)::DOUBLE END AS "hit_rate@5",
        CASE WHEN NOT na THEN found5 / 5.0::DOUBLE END AS "precision@5",
        CASE WHEN NOT na THEN found5 / n_relevant END AS "recall@5"
    FROM counted
)
SELECT trace_id, metric, value
FROM wide UNPIVOT INCLUDE NULLS (value FOR metric IN (
    "document_mrr", "document_recall_multi_hit", "hit_rate@5", "precision@5", "recall@5"
))
"""

COMPARE_SQL = f"""
SELECT
    count(*) AS rows,
    count(*) FILTER (WHERE r.trace_id IS NOT NULL AND f.trace_id IS NOT NULL) AS compared,
    count(*) FILTER (WHERE r.value IS NOT NULL AND f.value IS NOT NULL) AS values_compared,
    count(*) FILTER (WHERE r.trace_id IS NULL) AS only_floor,
    count(*) FILTER (WHERE f.trace_id IS NULL) AS only_ragpulse,
    count(*) FILTER (WHERE r.trace_id IS NOT NULL AND f.trace_id IS NOT NULL AND NOT (
        (r.value IS NULL AND f.value IS NULL) OR abs(r.value - f.value) <= {TOLERANCE}
    )) AS mismatched,
    max(abs(r.value - f.value)) AS max_abs_diff
FROM (
    SELECT trace_id, metric, CASE WHEN isnan(value) THEN NULL ELSE value END AS value
    FROM rp.scores WHERE partition_date = $day
) AS r
FULL OUTER JOIN floor_scores AS f ON r.trace_id = f.trace_id AND r.metric = f.metric
"""

# Where the cold run's time goes: outermost calls of these functions (cumulative, summed over threads).
STAGES = {
    "imports": ("_find_and_load",),
    "Prefect start-up (ephemeral API)": ("start",),
    "staging": ("stage_slice", "stage_records"),
    "read_trace_batch": ("read_trace_batch",),
    "metrics.compute": ("compute",),
    "input profile (per batch)": ("batch_profile", "trace_profile"),
    "input and output suites": ("check_traces", "check_scores"),
    "traces excerpts (read while publishing)": ("_excerpt_batches",),
    "publish": ("publish",),
}
STAGE_FILES = {
    "Prefect start-up (ephemeral API)": "server.py",
    "metrics.compute": "registry.py",
    "publish": "duckdb.py",
}


def read_once(partition: Path) -> None:
    """Read every file of the day once before any clock starts: the floor runs first, and it should not pay the
    disk reads that the page cache then saves every ragpulse run (a 2.6 GB day took the floor from 8 to 47 s)."""
    for path in sorted(partition.iterdir()):
        with path.open("rb") as handle:
            while handle.read(2**24):
                pass


def in_child(function: Any, *args: Any) -> Any:
    """``function(*args)`` in a spawned child process: DuckDB grows the process that runs a query over a large day
    by gigabytes, and a process forked from a large one inherits its RSS high-water mark (see ``run_ragpulse``)."""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def day_files(partition: str | Path) -> tuple[list[str], list[str]]:
    """The day's JSONL (plain or gzipped) and Parquet files, in name order."""
    files = sorted(Path(partition).iterdir())
    json_files = [str(f) for f in files if f.name.endswith((".jsonl", ".jsonl.gz"))]
    return json_files, [str(f) for f in files if f.name.endswith(".parquet")]


def floor(partition: Path, db: Path) -> dict[str, Any]:
    """The floor's query, in a child process."""
    return dict(in_child(_floor, str(partition), str(db)))


def _floor(partition: str, db: str) -> dict[str, Any]:
    import duckdb

    json_files, parquet_files = day_files(partition)
    con = duckdb.connect(db)
    wall, cpu = time.perf_counter(), time.process_time()
    con.execute(FLOOR_SQL, {"json_files": json_files, "parquet_files": parquet_files})
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows = con.execute("SELECT count(*) FROM floor_scores").fetchone()
    con.close()
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "rows": rows[0] if rows else 0}


class TreeSampler:
    """Peak RSS of a process and of its whole tree, the kernel's high-water mark of the process (``VmHWM``: a spike
    between two samples counts), its RSS once a second, and the last CPU times seen of each process in the tree."""

    def __init__(self, pid: int, interval: float) -> None:
        self.root = psutil.Process(pid)
        self.interval = interval
        self.own_peak = self.tree_peak = self.own_hwm = 0
        self.cpu_seen: dict[int, float] = {}
        self.timeline: list[tuple[float, int]] = []  # (seconds since start, RSS MiB)
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                tree = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                return
            total = 0
            for process in tree:
                try:
                    rss = process.memory_info().rss
                    times = process.cpu_times()
                except psutil.Error:
                    continue
                total += rss
                self.cpu_seen[process.pid] = times.user + times.system
                if process.pid == self.root.pid:
                    self.own_peak = max(self.own_peak, rss)
                    self.own_hwm = max(self.own_hwm, _high_water_mark(process.pid))
                    elapsed = time.monotonic() - self._started
                    if not self.timeline or elapsed - self.timeline[-1][0] >= 1.0:
                        self.timeline.append((round(elapsed, 1), round(rss / 2**20)))
            self.tree_peak = max(self.tree_peak, total)
            self._stop.wait(self.interval)


def _high_water_mark(pid: int) -> int:
    """``VmHWM`` of ``pid`` in bytes (Linux), 0 where it cannot be read."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def run_ragpulse(
    command: list[str], env: dict[str, str], log: Path, interval: float, server: psutil.Process | None = None
) -> dict[str, Any]:
    """Run one CLI call; wall, CPU of it and its reaped children (wait4), peak RSS sampled over its tree and its
    ``VmHWM``, and on failure the end of its output (the scratch dir and its logs are removed).

    Not wait4's ``ru_maxrss``: Linux keeps a process's RSS high-water mark across ``execve``, so a child forked
    from this process starts with this process's RSS as its peak. An earlier version of this bench ran the floor's
    DuckDB query and the text pass in its own process, which then held gigabytes, and reported a 10.5 GB
    ``ru_maxrss`` for a ragpulse run whose own peak was 2.5 GB (bench/README.md, "Memory")."""
    load_before = os.getloadavg()
    server_before = server_cpu_s(server)
    with log.open("wb") as out:
        start = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)
        sampler = TreeSampler(process.pid, interval)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        sampler.stop()
    server_after = server_cpu_s(server)
    exit_code = os.waitstatus_to_exitcode(status)
    reaped_cpu = usage.ru_utime + usage.ru_stime
    seen_cpu = sum(sampler.cpu_seen.values())  # a lower bound, but it counts children that were never reaped
    children_seen = seen_cpu - sampler.cpu_seen.get(process.pid, 0.0)
    measured: dict[str, Any] = {
        "exit_code": exit_code,
        "wall_s": round(wall, 2),
        "cpu_s": round(max(reaped_cpu, seen_cpu), 2),
        "children_cpu_s_seen": round(children_seen, 2),
        "peak_rss_tree_mib": round(sampler.tree_peak / 2**20),
        "peak_rss_ragpulse_mib": round(sampler.own_peak / 2**20),
        "vm_hwm_ragpulse_mib": round(sampler.own_hwm / 2**20),
        "server_cpu_s": None
        if server_before is None or server_after is None
        else round(server_after - server_before, 2),
        "rss_mib_timeline": sampler.timeline,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    if exit_code != 0:
        measured["output_tail"] = log.read_text(errors="replace").splitlines()[-12:]
        print(f"{' '.join(command)} exited with {exit_code}:", *measured["output_tail"], sep="\n", file=sys.stderr)
    return measured


def evaluate_command(source: Path, work: Path, warehouse: Path) -> list[str]:
    return [
        str(Path(sys.executable).with_name("ragpulse")),
        "evaluate",
        "--source",
        str(source),
        "--date",
        DAY.isoformat(),
        "--metrics",
        ",".join(METRICS),
        "--warehouse",
        f"duckdb:///{warehouse}",
        "--work-dir",
        str(work),
    ]


_CJK = re.compile("[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_WORD = re.compile(r"\w{3,}")


def distinct_texts(partition: Path, seed: int) -> int:
    """Make every question and answer of the day distinct, in its own language: each gets a few words of one of its
    own trace's passages appended (a run of characters for CJK), as a user's wording varies around the same
    knowledge base. Passages stay as generated (a knowledge base repeats); the retrieval metrics' values do not
    depend on the texts. Returns how many texts were changed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    changed = 0

    def vary(text: str | None, passages: list[Any]) -> str | None:
        nonlocal changed
        passage = next((c["text"] for c in passages or () if c and c.get("text")), None)
        if text is None or not passage:
            return text
        changed += 1
        if _CJK.search(passage):
            start = rng.randrange(max(1, len(passage) - 8))
            return f"{text}（{passage[start : start + rng.randint(4, 8)]}）"
        words = _WORD.findall(passage)
        return f"{text} ({' '.join(rng.sample(words, min(len(words), rng.randint(3, 6))))})"

    def vary_trace(trace: dict[str, Any]) -> dict[str, Any]:
        passages = list(trace.get("contexts") or [])
        rng.shuffle(passages)
        trace["question"] = vary(trace.get("question"), passages)
        trace["answer"] = vary(trace.get("answer"), passages[::-1])
        return trace

    for path in sorted(partition.iterdir()):
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            rows = [vary_trace(row) for row in table.to_pylist()]
            pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
            continue
        opener: Any = gzip.open if path.suffix == ".gz" else open
        varied = path.with_name(f"{path.name}.distinct")
        with opener(path, "rt", encoding="utf-8") as src, opener(varied, "wt", encoding="utf-8") as dst:
            for line in src:
                dst.write(f"{json.dumps(vary_trace(json.loads(line)), ensure_ascii=False)}\n" if line.strip() else line)
        varied.replace(path)
    return changed


def server_cpu_s(process: psutil.Process | None) -> float | None:
    """The server's CPU so far, its children's included."""
    if process is None:
        return None
    with contextlib.suppress(psutil.Error):
        times = process.cpu_times()
        children = sum(sum(c.cpu_times()[:2]) for c in process.children(recursive=True))
        return times.user + times.system + children
    return None


def prefect_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
    )
    return env


def compare(floor_db: Path, warehouse: Path) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect(str(floor_db))
    con.execute(f"ATTACH '{warehouse}' AS rp (READ_ONLY)")
    row = con.execute(COMPARE_SQL, {"day": DAY}).fetchone()
    statuses = dict(
        con.execute(
            "SELECT status, count(*) FROM rp.scores WHERE partition_date = $day GROUP BY status", {"day": DAY}
        ).fetchall()
    )
    con.close()
    assert row is not None
    names = ("rows", "compared", "values_compared", "only_floor", "only_ragpulse", "mismatched", "max_abs_diff")
    result: dict[str, Any] = dict(zip(names, row, strict=True))
    result["ragpulse_statuses"] = statuses
    result["equal"] = result["mismatched"] == 0 and result["only_floor"] == 0 and result["only_ragpulse"] == 0
    return result


# ------------------------------------------------------------------------------------------ profile

PROFILED_CHILD = """
import cProfile, pstats, sys, threading
out = sys.argv[1]
sys.argv = ["ragpulse", *sys.argv[2:]]
profiles = []
run = threading.Thread.run
def profiled_run(self):
    profile = cProfile.Profile()
    profiles.append(profile)
    profile.runcall(run, self)
threading.Thread.run = profiled_run
main = cProfile.Profile()
profiles.append(main)
code = 0
try:
    main.runcall(__import__("runpy").run_module, "ragpulse.cli", run_name="__main__")
except SystemExit as exit:
    code = exit.code or 0
finally:
    for profile in profiles:
        profile.disable()
    stats = pstats.Stats(main)
    for profile in profiles[1:]:
        if profile.getstats():
            stats.add(profile)
    stats.dump_stats(out)
sys.exit(code)
"""


# A child that imports ragpulse from PYTHONPATH (``--before``): the editable install's finder sits on sys.meta_path
# ahead of PYTHONPATH, so it is dropped first.
_FROM_PYTHONPATH = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()];"
    "sys.modules.pop('ragpulse', None);"
)


def package_roots(env: dict[str, str], cwd: Path) -> list[str]:
    """Where the subprocess finds ragpulse's flows, tasks and metrics (PYTHONPATH can point at another checkout)."""
    code = (
        (_FROM_PYTHONPATH if env.get("PYTHONPATH") else "")
        + "import ragpulse.flows as f, ragpulse.tasks as t, ragpulse.metrics as m;"
        + "print(f.__path__[0], t.__path__[0], m.__path__[0])"
    )
    found = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, check=True, capture_output=True, text=True)
    return found.stdout.split()


def cli_command(env: dict[str, str]) -> list[str]:
    """How to start the ragpulse CLI with ``env``: the installed script, or for PYTHONPATH code its module."""
    if not env.get("PYTHONPATH"):
        return [str(Path(sys.executable).with_name("ragpulse"))]
    run = "import runpy; sys.argv[0] = 'ragpulse'; runpy.run_module('ragpulse.cli', run_name='__main__')"
    code = _FROM_PYTHONPATH + run
    return [sys.executable, "-c", code]


def profile_cold(
    command: list[str], env: dict[str, str], scratch: Path, top: int, keep: Path | None, roots: list[str]
) -> dict[str, Any]:
    """A cold run with every thread of the ragpulse process under cProfile (the API server is not profiled)."""
    out = keep or scratch / "cold.prof"
    script = scratch / "profiled_child.py"
    script.write_text(PROFILED_CHILD)
    child = [sys.executable, str(script), str(out), *command[1:]]
    measured = run_ragpulse(child, env, scratch / "profile.log", 0.2)
    stats = pstats.Stats(str(out))
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    # The project's own functions only: summed over threads, the engine's and the event loops' frames are mostly
    # waiting, and would fill the list.
    ranked = sorted(
        (item for item in raw.items() if item[0][0].startswith(tuple(roots))),
        key=lambda item: item[1][3],
        reverse=True,
    )
    rows = [
        {
            "function": f"{_relative(filename, roots)}:{line}({function})",
            "ncalls": ncalls,
            "tottime_s": round(tottime, 2),
            "cumtime_s": round(cumtime, 2),
        }
        for (filename, line, function), (_, ncalls, tottime, cumtime, _) in ranked[:top]
    ]
    stages: dict[str, float] = {}
    for stage, functions in STAGES.items():
        wanted = STAGE_FILES.get(stage)
        stages[stage] = round(
            sum(
                cumtime
                for (filename, _, function), (_, _, _, cumtime, _) in raw.items()
                if function in functions and (wanted is None or Path(filename).name == wanted)
            ),
            2,
        )
    return {"run": measured, "top_cumulative": rows, "stages_cumtime_s": stages}


def _relative(filename: str, roots: list[str]) -> str:
    root = next(r for r in roots if filename.startswith(r))
    return str(Path(filename).relative_to(Path(root).parent))


# ------------------------------------------------------------------------------------------ main


def cold_and_warm(
    source: Path,
    scratch: Path,
    floor_db: Path,
    env: dict[str, str],
    interval: float,
    server: psutil.Process | None,
) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
    """A cold and a warm run on a fresh work dir and warehouse, and their values compared with the floor's. A failed
    cold run is recorded as far as it went, and nothing else is run."""
    scratch.mkdir(parents=True, exist_ok=True)
    warehouse = scratch / "warehouse.duckdb"
    command = [*cli_command(env), *evaluate_command(source, scratch / "work", warehouse)[1:]]
    cold = run_ragpulse(command, env, scratch / "cold.log", interval, server)
    print(f"cold: {cold}")
    ok = cold["exit_code"] == 0
    warm = run_ragpulse(command, env, scratch / "warm.log", interval, server) if ok else None
    print(f"warm: {warm}")
    values = compare(floor_db, warehouse) if ok else None
    print(f"values: {values}")
    return cold, warm, values


def ratios(floor_run: dict[str, Any], cold: dict[str, Any], warm: dict[str, Any] | None) -> dict[str, float]:
    found = {
        "cold_over_floor_wall": round(cold["wall_s"] / floor_run["wall_s"], 1),
        "cold_over_floor_cpu": round(cold["cpu_s"] / floor_run["cpu_s"], 1),
    }
    if warm:
        found["warm_over_cold_wall"] = round(warm["wall_s"] / cold["wall_s"], 3)
        found["warm_over_cold_cpu"] = round(warm["cpu_s"] / cold["cpu_s"], 3)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="traces in the day")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--data", type=Path, help="keep the generated day here, and reuse it if already there")
    parser.add_argument("--interval", type=float, default=0.1, help="RSS sampling interval, s")
    parser.add_argument(
        "--ephemeral", action="store_true", help="run against Prefect's ephemeral API (a one-off CLI call, the demo)"
    )
    parser.add_argument(
        "--repeated-texts", action="store_true", help="keep the demo corpus's repeated questions and answers"
    )
    parser.add_argument("--profile", action="store_true", help="also run a cold flow under cProfile")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--profile-out", type=Path, help="keep the merged cProfile stats here")
    parser.add_argument("--out", type=Path, help="default bench/results/floor-<n>.json")
    parser.add_argument(
        "--before",
        type=Path,
        help="a PYTHONPATH root holding another ragpulse (e.g. an exported commit): its cold and warm runs are "
        "measured in the same run, before this checkout's, on the same day and the same floor",
    )
    args = parser.parse_args(argv)
    suffix = ("-ephemeral" if args.ephemeral else "") + ("-repeated" if args.repeated_texts else "")
    out = args.out or RESULTS / f"floor-{args.n}{suffix}.json"

    scratch = Path(tempfile.mkdtemp(prefix="bench-floor-"))
    try:
        source = args.data or scratch / "traces"
        texts = "repeated" if args.repeated_texts else "distinct"
        marker = source / f"generated-{args.n}-{args.seed}-{texts}.json"
        if marker.exists():
            data = json.loads(marker.read_text())
        else:
            shutil.rmtree(source / f"dt={DAY}", ignore_errors=True)
            for old in source.glob("generated-*.json"):
                old.unlink()
            data = generate(source, args.n, args.seed, malformed=0)
            if not args.repeated_texts:
                start = time.perf_counter()
                data["texts_made_distinct"] = in_child(distinct_texts, source / f"dt={DAY}", args.seed)
                data["seconds"] = round(data["seconds"] + time.perf_counter() - start, 1)
            marker.write_text(json.dumps(data))
        data = {
            **describe_partition(source, data["seconds"]),
            "traces": args.n,
            "seed": args.seed,
            "texts": texts,
            "texts_made_distinct": data.get("texts_made_distinct"),
        }
        print(f"day: {args.n:,} traces, {data['bytes'] / 2**20:.0f} MiB, generated in {data['seconds']} s")

        env = prefect_env(scratch / "prefect-home")
        prefect = str(Path(sys.executable).with_name("prefect"))
        start = time.perf_counter()
        subprocess.run([prefect, "server", "database", "upgrade", "-y"], env=env, check=True, capture_output=True)
        database_s = round(time.perf_counter() - start, 1)
        with contextlib.ExitStack() as stack:
            server = None
            if not args.ephemeral:
                url, server = stack.enter_context(prefect_server(env, scratch / "server.log"))
                env["PREFECT_API_URL"] = url
            return _measure(args, source, scratch, env, server, data, database_s, out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _measure(
    args: argparse.Namespace,
    source: Path,
    scratch: Path,
    env: dict[str, str],
    server: psutil.Process | None,
    data: dict[str, Any],
    database_s: float,
    out: Path,
) -> int:
    """The floor, then each ragpulse's cold and warm runs (and the profiled cold run), written to ``out``."""
    roots = package_roots(env, scratch)
    print(f"ragpulse code: {roots[0]}")
    load_before = os.getloadavg()
    floor_db = scratch / "floor.duckdb"
    read_once(source / f"dt={DAY}")
    floor_run = floor(source / f"dt={DAY}", floor_db)
    print(f"floor: {floor_run}")
    before = None
    if args.before is not None:
        before_env = {**env, "PYTHONPATH": str(args.before)}
        before = {"packages": package_roots(before_env, scratch)}
        print(f"before: ragpulse code {before['packages'][0]}")
        cold, warm, values = cold_and_warm(source, scratch / "before", floor_db, before_env, args.interval, server)
        before.update(cold=cold, warm=warm, values=values, ratios=ratios(floor_run, cold, warm))
    cold, warm, values = cold_and_warm(source, scratch / "after", floor_db, env, args.interval, server)
    ok = cold["exit_code"] == 0
    profile = None
    if args.profile and ok:
        profiled = evaluate_command(source, scratch / "work-profile", scratch / "warehouse-profile.duckdb")
        profile = profile_cold(profiled, env, scratch, args.top, args.profile_out, roots)
        print(json.dumps(profile, indent=1))

    result = {
        "benchmark": "bench/bench_floor.py",
        "data": {**data, "partition": str(DAY), "generator": "ragpulse.tasks.demo.generate (no malformed lines)"},
        "prefect": "ephemeral API" if server is None else "running server (its CPU during each run: server_cpu_s)",
        "metrics": list(METRICS),
        "ragpulse_code": {"packages": roots, "PYTHONPATH": os.environ.get("PYTHONPATH")},
        "prefect_database_created_s": database_s,
        "floor": floor_run,
        "cold": cold,
        "warm": warm,
        "ratios": ratios(floor_run, cold, warm),
        "values": values,
        "before": before,
        "profile": profile,
        "machine": machine(load_before),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {out}")
    return 0 if values and values["equal"] and warm and warm["exit_code"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
