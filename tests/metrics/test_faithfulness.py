"""metrics/faithfulness.py (and the shared statement step in metrics/_statements.py) with a scripted judge."""

from __future__ import annotations

import json
import math

import pytest

from ragpulse.metrics import Status, TraceBatch
from ragpulse.metrics._prompting import DATA_RULE, language_rule
from ragpulse.metrics._statements import STATEMENTS_INSTRUCTIONS, build_statements_request, parse_statements
from ragpulse.metrics.faithfulness import (
    VERDICTS_INSTRUCTIONS,
    Faithfulness,
    build_verdicts_request,
    create,
    parse_verdicts,
)
from ragpulse.metrics.judge import PARSE_ERROR, JudgeCallError, JudgeRequest, VerdictParseError
from ragpulse.metrics.registry import MetricRequest
from tests.doubles.fake_judge import FakeJudge, reply, run, traces

QUESTION = "When was the Eiffel Tower built and how tall is it?"
ANSWER = "It was built from 1887 to 1889 for the World's Fair. It is 330 metres tall, and it is in Lyon."
CONTEXTS = [
    "The Eiffel Tower was constructed from 1887 to 1889 as the centrepiece of the 1889 World's Fair.",
    "The tower is 330 metres tall and stands on the Champ de Mars in Paris.",
]
STATEMENTS = [
    "The Eiffel Tower was built from 1887 to 1889.",
    "The Eiffel Tower was built for the World's Fair.",
    "The Eiffel Tower is 330 metres tall.",
    "The Eiffel Tower is in Lyon.",
]
STATEMENTS_KEY = ("answer_statements", "statements")
VERDICTS_KEY = ("faithfulness", "verdicts")


def _batch(**overrides: object) -> TraceBatch:
    return traces({"question": QUESTION, "answer": ANSWER, "contexts": CONTEXTS, **overrides})


def _verdicts(*flags: bool) -> str:
    return reply(
        verdicts=[{"statement": s, "reason": "r", "supported": f} for s, f in zip(STATEMENTS, flags, strict=True)]
    )


def test_score_is_supported_over_total() -> None:
    judge = FakeJudge(
        {STATEMENTS_KEY: [reply(statements=STATEMENTS)], VERDICTS_KEY: [_verdicts(True, True, True, False)]}
    )
    (outcome,) = run(Faithfulness(), _batch(), judge)
    assert outcome == outcome.ok(0.75)
    assert judge.steps() == [STATEMENTS_KEY, VERDICTS_KEY]
    assert judge.unused() == {}


def test_requests_hold_the_inputs_once() -> None:
    judge = FakeJudge(
        {STATEMENTS_KEY: [reply(statements=STATEMENTS)], VERDICTS_KEY: [_verdicts(True, True, True, True)]}
    )
    run(Faithfulness(), _batch(), judge)
    statements, verdicts = judge.requests
    assert statements == build_statements_request(QUESTION, ANSWER)
    statements_rule = language_rule(None, "the statements", fallback="the answer")
    assert statements.messages == (
        ("system", f"{STATEMENTS_INSTRUCTIONS}\n{DATA_RULE}\n{statements_rule}"),
        ("user", json.dumps({"question": QUESTION, "answer": ANSWER})),
    )
    verdicts_rule = language_rule(None, "the reasons", fallback="the statements")
    assert verdicts.messages[0] == ("system", f"{VERDICTS_INSTRUCTIONS}\n{DATA_RULE}\n{verdicts_rule}")
    assert json.loads(verdicts.messages[1][1]) == {"contexts": CONTEXTS, "statements": STATEMENTS}
    assert verdicts.schema["properties"]["verdicts"]["minItems"] == 4
    assert verdicts.schema["properties"]["verdicts"]["maxItems"] == 4
    assert (verdicts.prompt_version, statements.prompt_version) == ("faithfulness/3", "answer_statements/3")


def test_requests_are_deterministic() -> None:
    assert build_statements_request(QUESTION, ANSWER) == build_statements_request(QUESTION, ANSWER)
    assert build_verdicts_request(CONTEXTS, STATEMENTS) == build_verdicts_request(list(CONTEXTS), list(STATEMENTS))
    assert build_verdicts_request(CONTEXTS, STATEMENTS) != build_verdicts_request(CONTEXTS[::-1], STATEMENTS)


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"answer": None}, "no_answer"),
        ({"answer": "   "}, "no_answer"),
        ({"question": ""}, "no_question"),
        ({"contexts": []}, "no_contexts"),
    ],
)
def test_not_applicable_without_inputs(overrides: dict[str, object], reason: str) -> None:
    judge = FakeJudge()
    (outcome,) = run(Faithfulness(), _batch(**overrides), judge)
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, reason)
    assert math.isnan(outcome.value)
    assert judge.requests == []


