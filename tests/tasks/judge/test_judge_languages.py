"""Japanese and Chinese traces through the judge metrics, the real HTTP client and the call cache, against
the scripted OpenAI-compatible server: the prompts name the language, CJK text travels intact both ways."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from ragpulse.metrics.answer_relevancy import AnswerRelevancy
from ragpulse.metrics.faithfulness import Faithfulness
from ragpulse.metrics.judge import JudgeContext, judge_batch
from ragpulse.tasks.judge.client import OpenAIJudge
from ragpulse.tasks.judge.config import JudgeConfig
from tests.doubles.fake_judge import FakeEmbedder, traces
from tests.doubles.judge_server import JudgeServer

TRACES = {
    "ja": {
        "question": "日本の首都はどこですか？",
        "answer": "東京は日本の首都です。大阪は第二の都市です。",
        "contexts": ["東京は日本の首都であり、最大の都市である。"],
        "statements": ["東京は日本の首都です。", "大阪は第二の都市です。"],
        "generated": "日本の首都はどこですか？",
        "name": "Japanese (ja)",
    },
    "zh": {
        "question": "中国的首都是哪里？",
        "answer": "北京是中国的首都。上海是最大的城市！",
        "contexts": ["北京是中华人民共和国的首都。"],
        "statements": ["北京是中国的首都。", "上海是中国最大的城市！"],
        "generated": "中国的首都是哪座城市？",
        "name": "Chinese (zh)",
    },
}


def _content(body: dict[str, Any]) -> str | list[str]:
    """Replies by request kind, as raw UTF-8 JSON text (not ``\\u`` escapes), in the trace's language."""
    user = body["messages"][-1]["content"]
    trace = next(t for t in TRACES.values() if t["answer"] in user or t["statements"][0] in user)
    name = body["response_format"]["json_schema"]["name"]
    if name.startswith("answer_statements"):
        return json.dumps({"statements": trace["statements"]}, ensure_ascii=False)
    if name.startswith("faithfulness"):
        supported = [True, False]
        verdicts = [
            {"statement": s, "reason": "文脈を参照。", "supported": f}
            for s, f in zip(trace["statements"], supported, strict=True)
        ]
        return json.dumps({"verdicts": verdicts}, ensure_ascii=False)
    if name.startswith("answer_relevancy"):
        return [json.dumps({"question": trace["generated"], "noncommittal": 0}, ensure_ascii=False)] * body["n"]
    raise AssertionError(f"unexpected judge request {name!r}")


def _score(server: JudgeServer, cache: Path, model: str) -> dict[str, list[float]]:
    batch = traces(
        *({**{k: t[k] for k in ("question", "answer", "contexts")}, "language": tag} for tag, t in TRACES.items())
    )
    vectors = {t["question"]: [1.0, 0.0] for t in TRACES.values()} | {
        TRACES["ja"]["generated"]: [1.0, 0.0],
        TRACES["zh"]["generated"]: [0.6, 0.8],
    }
    settings = JudgeConfig(base_url=server.base_url, model=model, cache_url=str(cache), backoff_base_seconds=0.01)

    async def main() -> dict[str, list[float]]:
        judge = OpenAIJudge(settings)
        try:
            results = await judge_batch(
                batch, [Faithfulness(), AnswerRelevancy()], JudgeContext(judge, FakeEmbedder(vectors))
            )
        finally:
            await judge.aclose()
        return {name: result.values.tolist() for name, result in results.items()}

    return asyncio.run(main())


def test_japanese_and_chinese_traces_end_to_end(judge_server: JudgeServer, tmp_path: Path) -> None:
    judge_server.responder = _content
    model = f"judge-{uuid.uuid4().hex[:10]}"
    scores = _score(judge_server, tmp_path / "cache", model)
    assert scores["faithfulness"] == [0.5, 0.5]
    assert scores["answer_relevancy"] == pytest.approx([1.0, 0.6], rel=1e-12)

    requests = judge_server.chat_requests()
    assert len(requests) == 6  # per trace: statements, verdicts, questions
    for tag, trace in TRACES.items():
        users = {r.body["response_format"]["json_schema"]["name"]: r.body["messages"][-1]["content"]
                 for r in requests if trace["statements"][0] in r.body["messages"][-1]["content"]}  # fmt: skip
        # The inputs travel as one JSON object, the CJK text unescaped (readable, and fewer tokens).
        assert {name: json.loads(content) for name, content in users.items()} == {
            "answer_statements_statements": {"question": trace["question"], "answer": trace["answer"]},
            "faithfulness_verdicts": {"contexts": trace["contexts"], "statements": trace["statements"]},
            "answer_relevancy_questions": {"answer": trace["answer"]},
        }, tag
        assert all(trace["answer"] in content for content in users.values() if "answer" in json.loads(content)), tag
        for r in requests:
            if trace["statements"][0] in r.body["messages"][-1]["content"]:
                assert f"\nLanguage: {trace['name']}. Write " in r.body["messages"][0]["content"], tag

    # A new client on the same cache answers everything from it: the CJK prompts make stable keys.
    assert _score(judge_server, tmp_path / "cache", model) == scores
    assert judge_server.calls == 6
