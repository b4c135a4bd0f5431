"""metrics/context_precision.py: both families, one call per trace, ragas' average-precision formula."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragpulse.metrics import Status, TraceBatch
from ragpulse.metrics.context_precision import (
    ContextPrecision,
    build_request,
    context_precision,
    create_with_reference,
    create_without_reference,
    parse_verdicts,
)
from ragpulse.metrics.judge import PARSE_ERROR, VerdictParseError
from ragpulse.metrics.registry import MetricRequest
from tests.doubles.fake_judge import FakeJudge, reply, run, traces

QUESTION = "Who painted the Mona Lisa?"
ANSWER = "Leonardo da Vinci painted it."
REFERENCE = "Leonardo da Vinci."
CONTEXTS = ["The Mona Lisa is by Leonardo da Vinci.", "The Louvre is in Paris.", "Leonardo painted it c. 1503."]
WITH = ("context_precision", "verdicts")
WITHOUT = ("context_precision_without_reference", "verdicts")


def _batch(**overrides: object) -> TraceBatch:
    return traces({"question": QUESTION, "answer": ANSWER, "reference": REFERENCE, "contexts": CONTEXTS, **overrides})


def _verdicts(*flags: int) -> str:
    return reply(verdicts=[{"reason": "r", "useful": flag} for flag in flags])


def _ragas(verdicts: list[int]) -> float:
    """ragas' own arithmetic, epsilon included."""
    denominator = sum(verdicts) + 1e-10
    numerator = sum((sum(verdicts[: i + 1]) / (i + 1)) * verdicts[i] for i in range(len(verdicts)))
    return numerator / denominator


def test_average_precision_of_the_verdicts_in_one_call() -> None:
    judge = FakeJudge({WITH: [_verdicts(1, 0, 1)]})
    (outcome,) = run(ContextPrecision(with_reference=True), _batch(), judge)
    assert outcome == outcome.ok((1 / 1 + 2 / 3) / 2)
    assert judge.steps() == [WITH]
    (request,) = judge.requests
    assert json.loads(request.messages[1][1]) == {"question": QUESTION, "reference": REFERENCE, "contexts": CONTEXTS}
    assert 'reference answer ("reference")' in request.messages[0][1]
    assert request.schema["properties"]["verdicts"]["maxItems"] == 3


def test_without_reference_judges_against_the_answer() -> None:
    judge = FakeJudge({WITHOUT: [_verdicts(0, 1, 1)]})
    (outcome,) = run(ContextPrecision(with_reference=False), _batch(reference=None), judge)
    assert outcome == outcome.ok((1 / 2 + 2 / 3) / 2)
    assert json.loads(judge.requests[0].messages[1][1]) == {
        "question": QUESTION,
        "answer": ANSWER,
        "contexts": CONTEXTS,
    }
    assert "reference" not in judge.requests[0].messages[0][1]


def test_no_useful_context_scores_zero() -> None:
    (outcome,) = run(ContextPrecision(with_reference=True), _batch(), FakeJudge({WITH: [_verdicts(0, 0, 0)]}))
    assert outcome == outcome.ok(0.0)


def test_formula_matches_ragas_within_its_epsilon() -> None:
    rng = np.random.default_rng(0)
    for _ in range(2000):
        verdicts = rng.integers(0, 2, int(rng.integers(1, 15))).tolist()
        ours = context_precision(verdicts)
        assert ours == pytest.approx(_ragas(verdicts), rel=1e-9, abs=1e-12)
        assert 0.0 <= ours <= 1.0


@pytest.mark.parametrize(
    ("with_reference", "overrides", "reason"),
    [
        (True, {"reference": None}, "no_reference"),
        (True, {"contexts": []}, "no_contexts"),
        (True, {"question": ""}, "no_question"),
        (False, {"answer": None}, "no_answer"),
        (False, {"contexts": []}, "no_contexts"),
    ],
)
def test_not_applicable(with_reference: bool, overrides: dict[str, object], reason: str) -> None:
    judge = FakeJudge()
    (outcome,) = run(ContextPrecision(with_reference=with_reference), _batch(**overrides), judge)
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, reason)
    assert judge.requests == []


@pytest.mark.parametrize(
    "bad",
    [_verdicts(1, 0), _verdicts(1, 0, 2), _verdicts(1, 0, True), reply(verdicts=[{"useful": 1}] * 3), "{", "null"],
    ids=["too-few", "out-of-range", "bool", "no-reason", "truncated", "null"],
)
def test_bad_verdicts_fail_after_one_repair(bad: str) -> None:
    judge = FakeJudge({WITH: [bad], ("context_precision", "verdicts:repair"): [bad]})
    (outcome,) = run(ContextPrecision(with_reference=True), _batch(), judge)
    assert (outcome.status, outcome.reason) == (Status.FAILED, PARSE_ERROR)
    assert len(judge.requests) == 2


def test_parse_verdicts() -> None:
    assert parse_verdicts(_verdicts(1, 0, 1), "q1", expected=3) == [1, 0, 1]
    with pytest.raises(VerdictParseError, match=r"verdicts\[2\]\.useful must be 0 or 1, got true"):
        parse_verdicts(_verdicts(1, 0, True), "q1", expected=3)


def test_deterministic_requests_and_factories() -> None:
    assert build_request(QUESTION, REFERENCE, CONTEXTS, with_reference=True) == build_request(
        QUESTION, REFERENCE, list(CONTEXTS), with_reference=True
    )
    with_ref = create_with_reference(MetricRequest("context_precision"), {})
    without = create_without_reference(MetricRequest("context_precision_without_reference"), {})
    assert (with_ref.name, without.name) == ("context_precision", "context_precision_without_reference")
    assert with_ref.prompt_version == without.prompt_version == "context_precision/3"
    assert with_ref.spec.version == without.spec.version == "2.0.0"


def test_a_japanese_trace_names_its_language_and_keeps_the_text_intact() -> None:
    question, reference = "『モナ・リザ』を描いたのは誰ですか？", "レオナルド・ダ・ヴィンチです。"
    contexts = ["『モナ・リザ』はレオナルド・ダ・ヴィンチの作品です。", "ルーヴル美術館はパリにあります。"]
    judge = FakeJudge({WITH: ['{"verdicts": [{"reason": "作者が書かれている。", "useful": 1}, '
                              '{"reason": "作者に触れていない。", "useful": 0}]}']})  # fmt: skip
    batch = traces({"question": question, "reference": reference, "contexts": contexts, "language": "ja"})
    (outcome,) = run(ContextPrecision(with_reference=True), batch, judge)
    assert outcome == outcome.ok(1.0)
    (request,) = judge.requests
    assert request.messages[0][1].endswith(
        "\nLanguage: Japanese (ja). Write the reasons in that language, whatever the language of these "
        "instructions, the examples or the contexts, and keep the JSON keys as given."
    )
    assert request.messages[1][1] == (
        f'{{"question": "{question}", "reference": "{reference}", "contexts": ["{contexts[0]}", "{contexts[1]}"]}}'
    )
