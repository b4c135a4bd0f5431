"""A scripted OpenAI-compatible judge on loopback, for tests that go through the real ``openai`` client.

The server (Starlette on uvicorn, in a background thread, random free port on 127.0.0.1) answers
``POST /v1/chat/completions`` and ``POST /v1/embeddings``. Tests decide what it says and how it fails:

- ``responder(body) -> str | list[str] | dict``: the reply content for a chat request (a list gives one
  content per choice, a dict is JSON-encoded; a single reply is repeated for ``n`` choices);
- ``fail_next(*faults)``: faults applied to the next chat requests in arrival order; ``fault_rule(body)``
  picks a fault per request once that queue is empty (e.g. only for prompts that contain "poison");
- capabilities: ``json_schema_supported``, ``json_object_supported`` (a 400 naming ``response_format``
  when unsupported), ``max_choices`` (fewer choices than ``n``), ``api_key`` (401 on a wrong key),
  ``latency`` (seconds added to every chat reply).

Every request is recorded (path, JSON body, headers, start and end times) and ``max_in_flight`` is
the most chat requests it was serving at once. Use the ``judge_server`` fixture (one server per test
session, ``reset()`` before each test; register it with ``pytest_plugins = ["tests.doubles.judge_server"]`` in
``tests/conftest.py``), or build your own fixture with ``yield from fresh_judge_server()``::

    def test_something(judge_server: JudgeServer) -> None:
        judge_server.responder = lambda body: {"verdict": True}
        judge_server.fail_next(Fault.rate_limited(retry_after="1"))
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = [
    "Fault",
    "JudgeServer",
    "RecordedRequest",
    "fresh_judge_server",
    "judge_server",
    "pseudo_embedding",
    "running_judge_server",
]

Responder = Callable[[dict[str, Any]], "str | list[str] | dict[str, Any]"]


@dataclass(frozen=True)
class Fault:
    """How one chat request misbehaves. Build with the class methods; fields combine (latency + status)."""

    status: int | None = None
    message: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    latency: float = 0.0
    hang: float = 0.0
    body: str | None = None
    truncate_body: bool = False
    truncate_content: bool = False
    empty_content: bool = False
    choices: int | None = None

    @classmethod
    def delay(cls, seconds: float) -> Fault:
        return cls(latency=seconds)

    @classmethod
    def rate_limited(cls, *, retry_after: str | None = None, retry_after_ms: int | None = None) -> Fault:
        """429 with ``Retry-After`` (seconds or an HTTP date) and/or ``retry-after-ms``."""
        headers = []
        if retry_after is not None:
            headers.append(("retry-after", retry_after))
        if retry_after_ms is not None:
            headers.append(("retry-after-ms", str(retry_after_ms)))
        return cls(status=429, message="Rate limit reached for requests", headers=tuple(headers))

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        return cls(status=status, message="The server had an error while processing your request")

    @classmethod
    def bad_request(cls, message: str = "invalid request") -> Fault:
        return cls(status=400, message=message)

    @classmethod
    def hang_up(cls, seconds: float = 30.0) -> Fault:
        """Answer nothing for ``seconds`` (stops early when the client disconnects)."""
        return cls(hang=seconds)

    @classmethod
    def malformed_json(cls) -> Fault:
        """A 200 whose body is not JSON at all."""
        return cls(body='{"id": "chatcmpl-x", "choices": [oops')

    @classmethod
    def truncated_json(cls) -> Fault:
        """A 200 whose body is the first half of a valid completion (a proxy cut it)."""
        return cls(truncate_body=True)

    @classmethod
    def truncated_reply(cls) -> Fault:
        """A valid completion whose content is cut in half, ``finish_reason="length"``."""
        return cls(truncate_content=True)

    @classmethod
    def empty_reply(cls) -> Fault:
        """A valid completion whose message content is null."""
        return cls(empty_content=True)

    @classmethod
    def fewer_choices(cls, count: int) -> Fault:
        return cls(choices=count)


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    started: float
    finished: float | None = None


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def pseudo_embedding(text: str, dimensions: int = 32) -> list[float]:
    """A deterministic unit vector derived from a hash of ``text``."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    vector = np.random.default_rng(seed).standard_normal(dimensions)
    return [float(x) for x in vector / np.linalg.norm(vector)]


