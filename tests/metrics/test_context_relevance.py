"""metrics/context_relevance.py: Haystack's definition, all contexts in one call."""

from __future__ import annotations

import pytest

from ragpulse.metrics import Status
from ragpulse.metrics._prompting import DATA_RULE, data_json
from ragpulse.metrics.context_relevance import (
    INSTRUCTIONS,
    ContextRelevance,
    build_request,
    create,
    language_line,
    parse_relevant_statements,
)
from ragpulse.metrics.judge import PARSE_ERROR, VerdictParseError
from ragpulse.metrics.registry import MetricRequest
from tests.doubles.fake_judge import FakeJudge, reply, run, traces

QUESTION = "What is the capital of Italy?"
CONTEXTS = ["Rome is the capital of Italy. It has 2.8 million inhabitants.", "Madrid is the capital of Spain."]
KEY = ("context_relevance", "relevant_statements")


@pytest.mark.parametrize(
    ("statements", "expected"), [(["Rome is the capital of Italy."], 1.0), (["a", "b"], 1.0), ([], 0.0)]
)
def test_one_if_any_relevant_statement(statements: list[str], expected: float) -> None:
    judge = FakeJudge({KEY: [reply(relevant_statements=statements)]})
    (outcome,) = run(ContextRelevance(), traces({"question": QUESTION, "contexts": CONTEXTS}), judge)
    assert outcome == outcome.ok(expected)
    (request,) = judge.requests
    assert request.messages == (
        ("system", f"{INSTRUCTIONS}\n{DATA_RULE}\n{language_line(None)}"),
        ("user", data_json({"question": QUESTION, "contexts": CONTEXTS})),
    )
    assert request == build_request(QUESTION, CONTEXTS)


@pytest.mark.parametrize(
    ("record", "reason"),
    [({"question": QUESTION}, "no_contexts"), ({"question": "", "contexts": CONTEXTS}, "no_question")],
)
def test_not_applicable(record: dict[str, object], reason: str) -> None:
    judge = FakeJudge()
    (outcome,) = run(ContextRelevance(), traces(record), judge)
    assert (outcome.status, outcome.reason) == (Status.NOT_APPLICABLE, reason)
    assert judge.requests == []


def test_the_answer_is_not_needed() -> None:
    judge = FakeJudge({KEY: [reply(relevant_statements=[])]})
    (outcome,) = run(ContextRelevance(), traces({"question": QUESTION, "answer": None, "contexts": CONTEXTS}), judge)
    assert outcome == outcome.ok(0.0)


@pytest.mark.parametrize("bad", [reply(relevant_statements="Rome"), reply(relevant_statements=[1]), "[]"])
def test_bad_replies_fail_after_one_repair(bad: str) -> None:
    judge = FakeJudge({KEY: [bad], ("context_relevance", "relevant_statements:repair"): [bad]})
    (outcome,) = run(ContextRelevance(), traces({"question": QUESTION, "contexts": CONTEXTS}), judge)
    assert (outcome.status, outcome.reason) == (Status.FAILED, PARSE_ERROR)


def test_parser_and_factory() -> None:
    with pytest.raises(VerdictParseError, match='relevant_statements must be a list, got "Rome"'):
        parse_relevant_statements(reply(relevant_statements="Rome"), "q1")
    metric = create(MetricRequest("context_relevance"), {})
    assert (metric.name, metric.prompt_version, metric.spec.version) == (
        "context_relevance",
        "context_relevance/3",
        "2.0.0",
    )


def test_a_chinese_question_names_its_language_but_the_copies_are_not_translated() -> None:
    question = "意大利的首都是哪里？"
    contexts = ["罗马是意大利的首都。罗马约有280万居民。", "Madrid is the capital of Spain."]
    judge = FakeJudge({KEY: ['{"relevant_statements": ["罗马是意大利的首都。"]}']})
    (outcome,) = run(ContextRelevance(), traces({"question": question, "contexts": contexts, "language": "zh"}), judge)
    assert outcome == outcome.ok(1.0)
    (request,) = judge.requests
    assert request.messages[0][1] == (
        f"{INSTRUCTIONS}\n{DATA_RULE}\nLanguage: Chinese (zh). Copy the sentences in the language of the "
        "contexts, without translating them, and keep the JSON keys as given."
    )
    assert request.messages[1][1] == f'{{"question": "{question}", "contexts": ["{contexts[0]}", "{contexts[1]}"]}}'
    assert language_line(None).startswith("Copy the sentences in the language of the contexts")
