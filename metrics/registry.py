"""The metric registry: names, versions and how to compute each metric over a batch."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import ragpulse.metrics.agent_goal_accuracy as agent_goal_accuracy
import ragpulse.metrics.agent_steps as agent_steps
import ragpulse.metrics.answer_correctness as answer_correctness
import ragpulse.metrics.answer_relevancy as answer_relevancy
import ragpulse.metrics.aspect_critique as aspect_critique
import ragpulse.metrics.average_precision as average_precision
import ragpulse.metrics.context_precision as context_precision
import ragpulse.metrics.context_recall as context_recall
import ragpulse.metrics.context_relevance as context_relevance
import ragpulse.metrics.embedding_signals as embedding_signals
import ragpulse.metrics.exact_match as exact_match
import ragpulse.metrics.f1 as f1
import ragpulse.metrics.faithfulness as faithfulness
import ragpulse.metrics.feedback as feedback
import ragpulse.metrics.llm_judge as llm_judge
import ragpulse.metrics.ndcg as ndcg
import ragpulse.metrics.operations as operations
import ragpulse.metrics.precision as precision
import ragpulse.metrics.recall as recall
import ragpulse.metrics.reciprocal_rank as reciprocal_rank
import ragpulse.metrics.refusal as refusal
import ragpulse.metrics.semantic_similarity as semantic_similarity
import ragpulse.metrics.tool_calls as tool_calls
from ragpulse.metrics._arrays import RankingArrays, ranking_arrays
from ragpulse.metrics._request import MetricName, split_metric_name
from ragpulse.metrics._spec import MetricResult, MetricSpec
from ragpulse.metrics.agent_goal_accuracy import ConversationMetric
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.errors import ShapeError, UnknownMetricError
from ragpulse.metrics.judge import JudgeMetric
from ragpulse.metrics.prices import BUILTIN_PRICES, PriceTable

__all__ = [
    "CONVERSATION_FAMILIES",
    "DEFAULT_EMBEDDING_METRICS",
    "DEFAULT_FEEDBACK_METRICS",
    "DEFAULT_METRICS",
    "EMBEDDING_SIGNALS",
    "REGISTRY",
    "STEP_FAMILIES",
    "AgentScorer",
    "AnswerScorer",
    "ConversationFactory",
    "FeedbackScorer",
    "JudgeFactory",
    "MetricDefinition",
    "MetricRequest",
    "Needs",
    "OperationsScorer",
    "RankingScorer",
    "Scorer",
    "build_conversation_metrics",
    "build_judge_metrics",
    "compute",
    "parse_metrics",
    "spec_name",
]

RankingScorer = Callable[[RankingArrays, int | None], MetricResult]
AnswerScorer = Callable[[TraceBatch, int | None], MetricResult]
AgentScorer = Callable[[TraceBatch], MetricResult]
"""Counts and compares what an agent did (steps, tool calls) from the batch alone."""
OperationsScorer = Callable[[TraceBatch, PriceTable], MetricResult]
"""Reads what a turn cost to serve (latencies, token usage, span errors, retrievals) from the batch alone; the price
table is the run's (``cost_usd`` reads it)."""
JudgeFactory = Callable[["MetricRequest", Mapping[str, Any]], JudgeMetric]
"""Builds a judge metric from its request (variant) and the run's judge options (rubrics, weights...)."""
ConversationFactory = Callable[["MetricRequest", Mapping[str, Any]], ConversationMetric]
"""Builds a judge metric whose unit is a conversation (:data:`CONVERSATION_FAMILIES`)."""
FeedbackScorer = Callable[[TraceBatch, str, feedback.FeedbackReading], MetricResult]
"""Reads the feedback of one name (the request's variant) from the batch alone, with the run's label table."""
Scorer = (
    RankingScorer | AnswerScorer | AgentScorer | OperationsScorer | FeedbackScorer | JudgeFactory | ConversationFactory
)
Needs = Literal["ranking", "answers", "agent", "operations", "retrieval", "feedback", "judge", "embeddings"]
_JUDGED: frozenset[Needs] = frozenset({"judge", "embeddings"})
"""Run by ``judge_batch``: the LLM judge's metrics, and answer_semantic_similarity, which asks an offline embedding
(or cross-encoder) model instead and so runs without a judge configured."""


