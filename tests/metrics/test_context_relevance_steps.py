"""Context relevance per retrieval step: all steps of one turn in one judge request (ContextRelevance.score_steps)."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest

from ragpulse.metrics import Status
from ragpulse.metrics._prompting import DATA_RULE, HISTORY_RULE
from ragpulse.metrics.context_relevance import (
    STEPS_INSTRUCTIONS,
    ContextRelevance,
    build_request,
    language_line,
)
from ragpulse.metrics.judge import PARSE_ERROR, JudgeCallError, JudgeContext, Outcome, StepJudgeMetric
from tests.doubles.fake_judge import FakeJudge, reply, run, traces

STEPS_KEY = ("context_relevance", "relevant_statements_by_step")
ONE_KEY = ("context_relevance", "relevant_statements")

QUESTION = "上海和北京哪个城市人口更多？"
STEP_A = {
    "id": "a",
    "kind": "tool",
    "query": "上海 人口",
    "contexts": [{"id": "d1", "text": "上海市常住人口约2487万。"}],
}
STEP_B = {"id": "b", "kind": "tool", "query": "北京 人口", "contexts": [{"id": "d2", "text": "北京是中国的首都。"}]}
STEP_C = {
    "id": "c",
    "kind": "retriever",
    "query": "東京 人口",
    "contexts": [{"id": "d3", "text": "東京都の人口は約1400万人。"}],
}


def _turn(*steps: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"trace_id": "t1", "question": QUESTION, "language": "zh", "steps": list(steps), **fields}


def _score(record: dict[str, Any], judge: FakeJudge, against: Any = "step_query") -> list[Outcome]:
    batch = traces(record)
    return asyncio.run(ContextRelevance().score_steps(batch, 0, JudgeContext(judge), against=against))


def test_context_relevance_is_a_step_judge_metric() -> None:
    assert isinstance(ContextRelevance(), StepJudgeMetric)


def test_several_steps_are_judged_in_one_request() -> None:
    judge = FakeJudge(
        {
            STEPS_KEY: [
                reply(
                    steps=[
                        {"relevant_statements": ["上海市常住人口约2487万。"]},
                        {"relevant_statements": []},
                        {"relevant_statements": ["東京都の人口は約1400万人。"]},
                    ]
                )
            ]
        }
    )
    outcomes = _score(_turn(STEP_A, STEP_B, STEP_C), judge)
    # Haystack's rule per step: 1 when the judge copies any sentence, else 0.
    assert outcomes == [Outcome.ok(1.0), Outcome.ok(0.0), Outcome.ok(1.0)]
    (request,) = judge.requests
    assert request.prompt_version == "context_relevance/3"
    assert request.messages[0] == ("system", f"{STEPS_INSTRUCTIONS}\n{DATA_RULE}\n{language_line('zh')}")
    assert json.loads(request.messages[1][1]) == {
        "steps": [
            {"query": "上海 人口", "contexts": ["上海市常住人口约2487万。"]},
            {"query": "北京 人口", "contexts": ["北京是中国的首都。"]},
            {"query": "東京 人口", "contexts": ["東京都の人口は約1400万人。"]},
        ]
    }
    steps_schema = request.schema["properties"]["steps"]
    assert (steps_schema["minItems"], steps_schema["maxItems"]) == (3, 3)


def test_against_the_question_and_with_history() -> None:
    judge = FakeJudge(
        {STEPS_KEY: [reply(steps=[{"relevant_statements": []}, {"relevant_statements": ["北京是中国的首都。"]}])]}
    )
    history = [{"role": "user", "content": "我们在比较中国的城市。"}]
    outcomes = _score(_turn(STEP_A, STEP_B, history=history), judge, against="question")
    assert outcomes == [Outcome.ok(0.0), Outcome.ok(1.0)]
    (request,) = judge.requests
    assert f"{DATA_RULE}\n{HISTORY_RULE}\n" in request.messages[0][1]
    data = json.loads(request.messages[1][1])
    assert data["previous_turns"] == [{"role": "user", "content": "我们在比较中国的城市。"}]
    assert [step["query"] for step in data["steps"]] == [QUESTION, QUESTION]
    assert request.prompt_version == "context_relevance/3+history"


def test_one_step_sends_the_ordinary_request_of_its_step_row() -> None:
    """A turn with one step asks what ``score`` asks for that step's row of ``step_batch``: one request, cached once."""
    judge = FakeJudge({ONE_KEY: [reply(relevant_statements=["上海市常住人口约2487万。"])] * 2})
    record = _turn(STEP_A)
    assert _score(record, judge) == [Outcome.ok(1.0)]
    rows = traces(record).step_batch("step_query")
    assert run(ContextRelevance(), rows.batch, judge) == [Outcome.ok(1.0)]
    first, second = judge.requests
    assert first == second == build_request("上海 人口", ["上海市常住人口约2487万。"], "zh")
    assert first.prompt_version == "context_relevance/3"


def test_steps_lacking_a_query_or_contexts_are_not_applicable_and_left_out() -> None:
    no_query = {**STEP_B, "query": None}
    no_contexts = {**STEP_C, "contexts": []}
    no_text = {**STEP_C, "contexts": [{"id": "d9"}]}
    judge = FakeJudge({ONE_KEY: [reply(relevant_statements=[])]})
    outcomes = _score(_turn(no_query, STEP_A, no_contexts, no_text), judge)
    assert [(o.status, o.reason) for o in outcomes] == [
        (Status.NOT_APPLICABLE, "no_question"),
        (Status.OK, None),
        (Status.NOT_APPLICABLE, "no_contexts"),
        (Status.NOT_APPLICABLE, "no_context_text"),
    ]
    assert outcomes[1].value == 0.0 and math.isnan(outcomes[0].value)
    assert judge.steps() == [ONE_KEY]  # only the judged step, in the one-step request


def test_a_turn_without_steps_has_no_outcomes_and_no_request() -> None:
    judge = FakeJudge()
    assert _score(_turn(), judge) == []
    assert _score({"trace_id": "t1", "question": QUESTION}, judge) == []
    assert judge.requests == []


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ({STEPS_KEY: [JudgeCallError("judge_timeout")]}, "judge_timeout"),
        # One entry for three steps: wrong count, repaired once, still wrong.
        (
            {
                STEPS_KEY: [reply(steps=[{"relevant_statements": []}])],
                ("context_relevance", "relevant_statements_by_step:repair"): [reply(steps=[])],
            },
            PARSE_ERROR,
        ),
    ],
)
def test_a_failed_call_fails_every_judged_step(script: dict[tuple[str, str], list[Any]], reason: str) -> None:
    judge = FakeJudge(script)
    outcomes = _score(_turn(STEP_A, {**STEP_B, "query": ""}, STEP_C, STEP_A), judge)
    assert [(o.status, o.reason) for o in outcomes] == [
        (Status.FAILED, reason),
        (Status.NOT_APPLICABLE, "no_question"),
        (Status.FAILED, reason),
        (Status.FAILED, reason),
    ]
    assert all(math.isnan(o.value) for o in outcomes)


def test_a_repaired_reply_is_used() -> None:
    judge = FakeJudge(
        {
            STEPS_KEY: ['{"steps": "none"}'],
            ("context_relevance", "relevant_statements_by_step:repair"): [
                reply(steps=[{"relevant_statements": []}, {"relevant_statements": ["北京是中国的首都。"]}])
            ],
        }
    )
    assert _score(_turn(STEP_A, STEP_B), judge) == [Outcome.ok(0.0), Outcome.ok(1.0)]
    repair = judge.requests[1]
    assert "steps must be a list" in repair.messages[-1][1]
