"""A webhook endpoint on loopback that records what it receives and can be told to fail."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# The path plays the part of a Slack webhook's secret token.
SECRET_PATH = "/services/T000/B000/s3cr3t-webhook-token"


@dataclass
class WebhookReceiver:
    url: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    # Status codes answered to the next requests, in order; then 200.
    failures: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, status: int, times: int) -> None:
        with self.lock:
            self.failures = [status] * times


@contextlib.contextmanager
def receiving() -> Iterator[WebhookReceiver]:
    """A receiver listening on a free loopback port while the block runs."""
    receiver: WebhookReceiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with receiver.lock:
                receiver.attempts += 1
                status = receiver.failures.pop(0) if receiver.failures else 200
                if status == 200 and self.path == SECRET_PATH:
                    receiver.messages.append(json.loads(body))
            self.send_response(status if self.path == SECRET_PATH else 404)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = WebhookReceiver(f"http://127.0.0.1:{server.server_address[1]}{SECRET_PATH}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    with receiving() as receiver:
        yield receiver