@dataclass(frozen=True)
class MetricDefinition:
    """How to compute a family: from ranking arrays, from answers, from an agent's steps and tool calls, from what a
    turn cost to serve (``operations``: span times, token usage, span errors; ``retrieval``: how many documents each
    retrieval returned), by asking the judge, or with embeddings."""

    spec: MetricSpec
    needs: Needs
    scorer: Scorer


def _definitions() -> dict[str, MetricDefinition]:
    entries: list[tuple[MetricSpec, Needs, Scorer]] = [
        (average_precision.SPEC, "ranking", average_precision.score),
        (reciprocal_rank.SPEC, "ranking", reciprocal_rank.score),
        (ndcg.SPEC, "ranking", ndcg.score),
        (recall.SINGLE_HIT, "ranking", recall.score_single_hit),
        (recall.MULTI_HIT, "ranking", recall.score_multi_hit),
        (recall.RECALL_AT_K, "ranking", recall.score_at_k),
        (precision.PRECISION_AT_K, "ranking", precision.score_precision),
        (precision.HIT_RATE_AT_K, "ranking", precision.score_hit_rate),
        (exact_match.EXACT, "answers", exact_match.score_exact),
        (exact_match.NORMALIZED, "answers", exact_match.score_normalized),
        (f1.SPEC, "answers", f1.score),
        (agent_steps.RETRIEVAL_STEPS, "agent", agent_steps.score_retrieval_steps),
        (agent_steps.REPEATED_QUERIES, "agent", agent_steps.score_repeated_queries),
        (agent_steps.TOOL_ERRORS, "agent", agent_steps.score_tool_errors),
        (tool_calls.TOOL_CALL_ACCURACY, "agent", tool_calls.score_accuracy),
        (tool_calls.TOOL_CALL_F1, "agent", tool_calls.score_f1),
        (operations.LATENCY_MS, "operations", operations.score_latency),
        (operations.RETRIEVAL_LATENCY_MS, "operations", operations.score_retrieval_latency),
        (operations.GENERATION_LATENCY_MS, "operations", operations.score_generation_latency),
        (operations.INPUT_TOKENS, "operations", operations.score_input_tokens),
        (operations.OUTPUT_TOKENS, "operations", operations.score_output_tokens),
        (operations.COST_USD, "operations", operations.score_cost_usd),
        (operations.ERROR, "operations", operations.score_error),
        (operations.EMPTY_RETRIEVAL, "retrieval", operations.score_empty_retrieval),
        (operations.ANSWER_LENGTH, "answers", operations.score_answer_length),
        (refusal.SPEC, "answers", refusal.score),
        # What people said (user_feedback:<name>) and what a tracing tool's evaluators computed, apart.
        (feedback.USER_FEEDBACK, "feedback", feedback.score_user_feedback),
        (feedback.TOOL_EVALUATION, "feedback", feedback.score_tool_evaluation),
        # Judge metrics: the scorer is a JudgeFactory; run them with ragpulse.metrics.judge.judge_batch.
        (faithfulness.SPEC, "judge", faithfulness.create),
        (answer_relevancy.SPEC, "judge", answer_relevancy.create),
        (context_precision.WITH_REFERENCE, "judge", context_precision.create_with_reference),
        (context_precision.WITHOUT_REFERENCE, "judge", context_precision.create_without_reference),
        (context_recall.SPEC, "judge", context_recall.create),
        (context_relevance.SPEC, "judge", context_relevance.create),
        (answer_correctness.SPEC, "judge", answer_correctness.create),
        (aspect_critique.SPEC, "judge", aspect_critique.create),
        (llm_judge.SPEC, "judge", llm_judge.create),
        (semantic_similarity.SPEC, "embeddings", semantic_similarity.create),
        # Label-free embedding signals: the run's embedder, no judge; sampled by scoring.embedding_sample.
        (embedding_signals.CONTEXT_RELEVANCE, "embeddings", embedding_signals.create),
        (embedding_signals.CONTEXT_RELEVANCE_MEAN, "embeddings", embedding_signals.create),
        (embedding_signals.ANSWER_SUPPORT, "embeddings", embedding_signals.create),
        (embedding_signals.ANSWER_RELEVANCE, "embeddings", embedding_signals.create),
        # The refusal question asked of the encoder: labelled prototypes, on the embedding signals' sample.
        (refusal.EMBEDDING_SPEC, "embeddings", refusal.create_embedding),
        # A conversation's metric: run by agent_goal_accuracy.judge_conversations, never per trace.
        (agent_goal_accuracy.SPEC, "judge", agent_goal_accuracy.create),
    ]
    return {spec.name: MetricDefinition(spec, needs, scorer) for spec, needs, scorer in entries}


