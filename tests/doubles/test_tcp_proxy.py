"""The fault-injecting TCP proxy against a plain echo server: forwarding, counts and every fault."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tests.doubles.tcp_proxy import TcpProxy


@pytest.fixture
def echo() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


def _client(proxy: TcpProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
    return sock


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_forwards_and_counts(tcp_proxy: type[TcpProxy], echo: int) -> None:
    proxy = tcp_proxy("127.0.0.1", echo)
    with _client(proxy) as sock:
        sock.sendall(b"hello")
        assert _recv_exactly(sock, 5) == b"hello"
    assert (proxy.connections, proxy.bytes_up, proxy.bytes_down) == (1, 5, 5)


def test_cut_closes_live_connections_and_new_ones_pass(tcp_proxy: type[TcpProxy], echo: int) -> None:
    proxy = tcp_proxy("127.0.0.1", echo)
    with _client(proxy) as sock:
        sock.sendall(b"x")
        assert _recv_exactly(sock, 1) == b"x"
        proxy.cut()
        assert sock.recv(10) == b""
    with _client(proxy) as sock:
        sock.sendall(b"y")
        assert _recv_exactly(sock, 1) == b"y"


def test_blackhole_keeps_the_socket_open_but_silent(tcp_proxy: type[TcpProxy], echo: int) -> None:
    proxy = tcp_proxy("127.0.0.1", echo)
    with _client(proxy) as sock:
        sock.sendall(b"x")
        assert _recv_exactly(sock, 1) == b"x"
        proxy.blackhole()
        sock.sendall(b"lost")
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            sock.recv(10)


def test_refuse_and_heal(tcp_proxy: type[TcpProxy], echo: int) -> None:
    proxy = tcp_proxy("127.0.0.1", echo)
    proxy.refuse()
    with _client(proxy) as sock:
        assert sock.recv(10) == b""
    assert proxy.refused == 1
    proxy.heal()
    with _client(proxy) as sock:
        sock.sendall(b"ok")
        assert _recv_exactly(sock, 2) == b"ok"


@pytest.mark.parametrize(("forward", "echoed"), [(True, b"a COMMIT"), (False, b"")])
def test_a_pattern_cuts_after_or_instead_of_its_chunk(
    tcp_proxy: type[TcpProxy], echo: int, forward: bool, echoed: bytes
) -> None:
    proxy = tcp_proxy("127.0.0.1", echo)
    fired = proxy.on_upstream(b"COMMIT", after=b"DELETE", forward=forward)
    with _client(proxy) as sock:
        sock.sendall(b"COMMIT")  # before DELETE: passes
        assert _recv_exactly(sock, 6) == b"COMMIT"
        sock.sendall(b"DELETE")
        assert _recv_exactly(sock, 6) == b"DELETE"
        sock.sendall(b"a COMMIT")
        assert fired.wait(2)
        assert _recv_exactly(sock, 100) == b""  # cut: the echo, if any, never comes back
    assert proxy.bytes_up == 12 + len(echoed)


@pytest.mark.parametrize("direction", ["up", "down"])
def test_after_bytes_cuts_mid_body(tcp_proxy: type[TcpProxy], echo: int, direction: str) -> None:
    proxy = tcp_proxy("127.0.0.1", echo)
    fired = proxy.after_bytes(1000, direction, armed_by=b"PUT")  # type: ignore[arg-type]
    with _client(proxy) as sock:
        sock.sendall(b"PUT " + b"b" * 5000)
        assert fired.wait(2)
        received = _recv_exactly(sock, 10_000)
    assert len(received) <= 1000 and proxy.bytes_down == len(received)
    # Upstream: the server got exactly the budget (its echo is cut off); downstream: some of the echo came back.
    assert proxy.bytes_up == 1000 if direction == "up" else len(received) > 0
