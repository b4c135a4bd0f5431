"""Judge and semantic metrics as cached async Prefect tasks, beside the retrieval metrics.

The call-level cache (tasks/judge/client.py) makes re-runs and interrupted backfills free of repeated
calls; this task's own cache skips whole batches whose content, metrics, prompts and judge model
are unchanged.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from prefect import get_run_logger, task
from prefect.cache_policies import CacheKeyFnPolicy
from prefect.context import TaskRunContext

from ragpulse import metrics
from ragpulse.metrics import MetricResult, Status, TraceBatch
from ragpulse.metrics.judge import JudgeContext, JudgeMetric, judge_batch
from ragpulse.metrics.registry import build_judge_metrics, parse_metrics
from ragpulse.tasks.core.errors import ConfigError
from ragpulse.tasks.core.fingerprint import code_fingerprint, digest
from ragpulse.tasks.ingest.stage import BatchRef, StagedPartition
from ragpulse.tasks.scoring.score import ScoredBatch, read_staged, read_trace_batch

if TYPE_CHECKING:
    from ragpulse.tasks.judge.client import JudgeSettings
    from ragpulse.tasks.scoring.embed import OffLoopEmbedder

__all__ = [
    "NOT_SAMPLED",
    "JudgePlan",
    "judge_score_batch",
    "judge_settings",
    "load_judge_options",
    "plan_judging",
    "sampled",
]

NOT_SAMPLED = "not_sampled"


@dataclass(frozen=True)
class JudgePlan:
    """How the requested metrics run: ``plain`` (no model), ``judged`` (judge or embedding model),
    ``skipped`` (LLM metrics while no judge is configured). ``names`` is what gets published."""

    plain: list[str]
    judged: list[str]
    skipped: list[str]
    judge_model: str | None
    prompt_versions: dict[str, str]

    @property
    def names(self) -> list[str]:
        return [*self.plain, *self.judged]

    def batches(self, staged: StagedPartition) -> list[BatchRef]:
        """The batches the judge task maps over: none when there is nothing to judge."""
        return staged.batches if self.judged else []

    def describe(self) -> dict[str, Any]:
        return {"judge_model": self.judge_model, "prompt_versions": self.prompt_versions, "skipped": self.skipped}


def judge_settings(work_dir: str, *, model: str | None = None, base_url: str | None = None) -> JudgeSettings:
    """Judge settings from RAGPULSE_JUDGE_* env vars with the flow's overrides (validated); the call cache
    defaults to ``<work_dir>/judge-cache``."""
    from ragpulse.tasks.core.workdir import work_root
    from ragpulse.tasks.judge.client import JudgeSettings

    overrides = {k: v for k, v in {"model": model, "base_url": base_url}.items() if v is not None}
    return JudgeSettings(**overrides).with_default_cache(work_root(work_dir))


def load_judge_options(path: str | None) -> dict[str, Any]:
    """Judge options from a TOML or JSON file: aspects, llm_judges, weights, generations, models."""
    if path is None:
        return {}
    file = Path(path)
    try:
        text = file.read_text()
        options = json.loads(text) if file.suffix == ".json" else tomllib.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read judge config {path!r}: {exc}") from exc
    if not isinstance(options, dict):
        raise ConfigError(f"judge config {path!r} must hold a table/object of options")
    return options


def plan_judging(metric_names: Sequence[str], judge_model: str | None, options: Mapping[str, Any]) -> JudgePlan:
    """Split the metrics: LLM metrics are skipped (not failed) when no judge is configured."""
    requests = parse_metrics(metric_names)
    built = build_judge_metrics(requests, options)
    judged = [m.name for m in built if judge_model or not m.uses_llm]
    return JudgePlan(
        plain=[r.name for r in requests if not r.is_judge],
        judged=judged,
        skipped=[m.name for m in built if m.uses_llm and not judge_model],
        judge_model=judge_model if any(m.uses_llm for m in built) else None,
        prompt_versions={m.name: m.prompt_version for m in built if m.name in judged},
    )


def sampled(trace_ids: Sequence[str], rate: float) -> NDArray[np.bool_]:
    """Deterministic sample by trace_id: the same traces are judged in every run and every process."""
    if rate >= 1.0:
        return np.ones(len(trace_ids), dtype=bool)
    threshold = int(rate * 2**64)
    return np.fromiter(
        (int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big") < threshold for t in trace_ids),
        dtype=bool,
        count=len(trace_ids),
    )


def _judge_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    requests = parse_metrics(params["metric_names"])
    options = params["options"]
    built = build_judge_metrics(requests, options)
    return "judge-batch-" + digest(
        params["batch"].content_hash,
        sorted((m.name, m.spec.version, m.prompt_version) for m in built),
        params["judge_settings"].model if params["judge_settings"] else None,
        params["judge_settings"].endpoint if params["judge_settings"] else None,
        json.dumps(options, sort_keys=True, default=str),
        params["sample_rate"],
        code_fingerprint(metrics, sys.modules[__name__]),
    )


def _embedder(options: Mapping[str, Any], judge_metrics: Sequence[JudgeMetric]) -> OffLoopEmbedder | None:
    from ragpulse.tasks.scoring.embed import DEFAULT_EMBEDDING_MODEL, OffLoopEmbedder

    needs_embeddings = {"answer_relevancy", "answer_correctness", "answer_semantic_similarity"}
    if not any(m.spec.name in needs_embeddings for m in judge_metrics):
        return None
    return OffLoopEmbedder(str(options.get("embedding_model", DEFAULT_EMBEDDING_MODEL)))


def _context_options(options: Mapping[str, Any]) -> dict[str, Any]:
    resolved = dict(options)
    if options.get("similarity_mode") == "cross_encoder":
        from ragpulse.tasks.scoring.embed import CrossEncoderScorer

        model = options.get("cross_encoder_model")
        if not model:
            raise ConfigError("similarity_mode = 'cross_encoder' needs cross_encoder_model (a path or model name)")
        resolved["pair_scorer"] = CrossEncoderScorer(str(model))
    return resolved


def _expand(result: MetricResult, mask: NDArray[np.bool_]) -> MetricResult:
    """Put a sampled batch's results back in place; unsampled traces are NaN, not_applicable, not_sampled."""
    n = len(mask)
    values = np.full(n, np.nan)
    status = np.full(n, Status.NOT_APPLICABLE, dtype=np.int8)
    reasons = np.full(n, NOT_SAMPLED, dtype=object)
    values[mask], status[mask], reasons[mask] = result.values, result.status, result.reasons
    return MetricResult(values, status, reasons)


