"""metrics/context_recall.py with a scripted judge."""

from __future__ import annotations

import json

import pytest

from ragpulse.metrics import Status, TraceBatch
from ragpulse.metrics._prompting import DATA_RULE, language_rule
from ragpulse.metrics.context_recall import INSTRUCTIONS, ContextRecall, build_request, create, parse_claims
from ragpulse.metrics.judge import PARSE_ERROR, VerdictParseError
from ragpulse.metrics.registry import MetricRequest
from tests.doubles.fake_judge import FakeJudge, reply, run, traces

QUESTION = "What do we know about Marie Curie?"
REFERENCE = "Marie Curie won two Nobel Prizes. She discovered polonium. She was born in Warsaw. She died in 1934."
CONTEXTS = ["Curie won the Nobel Prize in Physics (1903) and Chemistry (1911).", "She discovered polonium and radium."]
KEY = ("context_recall", "claims")


def _batch(**overrides: object) -> TraceBatch:
    return traces({"question": QUESTION, "answer": "x", "reference": REFERENCE, "contexts": CONTEXTS, **overrides})


def _claims(*flags: int) -> str:
    return reply(claims=[{"claim": f"claim {i}", "reason": "r", "attributed": f} for i, f in enumerate(flags)])


def test_attributed_over_total_in_one_call() -> None:
    judge = FakeJudge({KEY: [_claims(1, 1, 0, 0)]})
    (outcome,) = run(ContextRecall(), _batch(), judge)
    assert outcome == outcome.ok(0.5)
    (request,) = judge.requests
    assert request.messages == (
        (
            "system",
            f"{INSTRUCTIONS}\n{DATA_RULE}\n"
            f"{language_rule(None, 'the claims and reasons', fallback='the reference answer')}",
        ),
        ("user", json.dumps({"question": QUESTION, "reference": REFERENCE, "contexts": CONTEXTS})),
    )
    assert request == build_request(QUESTION, REFERENCE, CONTEXTS)


def test_the_first_reference_is_used() -> None:
    judge = FakeJudge({KEY: [_claims(1, 0, 1)]})
    (outcome,) = run(ContextRecall(), _batch(reference="  ", reference_answers=["Curie won two Nobels.", "x"]), judge)
    assert outcome.value == pytest.approx(2 / 3, rel=1e-15)
    assert json.loads(judge.requests[0].messages[1][1])["reference"] == "Curie won two Nobels."


def test_no_claims_is_not_applicable() -> None:
    (outcome,) = run(ContextRecall(), _batch(), FakeJudge({KEY: [reply(claims=[])]}))
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, "no_statements")


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [({"reference": None}, "no_reference"), ({"contexts": []}, "no_contexts"), ({"question": ""}, "no_question")],
)
def test_not_applicable(overrides: dict[str, object], reason: str) -> None:
    judge = FakeJudge()
    (outcome,) = run(ContextRecall(), _batch(**overrides), judge)
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, reason)
    assert judge.requests == []


@pytest.mark.parametrize(
    "bad",
    [_claims(1, 2), _claims(1, True), reply(claims=[{"claim": "", "reason": "r", "attributed": 1}]), "no", "{}"],
    ids=["out-of-range", "bool", "empty-claim", "not-json", "missing-key"],
)
def test_bad_replies_fail_after_one_repair(bad: str) -> None:
    judge = FakeJudge({KEY: [bad], ("context_recall", "claims:repair"): [bad]})
    (outcome,) = run(ContextRecall(), _batch(), judge)
    assert (outcome.status, outcome.reason) == (Status.FAILED, PARSE_ERROR)


def test_parse_claims_and_factory() -> None:
    assert parse_claims(_claims(0, 1), "q1") == [0, 1]
    with pytest.raises(VerdictParseError, match=r"record 'q1', field 'claims\[0\]': claims\[0\] must be an object"):
        parse_claims(reply(claims=["a"]), "q1")
    assert create(MetricRequest("context_recall"), {}).prompt_version == "context_recall/3"


def test_a_japanese_reference_is_sent_whole_and_split_by_the_judge() -> None:
    reference = "東京は日本の首都です。大阪は第二の都市です。"
    contexts = ["東京は日本の首都であり、最大の都市である。"]
    claims = [
        {"claim": "東京は日本の首都です。", "reason": "文脈1に書かれている。", "attributed": 1},
        {"claim": "大阪は第二の都市です。", "reason": "文脈に大阪の記述はない。", "attributed": 0},
    ]
    judge = FakeJudge({KEY: [json.dumps({"claims": claims}, ensure_ascii=False)]})
    batch = traces({"question": "日本の主な都市は？", "reference": reference, "contexts": contexts, "language": "ja"})
    (outcome,) = run(ContextRecall(), batch, judge)
    assert outcome == outcome.ok(0.5)
    (request,) = judge.requests
    assert f'"reference": "{reference}", ' in request.messages[1][1]  # one string, not cut at "。"
    assert request.messages[0][1].endswith(
        "\nLanguage: Japanese (ja). Write the claims and reasons in that language, whatever the language of these "
        "instructions, the examples or the contexts, and keep the JSON keys as given."
    )
