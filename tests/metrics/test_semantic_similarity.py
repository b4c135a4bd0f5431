"""metrics/semantic_similarity.py: bi-encoder cosine or cross-encoder score against the best reference."""

from __future__ import annotations

import numpy as np
import pytest

from ragpulse.metrics import ShapeError, Status, TraceBatch
from ragpulse.metrics.registry import MetricRequest
from ragpulse.metrics.semantic_similarity import SemanticSimilarity, create
from tests.doubles.fake_judge import FakeEmbedder, FakeJudge, FakePairScorer, run, traces

ANSWER = "Paris is France's capital."
REFERENCES = ["The capital of France is Paris.", "Paris."]
VECTORS = {ANSWER: [1.0, 0.0, 0.0], REFERENCES[0]: [0.8, 0.6, 0.0], REFERENCES[1]: [0.6, 0.0, 0.8]}


def _batch(**overrides: object) -> TraceBatch:
    return traces(
        {
            "question": "?",
            "answer": ANSWER,
            "reference": REFERENCES[0],
            "reference_answers": REFERENCES[1:],
            **overrides,
        }
    )


def test_bi_encoder_best_reference_without_the_judge() -> None:
    judge, embedder = FakeJudge(), FakeEmbedder(VECTORS)
    metric = SemanticSimilarity()
    (outcome,) = run(metric, _batch(), judge, embedder=embedder)
    assert outcome.status == Status.OK and outcome.value == pytest.approx(0.8, rel=1e-12)
    assert embedder.calls == [[ANSWER, *REFERENCES]]
    assert judge.requests == [] and metric.uses_llm is False
    assert metric.prompt_version == "answer_semantic_similarity/1:bi_encoder"


def test_negative_cosine_is_clipped_to_zero() -> None:
    embedder = FakeEmbedder({ANSWER: [1.0, 0.0], "Berlin.": [-0.6, 0.8]})
    (outcome,) = run(
        SemanticSimilarity(), _batch(reference="Berlin.", reference_answers=None), FakeJudge(), embedder=embedder
    )
    assert outcome == outcome.ok(0.0)


def test_cross_encoder_takes_the_pair_scorer_from_the_options() -> None:
    scorer = FakePairScorer({(ANSWER, REFERENCES[0]): 0.93, (ANSWER, REFERENCES[1]): 0.4})
    metric = create(MetricRequest("answer_semantic_similarity"), {"similarity_mode": "cross_encoder"})
    (outcome,) = run(metric, _batch(), FakeJudge(), options={"pair_scorer": scorer})
    assert outcome == outcome.ok(0.93)
    assert scorer.calls == [[(ANSWER, REFERENCES[0]), (ANSWER, REFERENCES[1])]]
    (outcome,) = run(metric, _batch(), FakeJudge(), embedder=FakeEmbedder(VECTORS))
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, "no_pair_scorer")


def test_a_pair_scorer_outside_zero_one_is_a_bug() -> None:
    class Logits:
        def score(self, pairs: object) -> np.ndarray:
            return np.array([3.2, -1.0])

    with pytest.raises(ShapeError, match=r"argument 'pair_scorer': expected scores in \[0, 1\] \(apply a sigmoid"):
        run(SemanticSimilarity("cross_encoder"), _batch(), FakeJudge(), options={"pair_scorer": Logits()})


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [({"answer": None}, "no_answer"), ({"reference": None, "reference_answers": None}, "no_reference")],
)
def test_not_applicable(overrides: dict[str, object], reason: str) -> None:
    (outcome,) = run(SemanticSimilarity(), _batch(**overrides), FakeJudge(), embedder=FakeEmbedder(VECTORS))
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, reason)


def test_no_embedder() -> None:
    (outcome,) = run(SemanticSimilarity(), _batch(), FakeJudge())
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, "no_embedder")


def test_question_is_not_needed() -> None:
    (outcome,) = run(SemanticSimilarity(), _batch(question=""), FakeJudge(), embedder=FakeEmbedder(VECTORS))
    assert outcome.status == Status.OK


def test_unknown_mode() -> None:
    with pytest.raises(ShapeError, match="argument 'similarity_mode': expected one of bi_encoder, cross_encoder"):
        create(MetricRequest("answer_semantic_similarity"), {"similarity_mode": "sas"})