REGISTRY: Mapping[str, MetricDefinition] = _definitions()

STEP_FAMILIES: frozenset[str] = frozenset(
    {
        *(name for name, definition in REGISTRY.items() if definition.needs == "ranking"),
        context_relevance.SPEC.name,
        context_precision.WITH_REFERENCE.name,
        context_precision.WITHOUT_REFERENCE.name,
        context_recall.SPEC.name,
    }
)
"""Families also computed per retrieval step of an agent's turn, on ``TraceBatch.step_batch``: the ranking
metrics and the context judges, whose inputs a step has (a query and the documents it returned)."""

CONVERSATION_FAMILIES: frozenset[str] = frozenset({agent_goal_accuracy.SPEC.name})
"""Families whose unit is a conversation: the turn judge skips them (:func:`build_judge_metrics`);
:func:`build_conversation_metrics` builds them."""

DEFAULT_METRICS: tuple[str, ...] = (
    "document_map",
    "document_mrr",
    "document_ndcg",
    "document_ndcg@10",
    "document_recall_single_hit",
    "document_recall_multi_hit",
    "precision@5",
    "hit_rate@5",
    "recall@5",
    "answer_exact_match",
    "answer_exact_match_normalized",
    "answer_f1",
    # Operational metrics: no labels, no judge; ok wherever the traces log what they read (docs/metrics.md).
    "retrieval_steps",
    "latency_ms",
    "retrieval_latency_ms",
    "generation_latency_ms",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "error",
    "empty_retrieval",
    "answer_length",
    "refusal",
)

EMBEDDING_SIGNALS: tuple[str, ...] = tuple(
    spec.name
    for spec in (
        embedding_signals.CONTEXT_RELEVANCE,
        embedding_signals.CONTEXT_RELEVANCE_MEAN,
        embedding_signals.ANSWER_SUPPORT,
        embedding_signals.ANSWER_RELEVANCE,
    )
)
"""The embedding signals, each validated against human labels (ROC AUC on ARES, JSQuAD, CMRC 2018; docs/metrics.md),
run on the day's ``embedding_sample`` by the judge task with the run's local encoder."""

DEFAULT_EMBEDDING_METRICS: tuple[str, ...] = (*EMBEDDING_SIGNALS, refusal.EMBEDDING_SPEC.name)
"""Also in a run's default metrics (``ScoringConfig.metrics``): the embedding signals and ``embedding_refusal`` (its
precision and recall measured on unseen phrasings; it shares the answer's encode with ``embedding_answer_relevance``).
Kept out of :data:`DEFAULT_METRICS`, which ``compute`` scores without a model."""

DEFAULT_FEEDBACK_METRICS: tuple[str, ...] = ("user_feedback:*", "tool_evaluation:*")
"""Also in a run's default metrics (``ScoringConfig.metrics``): every feedback name the day holds, people's and tools'
evaluations apart, expanded by the run after staging (tasks/scoring/feedback_names.py); nothing on a day without
feedback. Kept out of :data:`DEFAULT_METRICS`, which lists metrics ``compute`` scores as named."""


@dataclass(frozen=True)
class MetricRequest(MetricName):
    """One metric to compute: a :class:`MetricName` whose family is registered and takes its cutoff or variant."""

    @property
    def per_step(self) -> bool:
        """Whether it is also computed per retrieval step (:data:`STEP_FAMILIES`)."""
        return self.family in STEP_FAMILIES

    @property
    def is_conversation(self) -> bool:
        """Whether its unit is a conversation (:data:`CONVERSATION_FAMILIES`), not a turn."""
        return self.family in CONVERSATION_FAMILIES

    @property
    def is_judge(self) -> bool:
        """Whether ``judge_batch`` computes it (see ``_JUDGED``), not ``compute``."""
        return self.definition.needs in _JUDGED

    @property
    def definition(self) -> MetricDefinition:
        return REGISTRY[self.family]

    @property
    def version(self) -> str:
        return self.definition.spec.version

    @classmethod
    def parse(cls, name: str) -> MetricRequest:
        parts = split_metric_name(name)
        if parts is None or parts.family not in REGISTRY:
            raise UnknownMetricError(name, [spec_name(d.spec) for d in REGISTRY.values()])
        spec = REGISTRY[parts.family].spec
        k, variant = parts.k, parts.variant
        if k is not None and not spec.takes_k:
            raise ShapeError(name, f"{spec.name} without a cutoff", f"@{k}")
        if k is None and spec.requires_k:
            raise ShapeError(name, f"a cutoff, e.g. {spec.name}@5", "no cutoff")
        if k is not None and k < 1:
            raise ShapeError(name, "a cutoff k >= 1", k)
        if variant is not None and not spec.takes_variant:
            raise ShapeError(name, f"{spec.name} without a variant", f":{variant}")
        if variant is None and spec.takes_variant:
            raise ShapeError(name, f"a variant, e.g. {spec.name}:<name>", "no variant")
        if variant == feedback.EVERY_NAME and spec.name not in feedback.FAMILIES:
            raise ShapeError(name, "a named variant (* only for user_feedback and tool_evaluation)", "*")
        return cls(spec.name, k, variant)


