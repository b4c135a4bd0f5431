"""Score staged batches with the pure metrics, as cached Prefect tasks."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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

from ragpulse import metrics
from ragpulse.metrics import MetricRequest, MetricResult, TraceBatch, compute
from ragpulse.tasks.core.fingerprint import code_fingerprint, digest
from ragpulse.tasks.core.storage import filesystem, storage_errors
from ragpulse.tasks.ingest.stage import BatchRef

__all__ = [
    "ScoredBatch",
    "count_cached",
    "fresh_usage",
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
    prompt_versions: dict[str, str] = field(default_factory=dict)
    judge_model: str | None = None
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)

    def merged(self, other: ScoredBatch) -> ScoredBatch:
        """The same traces with ``other``'s metrics added (judge results beside retrieval results)."""
        if not np.array_equal(self.trace_ids, other.trace_ids):
            raise ValueError("cannot merge scores of different batches")
        return replace(
            self,
            results={**self.results, **other.results},
            versions={**self.versions, **other.versions},
            prompt_versions={**self.prompt_versions, **other.prompt_versions},
            judge_model=self.judge_model or other.judge_model,
            usage={**self.usage, **other.usage},
        )


def scoring_fingerprint() -> str:
    """Hash of every module whose code can change a score."""
    return code_fingerprint(metrics, sys.modules[__name__])


def _score_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    requests = [MetricRequest.parse(name) for name in params["metric_names"]]
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
    requests = [MetricRequest.parse(name) for name in metric_names]  # may be none: judge metrics only
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
        questions=table.column("question").to_pylist(),
    )


def _labels(pairs: list[dict[str, Any]] | None) -> dict[str, float] | None:
    return None if pairs is None else {pair["key"]: pair["gain"] for pair in pairs}


def count_cached(*per_batch: Sequence[Any]) -> int:
    """Batches whose every scoring task (one list of futures per kind, batch-aligned) came from the cache.

    Raises the first scoring failure: a batch that could not be scored must fail the run, never reach
    the publish as missing. An empty list (a kind with nothing to do) does not count against a batch.
    """
    for futures in per_batch:
        for future in futures:
            future.result()
    kinds = [futures for futures in per_batch if futures]
    return sum(all(f.state.name == "Cached" for f in batch) for batch in zip(*kinds, strict=True)) if kinds else 0


def fresh_usage(futures: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Judge usage of this run: batches answered from the task cache cost nothing now, so they count zero."""
    from ragpulse.tasks.judge.client import merge_usage

    return merge_usage(*(f.result().usage for f in futures if f.state.name != "Cached"))
