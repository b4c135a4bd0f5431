"""metrics/answer_relevancy.py with a scripted judge and fixed embedding vectors."""

from __future__ import annotations

import math

import pytest

from ragpulse.metrics import ShapeError, Status, TraceBatch
from ragpulse.metrics._prompting import DATA_RULE, data_json, language_rule
from ragpulse.metrics.answer_relevancy import (
    INSTRUCTIONS,
    PROMPT_VERSION,
    AnswerRelevancy,
    answer_relevancy,
    build_request,
    create,
)
from ragpulse.metrics.judge import PARSE_ERROR
from ragpulse.metrics.registry import MetricRequest
from tests.doubles.fake_judge import FakeEmbedder, FakeJudge, reply, run, traces

QUESTION = "Where is the Eiffel Tower?"
ANSWER = "The Eiffel Tower stands on the Champ de Mars in Paris."
KEY = ("answer_relevancy", "questions")
GENERATED = ["Where does the Eiffel Tower stand?", "In which city is the Eiffel Tower?", "What is the Champ de Mars?"]
# cosines to the question: 1.0, 0.6, 0.8
VECTORS = {QUESTION: [1.0, 0.0], GENERATED[0]: [2.0, 0.0], GENERATED[1]: [0.6, 0.8], GENERATED[2]: [0.8, 0.6]}


def _batch(**overrides: object) -> TraceBatch:
    return traces({"question": QUESTION, "answer": ANSWER, **overrides})


def _generations(*flags: int) -> list[str]:
    return [reply(question=q, noncommittal=f) for q, f in zip(GENERATED, flags, strict=False)]


def test_mean_cosine_of_generated_questions() -> None:
    judge, embedder = FakeJudge({KEY: _generations(0, 1, 0)}), FakeEmbedder(VECTORS)
    (outcome,) = run(AnswerRelevancy(), _batch(), judge, embedder=embedder)
    assert outcome.status == Status.OK
    assert outcome.value == pytest.approx((1.0 + 0.6 + 0.8) / 3, rel=1e-12)
    (request,) = judge.requests
    assert request.n == 3
    unknown = language_rule(None, "the question", fallback="the answer")
    assert request.messages == (
        ("system", f"{INSTRUCTIONS}\n{DATA_RULE}\n{unknown}"),
        ("user", data_json({"answer": ANSWER})),
    )
    assert unknown.startswith("Write the question in the language of the answer,")
    assert QUESTION not in request.messages[1][1]
    assert embedder.calls == [[QUESTION, *GENERATED]]


def test_zeroed_when_every_generation_is_noncommittal() -> None:
    embedder = FakeEmbedder(VECTORS)
    (outcome,) = run(AnswerRelevancy(), _batch(), FakeJudge({KEY: _generations(1, 1, 1)}), embedder=embedder)
    assert outcome == outcome.ok(0.0)
    assert embedder.calls == []


def test_empty_generated_questions_are_left_out() -> None:
    replies = [reply(question="", noncommittal=1), reply(question=GENERATED[1], noncommittal=0)]
    embedder = FakeEmbedder(VECTORS)
    (outcome,) = run(AnswerRelevancy(2), _batch(), FakeJudge({KEY: replies}), embedder=embedder)
    assert outcome.value == pytest.approx(0.6, rel=1e-12)
    assert embedder.calls == [[QUESTION, GENERATED[1]]]
    replies = [reply(question=" ", noncommittal=0)] * 2
    (outcome,) = run(AnswerRelevancy(2), _batch(), FakeJudge({KEY: replies}), embedder=embedder)
    assert outcome == outcome.ok(0.0)


def test_negative_cosines_are_clipped_at_zero() -> None:
    vectors = {QUESTION: [1.0, 0.0], "Opposite?": [-1.0, 0.0], "Same?": [3.0, 0.0]}
    replies = [reply(question="Opposite?", noncommittal=0), reply(question="Same?", noncommittal=0)]
    (outcome,) = run(AnswerRelevancy(2), _batch(), FakeJudge({KEY: replies}), embedder=FakeEmbedder(vectors))
    assert outcome == outcome.ok(0.5)
    assert answer_relevancy([], []) == 0.0


@pytest.mark.parametrize(("overrides", "reason"), [({"answer": None}, "no_answer"), ({"question": " "}, "no_question")])
def test_not_applicable_without_inputs(overrides: dict[str, object], reason: str) -> None:
    judge = FakeJudge()
    (outcome,) = run(AnswerRelevancy(), _batch(**overrides), judge, embedder=FakeEmbedder(VECTORS))
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, reason)
    assert judge.requests == []


