"""The call cache keeps only replies the metric could parse, through the real client and the scripted server:
a reply of the wrong shape is re-asked on the next call, a stale bad entry heals, and ``refresh_cache`` re-asks."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragpulse.metrics.judge import JudgeCallError, JudgeRequest, VerdictParseError, ask, load_json_object
from ragpulse.tasks.judge.cache import CachedCall, JudgeCache
from ragpulse.tasks.judge.client import OpenAIJudge
from ragpulse.tasks.judge.config import JudgeConfig
from ragpulse.tasks.judge.credentials import JudgeSecrets
from tests.doubles.judge_server import Fault, JudgeServer, fresh_judge_server

SCHEMA = {"type": "object", "properties": {"verdict": {"type": "boolean"}}, "required": ["verdict"]}
GOOD, BAD = json.dumps({"verdict": True}), json.dumps({"score": "high"})


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    yield from fresh_judge_server()


def _judge(server: JudgeServer, cache: Path, *, refresh: bool = False) -> OpenAIJudge:
    settings = JudgeConfig(
        base_url=server.base_url, model=f"judge-{uuid.uuid4().hex[:8]}", timeout_seconds=5.0, max_retries=0,
        cache_url=str(cache),
    )  # fmt: skip
    return OpenAIJudge(settings, secrets=JudgeSecrets(api_key="sk-test-heal"), refresh_cache=refresh)


def _verdict(raw: str) -> bool:
    value = load_json_object(raw, record_id="t1").get("verdict")
    if not isinstance(value, bool):
        raise VerdictParseError("t1", "verdict", raw, "verdict must be true or false")
    return value


def _request(text: str = "Is it supported?") -> JudgeRequest:
    return JudgeRequest("faithfulness", "faithfulness/2", "verdicts", (("user", text),), SCHEMA)


def _ask(judge: OpenAIJudge, request: JudgeRequest) -> Any:
    async def main() -> Any:
        try:
            return await ask(judge, request, _verdict)
        except (VerdictParseError, JudgeCallError) as exc:
            return exc
        finally:
            await judge.aclose()

    return asyncio.run(main())


def _entries(cache: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(cache.rglob("*.json"))]


def test_an_unparsable_reply_is_not_cached_and_is_asked_again(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: BAD
    first = _judge(server, tmp_path)
    assert isinstance(_ask(first, _request()), VerdictParseError)
    assert server.calls == 2  # the request and its repair, both answered wrongly
    assert _entries(tmp_path) == []

    server.responder = lambda body: GOOD
    judge = OpenAIJudge(first.settings)
    assert _ask(judge, _request()) == [True]
    assert server.calls == 3  # only the original request again: it parses now, no repair
    assert [e["replies"] for e in _entries(tmp_path)] == [[GOOD]]
    assert _ask(OpenAIJudge(first.settings), _request()) == [True] and server.calls == 3


def test_a_repaired_reply_is_cached_under_its_repair_only(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: GOOD if any(m["role"] == "assistant" for m in body["messages"]) else BAD
    judge = _judge(server, tmp_path)
    assert _ask(judge, _request()) == [True] and server.calls == 2
    assert [(e["step"], e["replies"]) for e in _entries(tmp_path)] == [("verdicts:repair", [GOOD])]
    # The same bad first reply comes back and its repair is served from the cache: one call, not two.
    assert _ask(OpenAIJudge(judge.settings), _request()) == [True] and server.calls == 3


def test_a_stale_unparsable_entry_is_asked_again_and_overwritten(server: JudgeServer, tmp_path: Path) -> None:
    judge = _judge(server, tmp_path)
    key = judge.key(_request())
    JudgeCache(str(tmp_path)).put(key, CachedCall((BAD,), 1, 1), request=_request(), model=judge.model)
    server.responder = lambda body: GOOD
    assert _ask(judge, _request()) == [True]
    assert server.calls == 1 and judge.usage.totals()["cache_hits"] == 0
    assert [e["replies"] for e in _entries(tmp_path)] == [[GOOD]]


def test_refresh_cache_asks_every_call_again_and_overwrites(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: GOOD
    judge = _judge(server, tmp_path)
    assert _ask(judge, _request()) == [True] and server.calls == 1
    server.responder = lambda body: json.dumps({"verdict": False})
    assert _ask(OpenAIJudge(judge.settings), _request()) == [True] and server.calls == 1  # cached
    refreshed = OpenAIJudge(judge.settings, refresh_cache=True)
    assert _ask(refreshed, _request()) == [False] and server.calls == 2
    assert [e["replies"] for e in _entries(tmp_path)] == [[json.dumps({"verdict": False})]]
    # A refreshed call that fails leaves no entry behind: the old reply must not answer the next run.
    server.fail_next(Fault.server_error())
    assert isinstance(_ask(OpenAIJudge(judge.settings, refresh_cache=True), _request()), JudgeCallError)
    assert server.calls == 3 and _entries(tmp_path) == []
