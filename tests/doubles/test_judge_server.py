"""The scripted judge server itself: fast replies, OpenAI-shaped bodies, faults in order, records."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.doubles.judge_server import Fault, JudgeServer, fresh_judge_server, pseudo_embedding


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    yield from fresh_judge_server()


def chat(server: JudgeServer, client: httpx.Client, **body: object) -> httpx.Response:
    payload = {"model": "m", "messages": [{"role": "user", "content": "x" * 40}], **body}
    return client.post(f"{server.base_url}/chat/completions", json=payload)


def test_replies_in_a_few_milliseconds_so_latency_figures_do_not_lie(judge_server: JudgeServer) -> None:
    # Nagle + delayed ACK would add ~40 ms to every reply without TCP_NODELAY on the accepted sockets;
    # the median keeps a loaded machine's outliers out.
    with httpx.Client() as client:
        chat(judge_server, client)
        times = []
        for _ in range(21):
            started = time.perf_counter()
            chat(judge_server, client)
            times.append(time.perf_counter() - started)
    assert statistics.median(times) < 0.03


def test_completion_has_n_choices_from_the_responder_and_usage_about_len_over_4(judge_server: JudgeServer) -> None:
    judge_server.responder = lambda body: [f"reply {i}" for i in range(body.get("n", 1))]
    with httpx.Client() as client:
        reply = chat(judge_server, client, n=3, seed=7).json()
    assert [c["message"]["content"] for c in reply["choices"]] == ["reply 0", "reply 1", "reply 2"]
    assert reply["usage"] == {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16}
    assert judge_server.chat_requests()[0].body["seed"] == 7


def test_faults_apply_to_the_next_requests_in_order_then_the_rule(judge_server: JudgeServer) -> None:
    judge_server.fail_next(Fault.rate_limited(retry_after="3", retry_after_ms=2500), Fault.server_error(503))
    judge_server.fault_rule = lambda body: Fault.fewer_choices(1) if body.get("n") else None
    with httpx.Client() as client:
        first, second, third = chat(judge_server, client), chat(judge_server, client), chat(judge_server, client, n=2)
    assert (first.status_code, first.headers["retry-after"], first.headers["retry-after-ms"]) == (429, "3", "2500")
    assert second.status_code == 503
    assert len(third.json()["choices"]) == 1
    assert judge_server.calls == 3


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        (Fault.malformed_json(), lambda r: r.status_code == 200 and not _is_json(r.text)),
        (Fault.truncated_json(), lambda r: r.status_code == 200 and not _is_json(r.text)),
        (Fault.truncated_reply(), lambda r: r.json()["choices"][0]["finish_reason"] == "length"),
        (Fault.empty_reply(), lambda r: r.json()["choices"][0]["message"]["content"] is None),
    ],
    ids=["malformed", "truncated-body", "truncated-content", "empty"],
)
def test_broken_replies(judge_server: JudgeServer, fault: Fault, check: object) -> None:
    judge_server.fail_next(fault)
    with httpx.Client() as client:
        response = chat(judge_server, client)
    assert callable(check) and check(response)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_unsupported_response_formats_and_wrong_key_are_rejected(judge_server: JudgeServer) -> None:
    judge_server.json_schema_supported = False
    judge_server.api_key = "right"
    with httpx.Client(headers={"authorization": "Bearer right"}) as client:
        rejected = chat(judge_server, client, response_format={"type": "json_schema", "json_schema": {}})
        accepted = chat(judge_server, client, response_format={"type": "json_object"})
    with httpx.Client(headers={"authorization": "Bearer wrong"}) as client:
        denied = chat(judge_server, client)
    assert rejected.status_code == 400 and "response_format" in rejected.json()["error"]["message"]
    assert accepted.status_code == 200
    assert denied.status_code == 401


def test_hang_ends_when_the_client_gives_up(judge_server: JudgeServer) -> None:
    judge_server.fail_next(Fault.hang_up(10))
    with httpx.Client(timeout=0.2) as client, pytest.raises(httpx.ReadTimeout):
        chat(judge_server, client)
    deadline = time.monotonic() + 3
    while judge_server.chat_requests()[0].finished is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert judge_server.chat_requests()[0].finished is not None


def test_embeddings_are_deterministic_unit_vectors(judge_server: JudgeServer) -> None:
    with httpx.Client() as client:
        body = {"model": "e", "input": ["alpha", "beta", "alpha"], "dimensions": 16}
        reply = client.post(f"{judge_server.base_url}/embeddings", json=body).json()
    vectors = [row["embedding"] for row in reply["data"]]
    assert vectors[0] == vectors[2] == pseudo_embedding("alpha", 16) != vectors[1]
    assert all(math.isclose(sum(x * x for x in v), 1.0) for v in vectors)
    assert reply["usage"]["prompt_tokens"] == 5  # ceil(5/4) + ceil(4/4) + ceil(5/4)


def test_reset_forgets_records_faults_and_script(judge_server: JudgeServer) -> None:
    with httpx.Client() as client:
        chat(judge_server, client, n=1)
    judge_server.fail_next(Fault.server_error())
    judge_server.latency = 1.0
    judge_server.reset()
    assert judge_server.requests == [] and judge_server.latency == 0.0
    with httpx.Client() as client:
        assert chat(judge_server, client).status_code == 200
