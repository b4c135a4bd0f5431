"""metrics/answer_correctness.py: factual F1 + semantic similarity, sharing faithfulness' statement request."""

from __future__ import annotations

import asyncio
import json

import pytest

from ragpulse.metrics import ShapeError, Status, TraceBatch
from ragpulse.metrics._statements import build_statements_request
from ragpulse.metrics.answer_correctness import (
    AnswerCorrectness,
    Classification,
    build_classify_request,
    create,
    factual_f1,
    parse_classification,
)
from ragpulse.metrics.faithfulness import Faithfulness
from ragpulse.metrics.judge import PARSE_ERROR, JudgeContext, judge_batch
from ragpulse.metrics.registry import MetricRequest
from tests.doubles.fake_judge import FakeEmbedder, FakeJudge, reply, run, traces

QUESTION = "What powers the Sun?"
ANSWER = "The Sun is powered by nuclear fission. Its core is very hot. It is a star."
REFERENCE = "The Sun is powered by nuclear fusion of hydrogen into helium in its core, which is very hot."
CONTEXTS = ["The Sun's core fuses hydrogen into helium.", "The core reaches about 15 million kelvin."]
STATEMENTS = ["The Sun is powered by nuclear fission.", "The Sun's core is very hot.", "The Sun is a star."]
STATEMENTS_KEY = ("answer_statements", "statements")
CLASSIFY_KEY = ("answer_correctness", "classify")
VECTORS = {ANSWER: [1.0, 0.0], REFERENCE: [0.6, 0.8]}  # cosine 0.6


def _batch(**overrides: object) -> TraceBatch:
    return traces({"question": QUESTION, "answer": ANSWER, "reference": REFERENCE, "contexts": CONTEXTS, **overrides})


def _classification(flags: list[bool], missing: list[str]) -> str:
    return reply(
        verdicts=[{"statement": s, "reason": "r", "in_reference": f} for s, f in zip(STATEMENTS, flags, strict=True)],
        missing=missing,
    )


# TP = 2 (hot core, star... judged supported), FP = 1 (fission), FN = 1 (hydrogen into helium)
CLASSIFIED = _classification([False, True, True], ["The Sun fuses hydrogen into helium."])


def test_weighted_factual_f1_and_similarity() -> None:
    judge = FakeJudge({STATEMENTS_KEY: [reply(statements=STATEMENTS)], CLASSIFY_KEY: [CLASSIFIED]})
    embedder = FakeEmbedder(VECTORS)
    (outcome,) = run(AnswerCorrectness(), _batch(), judge, embedder=embedder)
    f1 = 2 / (2 + 0.5 * (1 + 1))
    assert outcome.status == Status.OK
    assert outcome.value == pytest.approx(0.75 * f1 + 0.25 * 0.6, rel=1e-12)
    assert judge.steps() == [STATEMENTS_KEY, CLASSIFY_KEY]
    assert embedder.calls == [[ANSWER, REFERENCE]]
    classify = judge.requests[1]
    assert classify == build_classify_request(QUESTION, STATEMENTS, REFERENCE)
    assert json.loads(classify.messages[1][1]) == {
        "question": QUESTION,
        "reference": REFERENCE,
        "answer_statements": STATEMENTS,
    }


def test_statements_request_is_the_one_faithfulness_sends() -> None:
    script = {
        STATEMENTS_KEY: [reply(statements=STATEMENTS)] * 2,
        CLASSIFY_KEY: [CLASSIFIED],
        ("faithfulness", "verdicts"): [
            reply(verdicts=[{"statement": s, "reason": "r", "supported": True} for s in STATEMENTS])
        ],
    }
    faithfulness_judge, correctness_judge = FakeJudge(dict(script)), FakeJudge(dict(script))
    run(Faithfulness(), _batch(), faithfulness_judge)
    run(AnswerCorrectness(), _batch(), correctness_judge, embedder=FakeEmbedder(VECTORS))
    assert faithfulness_judge.requests[0] == correctness_judge.requests[0] == build_statements_request(QUESTION, ANSWER)
    assert faithfulness_judge.requests[0].cache_material() == correctness_judge.requests[0].cache_material()


def test_a_caching_client_extracts_the_statements_once_for_both_metrics() -> None:
    judge = FakeJudge(
        {
            STATEMENTS_KEY: [reply(statements=STATEMENTS)],
            CLASSIFY_KEY: [CLASSIFIED],
            ("faithfulness", "verdicts"): [
                reply(verdicts=[{"statement": s, "reason": "r", "supported": s != STATEMENTS[0]} for s in STATEMENTS])
            ],
        },
        cache=True,
    )
    context = JudgeContext(judge, FakeEmbedder(VECTORS))
    results = asyncio.run(judge_batch(_batch(), [Faithfulness(), AnswerCorrectness()], context))
    assert results["faithfulness"].values.tolist() == pytest.approx([2 / 3])
    assert results["answer_correctness"].values.tolist() == pytest.approx([0.75 * 2 / 3 + 0.25 * 0.6])
    assert sorted(judge.steps()) == sorted([STATEMENTS_KEY, ("faithfulness", "verdicts"), CLASSIFY_KEY])


def test_factual_only_needs_no_embedder_and_similarity_only_no_judge() -> None:
    judge = FakeJudge({STATEMENTS_KEY: [reply(statements=STATEMENTS)], CLASSIFY_KEY: [CLASSIFIED]})
    (outcome,) = run(AnswerCorrectness((1.0, 0.0)), _batch(), judge)
    assert outcome.value == pytest.approx(2 / 3, rel=1e-12)
    judge = FakeJudge()
    (outcome,) = run(AnswerCorrectness((0, 2)), _batch(), judge, embedder=FakeEmbedder(VECTORS))
    assert outcome.value == pytest.approx(0.6, rel=1e-12)
    assert judge.requests == []


