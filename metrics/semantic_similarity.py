"""Answer semantic similarity: how close the answer is in meaning to the best reference answer (SAS)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._prompting import Trace, embed_similarities
from ragpulse.metrics._request import MetricName
from ragpulse.metrics._spec import MetricSpec
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.errors import ShapeError
from ragpulse.metrics.judge import JudgeContext, Outcome

__all__ = [
    "MODES",
    "PROMPT_VERSION",
    "SPEC",
    "Mode",
    "PairScorer",
    "SemanticSimilarity",
    "create",
    "pair_scores",
]

SPEC = MetricSpec(
    name="answer_semantic_similarity",
    version="1.0.0",
    summary="Best similarity of the answer to any reference answer: bi-encoder cosine clipped at 0, "
    "or a cross-encoder score in [0, 1].",
)
PROMPT_VERSION = "answer_semantic_similarity/1"
"""No prompt: versions the computation; the mode is appended (``.../1:bi_encoder``)."""

Mode = Literal["bi_encoder", "cross_encoder"]
MODES: tuple[Mode, ...] = ("bi_encoder", "cross_encoder")


class PairScorer(Protocol):
    """Scores (answer, reference) pairs with a cross-encoder: one value in [0, 1] per pair.

    The implementation (``tasks/embeddings/models.py``) applies the sigmoid itself where the model emits logits.
    """

    def score(self, pairs: Sequence[tuple[str, str]]) -> NDArray[np.floating[Any]]: ...


def pair_scores(scorer: PairScorer, pairs: Sequence[tuple[str, str]]) -> NDArray[np.float64]:
    """The scorer's values, checked: one finite value in [0, 1] per pair, else :class:`ShapeError` (a bug)."""
    values = np.asarray(scorer.score(pairs), dtype=np.float64).reshape(-1)
    if len(values) != len(pairs):
        raise ShapeError("pair_scorer", f"{len(pairs)} scores (one per pair)", f"{len(values)} scores")
    if not np.all(np.isfinite(values) & (values >= 0.0) & (values <= 1.0)):
        raise ShapeError("pair_scorer", "scores in [0, 1] (apply a sigmoid to logits)", values.tolist())
    return values


class SemanticSimilarity:
    """Semantic answer similarity (Risch et al., 2021), as ragas' ``SemanticSimilarity`` and Haystack's
    ``SASEvaluator`` compute it, against the best of the trace's references.

    - ``bi_encoder`` (default): SIM = max over references r of cos(E(answer), E(r)) with the run's
      embedder E, clipped at 0. ragas and Haystack report the raw cosine, which can be negative;
      the clip keeps the value in [0, 1] and changes nothing for cosines >= 0.
    - ``cross_encoder``: SIM = max over r of the ``pair_scorer`` (from the context's options) score
      of (answer, r), already in [0, 1].

    Uses no LLM. Not applicable without an answer or a reference, or without the embedder
    (``no_embedder``) / pair scorer (``no_pair_scorer``) the mode needs.
    Reference: J. Risch, T. Möller, J. Gutsch, M. Pietsch, "Semantic Answer Similarity for
    Evaluating Question Answering Models", MRQA 2021.
    """

    name = SPEC.name
    spec = SPEC
    uses_llm = False

    def __init__(self, mode: Mode = "bi_encoder") -> None:
        if mode not in MODES:
            raise ShapeError("similarity_mode", f"one of {', '.join(MODES)}", repr(mode))
        self.mode = mode
        self.prompt_version = f"{PROMPT_VERSION}:{mode}"

    async def score(self, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome:
        trace = Trace.of(batch, index)
        if (reason := trace.missing("answer", "reference")) is not None:
            return Outcome.not_applicable(reason)
        answer = trace.answer.strip()
        references = [r.strip() for r in batch.references[index] if r.strip()]
        if self.mode == "bi_encoder":
            if context.embedder is None:
                return Outcome.not_applicable("no_embedder")
            return Outcome.ok(float((await embed_similarities(context.embedder, answer, references)).max()))
        scorer = context.options.get("pair_scorer")
        if scorer is None:
            return Outcome.not_applicable("no_pair_scorer")
        return Outcome.ok(float(pair_scores(scorer, [(answer, r) for r in references]).max()))


def create(request: MetricName, options: Mapping[str, Any]) -> SemanticSimilarity:
    """The registry's factory: reads ``similarity_mode`` (``bi_encoder`` by default, or ``cross_encoder``)."""
    return SemanticSimilarity(options.get("similarity_mode", "bi_encoder"))