def test_not_applicable_without_an_embedder_and_no_call_is_made() -> None:
    judge = FakeJudge()
    (outcome,) = run(AnswerRelevancy(), _batch(), judge)
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, "no_embedder")
    assert math.isnan(outcome.value) and judge.requests == []


def test_one_bad_completion_is_repaired_alone() -> None:
    judge = FakeJudge(
        {
            KEY: [
                _generations(0, 0, 0)[0],
                '{"question": "In which city is the Eiffel Tower?"}',
                _generations(0, 0, 0)[2],
            ],
            ("answer_relevancy", "questions:repair"): [_generations(0, 0, 0)[1]],
        }
    )
    (outcome,) = run(AnswerRelevancy(), _batch(), judge, embedder=FakeEmbedder(VECTORS))
    assert outcome.value == pytest.approx(0.8, rel=1e-12)
    assert [r.n for r in judge.requests] == [3, 1]
    assert "noncommittal is missing" in judge.requests[1].messages[-1][1]


@pytest.mark.parametrize(
    "bad", ["maybe", reply(question="Q?", noncommittal=True), reply(question="Q?", noncommittal=2)]
)
def test_an_unrepairable_completion_fails_the_score(bad: str) -> None:
    judge = FakeJudge({KEY: [bad, *_generations(0, 0)], ("answer_relevancy", "questions:repair"): [bad]})
    (outcome,) = run(AnswerRelevancy(), _batch(), judge, embedder=FakeEmbedder(VECTORS))
    assert (outcome.status, outcome.reason) == (Status.FAILED, PARSE_ERROR)


def test_generations_come_from_the_options() -> None:
    metric = create(MetricRequest("answer_relevancy"), {"answer_relevancy_generations": 5})
    assert metric.generations == 5
    assert create(MetricRequest("answer_relevancy"), {}).generations == 3
    assert build_request(ANSWER, 5).n == 5
    assert build_request(ANSWER) == build_request(ANSWER)
    for bad in (0, True, "3", 2.0):
        with pytest.raises(ShapeError, match="argument 'answer_relevancy_generations': expected an integer >= 1"):
            create(MetricRequest("answer_relevancy"), {"answer_relevancy_generations": bad})


def test_a_japanese_trace_asks_for_a_japanese_question_and_scores_it() -> None:
    question, answer = "エッフェル塔はどこにありますか？", "エッフェル塔はパリのシャン・ド・マルス公園にあります。"
    generated = ["エッフェル塔はどこに建っていますか？", "エッフェル塔がある都市はどこですか？"]
    vectors = {question: [1.0, 0.0], generated[0]: [1.0, 0.0], generated[1]: [0.6, 0.8]}
    # Replies as a judge sends them: UTF-8 text, not \u escapes.
    replies = [f'{{"question": "{q}", "noncommittal": 0}}' for q in generated]
    judge, embedder = FakeJudge({KEY: replies}), FakeEmbedder(vectors)
    batch = traces({"question": question, "answer": answer, "language": "ja"})
    (outcome,) = run(AnswerRelevancy(2), batch, judge, embedder=embedder)
    assert outcome.status == Status.OK and outcome.value == pytest.approx((1.0 + 0.6) / 2, rel=1e-12)
    assert embedder.calls == [[question, *generated]]
    (request,) = judge.requests
    system, user = (content for _, content in request.messages)
    assert system.endswith(
        "\nLanguage: Japanese (ja). Write the question in that language, whatever the language "
        "of these instructions, the examples or the contexts, and keep the JSON keys as given."
    )
    assert user == f'{{"answer": "{answer}"}}'
    assert request.prompt_version == PROMPT_VERSION == "answer_relevancy/3"


def test_the_language_changes_the_request_and_only_the_system_message() -> None:
    chinese, unknown = build_request("埃菲尔铁塔位于巴黎。", language="zh"), build_request("埃菲尔铁塔位于巴黎。")
    assert "Language: Chinese (zh)." in chinese.messages[0][1] and "Chinese" not in unknown.messages[0][1]
    assert chinese.messages[1] == unknown.messages[1] == ("user", '{"answer": "埃菲尔铁塔位于巴黎。"}')
    assert chinese.cache_material() != unknown.cache_material()
