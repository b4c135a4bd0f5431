"""Throughput of ragpulse's retrieval metrics against trec_eval (pytrec_eval), Haystack and ranx.

Builds N seeded random traces of 10 retrieved contexts each (ids distinct within a trace, graded relevance
0..3, at least one relevant context labelled per trace), then, batch by batch (5,000 traces), times:

- ragpulse: ``metrics.compute`` over 8 retrieval metrics, the 7 with a trec_eval counterpart, and building
  the ``TraceBatch`` (input validation) on its own;
- pytrec_eval: ``RelevanceEvaluator(qrels, measures)`` (parses the qrels) plus ``evaluate(run)``, 7 measures;
- Haystack's evaluators (MAP, MRR, NDCG, recall single and multi hit) on a subsample only (pure Python,
  one component per metric); their rate is measured there and only *extrapolated* to N;
- ranx, if importable.

Each tool is handed its own input format, built before the clock starts; every tool is checked against
ragpulse on the first batch before anything is timed. Prints a table and writes JSON (default
``bench/results/metrics.json``).

    python bench/bench_metrics.py            # N = 1,000,000
    python bench/bench_metrics.py --n 50000  # quick run
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import cpu_model
from ragpulse.metrics import MetricResult, Status, TraceBatch, compute, parse_metrics

CONTEXTS = 10
CORPUS = 1_000_003  # prime, so that start + j * step (mod CORPUS) is distinct for j < CONTEXTS + 2
OURS = [
    "document_map",
    "document_mrr",
    "document_ndcg",
    "document_ndcg@10",
    "document_recall_multi_hit",
    "precision@5",
    "recall@5",
    "hit_rate@5",
]
TREC = {
    "map": "document_map",
    "recip_rank": "document_mrr",
    "ndcg": "document_ndcg",
    "ndcg_cut_10": "document_ndcg@10",
    "P_5": "precision@5",
    "recall_5": "recall@5",
    "success_5": "hit_rate@5",
}
RANX = {
    "map": "document_map",
    "mrr": "document_mrr",
    "ndcg": "document_ndcg",
    "ndcg@10": "document_ndcg@10",
    "precision@5": "precision@5",
    "recall@5": "recall@5",
    "hit_rate@5": "hit_rate@5",
}
HAYSTACK = [
    "document_map",
    "document_mrr",
    "document_ndcg",
    "document_recall_single_hit",
    "document_recall_multi_hit",
]


@dataclass
class Dataset:
    """N traces as arrays: retrieved ids, their gains, and 0-2 relevant ids that were not retrieved."""

    ids: NDArray[np.int64]  # (N, CONTEXTS)
    gains: NDArray[np.int64]  # (N, CONTEXTS), 0..3
    extra_ids: NDArray[np.int64]  # (N, 2)
    extra_gains: NDArray[np.int64]  # (N, 2), 0 = absent


def make_dataset(n: int, seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    start = rng.integers(0, CORPUS, n)[:, None]
    step = rng.integers(1, CORPUS, n)[:, None]
    ids = (start + np.arange(CONTEXTS + 2) * step) % CORPUS
    gains = np.where(rng.random((n, CONTEXTS)) < 0.2, rng.integers(1, 4, (n, CONTEXTS)), 0)
    judged_zero = rng.random((n, CONTEXTS)) < 0.1  # judged non-relevant labels (gain 0) on some misses
    gains = np.where((gains == 0) & judged_zero, -1, gains)  # -1: labelled 0 (kept apart from "unlabelled")
    n_extra = rng.integers(0, 3, n)
    n_extra = np.where((gains > 0).any(axis=1), n_extra, np.maximum(n_extra, 1))  # every trace has a relevant doc
    extra_gains = np.where(np.arange(2) < n_extra[:, None], rng.integers(1, 4, (n, 2)), 0)
    return Dataset(ids[:, :CONTEXTS], gains, ids[:, CONTEXTS:], extra_gains)


@dataclass
class Inputs:
    """One batch in the shapes the tools take: trace ids, ranked doc ids, labels by doc id."""

    trace_ids: list[str]
    retrieved: list[list[str]]
    labels: list[dict[str, int]]


def batch_inputs(data: Dataset, lo: int, hi: int) -> Inputs:
    retrieved = [[f"d{x}" for x in row] for row in data.ids[lo:hi].tolist()]
    labels: list[dict[str, int]] = []
    for docs, gains, extra, extra_gains in zip(
        retrieved,
        data.gains[lo:hi].tolist(),
        data.extra_ids[lo:hi].tolist(),
        data.extra_gains[lo:hi].tolist(),
        strict=True,
    ):
        label = {doc: max(gain, 0) for doc, gain in zip(docs, gains, strict=True) if gain != 0}
        label.update((f"d{x}", g) for x, g in zip(extra, extra_gains, strict=True) if g > 0)
        labels.append(label)
    return Inputs([f"q{i}" for i in range(lo, hi)], retrieved, labels)


def trace_batch(inputs: Inputs) -> TraceBatch:
    n = len(inputs.trace_ids)
    return TraceBatch(
        trace_ids=inputs.trace_ids,
        context_ids=inputs.retrieved,
        context_texts=inputs.retrieved,
        relevant_ids=inputs.labels,  # type: ignore[arg-type]
        relevant_texts=[None] * n,
        answers=[None] * n,
        references=[[]] * n,
    )


def trec_run(inputs: Inputs) -> dict[str, dict[str, float]]:
    """Scores descending by rank and distinct, so that trec_eval's ranking is the given one."""
    return {
        q: {doc: float(CONTEXTS - r) for r, doc in enumerate(docs)}
        for q, docs in zip(inputs.trace_ids, inputs.retrieved, strict=True)
    }