def spec_name(spec: MetricSpec) -> str:
    """How a family is written by users: ``precision@k``, ``llm_judge:<name>``."""
    name = f"{spec.name}:<name>" if spec.takes_variant else spec.name
    return f"{name}@k" if spec.requires_k else name


def parse_metrics(names: Iterable[str]) -> list[MetricRequest]:
    """Parse and de-duplicate metric names, keeping their order."""
    requests: dict[str, MetricRequest] = {}
    for name in names:
        request = MetricRequest.parse(name)
        requests.setdefault(request.name, request)
    if not requests:
        raise ShapeError("metrics", "at least one metric", "none")
    return list(requests.values())


def compute(
    batch: TraceBatch,
    requests: Iterable[MetricRequest],
    *,
    prices: PriceTable = BUILTIN_PRICES,
    feedback_reading: feedback.FeedbackReading | None = None,
    refusal_phrases: Sequence[str] = (),
) -> dict[str, MetricResult]:
    """Compute every requested non-judge metric over one batch, building shared ranking arrays once; ``prices``
    (``ragpulse.metrics.prices.merged_prices``) prices the application's model calls for ``cost_usd``;
    ``feedback_reading`` (default: the built-in labels and scales) reads the feedback metrics' values;
    ``refusal_phrases`` are the application's own fallback sentences, refusals wherever ``refusal`` finds them."""
    arrays: RankingArrays | None = None
    results: dict[str, MetricResult] = {}
    for request in requests:
        definition = request.definition
        if request.is_judge:
            raise ShapeError(
                request.name, "a metric that needs no judge (use ragpulse.metrics.judge.judge_batch)", "judge"
            )
        # A definition's needs say which kind of scorer it holds.
        if definition.needs == "ranking":
            arrays = arrays if arrays is not None else ranking_arrays(batch)
            results[request.name] = cast(RankingScorer, definition.scorer)(arrays, request.k)
        elif definition.needs == "agent":
            results[request.name] = cast(AgentScorer, definition.scorer)(batch)
        elif definition.needs == "feedback" and request.variant == feedback.EVERY_NAME:
            continue  # every name the day holds: the run expands it (tasks/scoring/feedback_names.py) before scoring
        elif definition.needs == "feedback":
            reading = feedback_reading or feedback.FeedbackReading()
            results[request.name] = cast(FeedbackScorer, definition.scorer)(batch, str(request.variant), reading)
        elif definition.needs in ("operations", "retrieval"):
            results[request.name] = cast(OperationsScorer, definition.scorer)(batch, prices)
        elif request.family == refusal.SPEC.name:
            results[request.name] = refusal.score(batch, phrases=refusal_phrases)
        else:
            results[request.name] = cast(AnswerScorer, definition.scorer)(batch, request.k)
    return results


def build_judge_metrics(requests: Iterable[MetricRequest], options: Mapping[str, Any]) -> list[JudgeMetric]:
    """Instantiate the judge metrics among ``requests`` that score turns (traces) with the run's judge options."""
    return [
        cast(JudgeFactory, request.definition.scorer)(request, options)
        for request in requests
        if request.is_judge and not request.is_conversation
    ]


def build_conversation_metrics(
    requests: Iterable[MetricRequest], options: Mapping[str, Any]
) -> list[ConversationMetric]:
    """Instantiate the conversation metrics among ``requests`` (:data:`CONVERSATION_FAMILIES`)."""
    return [
        cast(ConversationFactory, request.definition.scorer)(request, options)
        for request in requests
        if request.is_conversation
    ]
