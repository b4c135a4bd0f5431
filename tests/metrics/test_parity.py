"""Per-trace parity with two reference implementations on 2,000 seeded random traces.

- trec_eval through pytrec_eval: map, recip_rank, ndcg, ndcg_cut_10, P_5, recall_5, success_5.
- Haystack 3.x evaluators (``document_comparison_field="id"``): MAP, MRR, NDCG, recall single/multi hit,
  answer exact match.

Where a metric does not apply (no context labelled relevant) ragpulse returns NaN; the references return 0.0
there (or, for trec_eval, may leave the query out), so values are compared only where our status is ok and
the references are checked to give 0.0 elsewhere. Each test skips when its reference package is missing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import MetricResult, Status, TraceBatch, compute, parse_metrics

N_TRACES = 2_000
RTOL = 1e-9

TREC_MEASURES = {
    "map": "document_map",
    "recip_rank": "document_mrr",
    "ndcg": "document_ndcg",
    "ndcg_cut_10": "document_ndcg@10",
    "P_5": "precision@5",
    "recall_5": "recall@5",
    "success_5": "hit_rate@5",
}


@dataclass(frozen=True)
class Traces:
    """Retrieved ids in rank order and integer labels by id (None: no labels at all)."""

    ids: list[str]
    retrieved: list[list[str]]
    labels: list[dict[str, int] | None]

    def batch(self) -> TraceBatch:
        n = len(self.ids)
        return TraceBatch(
            trace_ids=self.ids,
            context_ids=self.retrieved,
            context_texts=self.retrieved,
            relevant_ids=self.labels,
            relevant_texts=[None] * n,
            answers=[None] * n,
            references=[[]] * n,
        )

    def relevant(self, i: int) -> list[str]:
        return [key for key, gain in (self.labels[i] or {}).items() if gain > 0]


def _traces(*, graded: bool, duplicates: bool, seed: int = 0) -> Traces:
    rng = np.random.default_rng(seed)
    pool = 25
    ids, retrieved, labels = [], [], []
    for i in range(N_TRACES):
        size = int(rng.integers(0, 16))
        if duplicates:
            docs = [f"d{x}" for x in rng.integers(0, pool // 2, size)]
        else:
            docs = [f"d{x}" for x in rng.choice(pool, size=size, replace=False)]
        labelled = [f"d{x}" for x in rng.choice(pool, size=int(rng.integers(0, 15)), replace=False)]
        gains = rng.integers(0, 4, len(labelled)) if graded else rng.integers(0, 2, len(labelled))
        ids.append(f"q{i}")
        retrieved.append(docs)
        labels.append(None if rng.random() < 0.05 else {key: int(g) for key, g in zip(labelled, gains, strict=True)})
    return Traces(ids, retrieved, labels)


def _ours(traces: Traces, names: Sequence[str]) -> dict[str, MetricResult]:
    return compute(traces.batch(), parse_metrics(names))


def _assert_parity(ours: MetricResult, theirs: Sequence[float], name: str) -> None:
    ok = ours.status == Status.OK
    assert ok.sum() > N_TRACES // 2, "the random traces should mostly be applicable"
    assert (~ok).sum() > 0, "the random traces should include inapplicable ones"
    np.testing.assert_allclose(ours.values[ok], np.asarray(theirs, dtype=np.float64)[ok], rtol=RTOL, err_msg=name)
    assert np.all(np.asarray(theirs)[~ok] == 0.0), f"{name}: the reference scores inapplicable traces 0.0"


# trec_eval ----------------------------------------------------------------------------------------------------


def _scores_by_rank(docs: Sequence[str]) -> dict[str, float]:
    """Distinct scores falling with the rank, so that trec_eval's order (by score) is exactly our rank order."""
    return {doc: float(len(docs) - rank) for rank, doc in enumerate(docs)}


@pytest.mark.parametrize("graded", [True, False], ids=["graded", "binary"])
def test_trec_eval_parity(graded: bool) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    traces = _traces(graded=graded, duplicates=False)
    labelled = [i for i, labels in enumerate(traces.labels) if labels is not None]
    qrels = {traces.ids[i]: dict(traces.labels[i] or {}) for i in labelled}
    run = {traces.ids[i]: _scores_by_rank(traces.retrieved[i]) for i in labelled}
    evaluated = pytrec_eval.RelevanceEvaluator(qrels, set(TREC_MEASURES)).evaluate(run)
    ours = _ours(traces, list(TREC_MEASURES.values()))
    for measure, name in TREC_MEASURES.items():
        result = ours[name]
        for i, trace_id in enumerate(traces.ids):
            reference = evaluated.get(trace_id, {}).get(measure)
            if result.status[i] != Status.OK:
                # no labels (never sent) or nothing labelled relevant: trec_eval omits the query or scores 0.0
                assert reference in (None, 0.0), (measure, trace_id)
                continue
            assert reference is not None, f"trec_eval left out {trace_id}, which has relevant labels"
            assert math.isclose(result.values[i], reference, rel_tol=RTOL, abs_tol=0.0), (
                measure,
                trace_id,
                result.values[i],
                reference,
            )


