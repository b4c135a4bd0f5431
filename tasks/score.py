"""Score staged batches with the pure metrics, as cached Prefect tasks."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray
from prefect import get_run_logger, task
from prefect.cache_policies import CacheKeyFnPolicy
from prefect.context import TaskRunContext
from prefect.locking.filesystem import FileSystemLockManager
from prefect.transactions import IsolationLevel

import metrics
from metrics import MetricResult, TraceBatch, compute, parse_metrics
from tasks._fingerprint import code_fingerprint, digest
from tasks.load import BatchRef
from tasks.storage import filesystem, storage_errors

__all__ = [
    "ScoredBatch",
    "count_cached",
    "read_staged",
    "read_trace_batch",
    "score_batch",
    "score_cache_policy",
    "scoring_fingerprint",
]


@dataclass(frozen=True)
class ScoredBatch:
    """Per-trace results of one batch: index-aligned trace identities and one MetricResult per metric."""

    trace_ids: NDArray[np.object_]
    source_files: NDArray[np.object_]
    source_lines: NDArray[np.int64]
    results: dict[str, MetricResult]
    versions: dict[str, str]


def scoring_fingerprint() -> str:
    """Hash of every module whose code can change a score."""
    return code_fingerprint(metrics, sys.modules[__name__])


def _score_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    requests = parse_metrics(params["metric_names"])
    return "score-batch-" + digest(
        params["batch"].content_hash, sorted((r.name, r.version) for r in requests), scoring_fingerprint()
    )


def score_cache_policy(lock_dir: Any | None) -> CacheKeyFnPolicy:
    """Cache on the batch content, metric names and versions and the scoring code.

    With a lock directory, identical tasks running at once (two runs of the same date) compute once.
    """
    policy = CacheKeyFnPolicy(cache_key_fn=_score_key)
    if lock_dir is None:
        return policy
    return policy.configure(
        isolation_level=IsolationLevel.SERIALIZABLE, lock_manager=FileSystemLockManager(lock_files_directory=lock_dir)
    )


@task(name="score-batch", cache_policy=score_cache_policy(None), persist_result=True)
def score_batch(
    batch: BatchRef, metric_names: Sequence[str], work_storage_options: dict[str, Any] | None = None
) -> ScoredBatch:
    """Compute the requested metrics for one staged batch. Pure scoring: never retried."""
    table = read_staged(batch, work_storage_options)
    traces = read_trace_batch(table)
    requests = parse_metrics(metric_names)
    results = compute(traces, requests)
    get_run_logger().info("scored %d traces x %d metrics", len(traces), len(results))
    return ScoredBatch(
        trace_ids=np.asarray(traces.trace_ids, dtype=object),
        source_files=np.asarray(table.column("source_file").to_pylist(), dtype=object),
        source_lines=table.column("source_line").to_numpy().astype(np.int64),
        results=results,
        versions={r.name: r.version for r in requests},
    )


def read_staged(batch: BatchRef, storage_options: Mapping[str, Any] | None = None) -> pa.Table:
    fs, path = filesystem(batch.url, storage_options)
    with storage_errors(batch.url):
        if not fs.exists(path):
            raise FileNotFoundError(
                f"staged batch {batch.url} is gone (work dir cleaned?); re-run with --refresh-cache to restage"
            )
        with fs.open(path, "rb") as handle:
            return pq.read_table(handle)


def read_trace_batch(table: pa.Table) -> TraceBatch:
    """Staged Arrow rows -> the metrics' input, converting column by column rather than row by row."""
    contexts = table.column("contexts").combine_chunks()
    offsets = contexts.offsets.to_numpy()
    flat = contexts.flatten()
    ids = flat.field("id").to_pylist()
    texts = flat.field("text").to_pylist()
    spans = list(zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True))
    references = [
        [r for r in dict.fromkeys([ref, *(alts or [])]) if r is not None]
        for ref, alts in zip(
            table.column("reference").to_pylist(), table.column("reference_answers").to_pylist(), strict=True
        )
    ]
    return TraceBatch(
        trace_ids=table.column("trace_id").to_pylist(),
        context_ids=[ids[a:b] for a, b in spans],
        context_texts=[texts[a:b] for a, b in spans],
        relevant_ids=[_labels(pairs) for pairs in table.column("relevant_context_ids").to_pylist()],
        relevant_texts=[_labels(pairs) for pairs in table.column("relevant_contexts").to_pylist()],
        answers=table.column("answer").to_pylist(),
        references=references,
    )


def _labels(pairs: list[dict[str, Any]] | None) -> dict[str, float] | None:
    return None if pairs is None else {pair["key"]: pair["gain"] for pair in pairs}


def count_cached(futures: Sequence[Any]) -> int:
    """How many scoring tasks were answered from the cache (Prefect's 'Cached' state), once all finished."""
    for future in futures:
        future.wait()
    return sum(future.state.name == "Cached" for future in futures)