def test_batch_built_without_questions_says_no_question() -> None:
    batch = _batch()
    fields = {name: getattr(batch, name) for name in batch.__dataclass_fields__}
    (outcome,) = run(Faithfulness(), TraceBatch(**{**fields, "questions": None}), FakeJudge())
    assert outcome.reason == "no_question"


def test_no_statements_is_not_applicable_after_one_call() -> None:
    judge = FakeJudge({STATEMENTS_KEY: [reply(statements=[])]})
    (outcome,) = run(Faithfulness(), _batch(answer="I don't know."), judge)
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, "no_statements")
    assert judge.steps() == [STATEMENTS_KEY]


BAD_VERDICTS = {
    "not-json": "Sure! All statements are supported.",
    "missing-key": reply(results=[]),
    "wrong-length": _verdicts(True, True, True, True).replace(
        ', {"statement": "The Eiffel Tower is in Lyon.", "reason": "r", "supported": true}', ""
    ),
    "wrong-type": reply(verdicts=[{"statement": s, "reason": "r", "supported": "yes"} for s in STATEMENTS]),
    "missing-field": reply(verdicts=[{"statement": s, "reason": "r"} for s in STATEMENTS]),
}


@pytest.mark.parametrize("bad", BAD_VERDICTS.values(), ids=BAD_VERDICTS.keys())
def test_unparsable_verdicts_get_one_repair_then_fail(bad: str) -> None:
    judge = FakeJudge(
        {
            STATEMENTS_KEY: [reply(statements=STATEMENTS)],
            VERDICTS_KEY: [bad],
            ("faithfulness", "verdicts:repair"): [bad],
        }
    )
    (outcome,) = run(Faithfulness(), _batch(), judge)
    assert (outcome.status, outcome.reason) == (Status.FAILED, PARSE_ERROR)
    assert judge.steps() == [STATEMENTS_KEY, VERDICTS_KEY, ("faithfulness", "verdicts:repair")]
    repair = judge.requests[-1]
    assert repair.messages[:2] == judge.requests[1].messages
    assert repair.messages[2] == ("assistant", bad)


def test_a_good_repair_is_scored() -> None:
    judge = FakeJudge(
        {
            STATEMENTS_KEY: [reply(statements=STATEMENTS)],
            VERDICTS_KEY: [BAD_VERDICTS["wrong-length"]],
            ("faithfulness", "verdicts:repair"): [_verdicts(False, True, True, False)],
        }
    )
    (outcome,) = run(Faithfulness(), _batch(), judge)
    assert outcome == outcome.ok(0.5)
    problem = judge.requests[-1].messages[-1][1]
    assert "verdicts must have exactly 4 items (one per input, in order), got 3" in problem


def test_unparsable_statements_fail_the_score() -> None:
    judge = FakeJudge({STATEMENTS_KEY: ["{}"], ("answer_statements", "statements:repair"): ['{"statements": [1]}']})
    (outcome,) = run(Faithfulness(), _batch(), judge)
    assert (outcome.status, outcome.reason) == (Status.FAILED, PARSE_ERROR)


def test_a_judge_call_error_fails_one_trace_and_the_batch_completes() -> None:
    batch = traces(
        {"question": QUESTION, "answer": ANSWER, "contexts": CONTEXTS},
        {"question": "Who designed it?", "answer": "Gustave Eiffel's company.", "contexts": CONTEXTS},
        {"question": QUESTION, "answer": None, "contexts": CONTEXTS},
    )

    def responder(request: JudgeRequest) -> list[str | BaseException]:
        if json.loads(request.messages[1][1]).get("question") == "Who designed it?":
            return [JudgeCallError("rate_limited_after_6_retries", "429 Too Many Requests")]
        if request.step == "statements":
            return [reply(statements=STATEMENTS[:2])]
        return [reply(verdicts=[{"statement": s, "reason": "r", "supported": True} for s in STATEMENTS[:2]])]

    outcomes = run(Faithfulness(), batch, FakeJudge(responder=responder))
    assert outcomes[0] == outcomes[0].ok(1.0)
    assert (outcomes[1].status, outcomes[1].reason) == (Status.FAILED, "rate_limited_after_6_retries")
    assert (outcomes[2].status, outcomes[2].reason) == (Status.NOT_APPLICABLE, "no_answer")


