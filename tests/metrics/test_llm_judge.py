"""metrics/llm_judge.py: custom judges defined in configuration (Haystack's LLMEvaluator)."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.metrics import ShapeError, Status, TraceBatch, UnknownMetricError
from ragpulse.metrics._prompting import DATA_RULE
from ragpulse.metrics.judge import PARSE_ERROR
from ragpulse.metrics.llm_judge import JudgeDefinition, LLMJudge, UnknownJudgeError, build_request, create
from ragpulse.metrics.registry import MetricRequest
from tests.doubles.fake_judge import FakeJudge, reply, run, traces

GROUNDED: dict[str, Any] = {
    "instructions": "Rate from 1 to 5 how well the answer sticks to the contexts.",
    "inputs": ["answer", "contexts"],
    "outputs": ["reason", "score"],
    "examples": [
        {
            "inputs": {"contexts": ["Rome is in Italy."], "answer": "Rome is in Italy."},
            "outputs": {"score": 5, "reason": "Stated in the context."},
        }
    ],
    "range": [1, 5],
}
KEY = ("llm_judge:grounded", "outputs")


def _judge(definition: dict[str, Any] | None = None, name: str = "grounded") -> LLMJudge:
    return create(MetricRequest("llm_judge", variant=name), {"llm_judges": {name: definition or GROUNDED}})


def _batch(**overrides: object) -> TraceBatch:
    return traces({"question": "Where is Rome?", "answer": "In Italy.", "contexts": ["Rome is in Italy."], **overrides})


def test_prompt_is_built_from_the_definition() -> None:
    judge = FakeJudge({KEY: [reply(reason="Supported.", score=4)]})
    (outcome,) = run(_judge(), _batch(), judge)
    assert outcome == outcome.ok(0.75)  # 4 on [1, 5]
    (request,) = judge.requests
    assert request.messages == (
        (
            "system",
            "Rate from 1 to 5 how well the answer sticks to the contexts.\n\n"
            'Reply with JSON only: an object with exactly the keys ["reason", "score"]; '
            '"score" is a number from 1 to 5.\n\n'
            "Examples:\n"
            'Inputs: {"answer": "Rome is in Italy.", "contexts": ["Rome is in Italy."]}\n'
            'Outputs: {"reason": "Stated in the context.", "score": 5}\n\n'
            f"{DATA_RULE}\n"
            "Write any text of the reply in the language of the answer, whatever the language of these "
            "instructions, the examples or the contexts, and keep the JSON keys as given.",
        ),
        ("user", '{"answer": "In Italy.", "contexts": ["Rome is in Italy."]}'),
    )
    assert request.schema["properties"]["score"] == {"type": "number", "minimum": 1.0, "maximum": 5.0}
    assert request.schema["required"] == ["reason", "score"]


def test_key_order_in_the_config_does_not_change_the_request() -> None:
    reordered = {key: GROUNDED[key] for key in reversed(list(GROUNDED))}
    reordered["examples"] = [{"outputs": {"reason": "Stated in the context.", "score": 5}, **GROUNDED["examples"][0]}]
    a, b = _judge().definition, _judge(reordered).definition
    values = {"answer": "x", "contexts": ["y"]}
    assert build_request(a, values) == build_request(b, values)
    assert a.prompt_version == b.prompt_version


def test_prompt_version_hashes_the_definition() -> None:
    metric = _judge()
    assert metric.prompt_version.startswith("llm_judge/3:grounded/") and len(metric.prompt_version) == 21 + 12
    assert metric.spec.version == "2.0.0"
    edited = _judge({**GROUNDED, "instructions": GROUNDED["instructions"] + " Be strict."})
    assert edited.prompt_version != metric.prompt_version
    renamed = _judge(name="grounded2")
    assert renamed.prompt_version != metric.prompt_version


def test_default_range_and_score_key() -> None:
    definition = {"instructions": "Is the answer polite? 1 yes, 0 no.", "inputs": ["answer"], "outputs": ["score"]}
    judge = FakeJudge({("llm_judge:polite", "outputs"): [reply(score=1)]})
    (outcome,) = run(_judge(definition, "polite"), _batch(), judge)
    assert outcome == outcome.ok(1.0)
    assert "Examples" not in judge.requests[0].messages[0][1]


def test_custom_score_key() -> None:
    definition = {"instructions": "Rate.", "inputs": ["question", "answer"], "outputs": ["grade"], "score_key": "grade"}
    judge = FakeJudge({("llm_judge:g", "outputs"): [reply(grade=0.25)]})
    (outcome,) = run(_judge(definition, "g"), _batch(), judge)
    assert outcome == outcome.ok(0.25)
    assert judge.requests[0].messages[1][1] == '{"question": "Where is Rome?", "answer": "In Italy."}'


@pytest.mark.parametrize(
    "bad",
    [reply(reason="r", score=6), reply(reason="r", score=0), reply(reason="r", score="4"), reply(score=4), "4"],
    ids=["above", "below", "string", "missing-output", "not-json"],
)
def test_bad_outputs_fail_after_one_repair(bad: str) -> None:
    judge = FakeJudge({KEY: [bad], ("llm_judge:grounded", "outputs:repair"): [bad]})
    (outcome,) = run(_judge(), _batch(), judge)
    assert (outcome.status, outcome.reason) == (Status.FAILED, PARSE_ERROR)


def test_a_repaired_reply_is_scored() -> None:
    judge = FakeJudge(
        {KEY: [reply(reason="r", score=7)], ("llm_judge:grounded", "outputs:repair"): [reply(reason="r", score=5)]}
    )
    (outcome,) = run(_judge(), _batch(), judge)
    assert outcome == outcome.ok(1.0)
    assert "score must be a number from 1 to 5, got 7" in judge.requests[1].messages[-1][1]


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [({"contexts": []}, "no_contexts"), ({"answer": None}, "no_answer")],
)
def test_not_applicable_without_a_declared_input(overrides: dict[str, object], reason: str) -> None:
    judge = FakeJudge()
    (outcome,) = run(_judge(), _batch(**overrides), judge)
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, reason)
    assert judge.requests == []


def test_undeclared_inputs_are_not_needed() -> None:
    judge = FakeJudge({KEY: [reply(reason="r", score=5)]})
    (outcome,) = run(_judge(), _batch(question="", reference=None), judge)
    assert outcome.status == Status.OK


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"instructions": " "}, "argument 'llm_judges.grounded.instructions': expected a non-empty text"),
        ({"inputs": ["answer", "metadata"]}, "argument 'llm_judges.grounded.inputs': expected a non-empty list"),
        ({"inputs": []}, "argument 'llm_judges.grounded.inputs'"),
        ({"outputs": ["reason", "reason"]}, "argument 'llm_judges.grounded.outputs'"),
        ({"score_key": "rating"}, "argument 'llm_judges.grounded.score_key': expected one of the outputs"),
        ({"range": [5, 1]}, "argument 'llm_judges.grounded.range'"),
        ({"range": [0, "5"]}, "argument 'llm_judges.grounded.range'"),
        ({"examples": [{"inputs": {"answer": "a"}}]}, r"argument 'llm_judges.grounded.examples\[0\]'"),
        (
            {"examples": [{"inputs": {"question": "q"}, "outputs": {"score": 1, "reason": ""}}]},
            r"argument 'llm_judges.grounded.examples\[0\].inputs'",
        ),
        (
            {"examples": [{"inputs": {"answer": "a"}, "outputs": {"score": 1}}]},
            r"argument 'llm_judges.grounded.examples\[0\].outputs'",
        ),
        ({"model": "gpt-4o"}, "argument 'llm_judges.grounded': expected only the keys .*, got unknown model"),
    ],
)
def test_invalid_definitions(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        _judge({**GROUNDED, **change})


def test_unknown_judge() -> None:
    with pytest.raises(
        UnknownJudgeError, match="no llm_judge named 'tone' under the 'llm_judges' option; defined: grounded"
    ):
        create(MetricRequest("llm_judge", variant="tone"), {"llm_judges": {"grounded": GROUNDED}})
    with pytest.raises(UnknownMetricError, match="defined: none"):
        create(MetricRequest("llm_judge", variant="tone"), {})


def test_definition_round_trips() -> None:
    definition = _judge().definition
    assert JudgeDefinition.from_dict("grounded", definition.to_dict()) == definition
    assert definition.to_dict()["score_key"] == "score"


def test_a_japanese_trace_names_its_language_and_sends_the_inputs_unescaped() -> None:
    definition = {"instructions": "Rate.", "inputs": ["contexts", "reference"], "outputs": ["reason", "score"]}
    judge = FakeJudge({("llm_judge:ja", "outputs"): ['{"reason": "文脈に書かれている。", "score": 1}']})
    record = {"question": "ローマはどこ？", "reference": "イタリアです。", "contexts": ["ローマはイタリアの首都。"]}
    batch = traces({**record, "language": "ja"})
    (outcome,) = run(_judge(definition, "ja"), batch, judge)
    assert outcome == outcome.ok(1.0)
    (request,) = judge.requests
    assert request.messages[1] == (
        "user",
        '{"contexts": ["ローマはイタリアの首都。"], "reference": "イタリアです。"}',
    )
    assert request.messages[0][1].endswith(
        f"\n\n{DATA_RULE}\nLanguage: Japanese (ja). Write any text of the reply in that language, whatever the "
        "language of these instructions, the examples or the contexts, and keep the JSON keys as given."
    )
    unknown = build_request(_judge(definition, "ja").definition, {"contexts": ["x"], "reference": "y"})
    assert "in the language of the reference answer," in unknown.messages[0][1]