def test_trec_eval_random_traces_cover_the_edge_cases() -> None:
    traces = _traces(graded=True, duplicates=False)
    statuses = _ours(traces, ["document_map"])["document_map"]
    assert set(statuses.reasons.tolist()) == {None, "no_relevance_labels", "no_relevant_context_labelled"}
    assert any(not docs for docs in traces.retrieved)
    assert any(len(docs) < 5 for docs in traces.retrieved) and any(len(docs) > 10 for docs in traces.retrieved)
    assert any(len(traces.relevant(i)) > 10 for i in range(N_TRACES))


# Haystack -----------------------------------------------------------------------------------------------------


def _haystack() -> Any:
    pytest.importorskip("haystack")
    return pytest.importorskip("haystack.components.evaluators")


def _documents(ids: Sequence[str], scores: Sequence[float] | None = None) -> list[Any]:
    from haystack import Document

    if scores is None:
        return [Document(id=doc_id) for doc_id in ids]
    return [Document(id=doc_id, score=score) for doc_id, score in zip(ids, scores, strict=True)]


def _haystack_scores(evaluator: Any, traces: Traces, *, graded: bool = False) -> list[float]:
    if graded:
        truth = [_documents(list(lab or {}), [float(g) for g in (lab or {}).values()]) for lab in traces.labels]
    else:
        truth = [_documents(traces.relevant(i)) for i in range(N_TRACES)]
    retrieved = [_documents(docs) for docs in traces.retrieved]
    return list(evaluator.run(ground_truth_documents=truth, retrieved_documents=retrieved)["individual_scores"])


@pytest.mark.slow
@pytest.mark.parametrize("duplicates", [False, True], ids=["distinct", "duplicates"])
def test_haystack_document_evaluators(duplicates: bool) -> None:
    evaluators = _haystack()
    traces = _traces(graded=True, duplicates=duplicates)
    ours = _ours(
        traces,
        ["document_map", "document_mrr", "document_ndcg", "document_recall_single_hit", "document_recall_multi_hit"],
    )
    pairs = {
        "document_map": evaluators.DocumentMAPEvaluator(document_comparison_field="id"),
        "document_mrr": evaluators.DocumentMRREvaluator(document_comparison_field="id"),
        "document_recall_single_hit": evaluators.DocumentRecallEvaluator(
            mode="single_hit", document_comparison_field="id"
        ),
        "document_recall_multi_hit": evaluators.DocumentRecallEvaluator(
            mode="multi_hit", document_comparison_field="id"
        ),
    }
    for name, evaluator in pairs.items():
        _assert_parity(ours[name], _haystack_scores(evaluator, traces), name)
    ndcg = evaluators.DocumentNDCGEvaluator(document_comparison_field="id")
    _assert_parity(ours["document_ndcg"], _haystack_scores(ndcg, traces, graded=True), "document_ndcg")
    if duplicates:
        assert sum(len(set(docs)) < len(docs) for docs in traces.retrieved) > N_TRACES // 4


@pytest.mark.slow
def test_haystack_map_also_credits_a_duplicate_once() -> None:
    evaluators = _haystack()
    retrieved, relevant = ["d1", "d1", "d2"], ["d1", "d2"]
    haystack_ap = evaluators.DocumentMAPEvaluator(document_comparison_field="id").run(
        ground_truth_documents=[_documents(relevant)], retrieved_documents=[_documents(retrieved)]
    )["individual_scores"]
    batch = TraceBatch(["q1"], [retrieved], [retrieved], [dict.fromkeys(relevant, 1)], [None], [None], [[]])
    ours = compute(batch, parse_metrics(["document_map"]))["document_map"].values
    # the repeated d1 at rank 2 is a miss: (1/1 + 2/3) / 2; crediting it again would give (1 + 1 + 1) / 2
    assert haystack_ap == pytest.approx([(1 + 2 / 3) / 2], rel=RTOL)
    np.testing.assert_allclose(ours, haystack_ap, rtol=RTOL)


@pytest.mark.slow
def test_haystack_answer_exact_match() -> None:
    evaluators = _haystack()
    rng = np.random.default_rng(0)
    words = ["Paris", "paris", "Paris ", "The Paris", "London", "london", "", "Rome", "rome!"]
    answers = [str(w) for w in rng.choice(words, N_TRACES)]
    references = [str(w) for w in rng.choice(words, N_TRACES)]
    n = N_TRACES
    batch = TraceBatch(
        [f"q{i}" for i in range(n)], [[]] * n, [[]] * n, [None] * n, [None] * n, answers, [[ref] for ref in references]
    )
    ours = compute(batch, parse_metrics(["answer_exact_match"]))["answer_exact_match"]
    theirs = evaluators.AnswerExactMatchEvaluator().run(ground_truth_answers=references, predicted_answers=answers)
    assert np.all(ours.status == Status.OK)
    np.testing.assert_array_equal(ours.values, np.asarray(theirs["individual_scores"], dtype=np.float64))
    assert 0 < ours.values.sum() < n
