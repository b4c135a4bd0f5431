"""Embedding signals: label-free proxies of retrieval and answer quality from one multilingual encoder's cosines.

Four metrics, each the raw cosine similarity of embeddings (no calibration: a cosine of e5 sits in a compressed band,
roughly 0.7-0.9, so values are compared with the same metric's own history, which drift does, never read as
probabilities):

- ``embedding_context_relevance``: the best cosine of the question to any retrieved context;
- ``embedding_context_relevance_mean``: the mean cosine of the question to the retrieved contexts;
- ``embedding_answer_support``: the answer split into sentences (:func:`split_sentences`), each sentence's best cosine
  to any context, averaged over the sentences;
- ``embedding_answer_relevance``: the cosine of the answer to the question.

The caller embeds: questions and answer sentences on the query side (e5's ``"query: "``), contexts on the passage side
(``"passage: "``, :class:`PassageEmbedder`). Their agreement with human labels (ROC AUC on ARES, JSQuAD, CMRC 2018) is
in ``bench/README.md`` and ``docs/metrics.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._prompting import Trace
from ragpulse.metrics._request import MetricName
from ragpulse.metrics._sentences import split_sentences
from ragpulse.metrics._spec import MetricSpec
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.errors import ShapeError
from ragpulse.metrics.judge import Embedder, JudgeContext, Outcome

__all__ = [
    "ANSWER_RELEVANCE",
    "ANSWER_SUPPORT",
    "CONTEXT_RELEVANCE",
    "CONTEXT_RELEVANCE_MEAN",
    "EMBEDDED_CONTEXTS",
    "FAMILIES",
    "PROMPT_VERSION",
    "EmbeddingSignal",
    "PassageEmbedder",
    "Signal",
    "answer_support",
    "context_relevance",
    "cosine_matrix",
    "create",
    "embedded_contexts",
    "embedded_texts",
    "passage_rows",
    "split_sentences",
]

CONTEXT_RELEVANCE = MetricSpec(
    name="embedding_context_relevance",
    version="1.0.0",
    summary="Best cosine of the question (query side) to any retrieved context (passage side); a label-free proxy.",
    lower=-1.0,
    upper=1.0,
)
CONTEXT_RELEVANCE_MEAN = MetricSpec(
    name="embedding_context_relevance_mean",
    version="1.0.0",
    summary="Mean cosine of the question to the retrieved contexts; a label-free proxy.",
    lower=-1.0,
    upper=1.0,
)
ANSWER_SUPPORT = MetricSpec(
    name="embedding_answer_support",
    version="1.0.0",
    summary="Mean over the answer's sentences of each one's best cosine to any context; a label-free proxy.",
    lower=-1.0,
    upper=1.0,
)
ANSWER_RELEVANCE = MetricSpec(
    name="embedding_answer_relevance",
    version="1.0.0",
    summary="Cosine of the answer to the question (both query side); a label-free proxy.",
    lower=-1.0,
    upper=1.0,
)
PROMPT_VERSION = "embedding_signals/1"
"""No prompt: versions the computation (prefixes, splitter, aggregation); the embedder's identity is appended."""

Signal = Literal["context_relevance", "context_relevance_mean", "answer_support", "answer_relevance"]
_SPECS: dict[Signal, MetricSpec] = {
    "context_relevance": CONTEXT_RELEVANCE,
    "context_relevance_mean": CONTEXT_RELEVANCE_MEAN,
    "answer_support": ANSWER_SUPPORT,
    "answer_relevance": ANSWER_RELEVANCE,
}
FAMILIES: frozenset[str] = frozenset(spec.name for spec in _SPECS.values())


class PassageEmbedder(Embedder, Protocol):
    """An embedder with a passage side: e5 encodes a retrieved document as ``"passage: " + text``, unlike the
    question; an embedder without one (a test double, a symmetric model) is used for both sides."""

    async def embed_passages(self, texts: Sequence[str]) -> NDArray[np.floating[Any]]: ...


def cosine_matrix(left: NDArray[np.floating[Any]], right: NDArray[np.floating[Any]]) -> NDArray[np.float64]:
    """Cosines of every row of ``left`` to every row of ``right``, shape ``(len(left), len(right))``; 0.0 where a
    row is all zeros.

    >>> cosine_matrix(np.array([[1.0, 0.0]]), np.array([[1.0, 1.0], [-2.0, 0.0], [0.0, 0.0]])).round(4)
    array([[ 0.7071, -1.    ,  0.    ]])
    """
    a, b = (np.asarray(m, dtype=np.float64) for m in (left, right))
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ShapeError("embeddings", "two 2-d arrays of the same width", f"shapes {a.shape} and {b.shape}")
    scale = np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))
    dots = a @ b.T
    return np.divide(dots, scale, out=np.zeros_like(dots), where=scale > 0)