def test_parsers_name_the_field() -> None:
    with pytest.raises(
        VerdictParseError, match=r"field 'verdicts\[1\]\.supported': verdicts\[1\]\.supported is missing"
    ):
        parse_verdicts(
            reply(verdicts=[{"statement": "a", "reason": "", "supported": True}, {"statement": "b", "reason": ""}]),
            "q1",
            expected=2,
        )
    with pytest.raises(VerdictParseError, match=r"field 'statements\[0\]': statements\[0\] must not be empty"):
        parse_statements(reply(statements=["  "]), "q1")
    with pytest.raises(VerdictParseError, match="field '<reply>': not a JSON object"):
        parse_statements("[]", "q1")
    assert parse_statements('```json\n{"statements": ["A  b."]}\n```', "q1") == ["A b."]


def test_factory() -> None:
    metric = create(MetricRequest("faithfulness"), {})
    assert (metric.name, metric.prompt_version, metric.uses_llm) == ("faithfulness", "faithfulness/3", True)
    assert metric.spec.version == "2.0.0"


JA_ANSWER = "東京は日本の首都です。大阪は第二の都市です。"
JA_STATEMENTS = ["東京は日本の首都です。", "大阪は第二の都市です。"]


def test_a_japanese_trace_end_to_end() -> None:
    """Japanese text reaches the judge whole, its Japanese statements come back as written (two, as the
    judge split them: nothing here cuts at "。"), and both prompts ask for Japanese."""
    contexts = ["東京は日本の首都であり、人口が最も多い都市である。", "横浜は日本で二番目に人口の多い市である。"]
    verdicts = [
        {"statement": JA_STATEMENTS[0], "reason": "文脈1に書かれている。", "supported": True},
        {"statement": JA_STATEMENTS[1], "reason": "文脈では二番目は横浜である。", "supported": False},
    ]
    judge = FakeJudge(
        {
            STATEMENTS_KEY: [json.dumps({"statements": JA_STATEMENTS}, ensure_ascii=False)],
            VERDICTS_KEY: [json.dumps({"verdicts": verdicts}, ensure_ascii=False)],
        }
    )
    batch = traces(
        {"question": "日本の首都はどこですか？", "answer": JA_ANSWER, "contexts": contexts, "language": "ja"}
    )
    (outcome,) = run(Faithfulness(), batch, judge)
    assert outcome == outcome.ok(0.5)
    statements, checked = judge.requests
    assert statements.messages[1][1] == f'{{"question": "日本の首都はどこですか？", "answer": "{JA_ANSWER}"}}'
    assert checked.messages[1][1] == json.dumps({"contexts": contexts, "statements": JA_STATEMENTS}, ensure_ascii=False)
    assert statements.messages[0][1].endswith(
        "\nLanguage: Japanese (ja). Write the statements in that language, whatever the language of these "
        "instructions, the examples or the contexts, and keep the JSON keys as given."
    )
    assert checked.messages[0][1].endswith("\nLanguage: Japanese (ja). Write the reasons in that language, "
                                           "whatever the language of these instructions, the examples or the "
                                           "contexts, and keep the JSON keys as given.")  # fmt: skip
    assert checked.schema["properties"]["verdicts"]["maxItems"] == 2


def test_statements_keep_cjk_punctuation_and_are_never_split_locally() -> None:
    raw = json.dumps({"statements": [JA_ANSWER, "北京是中国的首都！", "上海在哪里？"]}, ensure_ascii=False)
    assert parse_statements(raw, "q1") == [JA_ANSWER, "北京是中国的首都！", "上海在哪里？"]
    assert parse_statements(json.dumps({"statements": JA_STATEMENTS}), "q1") == JA_STATEMENTS


def test_the_statement_prompt_shows_a_japanese_example_for_every_language() -> None:
    english, chinese = (
        build_statements_request(QUESTION, ANSWER, "en"),
        build_statements_request("谁写了？", "他。", "zh-TW"),
    )
    for request in (english, chinese):
        assert "ブラム・ストーカーは1897年に『ドラキュラ』を出版しました。" in request.messages[0][1]
    assert english.messages[0][1].endswith("Language: English (en). Write the statements in that language, whatever "
                                           "the language of these instructions, the examples or the contexts, and "
                                           "keep the JSON keys as given.")  # fmt: skip
    assert "\nLanguage: Chinese (zh-TW). Write the statements in that language" in chinese.messages[0][1]
    assert chinese.messages[1] == ("user", '{"question": "谁写了？", "answer": "他。"}')
