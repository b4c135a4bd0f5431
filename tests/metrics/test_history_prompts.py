"""A conversation's earlier messages in the judge prompts of faithfulness (statement step), answer_relevancy,
context_relevance and context_precision: sent as ``previous_turns`` with one system line, and only when the trace
has history, so every request of a trace without history is byte for byte what it was before (cached replies
still serve) and the published prompt versions stay /3 (drift baselines and configuration hashes kept)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ragpulse.metrics import Status
from ragpulse.metrics._prompting import DATA_RULE, HISTORY_RULE
from ragpulse.metrics.agent_goal_accuracy import COMPARE_INSTRUCTIONS, GOAL_INSTRUCTIONS
from ragpulse.metrics.answer_correctness import AnswerCorrectness
from ragpulse.metrics.answer_relevancy import AnswerRelevancy
from ragpulse.metrics.context_precision import ContextPrecision
from ragpulse.metrics.context_relevance import STEPS_INSTRUCTIONS, ContextRelevance
from ragpulse.metrics.faithfulness import Faithfulness
from ragpulse.metrics.judge import JudgeCallError, JudgeMetric, JudgeRequest
from tests.doubles.fake_judge import FakeEmbedder, FakeJudge, reply, run, traces

QUESTION = "『ドラキュラ』の作者は誰ですか？"
ANSWER = "ブラム・ストーカーです。1897年に出版しました。"
CONTEXTS = ["ブラム・ストーカーは『ドラキュラ』を書いた。", "德古拉是一部小说。"]
TRACE: dict[str, Any] = {
    "question": QUESTION,
    "answer": ANSWER,
    "contexts": CONTEXTS,
    "reference": "ブラム・ストーカー",
    "language": "ja",
}

PINNED = {
    ("answer_statements", "statements"): "d008b1ba647dcb7f2c347177c12f6fa9aadab05f92fb7609a06903a4c5250030",
    ("faithfulness", "verdicts"): "3a192a8e3c0afe9af9c93b8274a28211bdba086c9b0b68a0af1d08a293f65493",
    ("answer_relevancy", "questions"): "b9faa75af5b2dcef129586c8cb1f7d98785da73a0b088e179260113795795430",
    ("context_relevance", "relevant_statements"): "ee0ee0c74866ecdfce6912832abad2330144bfccf13cde79f830678d16dc83a1",
    ("context_precision", "verdicts"): "f137d5e669303453b11c403bd2f0125f95fe2283fae38267b0d0bae9089d9e15",
    ("context_precision_without_reference", "verdicts"): (
        "ebdbd81d65ed0e1487bdebc853458eda941df2a3e899850b85332e1caec384c5"
    ),
}
"""SHA-256 of each request's cache material for TRACE, computed with the code before history was added (the
prompt versions /3): the judge client's cache key is a function of exactly this material."""

HISTORY = [
    ("user", "吸血鬼の小説でおすすめは？"),
    ("assistant", "『ドラキュラ』が古典です。"),
    ("user", "それはいつの作品？"),
    ("assistant", "1897年です。"),
    ("user", "長いですか？"),
    ("assistant", "はい、" + "とても長い小説です。" * 150),
    ("user", "映画はありますか？"),
    ("assistant", "多数あります。"),
]
"""Eight messages: only the last six are sent, the long one cut to 1,000 characters."""