def context_relevance(question: NDArray[np.floating[Any]], contexts: NDArray[np.floating[Any]]) -> tuple[float, float]:
    """The best and the mean cosine of the question's row to the contexts' rows.

    >>> context_relevance(np.array([1.0, 0.0]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    (1.0, 0.5)
    """
    cosines = cosine_matrix(np.atleast_2d(question), contexts)[0]
    if not len(cosines):
        raise ShapeError("contexts", "at least one context row", "none")
    return float(cosines.max()), float(cosines.mean())


def answer_support(sentences: NDArray[np.floating[Any]], contexts: NDArray[np.floating[Any]]) -> float:
    """The mean over the answer's sentence rows of each one's best cosine to any context row.

    >>> answer_support(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 0.0], [1.0, 1.0]])).__round__(4)
    0.8536
    """
    cosines = cosine_matrix(sentences, contexts)
    if cosines.size == 0:
        raise ShapeError("embeddings", "at least one sentence and one context row", f"shape {cosines.shape}")
    return float(cosines.max(axis=1).mean())


class EmbeddingSignal:
    """One embedding signal of one trace, with the run's embedder (``JudgeContext.embedder``); uses no LLM.

    Not applicable without the inputs it compares (``no_question``, ``no_answer``, ``no_contexts``,
    ``no_context_text``; blank contexts are left out), without an embedder (``no_embedder``).
    """

    uses_llm = False

    def __init__(self, signal: Signal) -> None:
        self.signal = signal
        self.spec = _SPECS[signal]
        self.name = self.spec.name
        self.prompt_version = PROMPT_VERSION

    async def score(self, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome:
        trace = Trace.of(batch, index)
        needs = _NEEDS[self.signal]
        if (reason := trace.missing(*needs)) is not None:
            return Outcome.not_applicable(reason)
        embedder = context.embedder
        if embedder is None:
            return Outcome.not_applicable("no_embedder")
        if self.signal == "answer_relevance":
            rows = await embedder.embed([trace.answer.strip(), trace.question.strip()])
            return Outcome.ok(float(cosine_matrix(rows[:1], rows[1:])[0, 0]))
        texts = embedded_contexts(trace.contexts)
        if not texts:
            return Outcome.not_applicable("no_contexts")
        passages = await passage_rows(embedder, texts)
        if self.signal == "answer_support":
            sentences = split_sentences(trace.answer, trace.language)  # a non-blank answer has one at least
            return Outcome.ok(answer_support(await embedder.embed(sentences), passages))
        best, mean = context_relevance(await embedder.embed([trace.question.strip()]), passages)
        return Outcome.ok(best if self.signal == "context_relevance" else mean)


_NEEDS: dict[Signal, tuple[Literal["question", "answer", "contexts"], ...]] = {
    "context_relevance": ("question", "contexts"),
    "context_relevance_mean": ("question", "contexts"),
    "answer_support": ("answer", "contexts"),
    "answer_relevance": ("question", "answer"),
}


EMBEDDED_CONTEXTS = 5
"""Contexts a signal compares, the first in rank order: encoding a passage costs ten times a question (bench/README.md,
embedding signals), and retrievers return up to 20; what reaches the top of the ranking is what the generator reads
most."""


def embedded_contexts(contexts: Sequence[str]) -> list[str]:
    """The non-blank contexts a signal embeds: the first :data:`EMBEDDED_CONTEXTS` of them, stripped."""
    return [text for c in contexts if (text := c.strip())][:EMBEDDED_CONTEXTS]


async def passage_rows(embedder: Embedder, texts: Sequence[str]) -> NDArray[np.floating[Any]]:
    """``texts`` embedded on the passage side where the embedder has one (:class:`PassageEmbedder`)."""
    embed_passages = getattr(embedder, "embed_passages", None)
    return await (embed_passages(texts) if embed_passages is not None else embedder.embed(texts))


def embedded_texts(batch: TraceBatch, families: frozenset[str]) -> tuple[list[str], list[str]]:
    """The query-side and passage-side texts the signals in ``families`` will embed for ``batch``, stripped as they
    strip them, so a caller can encode them in large batches first (``prefetch``)."""
    queries: list[str] = []
    passages: list[str] = []
    if not families & FAMILIES:
        return queries, passages
    for index in range(len(batch)):
        trace = Trace.of(batch, index)
        if families & {CONTEXT_RELEVANCE.name, CONTEXT_RELEVANCE_MEAN.name, ANSWER_RELEVANCE.name}:
            queries.append(trace.question.strip())
        if ANSWER_RELEVANCE.name in families:
            queries.append(trace.answer.strip())
        if ANSWER_SUPPORT.name in families:
            queries += split_sentences(trace.answer, trace.language)
        if families - {ANSWER_RELEVANCE.name}:
            passages += embedded_contexts(trace.contexts)
    return [q for q in queries if q], [p for p in passages if p]


def create(request: MetricName, options: Mapping[str, Any]) -> EmbeddingSignal:
    """The registry's factory: one signal per family."""
    signal = next(signal for signal, spec in _SPECS.items() if spec.name == request.family)
    return EmbeddingSignal(signal)