def test_weights_are_normalised_like_ragas() -> None:
    judge = FakeJudge({STATEMENTS_KEY: [reply(statements=STATEMENTS)], CLASSIFY_KEY: [CLASSIFIED]})
    (outcome,) = run(AnswerCorrectness((3, 1)), _batch(), judge, embedder=FakeEmbedder(VECTORS))
    assert outcome.value == pytest.approx(0.75 * 2 / 3 + 0.25 * 0.6, rel=1e-12)


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"reference": None}, "no_reference"),
        ({"answer": None}, "no_answer"),
        ({"question": " "}, "no_question"),
    ],
)
def test_not_applicable(overrides: dict[str, object], reason: str) -> None:
    judge = FakeJudge()
    (outcome,) = run(AnswerCorrectness(), _batch(**overrides), judge, embedder=FakeEmbedder(VECTORS))
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, reason)
    assert judge.requests == []


def test_no_embedder_with_a_similarity_weight_is_not_applicable_before_any_call() -> None:
    judge = FakeJudge()
    (outcome,) = run(AnswerCorrectness(), _batch(), judge)
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, "no_embedder")
    assert judge.requests == []


def test_no_statements() -> None:
    judge = FakeJudge({STATEMENTS_KEY: [reply(statements=[])]})
    (outcome,) = run(AnswerCorrectness(), _batch(), judge, embedder=FakeEmbedder(VECTORS))
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, "no_statements")


@pytest.mark.parametrize(
    "bad",
    [
        _classification([True, True, True], ["x"]).replace('"missing": ["x"]', '"gaps": ["x"]'),
        reply(verdicts=[{"statement": "a", "reason": "r", "in_reference": True}], missing=[]),
        _classification([True, True, True], "none"),  # type: ignore[arg-type]
        _classification([True, True, True], [""]),
    ],
    ids=["missing-key", "wrong-length", "missing-not-a-list", "empty-missing-fact"],
)
def test_bad_classifications_fail_after_one_repair(bad: str) -> None:
    judge = FakeJudge(
        {
            STATEMENTS_KEY: [reply(statements=STATEMENTS)],
            CLASSIFY_KEY: [bad],
            ("answer_correctness", "classify:repair"): [bad],
        }
    )
    (outcome,) = run(AnswerCorrectness(), _batch(), judge, embedder=FakeEmbedder(VECTORS))
    assert (outcome.status, outcome.reason) == (Status.FAILED, PARSE_ERROR)


def test_kernels() -> None:
    assert parse_classification(CLASSIFIED, "q1", expected=3) == Classification(2, 1, 1)
    assert factual_f1(Classification(0, 3, 2)) == 0.0
    assert factual_f1(Classification(4, 0, 0)) == 1.0


@pytest.mark.parametrize("weights", [(1, 1, 1), (0, 0), (-1, 2), (float("nan"), 1), "ab", (True, 1)])
def test_invalid_weights(weights: object) -> None:
    with pytest.raises(ShapeError, match="argument 'answer_correctness_weights': expected two finite numbers"):
        create(MetricRequest("answer_correctness"), {"answer_correctness_weights": weights})


def test_factory_reads_the_weights() -> None:
    assert create(MetricRequest("answer_correctness"), {}).weights == (0.75, 0.25)
    assert create(MetricRequest("answer_correctness"), {"answer_correctness_weights": [1, 0]}).weights == (1.0, 0.0)


def test_a_chinese_trace_shares_the_statement_request_and_names_its_language() -> None:
    question, answer = "太阳靠什么发光？", "太阳靠核裂变发光。它是一颗恒星。"
    reference = "太阳靠核心的氢核聚变发光。"
    statements = ["太阳靠核裂变发光。", "太阳是一颗恒星。"]
    classified = (
        '{"verdicts": [{"statement": "太阳靠核裂变发光。", "reason": "参考答案说的是核聚变。", "in_reference": false}, '
        '{"statement": "太阳是一颗恒星。", "reason": "参考答案没有提到。", "in_reference": false}], '
        '"missing": ["太阳靠核心的氢核聚变发光。"]}'
    )
    script = {
        STATEMENTS_KEY: [json.dumps({"statements": statements}, ensure_ascii=False)],
        CLASSIFY_KEY: [classified],
        ("faithfulness", "verdicts"): [
            reply(verdicts=[{"statement": s, "reason": "r", "supported": True} for s in statements])
        ],
    }
    judge = FakeJudge(script, cache=True)
    batch = traces(
        {"question": question, "answer": answer, "reference": reference, "contexts": ["太阳是恒星。"], "language": "zh"}
    )
    (correct,) = run(AnswerCorrectness((1.0, 0.0)), batch, judge)
    (faithful,) = run(Faithfulness(), batch, judge)
    assert (correct, faithful) == (correct.ok(0.0), faithful.ok(1.0))
    assert judge.steps() == [STATEMENTS_KEY, CLASSIFY_KEY, ("faithfulness", "verdicts")]  # statements asked once
    statements_request, classify, _ = judge.requests
    assert statements_request == build_statements_request(question, answer, "zh")
    assert classify.messages[0][1].endswith(
        "\nLanguage: Chinese (zh). Write the reasons and missing facts in that language, whatever the language of "
        "these instructions, the examples or the contexts, and keep the JSON keys as given."
    )
    assert classify.messages[1][1] == json.dumps(
        {"question": question, "reference": reference, "answer_statements": statements}, ensure_ascii=False
    )
    assert (classify.prompt_version, AnswerCorrectness().prompt_version) == ("answer_correctness/3",) * 2