def _subset(batch: TraceBatch, mask: NDArray[np.bool_]) -> TraceBatch:
    keep = np.flatnonzero(mask).tolist()

    def pick(seq: Sequence[Any]) -> list[Any]:
        return [seq[i] for i in keep]

    return TraceBatch(
        pick(batch.trace_ids), pick(batch.context_ids), pick(batch.context_texts), pick(batch.relevant_ids),
        pick(batch.relevant_texts), pick(batch.answers), pick(batch.references),
        questions=None if batch.questions is None else pick(batch.questions),
    )  # fmt: skip


@task(name="judge-batch", cache_policy=CacheKeyFnPolicy(cache_key_fn=_judge_key), persist_result=True)
async def judge_score_batch(
    batch: BatchRef,
    metric_names: list[str],
    judge_settings: Any,
    options: dict[str, Any],
    sample_rate: float = 1.0,
    work_storage_options: dict[str, Any] | None = None,
) -> ScoredBatch:
    """Judge one staged batch. A failed call is a NaN with a reason on that score, never a failed task."""
    from ragpulse.tasks.judge.client import OpenAIJudge

    table = read_staged(batch, work_storage_options)
    traces = read_trace_batch(table)
    judge_metrics = build_judge_metrics(parse_metrics(metric_names), options)
    mask = sampled(traces.trace_ids, sample_rate)
    client = OpenAIJudge(judge_settings) if any(m.uses_llm for m in judge_metrics) else None
    embedder = _embedder(options, judge_metrics)
    subset = _subset(traces, mask)
    if embedder is not None:
        # Encode the batch's texts in large batches, off the event loop; the metrics then hit the cache.
        texts = [
            t
            for t in [*(subset.questions or []), *subset.answers, *(r for refs in subset.references for r in refs)]
            if t
        ]
        await asyncio.to_thread(embedder.local.prefetch, texts)
    context = JudgeContext(judge=client, embedder=embedder, options=_context_options(options))  # type: ignore[arg-type]
    try:
        raw = await judge_batch(subset, judge_metrics, context)
    finally:
        if client is not None:
            await client.aclose()
    results = {name: _expand(result, mask) for name, result in raw.items()}
    usage = client.usage.snapshot() if client is not None else {}
    get_run_logger().info(
        "judged %d of %d traces x %d metrics: %d calls, %d from the call cache",
        int(mask.sum()), len(traces), len(judge_metrics),
        sum(u["http_calls"] for u in usage.values()), sum(u["cache_hits"] for u in usage.values()),
    )  # fmt: skip
    return ScoredBatch(
        trace_ids=np.asarray(traces.trace_ids, dtype=object),
        source_files=np.asarray(table.column("source_file").to_pylist(), dtype=object),
        source_lines=table.column("source_line").to_numpy().astype(np.int64),
        results=results,
        versions={m.name: m.spec.version for m in judge_metrics},
        prompt_versions={m.name: m.prompt_version for m in judge_metrics},
        judge_model=client.model if client is not None else None,
        usage=usage,
    )