def trec_qrels(inputs: Inputs) -> dict[str, dict[str, int]]:
    return dict(zip(inputs.trace_ids, inputs.labels, strict=True))


def batches(n: int, size: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, n, size):
        yield lo, min(lo + size, n)


@dataclass
class Timing:
    label: str
    metrics: int
    traces: int = 0
    seconds: float = 0.0  # wall clock
    cpu_seconds: float = 0.0  # this process's CPU time: steadier than wall time on a shared machine
    note: str = ""
    versus: Timing | None = None  # the ragpulse timing over the same metrics, for the speed ratio
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, traces: int, elapsed: tuple[float, float]) -> None:
        self.traces += traces
        self.seconds += elapsed[0]
        self.cpu_seconds += elapsed[1]

    @property
    def rate(self) -> float:
        """Traces per second of wall clock."""
        return self.traces / self.seconds if self.seconds else float("nan")

    @property
    def cpu_rate(self) -> float:
        """Traces per second of CPU time."""
        return self.traces / self.cpu_seconds if self.cpu_seconds else float("nan")


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, tuple[float, float]]:
    """Run ``fn(*args)``; return its result and (wall, CPU) seconds. Garbage is collected first, so that
    no tool pays for another's leftovers."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, (time.perf_counter() - wall, time.process_time() - cpu)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # ru_maxrss is KiB on Linux


def version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_close(ours: MetricResult, theirs: list[float], what: str) -> None:
    ok = ours.status == Status.OK
    np.testing.assert_allclose(ours.values[ok], np.asarray(theirs)[ok], rtol=1e-9, err_msg=what)


# Tools --------------------------------------------------------------------------------------------------------


def trec_evaluate(pytrec_eval: Any, qrels: dict[str, Any], run: dict[str, Any]) -> dict[str, dict[str, float]]:
    return pytrec_eval.RelevanceEvaluator(qrels, set(TREC)).evaluate(run)  # type: ignore[no-any-return]


def haystack_documents(inputs: Inputs) -> tuple[list[list[Any]], list[list[Any]], list[list[Any]]]:
    from haystack import Document

    truth = [[Document(id=doc) for doc, g in label.items() if g > 0] for label in inputs.labels]
    graded = [[Document(id=doc, score=float(g)) for doc, g in label.items()] for label in inputs.labels]
    retrieved = [[Document(id=doc) for doc in docs] for docs in inputs.retrieved]
    return truth, graded, retrieved


def haystack_evaluators() -> dict[str, Any]:
    from haystack.components.evaluators import (
        DocumentMAPEvaluator,
        DocumentMRREvaluator,
        DocumentNDCGEvaluator,
        DocumentRecallEvaluator,
    )

    return {
        "document_map": DocumentMAPEvaluator(document_comparison_field="id"),
        "document_mrr": DocumentMRREvaluator(document_comparison_field="id"),
        "document_ndcg": DocumentNDCGEvaluator(document_comparison_field="id"),
        "document_recall_single_hit": DocumentRecallEvaluator(mode="single_hit", document_comparison_field="id"),
        "document_recall_multi_hit": DocumentRecallEvaluator(mode="multi_hit", document_comparison_field="id"),
    }


def run_haystack(evaluators: dict[str, Any], documents: tuple[list[Any], list[Any], list[Any]]) -> dict[str, Any]:
    truth, graded, retrieved = documents
    return {
        name: evaluator.run(
            ground_truth_documents=graded if name == "document_ndcg" else truth, retrieved_documents=retrieved
        )["individual_scores"]
        for name, evaluator in evaluators.items()
    }


def run_ranx(ranx: Any, inputs: Inputs) -> dict[str, Any]:
    qrels = ranx.Qrels(
        {q: {d: g for d, g in label.items() if g > 0} for q, label in zip(inputs.trace_ids, inputs.labels, strict=True)}
    )
    return ranx.evaluate(qrels, ranx.Run(trec_run(inputs)), list(RANX), return_mean=False)  # type: ignore[no-any-return]


# Main ---------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="traces (default 1,000,000)")
    parser.add_argument("--batch", type=int, default=5_000, help="traces per batch (default 5,000)")
    parser.add_argument("--haystack-n", type=int, default=20_000, help="Haystack subsample (default 20,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "metrics.json")
    args = parser.parse_args()

    rss: dict[str, float] = {"start": peak_rss_mib()}
    data, seconds = timed(make_dataset, args.n, args.seed)
    rss["after_dataset"] = peak_rss_mib()
    print(f"dataset: {args.n:,} traces x {CONTEXTS} contexts in {seconds[0]:.1f} s", flush=True)

    all_requests = parse_metrics(OURS)
    trec_requests = parse_metrics(list(TREC.values()))
    ours = Timing("ragpulse compute", len(OURS), note="8 retrieval metrics in one compute() call")
    ours_trec = Timing("ragpulse compute (trec_eval set)", len(TREC), note="the 7 metrics pytrec_eval computes")
    build = Timing("ragpulse TraceBatch(...)", 0, note="input validation only; not included above")
    timings = [ours, ours_trec, build]

    try:
        import pytrec_eval
    except ImportError:
        pytrec_eval = None
        print("pytrec_eval not importable: skipped")
    trec = Timing("pytrec_eval", len(TREC), note="RelevanceEvaluator(qrels) + evaluate(run)", versus=ours_trec)
    if pytrec_eval is not None:
        timings.append(trec)
    try:
        import ranx  # type: ignore[import-not-found]
    except ImportError:
        ranx = None
        print("ranx not importable: skipped")
    ranx_timing = Timing("ranx", len(RANX), note="Qrels + Run + evaluate (numba)", versus=ours_trec)
    if ranx is not None:
        timings.append(ranx_timing)

    # Same answers before any timing: first batch, every tool against ragpulse.
    first = batch_inputs(data, 0, min(args.batch, args.n))
    first_batch = trace_batch(first)
    tracemalloc.start()
    reference = compute(first_batch, all_requests)
    compute_peak_mib = tracemalloc.get_traced_memory()[1] / 2**20  # numpy reports its buffers to tracemalloc
    tracemalloc.stop()
    del first_batch
    if pytrec_eval is not None:
        evaluated = trec_evaluate(pytrec_eval, trec_qrels(first), trec_run(first))
        for measure, name in TREC.items():
            check_close(reference[name], [evaluated[q][measure] for q in first.trace_ids], f"pytrec_eval {measure}")
    if ranx is not None:
        ranked = run_ranx(ranx, first)  # also the warm-up: numba compiles on first use
        for measure, name in RANX.items():
            check_close(reference[name], list(ranked[measure]), f"ranx {measure}")

    for lo, hi in batches(args.n, args.batch):
        inputs = batch_inputs(data, lo, hi)
        batch, seconds = timed(trace_batch, inputs)
        build.add(hi - lo, seconds)
        _, seconds = timed(compute, batch, all_requests)
        ours.add(hi - lo, seconds)
        _, seconds = timed(compute, batch, trec_requests)
        ours_trec.add(hi - lo, seconds)
        if pytrec_eval is not None:
            qrels, run = trec_qrels(inputs), trec_run(inputs)
            _, seconds = timed(trec_evaluate, pytrec_eval, qrels, run)
            trec.add(hi - lo, seconds)
        if ranx is not None:
            _, seconds = timed(run_ranx, ranx, inputs)
            ranx_timing.add(hi - lo, seconds)
        if (hi // args.batch) % 20 == 0:
            print(f"  {hi:,} / {args.n:,} traces", flush=True)
    rss["after_ragpulse_and_trec"] = peak_rss_mib()

    # Haystack: a subsample, same batches, compared against ragpulse on the same 5 metrics.
    try:
        evaluators = haystack_evaluators()
    except ImportError:
        evaluators = None
        print("haystack not importable: skipped")
    sub_n = min(args.haystack_n, args.n)
    if evaluators is not None:
        hay_requests = parse_metrics(HAYSTACK)
        ours_hay = Timing(f"ragpulse compute (Haystack set) [{sub_n:,} subsample]", len(HAYSTACK))
        hay = Timing(
            f"haystack evaluators [{sub_n:,} subsample]",
            len(HAYSTACK),
            note="5 components, one per metric",
            versus=ours_hay,
        )
        for lo, hi in batches(sub_n, args.batch):
            inputs = batch_inputs(data, lo, hi)
            mine, seconds = timed(compute, trace_batch(inputs), hay_requests)
            ours_hay.add(hi - lo, seconds)
            documents = haystack_documents(inputs)
            theirs, seconds = timed(run_haystack, evaluators, documents)
            hay.add(hi - lo, seconds)
            del documents
            if lo == 0:
                for name in HAYSTACK:
                    check_close(mine[name], theirs[name], f"haystack {name}")
        hay.extra["extrapolated_seconds_for_n"] = round(args.n / hay.rate, 1)
        hay.note += f"; {args.n:,} traces would take ~{args.n / hay.rate:,.0f} s (extrapolated, not measured)"
        timings += [ours_hay, hay]
        rss["after_haystack"] = peak_rss_mib()

    print()
    print(
        f"{'tool':<52} {'metrics':>7} {'traces':>10} {'wall s':>8} {'traces/s':>10} {'CPU s':>8} "
        f"{'traces/CPU s':>12} {'ragpulse/tool':>13}"
    )
    rows = []
    for t in timings:
        ratio = t.versus.cpu_rate / t.cpu_rate if t.versus is not None else None  # same metrics, by CPU time
        shown = f"{ratio:>12.1f}x" if ratio is not None else f"{'':>13}"
        print(
            f"{t.label:<52} {t.metrics:>7} {t.traces:>10,} {t.seconds:>8.2f} {t.rate:>10,.0f} "
            f"{t.cpu_seconds:>8.2f} {t.cpu_rate:>12,.0f} {shown}"
        )
        rows.append(
            {
                "tool": t.label,
                "metrics": t.metrics,
                "traces": t.traces,
                "wall_seconds": round(t.seconds, 4),
                "traces_per_wall_s": round(t.rate, 1),
                "cpu_seconds": round(t.cpu_seconds, 4),
                "traces_per_cpu_s": round(t.cpu_rate, 1),
                "ragpulse_speedup_same_metrics_cpu": None if ratio is None else round(ratio, 3),
                "note": t.note,
                **t.extra,
            }
        )
    for t in timings:
        if t.note:
            print(f"  {t.label}: {t.note}")
    print(f"peak RSS (whole process): {peak_rss_mib():,.0f} MiB; by phase: {rss}")
    print(
        f"ragpulse compute, one batch of {len(first.trace_ids):,}: "
        f"peak {compute_peak_mib:.1f} MiB allocated (tracemalloc)"
    )
    environment = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pytrec_eval_terrier": version("pytrec-eval-terrier"),
        "haystack_ai": version("haystack-ai"),
        "ranx": version("ranx"),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
    }
    print(f"environment: {environment}")
    result = {
        "benchmark": "retrieval metrics",
        "n_traces": args.n,
        "contexts_per_trace": CONTEXTS,
        "batch_size": args.batch,
        "seed": args.seed,
        "haystack_subsample": sub_n if evaluators is not None else None,
        "ragpulse_metrics": OURS,
        "trec_measures": list(TREC),
        "results": rows,
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "peak_rss_mib_by_phase": {k: round(v, 1) for k, v in rss.items()},
        "ragpulse_compute_peak_alloc_mib_per_batch": round(compute_peak_mib, 2),
        "environment": environment,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
