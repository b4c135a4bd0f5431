"""Staging throughput (issue 17): ``stage_records`` of the code at HEAD against the working tree, side by side.

Generates one ``dt=`` day of demo traces with ``ragpulse.tasks.demo.generate`` (through ``bench_flow.generate``: 40 %
plain JSONL, 30 % gzipped JSONL, 30 % Parquet, with the generator's malformed lines), exports ``git archive HEAD``
into a temporary package (the "before"), and stages in child processes, one per (revision, repeat), the two
revisions alternating:

* the whole day, and each of its three files alone (plain, gzip, Parquet), timed: process CPU and wall time of the
  ``stage_records`` call only, after the imports and the language model are loaded;
* untimed, for equality only: the hostile canonical records of tests/tasks/ingest/test_hostile_records.py, every
  JSONL and Parquet file under tests/fixtures staged as canonical records, and the openinference and otel-genai
  fixture days through their adapters.

Every input must give the same staged batches (content hashes, i.e. the same bytes), the same quarantine entries
(file, line, trace_id, field, reason, raw) and the same counts in both revisions, else the bench exits 1.

Usage::

    python bench/bench_staging.py                          # 60,000 traces, 3 repeats -> bench/results/staging.json
    python bench/bench_staging.py --traces 20000 --repeat 1 --data /tmp/staging-day --out /tmp/staging.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if "--child" not in sys.argv:  # a child imports the ragpulse of its PYTHONPATH
    sys.path.insert(0, str(REPO))


RESULTS = REPO / "bench" / "results"
DAY = "2026-03-02"  # bench_flow.DAY, the generated day; fixture days are the same date
TIMED = ("day", "jsonl", "gzip", "parquet")
FILES = {"jsonl": "traces-00.jsonl", "gzip": "traces-01.jsonl.gz", "parquet": "traces-02.parquet"}
ADAPTER_DAYS = {
    "openinference": "tests/fixtures/adapters/openinference",
    "openinference-langchain": "tests/fixtures/adapters/openinference/real/langchain_rag",
    "openinference-haystack": "tests/fixtures/adapters/openinference/real/haystack_rag",
    "openinference-openai": "tests/fixtures/adapters/openinference/real/openai_manual_rag",
    "openinference-llama-server": "tests/fixtures/adapters/openinference/real/llama_index_rag/server",
    "openinference-llama-spans": "tests/fixtures/adapters/openinference/real/llama_index_rag/from_spans",
    "otel-genai": "tests/fixtures/adapters/otel-genai",
    "otel-genai-real": "tests/fixtures/adapters/otel-genai/real",
}


# ------------------------------------------------------------------------------------------ child


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """Stage each input of ``spec`` with the ragpulse found on sys.path; times and outputs per input."""
    import datetime as dt

    import ragpulse
    from ragpulse.tasks.ingest.language import identify_language
    from ragpulse.tasks.ingest.staging import select_source_files, stage_records

    identify_language("Where is the capital of Japan?")  # load the model before any clock
    results: dict[str, Any] = {"ragpulse": str(Path(ragpulse.__file__).resolve().parent)}
    for name, job in spec["inputs"].items():
        date = dt.date.fromisoformat(DAY)
        files = select_source_files(job["source"], date, trace_format=job["format"])
        with tempfile.TemporaryDirectory() as staged_dir:
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            staged = stage_records(
                date,
                files,
                staged_url=staged_dir,
                batch_size=spec["batch_size"],
                trace_format=job["format"],
                language=job.get("language"),
            )
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        results[name] = {
            "wall_s": wall,
            "cpu_s": cpu,
            "batches": [[ref.content_hash, ref.n_rows] for ref in staged.batches],
            "quarantined": [
                [q.source_file.replace(job["source"], "<source>"), q.line, q.trace_id, q.field, q.reason, q.raw]
                for q in staged.quarantined
            ],
            "counts": repr(staged.counts),
        }
    return results


def _run_child(package: Path, spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(package)}
    done = subprocess.run(
        [sys.executable, __file__, "--child"], input=json.dumps(spec), capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        raise RuntimeError(f"child failed for {package}:\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout)
    expected = (package / "ragpulse").resolve()
    found = Path(result["ragpulse"])
    if found != expected:
        raise RuntimeError(f"child imported ragpulse from {found}, expected {expected}")
    return result


# ------------------------------------------------------------------------------------------ inputs


def _baseline(root: Path) -> Path:
    """HEAD as an importable package: ragpulse/__init__.py plus flows, tasks and metrics linked under it."""
    tree = root / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    package = root / "pkg" / "ragpulse"
    package.mkdir(parents=True)
    shutil.copy(tree / "ragpulse" / "__init__.py", package)
    for folder in ("flows", "tasks", "metrics"):
        (package / folder).symlink_to(tree / folder)
    return root / "pkg"


def _day(data: Path, traces: int, malformed: int) -> None:
    from bench.bench_flow import generate

    if not (data / f"dt={DAY}").is_dir():
        print(f"generating {traces:,} traces into {data}", flush=True)
        print(json.dumps(generate(data, traces, seed=17, malformed=malformed)), flush=True)
    for name, file in FILES.items():
        folder = data.parent / f"{data.name}-{name}" / f"dt={DAY}"
        if not folder.is_dir():
            folder.mkdir(parents=True)
            (folder / file).hardlink_to(data / f"dt={DAY}" / file)


def _corpus(root: Path) -> dict[str, dict[str, Any]]:
    """The untimed equality inputs: the hostile records, every fixture file as canonical records, adapter days."""
    from tests.tasks.ingest.test_hostile_records import CANONICAL

    hostile = root / "hostile" / f"dt={DAY}"
    hostile.mkdir(parents=True)
    (hostile / "hostile.jsonl").write_bytes(b"\n".join(line for _, line, _, _ in CANONICAL) + b"\n")
    fixtures = root / "fixtures" / f"dt={DAY}"
    fixtures.mkdir(parents=True)
    for i, path in enumerate(sorted((REPO / "tests" / "fixtures").rglob("*"))):
        if path.name.endswith((".jsonl", ".jsonl.gz", ".parquet")):
            shutil.copy(path, fixtures / f"{i:03d}-{path.name}")
    inputs: dict[str, dict[str, Any]] = {
        "hostile": {"source": str(root / "hostile"), "format": "ragpulse", "language": "en"},
        "fixtures-as-canonical": {"source": str(root / "fixtures"), "format": "ragpulse"},
    }
    for name, folder in ADAPTER_DAYS.items():
        trace_format = "otel-genai" if name.startswith("otel-genai") else "openinference"
        inputs[f"adapter:{name}"] = {"source": str(REPO / folder), "format": trace_format}
    return inputs


# ------------------------------------------------------------------------------------------ main


def _same(before: dict[str, Any], after: dict[str, Any], names: Any) -> dict[str, dict[str, bool]]:
    return {
        name: {key: before[name][key] == after[name][key] for key in ("batches", "quarantined", "counts")}
        for name in names
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=60_000)
    parser.add_argument("--malformed", type=int, default=10, help="the generator's broken lines in the day")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=5_000)
    parser.add_argument("--data", type=Path, help="keep the generated day here and reuse it")
    parser.add_argument("--out", type=Path, default=RESULTS / "staging.json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        json.dump(_child(json.load(sys.stdin)), sys.stdout)
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-staging-") as tmp:
        root = Path(tmp)
        data = args.data or root / "day"
        _day(data, args.traces, args.malformed)
        before_pkg = _baseline(root / "before")
        packages = {"before": before_pkg, "after": REPO}
        timed = {
            "day": {"source": str(data), "format": "ragpulse"},
            **{name: {"source": str(data.parent / f"{data.name}-{name}"), "format": "ragpulse"} for name in FILES},
        }
        corpus = _corpus(root / "corpus")
        checks = {rev: _run_child(pkg, {"inputs": corpus, "batch_size": 7}) for rev, pkg in packages.items()}
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        load = [os.getloadavg()[0]]
        for repeat in range(args.repeat):
            order = ("before", "after") if repeat % 2 == 0 else ("after", "before")
            for rev in order:
                runs[rev].append(_run_child(packages[rev], {"inputs": timed, "batch_size": args.batch_size}))
                print(rev, {name: round(runs[rev][-1][name]["cpu_s"], 2) for name in TIMED}, flush=True)
            load.append(os.getloadavg()[0])

    from bench._common import cpu_model

    equal_corpus = _same(checks["before"], checks["after"], corpus)
    equal_timed = {
        f"{name}#{i}": same
        for i in range(args.repeat)
        for name, same in _same(runs["before"][i], runs["after"][i], TIMED).items()
    }
    identical = all(all(v.values()) for v in (*equal_corpus.values(), *equal_timed.values()))
    table = {}
    for name in TIMED:
        first = runs["after"][0][name]
        n_records = sum(first["batches"][i][1] for i in range(len(first["batches"]))) + len(first["quarantined"])
        row: dict[str, Any] = {"records": n_records}
        for rev in ("before", "after"):
            cpus = [run[name]["cpu_s"] for run in runs[rev]]
            walls = [run[name]["wall_s"] for run in runs[rev]]
            row[rev] = {
                "cpu_s_best": round(min(cpus), 3),
                "cpu_s_median": round(statistics.median(cpus), 3),
                "wall_s_best": round(min(walls), 3),
                "cpu_us_per_record": round(min(cpus) / n_records * 1e6, 1),
            }
        row["cpu_ratio_best"] = round(row["before"]["cpu_s_best"] / row["after"]["cpu_s_best"], 2)
        row["cpu_ratio_median"] = round(row["before"]["cpu_s_median"] / row["after"]["cpu_s_median"], 2)
        row["wall_ratio_best"] = round(row["before"]["wall_s_best"] / row["after"]["wall_s_best"], 2)
        table[name] = row
    result = {
        "traces": args.traces,
        "batch_size": args.batch_size,
        "repeat": args.repeat,
        "identical": identical,
        "timed": table,
        "equal_timed": equal_timed,
        "equal_corpus": equal_corpus,
        "corpus_sizes": {
            name: {"batches": len(out["batches"]), "quarantined": len(out["quarantined"])}
            for name, out in checks["after"].items()
            if name != "ragpulse"
        },
        "environment": {
            "python": sys.version.split()[0],
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "load_average_1min": [round(x, 2) for x in load],
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"identical": identical, "timed": table}, indent=2))
    if not identical:
        print("DIFFERENT OUTPUT:", {k: v for k, v in {**equal_corpus, **equal_timed}.items() if not all(v.values())})
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