def _digest(request: JudgeRequest) -> str:
    material = json.dumps(request.cache_material(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(material.encode()).hexdigest()


def _script() -> FakeJudge:
    useful = reply(verdicts=[{"reason": "r", "useful": 1}, {"reason": "r", "useful": 0}])
    return FakeJudge(
        {
            ("answer_statements", "statements"): [reply(statements=["s1", "s2"])] * 2,
            ("faithfulness", "verdicts"): [
                reply(verdicts=[{"statement": s, "reason": "r", "supported": s == "s1"} for s in ("s1", "s2")])
            ]
            * 2,
            ("answer_relevancy", "questions"): [reply(question="誰？", noncommittal=0)] * 6,
            ("context_relevance", "relevant_statements"): [reply(relevant_statements=["x"])] * 2,
            ("context_precision", "verdicts"): [useful] * 2,
            ("context_precision_without_reference", "verdicts"): [useful] * 2,
        }
    )


METRICS: list[JudgeMetric] = [
    Faithfulness(),
    AnswerRelevancy(),
    ContextRelevance(),
    ContextPrecision(with_reference=True),
    ContextPrecision(with_reference=False),
]


def _requests(record: dict[str, Any]) -> dict[tuple[str, str], JudgeRequest]:
    judge, embedder = _script(), FakeEmbedder({QUESTION: [1.0, 0.0], "誰？": [1.0, 1.0]})
    for metric in METRICS:
        (outcome,) = run(metric, traces(record), judge, embedder=embedder)
        assert outcome.status == Status.OK, (metric.name, outcome)
    return {(r.metric, r.step): r for r in judge.requests}


def test_requests_without_history_are_those_of_before() -> None:
    sent = _requests(TRACE)
    assert {key: _digest(request) for key, request in sent.items()} == PINNED
    assert all(HISTORY_RULE not in content for r in sent.values() for _, content in r.messages)


def test_requests_with_history_send_the_last_six_messages_and_the_rule() -> None:
    history = [{"role": role, "content": content} for role, content in HISTORY]
    sent = _requests({**TRACE, "history": history})
    with_history = {key: r for key, r in sent.items() if key != ("faithfulness", "verdicts")}
    expected_turns = [{"role": role, "content": content[:1000]} for role, content in HISTORY[2:]]
    assert len(expected_turns[3]["content"]) == 1000
    for key, request in with_history.items():
        system, user = (content for _, content in request.messages)
        assert f"{DATA_RULE}\n{HISTORY_RULE}\n" in system, key
        data = json.loads(user)
        assert next(iter(data)) == "previous_turns", key
        assert data["previous_turns"] == expected_turns, key
        # A request tag of its own (never published): the published version stays /3.
        assert request.prompt_version == f"{request.metric.removesuffix('_without_reference')}/3+history", key
    assert json.loads(sent["answer_relevancy", "questions"].messages[1][1]) == {
        "previous_turns": expected_turns,
        "answer": ANSWER,
    }
    # The verdict step checks statements that already stand on their own: unchanged, still the cached request.
    assert _digest(sent["faithfulness", "verdicts"]) == PINNED["faithfulness", "verdicts"]


def test_the_published_prompt_versions_stay_3() -> None:
    """Drift compares only scores of one prompt version: a bump would start every user's baselines anew although
    their requests without history are unchanged."""
    assert [m.prompt_version for m in METRICS] == [
        "faithfulness/3",
        "answer_relevancy/3",
        "context_relevance/3",
        "context_precision/3",
        "context_precision/3",
    ]
    assert {r.prompt_version for r in _requests(TRACE).values()} == {
        "answer_statements/3",
        "faithfulness/3",
        "answer_relevancy/3",
        "context_relevance/3",
        "context_precision/3",
    }


def test_answer_correctness_sends_no_history() -> None:
    """Only faithfulness sends history to the shared statement step; answer correctness's request stays the one
    without it (and its prompt version is unchanged)."""
    judge = FakeJudge(
        {
            ("answer_statements", "statements"): [reply(statements=["s1"])],
            ("answer_correctness", "classify"): [JudgeCallError("judge_unavailable")],
        }
    )
    history = [{"role": "user", "content": "前の質問"}]
    (outcome,) = run(AnswerCorrectness(weights=(1.0, 0.0)), traces({**TRACE, "history": history}), judge)
    assert (outcome.status, outcome.reason) == (Status.FAILED, "judge_unavailable")
    assert judge.steps() == [("answer_statements", "statements"), ("answer_correctness", "classify")]
    assert _digest(judge.requests[0]) == PINNED["answer_statements", "statements"]


def test_docs_quote_the_new_prompts_verbatim() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text(encoding="utf-8")
    for prompt in (HISTORY_RULE, STEPS_INSTRUCTIONS, GOAL_INSTRUCTIONS, COMPARE_INSTRUCTIONS):
        assert f"```text\n{prompt}\n```" in text, prompt[:60]