@dataclass
class JudgeServer:
    """The scripted server; attributes are read by the server thread, so set them before requests."""

    url: str = ""
    responder: Responder = field(default=lambda body: {"ok": True})
    fault_rule: Callable[[dict[str, Any]], Fault | None] | None = None
    latency: float = 0.0
    json_schema_supported: bool = True
    json_object_supported: bool = True
    max_choices: int | None = None
    api_key: str | None = None
    _faults: deque[Fault] = field(default_factory=deque)
    _records: list[RecordedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _in_flight: int = 0
    max_in_flight: int = 0
    _thread: threading.Thread | None = None
    _server: uvicorn.Server | None = None

    @property
    def base_url(self) -> str:
        """What to pass as the judge's ``base_url``."""
        return f"{self.url}/v1"

    def reset(self) -> None:
        """Back to a well-behaved server with no records (between tests)."""
        with self._lock:
            self.responder = lambda body: {"ok": True}
            self.fault_rule = None
            self.latency = 0.0
            self.json_schema_supported = True
            self.json_object_supported = True
            self.max_choices = None
            self.api_key = None
            self._faults.clear()
            self._records.clear()
            self.max_in_flight = self._in_flight

    def fail_next(self, *faults: Fault) -> None:
        """Apply ``faults`` to the next chat requests, one each, in arrival order."""
        with self._lock:
            self._faults.extend(faults)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._records)

    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == "/v1/chat/completions"]

    @property
    def calls(self) -> int:
        """Chat completion requests received so far."""
        return len(self.chat_requests())

    # -- server side -------------------------------------------------------------------------------

    def _record(self, request: Request, body: dict[str, Any]) -> int:
        with self._lock:
            self._records.append(
                RecordedRequest(request.url.path, body, dict(request.headers.items()), time.monotonic())
            )
            return len(self._records) - 1

    def _finish(self, index: int) -> None:
        with self._lock:
            record = self._records[index] if index < len(self._records) else None
            if record is not None:
                self._records[index] = RecordedRequest(
                    record.path, record.body, record.headers, record.started, time.monotonic()
                )

    def _next_fault(self, body: dict[str, Any]) -> Fault:
        with self._lock:
            if self._faults:
                return self._faults.popleft()
            rule = self.fault_rule
        return (rule(body) if rule else None) or Fault()

    def _unauthorized(self, request: Request) -> Response | None:
        if self.api_key is None or request.headers.get("authorization") == f"Bearer {self.api_key}":
            return None
        return _error(401, "Incorrect API key provided.", "invalid_api_key")

    async def _chat(self, request: Request) -> Response:
        body = json.loads(await request.body())
        index = self._record(request, body)
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            return await self._answer_chat(request, body)
        finally:
            with self._lock:
                self._in_flight -= 1
            self._finish(index)

    async def _answer_chat(self, request: Request, body: dict[str, Any]) -> Response:
        fault = self._next_fault(body)
        if delay := self.latency + fault.latency:
            await asyncio.sleep(delay)
        if fault.hang:
            deadline = time.monotonic() + fault.hang
            while time.monotonic() < deadline and not await request.is_disconnected():
                await asyncio.sleep(0.02)
            return Response(status_code=504)
        if denied := self._unauthorized(request):
            return denied
        if fault.status is not None:
            return _error(fault.status, fault.message, None, dict(fault.headers))
        response_format = (body.get("response_format") or {}).get("type")
        if response_format == "json_schema" and not self.json_schema_supported:
            return _error(
                400, "response_format of type 'json_schema' is not supported by this model", "response_format"
            )
        if response_format == "json_object" and not self.json_object_supported:
            return _error(
                400, "response_format of type 'json_object' is not supported by this model", "response_format"
            )
        if fault.body is not None:
            return Response(fault.body, media_type="application/json")
        completion = self._completion(body, fault)
        if fault.truncate_body:
            text = json.dumps(completion)
            return Response(text[: len(text) // 2], media_type="application/json")
        return JSONResponse(completion)

    def _completion(self, body: dict[str, Any], fault: Fault) -> dict[str, Any]:
        n = int(body.get("n") or 1)
        reply = self.responder(body)
        if isinstance(reply, dict):
            reply = json.dumps(reply)
        contents: list[str | None] = list(reply) if isinstance(reply, list) else [reply] * n
        count = min(n, len(contents), fault.choices or n, self.max_choices or n)
        finish = "stop"
        if fault.truncate_content:
            contents = [c[: len(c) // 2] if c else c for c in contents]
            finish = "length"
        if fault.empty_content:
            contents = [None] * len(contents)
        prompt = "".join(str(m.get("content") or "") for m in body.get("messages", []))
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": contents[i]},
                "finish_reason": finish,
                "logprobs": None,
            }
            for i in range(count)
        ]
        completion_tokens = sum(_tokens(content or "") for content in contents[:count])
        return {
            "id": f"chatcmpl-{len(self._records)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "system_fingerprint": "fp_judge_server",
            "choices": choices,
            "usage": {
                "prompt_tokens": _tokens(prompt),
                "completion_tokens": completion_tokens,
                "total_tokens": _tokens(prompt) + completion_tokens,
            },
        }

    async def _embeddings(self, request: Request) -> Response:
        body = json.loads(await request.body())
        index = self._record(request, body)
        try:
            if denied := self._unauthorized(request):
                return denied
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            dimensions = int(body.get("dimensions") or 32)
            data = [
                {"object": "embedding", "index": i, "embedding": pseudo_embedding(str(text), dimensions)}
                for i, text in enumerate(texts)
            ]
            tokens = sum(_tokens(str(text)) for text in texts)
            return JSONResponse(
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", ""),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                }
            )
        finally:
            self._finish(index)

    def start(self) -> JudgeServer:
        """Bind a free loopback port and serve from a daemon thread; returns once it accepts requests."""
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            ]
        )
        # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
        # accepted connections inherit it. Without it every reply waits ~40 ms for Nagle + delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, backlog=2048, timeout_graceful_shutdown=1, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="judge-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the scripted judge server did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=5)


def _error(status: int, message: str, param: str | None, headers: dict[str, str] | None = None) -> Response:
    kind = {400: "invalid_request_error", 401: "invalid_request_error", 429: "requests"}.get(status, "server_error")
    payload = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    return JSONResponse(payload, status_code=status, headers=headers)


_shared: JudgeServer | None = None
_shared_lock = threading.Lock()


def running_judge_server() -> JudgeServer:
    """The process's shared server, started on first use (a daemon thread: it ends with the process)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = JudgeServer().start()
        return _shared


def fresh_judge_server() -> Iterator[JudgeServer]:
    """For fixtures: the shared server, reset before and after the test (``yield from fresh_judge_server()``)."""
    server = running_judge_server()
    server.reset()
    yield server
    with contextlib.suppress(Exception):
        server.reset()


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    """The shared scripted judge server, reset before and after the test."""
    yield from fresh_judge_server()
