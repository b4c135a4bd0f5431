"""metrics/aspect_critique.py: built-in and user-defined aspects, a real majority vote over N samples."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from ragpulse.metrics import RagpulseError, ShapeError, Status, TraceBatch, UnknownMetricError
from ragpulse.metrics._prompting import DATA_RULE, data_json, language_rule
from ragpulse.metrics.aspect_critique import (
    BUILTIN_ASPECTS,
    INSTRUCTIONS_TEMPLATE,
    Aspect,
    AspectCritique,
    UnknownAspectError,
    build_request,
    create,
    known_aspects,
)
from ragpulse.metrics.judge import PARSE_ERROR
from ragpulse.metrics.registry import MetricRequest, build_judge_metrics, parse_metrics
from tests.doubles.fake_judge import FakeJudge, reply, run, traces

QUESTION = "How do I reset my router?"
ANSWER = "Hold the reset button for ten seconds, then wait for the lights to settle."


def _batch(**overrides: object) -> TraceBatch:
    return traces({"question": QUESTION, "answer": ANSWER, **overrides})


def _votes(*votes: int) -> list[str]:
    return [reply(reason="r", verdict=v) for v in votes]


def _metric(name: str, options: Mapping[str, object] | None = None) -> AspectCritique:
    return create(MetricRequest("aspect_critique", variant=name), options or {})


@pytest.mark.parametrize(
    ("votes", "expected"), [((1, 0, 1), 1.0), ((0, 1, 0), 0.0), ((1, 1, 1), 1.0), ((0, 0, 0), 0.0)]
)
def test_majority_of_three_sampled_verdicts_in_one_request(votes: tuple[int, ...], expected: float) -> None:
    judge = FakeJudge({("aspect_critique:coherence", "verdict"): _votes(*votes)})
    (outcome,) = run(_metric("coherence"), _batch(), judge)
    assert outcome == outcome.ok(expected)
    (request,) = judge.requests
    assert request.n == 3
    coherence = BUILTIN_ASPECTS["coherence"]
    assert request.messages == (
        (
            "system",
            f"{INSTRUCTIONS_TEMPLATE.format(name='coherence', definition=coherence.definition)}\n"
            f"{DATA_RULE}\n{language_rule(None, 'the reason')}",
        ),
        ("user", data_json({"question": QUESTION, "answer": ANSWER})),
    )


def test_strictness_sets_the_number_of_votes() -> None:
    metric = _metric("conciseness", {"aspect_strictness": 5})
    judge = FakeJudge({("aspect_critique:conciseness", "verdict"): _votes(1, 0, 0, 1, 1)})
    (outcome,) = run(metric, _batch(), judge)
    assert outcome == outcome.ok(1.0)
    assert judge.requests[0].n == 5
    assert _metric("conciseness", {"aspect_strictness": 1}).strictness == 1


@pytest.mark.parametrize("strictness", [0, 2, 4, -1, True, 3.0, "3"])
def test_strictness_must_be_odd(strictness: object) -> None:
    with pytest.raises(ShapeError, match="argument 'aspect_strictness': expected an odd integer >= 1"):
        _metric("coherence", {"aspect_strictness": strictness})


def test_one_bad_vote_is_repaired_and_counted() -> None:
    judge = FakeJudge(
        {
            ("aspect_critique:correctness", "verdict"): ["yes", *_votes(0, 1)],
            ("aspect_critique:correctness", "verdict:repair"): _votes(1),
        }
    )
    (outcome,) = run(_metric("correctness"), _batch(), judge)
    assert outcome == outcome.ok(1.0)
    judge = FakeJudge(
        {
            ("aspect_critique:correctness", "verdict"): [reply(reason="r", verdict="1"), *_votes(0, 1)],
            ("aspect_critique:correctness", "verdict:repair"): [reply(verdict=1)],
        }
    )
    (outcome,) = run(_metric("correctness"), _batch(), judge)
    assert (outcome.status, outcome.reason) == (Status.FAILED, PARSE_ERROR)


def test_user_defined_aspects() -> None:
    options = {"aspects": {"politeness": "Is the answer  courteous and respectful?"}}
    metric = _metric("politeness", options)
    assert metric.aspect == Aspect("politeness", "Is the answer courteous and respectful?")
    judge = FakeJudge({("aspect_critique:politeness", "verdict"): _votes(1, 1, 0)})
    (outcome,) = run(metric, _batch(), judge)
    assert outcome == outcome.ok(1.0)
    assert "politeness: Is the answer courteous and respectful?" in judge.requests[0].messages[0][1]
    assert set(known_aspects(options)) == {*BUILTIN_ASPECTS, "politeness"}


def test_prompt_version_follows_the_definition() -> None:
    first = _metric("politeness", {"aspects": {"politeness": "Is it polite?"}})
    again = _metric("politeness", {"aspects": {"politeness": "Is it polite?"}})
    edited = _metric("politeness", {"aspects": {"politeness": "Is it polite and warm?"}})
    assert first.prompt_version == again.prompt_version != edited.prompt_version
    assert first.prompt_version.startswith("aspect_critique/3:politeness:")
    overridden = _metric("coherence", {"aspects": {"coherence": "Does it hang together?"}})
    assert overridden.prompt_version != _metric("coherence").prompt_version
    assert build_request(first.aspect, QUESTION, ANSWER) == build_request(again.aspect, QUESTION, ANSWER)


def test_unknown_aspect_lists_the_known_ones() -> None:
    with pytest.raises(UnknownAspectError) as info:
        _metric("tone", {"aspects": {"politeness": "Is it polite?"}})
    assert isinstance(info.value, UnknownMetricError) and isinstance(info.value, RagpulseError)
    assert str(info.value) == (
        "unknown aspect 'tone' for aspect_critique; known aspects: coherence, conciseness, correctness, "
        "harmfulness, maliciousness, politeness (define more under the 'aspects' option as {name: definition})"
    )


@pytest.mark.parametrize(
    ("aspects", "message"),
    [
        ({"Bad Name": "x"}, "argument 'aspects': expected names of lower-case letters"),
        ({"tone": ""}, "argument 'aspects.tone': expected a non-empty definition text"),
        (["tone"], "argument 'aspects': expected a mapping"),
    ],
)
def test_invalid_aspect_options(aspects: object, message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        _metric("coherence", {"aspects": aspects})


def test_harmful_aspects_are_lower_is_better() -> None:
    assert _metric("harmfulness").spec.higher_is_better is False
    assert _metric("maliciousness").spec.higher_is_better is False
    assert _metric("coherence").spec.higher_is_better is True
    assert _metric("harmfulness").spec.name == "aspect_critique"


def test_through_the_registry() -> None:
    (metric,) = build_judge_metrics(parse_metrics(["aspect_critique:harmfulness"]), {})
    assert metric.name == "aspect_critique:harmfulness"
    with pytest.raises(ShapeError, match=r"expected a variant, e\.g\. aspect_critique:<name>"):
        parse_metrics(["aspect_critique"])


@pytest.mark.parametrize(("overrides", "reason"), [({"answer": None}, "no_answer"), ({"question": ""}, "no_question")])
def test_not_applicable(overrides: dict[str, object], reason: str) -> None:
    judge = FakeJudge()
    (outcome,) = run(_metric("coherence"), _batch(**overrides), judge)
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, reason)
    assert judge.requests == []


def test_a_chinese_trace_names_its_language_and_keeps_the_text_intact() -> None:
    question, answer = "怎样重置路由器？", "按住重置键十秒钟，然后等指示灯稳定下来。"
    judge = FakeJudge(
        {("aspect_critique:coherence", "verdict"): ['{"reason": "步骤清楚，前后一致。", "verdict": 1}'] * 3}
    )
    (outcome,) = run(_metric("coherence"), traces({"question": question, "answer": answer, "language": "zh-CN"}), judge)
    assert outcome == outcome.ok(1.0)
    (request,) = judge.requests
    assert request.messages[0][1].endswith(
        "\nLanguage: Chinese (zh-CN). Write the reason in that language, whatever the language of these "
        "instructions, the examples or the contexts, and keep the JSON keys as given."
    )
    assert request.messages[1][1] == f'{{"question": "{question}", "answer": "{answer}"}}'
