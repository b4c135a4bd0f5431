"""A real TCP proxy on loopback that breaks the network at an exact point: in front of PostgreSQL or moto's S3.

Faults act now (``cut``, ``blackhole``, ``refuse``) or when a trigger fires on the traffic (``on_upstream``: a
client->server chunk containing a pattern; ``after_bytes``: so many bytes in one direction, e.g. mid-COPY or
mid-PUT body). Triggers are proxy-wide (a publish opens several connections) and one-shot. Patterns are matched
within one chunk, which holds a whole statement for the protocol messages tests aim at.

- ``cut()``: close every live connection on both sides now (FIN to client and server);
- ``blackhole()``: keep the live connections' sockets open but forward nothing more (a dead peer that never
  sends FIN: a pulled cable); new connections still pass;
- ``refuse()``: new connections are closed as soon as they are accepted;
- ``down()``: refuse and cut, as a host that went away (clients retrying get nowhere);
- ``heal()``: new connections pass again and pending triggers are dropped (blackholed connections stay dead).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import pytest

__all__ = ["Action", "TcpProxy", "tcp_proxy"]

Action = Literal["cut", "blackhole", "refuse", "down"]
_CHUNK = 65536


@dataclass
class _Trigger:
    action: Action
    pattern: bytes | None  # fires on (or, with ``budget``, arms at) an upstream chunk containing it
    after: bytes | None  # ``pattern`` only counts once this was seen upstream
    direction: Literal["up", "down"]
    budget: int | None  # bytes of ``direction`` still forwarded once armed; None: fire on the pattern's chunk
    forward: bool  # forward the chunk that fires it (False: the server never sees it)
    times: int | None = 1  # fires this often, then is gone; None: on every match
    reply: bytes | None = None  # once armed, fires on (instead of) the server->client chunk containing it
    until: tuple[bytes, ...] = ()  # once it fired, an upstream chunk containing any of these ends it
    seen_after: bool = False
    armed: bool = False
    fired: threading.Event | None = None


class _Connection:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.black = False
        self.closed = False

    def close(self) -> None:
        self.closed = True
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target``; ``url``-style helpers are left to the tests."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.connections = 0
        self.refused = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self._refusing = False
        self._live: list[_Connection] = []
        self._triggers: list[_Trigger] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, name=f"tcp-proxy-{self.port}", daemon=True)
        self._thread.start()

    # -- faults now ---------------------------------------------------------------------------------------

    def cut(self) -> None:
        with self._lock:
            live, self._live = self._live, []
        for conn in live:
            conn.close()

    def blackhole(self) -> None:
        with self._lock:
            for conn in self._live:
                conn.black = True

    def refuse(self) -> None:
        with self._lock:
            self._refusing = True

    def down(self) -> None:
        self.refuse()
        self.cut()

    def heal(self) -> None:
        with self._lock:
            self._refusing = False
            self._triggers.clear()

    # -- faults on the traffic ----------------------------------------------------------------------------

    def on_upstream(
        self,
        pattern: bytes,
        action: Action = "cut",
        *,
        after: bytes | None = None,
        forward: bool = True,
        times: int | None = 1,
        until: tuple[bytes, ...] = (),
    ) -> threading.Event:
        """Act when a client->server chunk contains ``pattern`` (once ``after`` has passed, if given), after
        forwarding that chunk (``forward=False``: instead of it), ``times`` times (None: every time, or until an
        upstream chunk containing one of ``until`` passes after the first time). Returns an event set when it
        first fired. Triggers are tried in the order they were added."""
        return self._add(_Trigger(action, pattern, after, "up", None, forward, times=times, until=until))

    def after_bytes(
        self, count: int, direction: Literal["up", "down"] = "up", action: Action = "cut", *, armed_by: bytes | None
    ) -> threading.Event:
        """Act once ``count`` bytes went ``direction`` from the upstream chunk containing ``armed_by`` on (None:
        from now); the chunk crossing the limit is forwarded only up to it."""
        trigger = _Trigger(action, armed_by, None, direction, count, True)
        trigger.armed = armed_by is None
        return self._add(trigger)

    def on_reply(self, reply: bytes, action: Action = "cut", *, armed_by: bytes) -> threading.Event:
        """Drop the first server->client chunk containing ``reply`` after an upstream chunk containing
        ``armed_by``, and act: the request was served, its answer is lost (e.g. ``b" 200 OK"`` to an S3 PUT,
        skipping its ``100 Continue``)."""
        return self._add(_Trigger(action, armed_by, None, "down", None, False, reply=reply))

    def _add(self, trigger: _Trigger) -> threading.Event:
        trigger.fired = threading.Event()
        with self._lock:
            self._triggers.append(trigger)
        return trigger.fired

    # -- plumbing -----------------------------------------------------------------------------------------

    def close(self) -> None:
        self._stopped = True
        # shutdown() wakes the accept() that close() alone leaves blocked on Linux.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                refusing = self._refusing
            if refusing:
                with self._lock:
                    self.refused += 1
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            conn = _Connection(client, server)
            with self._lock:
                self._live.append(conn)
            for direction in ("up", "down"):
                threading.Thread(target=self._pump, args=(conn, direction), daemon=True).start()

    def _pump(self, conn: _Connection, direction: Literal["up", "down"]) -> None:
        source, sink = (conn.client, conn.server) if direction == "up" else (conn.server, conn.client)
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                if conn.black:
                    continue
                data, action = self._inspect(data, direction)
                if action is not None:
                    # Nothing more comes back (e.g. the reply to the COMMIT just forwarded) before the fault acts.
                    self.blackhole()
                if data:
                    with self._lock:  # counted first: the peer may read them before sendall returns
                        if direction == "up":
                            self.bytes_up += len(data)
                        else:
                            self.bytes_down += len(data)
                    sink.sendall(data)
                if action is not None:
                    self._act(action)
                if conn.closed:
                    break
        except OSError:
            pass
        finally:
            if not conn.black:
                with self._lock:
                    if conn in self._live:
                        self._live.remove(conn)
                conn.close()

    def _inspect(self, data: bytes, direction: Literal["up", "down"]) -> tuple[bytes, Action | None]:
        """What of ``data`` to forward, and the action a trigger fired by it asks for."""
        with self._lock:
            for trigger in list(self._triggers):
                assert trigger.fired is not None
                if direction == "up" and trigger.fired.is_set() and any(u in data for u in trigger.until):
                    self._triggers.remove(trigger)
                    continue
                if direction == "up" and trigger.pattern is not None and not trigger.armed:
                    if trigger.after is not None and not trigger.seen_after:
                        trigger.seen_after = trigger.after in data
                        continue
                    if trigger.pattern not in data:
                        continue
                    if trigger.budget is None and trigger.reply is None:
                        self._fire(trigger)
                        return (data if trigger.forward else b""), trigger.action
                    trigger.armed = True  # and the arming chunk counts towards the budget
                    if direction != trigger.direction:
                        return data, None  # armed by this chunk: no other trigger acts on it
                if trigger.armed and direction == "down" and trigger.reply is not None:
                    if trigger.reply not in data:
                        continue
                    self._fire(trigger)
                    return b"", trigger.action
                if trigger.armed and direction == trigger.direction and trigger.budget is not None:
                    if len(data) < trigger.budget:
                        trigger.budget -= len(data)
                        continue
                    self._fire(trigger)
                    return data[: trigger.budget], trigger.action
        return data, None

    def _fire(self, trigger: _Trigger) -> None:
        if trigger.times is not None:
            trigger.times -= 1
            if trigger.times <= 0:
                self._triggers.remove(trigger)
        assert trigger.fired is not None
        trigger.fired.set()

    def _act(self, action: Action) -> None:
        {"cut": self.cut, "blackhole": self.blackhole, "refuse": self.refuse, "down": self.down}[action]()


@pytest.fixture
def tcp_proxy() -> Iterator[type[TcpProxy]]:
    """A factory of proxies, every one closed after the test: ``tcp_proxy("127.0.0.1", 5432)``."""
    made: list[TcpProxy] = []

    class Factory(TcpProxy):
        def __init__(self, host: str, port: int) -> None:
            super().__init__(host, port)
            made.append(self)

    yield Factory
    for proxy in made:
        proxy.close()
